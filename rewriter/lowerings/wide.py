"""float64 block totals and carries for the float32 product trees.

A float32 product tree starts every block's running product at 1. On factors within about
2^-12 of 1 each of those products, fl((1 + a)(1 + b)), rounds down more often than up
(:mod:`.near_one`), so a tree of float32 block totals and carries piles up an error
that grows with n / r instead of the sequential product's sqrt(n): float32 x = 1 + N(0, 1e-4)
of (4, 20000), last axis, gave 2196 ulps worst / 961 mean against the native kernel's 542 /
166 (``scripts/accuracy_near_one.py``). The fix, for a float32 computation on a target that
computes float64 (``Target.float64``; elsewhere :mod:`.near_one`)::

    t64 = the block totals taken from x in float64 (the block's r factors cast and multiplied)
    P64 = the exclusive scan of t64 along the blocks, in float64 (the upper levels)
    y_b = (...((Cast(P64, float32) * s_0) * s_1) ... ) * s_b      (exclusive: to s_{b-1})
          each block's own running product started from its prefix, in float32: a chain
          seeded by it (``carry``, ``radix``) or the Scan's initial state (``blocked``,
          ``tiled``), in place of the block's products from 1 times the prefix after

Accuracy: P64 carries a relative error of at most about (number of factors) * 2^-53, so its
rounding to float32 adds 0.5 ulp; then at most r multiplications in float32: at most about
r + 1 ulps, whatever n (and never more than the k - 1 of the float32 tree: within the first
block P is exactly 1). Measured on the cells above (products from 1, then the prefix: the
same count of roundings): 3.3 ulps worst / 0.4 mean.

Range: every partial product the float32 level forms is a prefix of x itself (the prefix
before the block times the block's first factors), so none overflows or underflows where the
sequential product does not; the float64 totals and upper levels cannot either (a block of
float32 factors is the ratio of two prefixes: at most 2^277). Until 2026-12-05 each block's
products started from 1, and factors of 2^+-70 whose prefixes stay within 2^+-70 overflowed
inside a block (inf where the native kernel gives 1.2 * 10^21); ``tests/test_tree_accuracy.py``
and ``tests/test_runtime_accuracy.py`` (tract, tinygrad, IREE) hold every such tree to the native
kernel's bits there. Where a product really leaves the range, a block whose prefix is back in
range gives the product where numpy stays inf or 0 (README, Guarantees).

Cost: a Cast of x to float64 and a product over each block (a ReduceProd, or r Casts and
r - 1 Muls of the slices: :func:`block_totals`); the upper levels on 1 / r of the data in
float64. On onnxruntime 1.32 the trees took 1.2-2.1x the float32 carries' time
(``scripts/bench_wide_carries.py``), on tract 1.3-3.3x (carry / radix, float32, 2^20 elements),
with the products from 1; seeded, a block takes r Muls where it took 2r - 1 (``carry``) and
no broadcast Mul by the prefixes follows (``blocked``, ``radix``, ``tiled``). On onnxruntime,
float32 grid cells (``scripts/bench_against_commit.py``, medians): ``auto``'s 21 changed
cells 0.84-0.99x the time of the products from 1 (median 0.95x), ``carry`` 0.94x, ``radix``
0.77x, ``blocked`` 0.86x, ``tiled`` 0.92x; on tract ``radix`` / ``blocked`` faster, ``carry``
unchanged, ``tiled``'s last axis 1.2-1.6x slower; on tinygrad ``carry``'s last axis
1.1-1.3x slower, its first and middle unchanged (docs/performance.md, twenty-eighth round).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx_ir as ir

from rewriter.lowerings.builder import Builder
from rewriter.lowerings.view import View
from rewriter.targets import Target

__all__ = ["NARROW_SLICES", "block_totals", "carry_dtype", "wide_view"]

# blocks of this many positions or fewer take their totals from the slices on onnxruntime: its
# ReduceProd (1.32) over blocks of 4 took 3.3x the time of 4 Casts and 3 Muls of the slices,
# float32 (262144, 4, 1); on (4096, 16, 16) it took 0.66x the slices' time. Other runtimes
# always take the slices: with tract's float64 ReduceProd radix took 2.1-6.6x and carry
# 1.0-5.0x the time they take with the slices (float32, 2^20 elements, n = 512 and 4096, every
# axis; that run's file was overwritten by the slices' run,
# scripts/results/bench-runtime-tract-2026-12-04-wide-carries).
NARROW_SLICES = 4


def carry_dtype(v: View) -> ir.DataType | None:
    """float64 where the tree computes float32 (float32, float16 and bfloat16 inputs) on a
    target that computes float64; None: the carries stay in the compute type."""
    if v.dtype == ir.DataType.FLOAT and v.target.float64:
        return ir.DataType.DOUBLE
    return None


def wide_view(b: Builder, v: View, wide: ir.DataType) -> View:
    """``v`` computing in ``wide`` (its ones a Constant of that type)."""
    return dataclasses.replace(v, dtype=wide, one=b.const(np.array(1), dtype=wide))


def block_totals(
    b: Builder,
    blocks: ir.Value,
    wide: ir.DataType,
    target: Target,
    slices: list[ir.Value] | None = None,
) -> ir.Value:
    """The products along axis 1 of the (o * m, r, i) ``blocks`` in ``wide``, (o * m, 1, i):
    its r ``slices`` cast and multiplied where they are given (on onnxruntime: r at most
    :data:`NARROW_SLICES`), else a ReduceProd of the blocks cast."""
    by_slices = target.auto != "onnxruntime" or len(slices or ()) <= NARROW_SLICES
    if slices is not None and by_slices:
        total = b.cast(slices[0], wide)
        for piece in slices[1:]:
            total = b.op("Mul", total, b.cast(piece, wide))
        return total
    whole = b.cast(blocks, wide)
    if b.opset >= 18:
        return b.op("ReduceProd", whole, b.const([1]), keepdims=1)
    return b.op("ReduceProd", whole, axes=[1], keepdims=1)
