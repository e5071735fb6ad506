"""float32 block totals that stay accurate on factors near 1, in float32 alone.

A float32 product tree starts each block's product at 1. On factors within about 2^-12 of
1, fl((1 + a)(1 + b)) rounds down more often than up, so block totals and the carries built
from them lean one way and the error grows with n. Where the target computes float64,
:mod:`.wide` takes the totals in float64; this module serves the others and ``doubling``:
the blocked form's totals, and the windows of the plain form's first steps (:func:`windows`).

Formula, for a block of r factors x_1 .. x_r (float32; r a power of two, 4 or more) whose
plain float32 total is T32::

    e_j = x_j - 1                         (exact for x_j in [0.5, 2], Sterbenz)
    E   = the product in offset form: E(a, c) = (a + c) + a * c, halving the block pairwise
    T   = 1 + E    where every |e_j| < 1 / (8 r),   else T32

Accuracy: where every |e_j| < 1 / (8 r), every partial product lies within [0.88, 1.14] and
every offset within 0.134 of 0, so each pair's three roundings add at most 0.48 eps to the
relative error and the last Add one eps: at most (0.48 (r - 1) + 1) eps <= (r - 1) eps, the
float32 product's own bound. Elsewhere (a factor further from 1, or 0, -0.0, inf, NaN) T32
is taken as it is, with its special values.

Cost: a Sub, an Abs and a ReduceMax over x, Splits in halves and (r - 1) / r of x again in
Add, Mul, Add, then a Less, an Add and a Where on 1 / r of the data: about six passes of
float32 over memory; 4 log2(r) + 6 nodes per block level.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx_ir as ir

from rewriter.lowerings.builder import Builder
from rewriter.lowerings.view import View

__all__ = ["totals", "wanted", "windows"]

_LEAST_FACTORS = 4  # the accuracy bound needs blocks of 4 factors or more


def wanted(v: View) -> bool:
    """Whether the tree computes float32 (float32, float16 and bfloat16 inputs): these
    totals where it takes no float64 ones (:func:`.wide.carry_dtype`; ``doubling`` none)."""
    return v.dtype == ir.DataType.FLOAT


def _combine(b: Builder, a: ir.Value, c: ir.Value) -> ir.Value:
    """The offset of (1 + a)(1 + c): (a + c) + a * c."""
    return b.op("Add", b.op("Add", a, c), b.op("Mul", a, c))


def totals(
    b: Builder,
    v: View,
    plain: ir.Value,
    size: int,
    *,
    blocks: ir.Value | None = None,
    slices: list[ir.Value] | None = None,
    run: int = 1,
) -> ir.Value:
    """The totals of blocks of ``size`` factors, of ``plain``'s shape (o * m, 1, i): from
    the r ``slices`` (each (o * m, 1, i)) where they are given, else from the (o * m, r, i)
    ``blocks`` (or the 2-D (o * m, r * ``run``) blocks, ``plain`` then (o * m, run));
    ``plain``: the blocks' float32 totals (the formula's T32). ``size``: a power
    of two (every tree's blocks are); blocks of 2 keep ``plain`` (the bound needs r >= 4)."""
    assert size & (size - 1) == 0 and (slices is None or len(slices) == size), size
    if size < _LEAST_FACTORS:
        return plain
    if slices is not None:
        offsets = [b.op("Sub", piece, v.one) for piece in slices]
        distance = b.op("Max", *[b.op("Abs", offset) for offset in offsets])
        while len(offsets) > 1:  # neighbours' offsets combined pairwise until one is left
            offsets = [_combine(b, offsets[k], offsets[k + 1]) for k in range(0, len(offsets), 2)]
        offset = offsets[0]
    else:  # halved pairwise along axis 1 (2-D: a factor is ``run`` columns), the distances
        assert blocks is not None  # by a ReduceMax (2-D: halved as well)
        offset = b.op("Sub", blocks, v.one)
        distance = b.op("Abs", offset)
        if run == 1:
            distance = b.reduce("ReduceMax", distance, 1, keepdims=1)
        width = size
        while width > 1:
            width //= 2
            low, high = b.split(offset, 1, 2, size=width * run)
            offset = _combine(b, low, high)
            if run > 1:
                distance = b.op("Max", *b.split(distance, 1, 2, size=width * run))
    return _chosen(b, v, offset, distance, plain, size=size)


def _chosen(
    b: Builder, v: View, offset: ir.Value, distance: ir.Value, plain: ir.Value, *, size: int
) -> ir.Value:
    """T: ``1 + offset`` where each of the block's ``size`` factors is within 1 / (8 size)
    of 1 (``distance``: their largest |x - 1|), else ``plain``."""
    limit = b.const(np.array(1 / (8 * size), dtype=np.float32))
    near = b.op("Less", distance, limit)  # false for NaN
    return b.op("Where", near, b.op("Add", offset, v.one), plain)


def windows(
    b: Builder,
    v: View,
    y: ir.Value,
    levels: int,
    shift: Callable[[ir.Value, int, ir.Value], ir.Value],
) -> ir.Value:
    """The first ``levels`` steps of a Hillis-Steele scan of ``y`` (plain ``doubling``): at
    each position the product of the window of r = 2^levels factors ending there (fewer at
    the start), the offset form (pairs of windows combined as above, distances by Max) where
    every factor of its window is within 1 / (8 r) of 1, else the plain float32 product.
    Each window is a tree of the same pairs as a block's, so the same bound holds.
    ``shift(t, s, fill)``: t moved by s positions along the scan, ``fill`` coming in (0-D)."""
    assert levels >= 2, levels  # r >= 4, as the bound needs
    zero = b.const(np.array(0, dtype=np.float32))
    offset = b.op("Sub", y, v.one)
    distance = b.op("Abs", offset)
    for k in range(levels):
        s = 1 << k
        offset = _combine(b, offset, shift(offset, s, zero))
        distance = b.op("Max", distance, shift(distance, s, zero))
        y = b.op("Mul", y, shift(y, s, v.one))
    return _chosen(b, v, offset, distance, y, size=1 << levels)
