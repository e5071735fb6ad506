"""``doubling``: a log-depth scan (Hillis-Steele) with no control flow, for any length.

Formula, on the (o, n, i) view of x, with K = ceil(log2(N)) steps for a bound N >= n::

    y_0 = x3                                 exclusive: y_0 = shift(x3, 1)
    y_{k+1} = y_k * shift(y_k, 2^k)          k = 0 .. K-1
    shift(y, s)[:, j] = y[:, j - s] for j >= s, 1 before    (reverse: y[:, j + s], 1 after)
                      = Slice(Pad(Slice(y, 0, -s), s ones before), 0, n)

(Exclusive shifts the input, not the products: IREE 3.13 does not compile the products'
shift of an 8-byte type over a run-time length, "'stream.yield' op used resource not listed
in explicit captures".)

After step k every output holds the product of the (up to) 2^(k+1) inputs ending at it, so
after K steps, of all inputs up to it. Every shift is a Slice, a Pad with constant pads and a
Slice whose end is n itself (a run-time value when n is), so one graph serves every length up
to N: when n is only known at run time the bound N comes from the user (``max_length``), and
a guard in the final Reshape makes a longer input fail at run time instead of giving a wrong
result (its middle dim becomes n + 1 when n > N, which no tensor of n elements fits).

On the 2-D view ``(o, n * i)`` (``View.flat``: onnx2tf with symbolic dims) a shift by s is
one by s * i columns, ``Slice(Pad(y, s * i ones before), 0, n * i)`` (reverse: ones after,
``Slice(.., s * i, s * i + n * i)``): a Pad first, so that no Slice bound is negative (onnx2tf
ignores a negative end over a symbolic dim).

Accuracy: each output is a product tree of its k factors (k - 1 multiplications): integers
bit-exact with wraparound (multiplication modulo 2^bits is associative and commutative);
floats within the sequential kernel's k - 1 ulps (not bitwise the same order); float16 /
bfloat16 multiplied in float32, rounded once. The plain form's float32 products of factors
near 1 round down more often than up (:mod:`.near_one`), so its error grows with n: x = 1 +
N(0, 1e-4), (4, 20000), 2268 ulps worst against the native kernel's 542; its mean error was
1.3x the sequential product's at n = 128 and 2.3x at 1024 (numpy prototype). So a float32
computation over a static n > 64 (:data:`ACCURATE_BLOCKED_ABOVE`) takes the blocked form
below, whose block totals come from :mod:`.near_one` (on the 2-D view, ``View.flat``:
TFLite, too, where the inner dim is static). Where the plain form stays (a length known only
at run time, bounded by ``max_length`` > 64, or a 2-D view over a run-time inner dim), its
first :data:`WINDOW_STEPS` = 5 steps are :func:`.near_one.windows`: each position's window
of 32 factors in offset form where all 32 are within 1 / 256 of 1 (else the plain product),
the same trees and bound as the blocked form's totals; the steps after are plain. On x = 1 +
N(0, 1e-4) of (16, 4096): 27 ulps worst / 2.9 mean against the plain form's 499 / 166 and
the sequential product's 322 / 49; at N(0, 1e-5) and n = 16384 140 / 38 against 2091 / 701
and 3197 / 698 (numpy prototype). Cost: those five steps three times over (offsets,
distances and the plain products, for the fallback): on IREE 3.13, float32 with every dim
symbolic, 2^20 elements, n = 128-4096, first and last axis, 1.45-1.76x the plain form's time
(20-58x its CumSum over static dims against 12-35x;
``scripts/results/bench-runtime-iree-2026-12-04-run-time-windows``); windows of 8 or 16
factors (:data:`WINDOW_STEPS` 3 or 4) took 0.88-0.93x / 0.93-0.96x the time of 32's in the
same rounds (``...-run-time-window-steps``), with 2.7-3.4x / 1.3-1.5x its error in the (16,
4096) prototype case: 32, as the blocked form's blocks.

Cost: K steps of (Slice, Pad, Slice, Mul) over the whole tensor: about 4 K passes over
memory and 4 K + 4 nodes (K = 16 for n = 65536). No Loop, Scan or If, no Transpose: for
runtimes without control flow and for lengths known only at run time.

Blocked, on the targets of :data:`BLOCKED_FROM` from the length given there, and for a
float32 computation beyond 64 (Accuracy, above); static n, the 3-D view: the same steps
inside blocks of B = :data:`BLOCK` positions, then the blocks' carries::

    pad n to m * B with ones (Pad; ones change no product, in either direction)
    yb = the inclusive doubling of the (o * m, B, i) view along its axis 1 (log2 B steps)
    t  = the block totals: yb[:, B - 1] (reverse: yb[:, 0]), viewed (o, m, i)
    P  = the EXCLUSIVE doubling of t along m (ceil(log2 m) steps on 1/B of the data)
    y  = yb * P (P viewed (o * m, 1, i), broadcast over the block), viewed (o, m * B, i),
         Slice [0, n);  exclusive: yb shifted by one inside its block before the Mul

Every output is still a product tree of its k factors (the same bound). For a float32
computation t is :func:`.near_one.totals` of the blocks (the offset form where every factor is
within 1 / 256 of 1, else yb's last): on x = 1 + N(0, 1e-4) of (16, 4096) 23 ulps worst / 3.2
mean against the sequential product's 267 / 44 (numpy prototype); tests/test_tree_accuracy.py
and test_runtime_accuracy.py hold it to 1.25x the native / sequential errors on onnxruntime,
OpenVINO and IREE. Full-size passes:
about 4 log2(B) + 2 instead of 4 log2(n). Measured on the last axis against the plain form
in the same rounds (``scripts/bench_runtime.py``, whose ``doubling_plain`` is the plain
form; float32 / int32, 2^20 and 10^6 elements; ``scripts/results/bench-runtime-*-2026-12-01-
doubling-*``): on IREE 3.13 0.37-0.71x its time at n = 128-8192 (0.86x at 200 on 10^6
elements; 0.99-1.02x at 64, where it is not used); on OpenVINO 2026.4 0.72-0.94x at n =
2000-8192, but 0.84-0.98x at 512 and 1024 and 0.99-1.12x at 600 and 1000 (its Pad and Slice
of the whole tensor cost more there), so from 2000 only for integers (float32 for its
accuracy: the cost below 2000 is in the README's performance section). B = 32 against 16 and 64 (a
prototype on 2^20 elements): the fastest on IREE or within 5 %; on OpenVINO within 4 % of 64
at n = 512 and 4096. Not on TFLite (not measured; its tests are the opt-in tier) nor the
other targets, where doubling only serves lengths known at run time.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import onnx_ir as ir

from rewriter.lowerings import loop, near_one
from rewriter.lowerings.builder import Builder
from rewriter.lowerings.view import Dim, View, guarded_length, shape_of, times
from rewriter.site import ScanSpec
from rewriter.targets import Target

__all__ = [
    "ACCURATE_BLOCKED_ABOVE",
    "BLOCK",
    "BLOCKED_FROM",
    "WINDOW_STEPS",
    "build",
    "compute_dtype",
    "max_ulps",
    "steps",
    "unsupported",
]

compute_dtype = loop.compute_dtype
max_ulps = loop.max_ulps
_INT64_MAX = int(np.iinfo(np.int64).max)
BLOCK = 32  # B: positions per block of the blocked form
# target name -> the static length from which doubling runs blocked (measured there)
BLOCKED_FROM: dict[str, int] = {"openvino": 2000, "iree": 128}
# float32 computations take the blocked form beyond this length, for its accurate totals
# (:mod:`.near_one`): the plain form's error grows with n (module docstring, Accuracy)
ACCURATE_BLOCKED_ABOVE = 64
# plain doubling's first steps taken in offset windows (of 2^WINDOW_STEPS factors) where the
# blocked form is not taken, for a float32 computation beyond ACCURATE_BLOCKED_ABOVE
WINDOW_STEPS = 5


def steps(bound: int) -> int:
    """K: the doubling steps for lengths up to ``bound``."""
    return max(0, math.ceil(math.log2(bound))) if bound > 1 else 0


def unsupported(spec: ScanSpec, target: Target) -> str | None:
    if spec.length is None and spec.max_length is None:
        return (
            "strategy 'doubling' needs a bound on the length of the scanned axis, which is "
            "only known at run time: pass max_length= (--max-length N)"
        )
    return None


def _plus(b: Builder, a: Dim, c: Dim) -> Dim:
    """``a + c``: an int when both are static, else a 1-element int64 tensor."""
    if isinstance(a, int) and isinstance(c, int):
        return a + c
    return b.op(
        "Add", b.const([a]) if isinstance(a, int) else a, b.const([c]) if isinstance(c, int) else c
    )


def _shift_flat(b: Builder, y: ir.Value, s: int, v: View) -> ir.Value:
    """``_shift`` on the 2-D view: by ``s * inner`` columns, Pad first (no negative bound)."""
    width = times(b, s, v.inner)
    total = times(b, v.length, v.inner)
    if v.reverse:
        padded = b.op("Pad", y, shape_of(b, 0, 0, 0, width), v.one)
        start, end = width, _plus(b, width, total)
    else:
        padded = b.op("Pad", y, shape_of(b, 0, width, 0, 0), v.one)
        start, end = 0, total
    return b.op("Slice", padded, v.tensor(b, start), v.tensor(b, end), b.const([1]))


def _shift_padded_first(b: Builder, y: ir.Value, s: int, n: ir.Value, v: View) -> ir.Value:
    """``_shift`` by a Pad of ``s`` ones first, then a Slice back to ``n`` with bounds in
    [0, n + s]: ``Slice(Pad(y, s before), 0, n)`` (reverse: ``Slice(Pad(y, s after), s, s +
    n)``). For targets whose Slice does not clamp an end below -dim (``slice_clamps``: MNN 3.6
    kept a column of a 3-wide dim for an end of -5) or whose Pad of an empty tensor gives 0
    (``empty_pad``): the plain shift slices ``[0, -s)`` and pads what is left, both wrong
    there when s >= n, which a length known only at run time reaches. Nothing here pads an
    empty tensor whose values are kept (an n of 0 is sliced back to 0)."""
    pads = [0, 0, 0, 0, s, 0] if v.reverse else [0, s, 0, 0, 0, 0]
    padded = b.op("Pad", y, b.const(pads), v.one)
    if v.reverse:
        end = b.op("Add", n, b.const([s]))
        return b.op("Slice", padded, b.const([s]), end, b.const([1]))
    return b.op("Slice", padded, b.const([0]), n, b.const([1]))


def _shift(b: Builder, y: ir.Value, s: int, n: ir.Value | None, v: View) -> ir.Value:
    """``y`` moved by ``s`` along axis 1, ones filling in (towards the end unless reverse).
    ``n``: the length to cut the result to (a shift by s >= n leaves s ones); None where the
    length is static and above s (the result is already n long)."""
    if v.flat:
        return _shift_flat(b, y, s, v)
    padded_first = not (v.target.slice_clamps and v.target.empty_pad)
    if n is not None and v.static_length is None and padded_first:
        return _shift_padded_first(b, y, s, n, v)
    if not v.target.pad_shifts and (v.dtype is None or v.dtype.itemsize == 8):
        # ones Concat-ed (always n long, no cut): IREE's Pad bug, seen for 8-byte types
        ones = v.ones(b, b.slice_axis(y, 1, 0, s))
        if v.reverse:
            return b.op("Concat", b.slice_axis(y, 1, s, _INT64_MAX), ones, axis=1)
        return b.op("Concat", ones, b.slice_axis(y, 1, 0, -s), axis=1)
    pads = [0, 0, 0, 0, 0, 0]
    if v.reverse:
        kept = b.slice_axis(y, 1, s, _INT64_MAX)
        pads[4] = s
    else:
        kept = b.slice_axis(y, 1, 0, -s)
        pads[1] = s
    padded = b.op("Pad", kept, b.const(pads), v.one)
    if n is None:
        return padded
    return b.op("Slice", padded, b.const([0]), n, b.const([1]))


def _scan_static(b: Builder, y: ir.Value, length: int, v: View, *, exclusive: bool) -> ir.Value:
    """The doubling steps along axis 1 of ``y``, whose length is static."""
    for k in range(steps(length)):
        y = b.op("Mul", y, _shift(b, y, 1 << k, None, v))
    if exclusive:  # length >= 1: a shift by one leaves it as long
        y = _shift(b, y, 1, None, v)
    return y


def _blocked(b: Builder, x3: ir.Value, v: View, n: int) -> ir.Value:
    """The blocked form (module docstring) of the scan along axis 1 of ``x3``; n static."""
    m = -(-n // BLOCK)
    padded = m * BLOCK
    if padded != n:
        x3 = b.op("Pad", x3, b.const([0, 0, 0, 0, padded - n, 0]), v.one)
    om = times(b, v.outer, m)
    blocks = b.reshape(x3, shape_of(b, om, BLOCK, v.inner))
    yb = _scan_static(b, blocks, BLOCK, v, exclusive=False)
    last = 0 if v.reverse else BLOCK - 1
    totals = b.slice_axis(yb, 1, last, last + 1)
    if near_one.wanted(v):
        totals = near_one.totals(b, v, totals, BLOCK, blocks=blocks)
    totals = b.reshape(totals, shape_of(b, v.outer, m, v.inner))
    carries = _scan_static(b, totals, m, v, exclusive=True)
    if v.exclusive:
        yb = _shift(b, yb, 1, None, v)
    y = b.op("Mul", yb, b.reshape(carries, shape_of(b, om, 1, v.inner)))
    y = b.reshape(y, shape_of(b, v.outer, padded, v.inner))
    return y if padded == n else b.slice_axis(y, 1, 0, n)


def _blocked_flat(b: Builder, x2: ir.Value, v: View, n: int) -> ir.Value:
    """The blocked form on the 2-D view (o, n * i), i static: the same steps, every tensor of
    rank 2 (a block is B * i columns, a shift by s positions one by s * i columns, and the
    carries, (o * m, i), are tiled B times along the columns to meet the block)."""
    i = v.inner
    assert isinstance(i, int), i
    m = -(-n // BLOCK)
    padded = m * BLOCK
    if padded != n:
        x2 = b.op("Pad", x2, b.const([0, 0, 0, (padded - n) * i]), v.one)
    om = times(b, v.outer, m)
    in_block = dataclasses.replace(v, outer=om, length=BLOCK)
    blocks = b.reshape(x2, shape_of(b, om, BLOCK * i))
    yb = _scan_static(b, blocks, BLOCK, in_block, exclusive=False)
    last = 0 if v.reverse else BLOCK - 1
    totals = b.slice_axis(yb, 1, last * i, (last + 1) * i)  # (o * m, i)
    if near_one.wanted(v):
        totals = near_one.totals(b, v, totals, BLOCK, blocks=blocks, run=i)
    across = dataclasses.replace(v, length=m)
    totals = b.reshape(totals, shape_of(b, v.outer, m * i))
    carries = b.reshape(_scan_static(b, totals, m, across, exclusive=True), shape_of(b, om, i))
    if v.exclusive:
        yb = _shift(b, yb, 1, None, in_block)
    y = b.op("Mul", yb, b.op("Tile", carries, b.const([1, BLOCK])))
    y = b.reshape(y, shape_of(b, v.outer, padded * i))
    return y if padded == n else b.slice_axis(y, 1, 0, n * i)


def _blocks(v: View, n: int) -> bool:
    """Whether the static length ``n`` takes the blocked form (3-D or 2-D view): from
    :data:`BLOCKED_FROM` (speed), and a float32 computation beyond
    :data:`ACCURATE_BLOCKED_ABOVE` (accuracy)."""
    first = BLOCKED_FROM.get(v.target.name)
    if first is not None and n >= first:
        return True
    return v.dtype == ir.DataType.FLOAT and n > ACCURATE_BLOCKED_ABOVE


def build(b: Builder, x3: ir.Value, v: View) -> ir.Value:
    """The scan along axis 1 of ``x3`` (in the compute type)."""
    static = v.static_length
    if static is not None and _blocks(v, static):
        if not v.flat:
            return _blocked(b, x3, v, static)
        if isinstance(v.inner, int):
            return _blocked_flat(b, x3, v, static)
    bound = static if static is not None else v.spec.max_length
    assert bound is not None
    n = v.tensor(b, v.length)
    y = _shift(b, x3, 1, n, v) if v.exclusive else x3
    first = 0
    if near_one.wanted(v) and bound > ACCURATE_BLOCKED_ABOVE:
        # the first steps in offset windows, as the blocked form's blocks (Accuracy)
        first = WINDOW_STEPS

        def shift(t: ir.Value, s: int, fill: ir.Value) -> ir.Value:
            return _shift(b, t, s, n, dataclasses.replace(v, one=fill))

        y = near_one.windows(b, v, y, first, shift)
    for k in range(first, steps(bound)):
        y = b.op("Mul", y, _shift(b, y, 1 << k, n, v))
    if static is not None:
        return y if y is not x3 else b.op("Identity", x3)
    # A run-time length above the bound must fail, not return a partial product.
    middle = guarded_length(b, v, n, bound)
    if v.flat:
        return b.reshape(y, shape_of(b, v.outer, times(b, middle, v.inner)))
    shape = b.op("Concat", v.tensor(b, v.outer), middle, v.tensor(b, v.inner), axis=0)
    return b.reshape(y, shape)
