"""float64 block totals and carries for the float32 product trees.

For a float32 computation on a target that computes float64 (``Target.float64``; elsewhere
:mod:`.near_one`)::

    t64 = the block totals taken from x in float64 (the block's r factors cast and multiplied)
    P64 = the exclusive scan of t64 along the blocks, in float64 (the upper levels)
    y_b = (...((Cast(P64, float32) * s_0) * s_1) ... ) * s_b      (exclusive: to s_{b-1})
          each block's running product started from its prefix: a chain seeded by it
          (``carry``, ``radix``) or the Scan's initial state (``blocked``)

Accuracy: P64's relative error is at most about k * 2^-53, so its rounding to float32 adds
0.5 ulp; then at most r multiplications in float32: about r + 1 ulps whatever n, never more
than the float32 tree's k - 1. Every partial product formed in float32 is a prefix of x (no
overflow or underflow where the sequential product has none); a block of float32 factors is
at most 2^277, inside float64's range.

Cost: a Cast of x to float64 and a product over each block (a ReduceProd, or r Casts and
r - 1 Muls of the slices: :func:`block_totals`); the upper levels on 1 / r of the data.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx_ir as ir

from rewriter.lowerings.builder import Builder
from rewriter.lowerings.view import View
from rewriter.targets import Target

__all__ = ["block_totals", "carry_dtype", "wide_view"]


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
    its r ``slices`` cast and multiplied where they are given and r is at most
    ``target.reduce_totals_above`` (or that is None), else a ReduceProd of the blocks cast."""
    above = target.reduce_totals_above
    by_slices = above is None or len(slices or ()) <= above
    if slices is not None and by_slices:
        total = b.cast(slices[0], wide)
        for piece in slices[1:]:
            total = b.op("Mul", total, b.cast(piece, wide))
        return total
    return b.reduce("ReduceProd", b.cast(blocks, wide), 1, keepdims=1)
