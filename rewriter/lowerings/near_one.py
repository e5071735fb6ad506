"""float32 block totals that stay accurate on factors near 1, in float32 alone.

A float32 product tree (``carry``, ``radix``, ``blocked``, ``tiled``, blocked ``doubling``)
starts each block's product at 1. On factors within about 2^-12 of 1 the product of two of
them, fl((1 + a)(1 + b)) with one above 1 and one below, rounds down more often than up (a +
b is exact and the cross term ab below half an ulp: about -1/8 ulp on average, measured), so
the block totals, and every carry built from them, lean one way: float32 x = 1 + N(0, 1e-4)
of (4, 4096), last axis, gave 455 ulps worst / 156 mean in blocked doubling against the
sequential product's 191 / 37 (numpy prototype). The carries themselves are not the cause:
the same trees with exact totals rounded once to float32 and float32 carries gave 13 / 2.5.
Where the target computes float64, :mod:`.wide` takes the totals in float64. This module
serves the targets that cannot (OpenVINO, TFLite and ``portable`` compute float64 in
float32) and ``doubling`` (IREE 3.13 compiled no 8-byte doubling with Pad shifts; with the
Concat shifts of ``Target.pad_shifts`` it did on 2026-12-05): the blocked form's totals, and
in the plain form (lengths known at run time) the windows of its first steps
(:func:`windows`).

Formula, for a block of r factors x_1 .. x_r (float32; r a power of two, 4 or more) whose
plain float32 total is T32::

    e_j = x_j - 1                         (exact for x_j in [0.5, 2], Sterbenz)
    E   = the product in offset form: E(a, c) = (a + c) + a * c, halving the block pairwise
          (the offset of (1 + a)(1 + c); the pairs' sums are of small numbers, so nothing
          of the cross term is lost)
    T   = 1 + E    where every |e_j| < 1 / (8 r),   else T32

Accuracy: where every |e_j| < 1 / (8 r), every partial product of the block lies within
[0.88, 1.14] ((1 - 1 / (8r))^r >= 0.8807 for r >= 4) and every offset within 0.134 of 0, so
each pair's three roundings (relative eps = 2^-24 each) add at most eps * (0.268 + 0.018 +
0.134) / 0.88 = 0.48 eps to the relative error, and the last Add one eps: at most (0.48 (r -
1) + 1) eps <= (r - 1) eps, the float32 product's own bound, so every bound stated for the
trees holds as it was. Elsewhere (a factor further from 1, or 0, -0.0, inf, NaN) T32 is
taken as it is, with its special values. On factors near 1 the offset form is the accurate
one: blocked doubling on x = 1 + N(0, 1e-4) of (16, 4096) gave 23 ulps worst / 3.2 mean,
against the sequential product's 267 / 44 and the plain totals' 439 / 147; at N(0, 3e-4) 24
/ 3.3 against 56 / 9.9 and 157 / 46; from N(0, 3e-3) on, where the check keeps T32, the
plain totals were within 1.17x the sequential product's mean error (numpy prototype, B = 32).

Cost: a Sub, an Abs and a ReduceMax (or one Max of the r slices) over x, Splits in halves
and (r - 1) / r of x again in Add, Mul, Add (the pairs' sizes halve), then a Less, an Add
and a Where on 1 / r of the data: about six passes of float32 over memory; 5r + 1 nodes per
block level (the slices' form) or 4 log2(r) + 6 (the halving form; a Split and a Max more
per level on TFLite's 2-D view of a first or middle axis). r is a power of two in every
tree. On OpenVINO 2026.4 the ReduceMax and the Splits took 0.84-0.86x the time of Slices and
a Max per level (blocked doubling on 2^20 float32, n = 128-4096, first and last axis).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx_ir as ir

from rewriter.lowerings import chain
from rewriter.lowerings.builder import Builder
from rewriter.lowerings.view import View

__all__ = ["totals", "wanted", "windows"]

_LEAST_FACTORS = 4  # the accuracy bound needs blocks of 4 factors or more
Offsets = tuple[ir.Value, ir.Value]  # a product's offset from 1, and its factors' largest


def wanted(v: View) -> bool:
    """Whether the tree computes float32 (float32, float16 and bfloat16 inputs), so takes
    these totals where it takes no float64 ones (the trees ask :func:`.wide.carry_dtype`
    first; blocked ``doubling`` never takes float64)."""
    return v.dtype == ir.DataType.FLOAT


def _combine(b: Builder, a: ir.Value, c: ir.Value) -> ir.Value:
    """The offset of (1 + a)(1 + c): (a + c) + a * c."""
    return b.op("Add", b.op("Add", a, c), b.op("Mul", a, c))


def _halved(b: Builder, level: list[ir.Value]) -> ir.Value:
    """Neighbours' offsets combined pairwise until one is left (a power-of-two count)."""
    while len(level) > 1:
        level = [_combine(b, level[k], level[k + 1]) for k in range(0, len(level), 2)]
    return level[0]


def _offsets_of_slices(b: Builder, v: View, slices: list[ir.Value]) -> Offsets:
    offsets = [b.op("Sub", piece, v.one) for piece in slices]
    distance = b.op("Max", *[b.op("Abs", offset) for offset in offsets])
    return _halved(b, offsets), distance


def _offsets_of_blocks(b: Builder, v: View, blocks: ir.Value, size: int, run: int) -> Offsets:
    """The ``blocks``' offsets halved pairwise along axis 1 (a Split in two, each level):
    (o * m, r, i), or on the 2-D view (o * m, r * run), a factor being ``run`` columns. The
    distances: a ReduceMax along axis 1, or on the 2-D view with run > 1 halved as well."""
    offset = b.op("Sub", blocks, v.one)
    distance = b.op("Abs", offset)
    by_halves = run > 1
    if not by_halves:
        if b.opset >= 18:
            distance = b.op("ReduceMax", distance, b.const([1]), keepdims=1)
        else:
            distance = b.op("ReduceMax", distance, axes=[1], keepdims=1)
    width = size
    while width > 1:
        width //= 2
        low, high = chain.split(b, offset, 1, 2, size=width * run)
        offset = _combine(b, low, high)
        if by_halves:
            distance = b.op("Max", *chain.split(b, distance, 1, 2, size=width * run))
    return offset, distance


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
        offset, distance = _offsets_of_slices(b, v, slices)
    else:
        assert blocks is not None
        offset, distance = _offsets_of_blocks(b, v, blocks, size, run)
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
