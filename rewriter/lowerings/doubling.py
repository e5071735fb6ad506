"""``doubling``: a log-depth scan (Hillis-Steele) with no control flow, for any length.

Formula, on the (o, n, i) view of x, with K = ceil(log2(N)) steps for a bound N >= n::

    y_0 = x3                                 exclusive: y_0 = shift(x3, 1)
    y_{k+1} = y_k * shift(y_k, 2^k)          k = 0 .. K-1
    shift(y, s)[:, j] = y[:, j - s] for j >= s, 1 before    (reverse: y[:, j + s], 1 after)
                      = Pad(Slice(y, 0, -s), s ones before)      (static n)
                      = Slice(Pad(y, s ones before), 0, n)       (run-time n, 2-D view)

Every shift's end is n itself, so one graph serves every length up to N (a run-time length:
N = ``max_length``, and a guard in the final Reshape fails a longer input). On the 2-D view
(``View.flat``) a shift by s is one by s * i columns.

Blocked (static n, from ``Target.doubling_blocked_from`` for speed, and for float32 beyond
:data:`ACCURATE_BLOCKED_ABOVE` for accuracy): the steps inside blocks of :data:`BLOCK`
positions, then the blocks' exclusive carries P (doubling of the block totals), y = yb * P.

Accuracy: each output is a product tree of its k factors: integers bit-exact with
wraparound; floats within the sequential kernel's k - 1 ulps; float16 / bfloat16 multiplied
in float32 and rounded once. float32 block totals come from :func:`.near_one.totals` and the
plain form's first :data:`WINDOW_STEPS` steps from :func:`.near_one.windows`, so the error
on factors near 1 does not grow with n (within 1.25x the native kernel's:
tests/lowerings/test_tree_accuracy.py).

Cost: K steps of (Slice, Pad, Mul) or (Pad, Slice, Mul) over the whole tensor: about 3K
passes and 3K + 4 nodes (K = 16 for n = 65536); blocked, about 4 log2(B) + 2 full-size passes.
"""

from __future__ import annotations

import dataclasses

import onnx_ir as ir

from rewriter.lowerings import near_one
from rewriter.lowerings.builder import END, Builder
from rewriter.lowerings.view import Dim, View, guarded_length, shape_of, times
from rewriter.site import ScanSpec
from rewriter.targets import Target

__all__ = ["ACCURATE_BLOCKED_ABOVE", "BLOCK", "WINDOW_STEPS", "build", "unsupported"]

BLOCK = 32  # B: positions per block of the blocked form
ACCURATE_BLOCKED_ABOVE = 64  # float32 beyond: blocked (or windows), for accuracy
WINDOW_STEPS = 5  # the plain form's first steps in offset windows of 2^5 factors


def unsupported(spec: ScanSpec, target: Target) -> str | None:
    if spec.length is None and spec.max_length is None:
        return (
            "strategy 'doubling' needs a bound on the length of the scanned axis, which is "
            "only known at run time: pass max_length= (--max-length N)"
        )
    return None


def _shift(b: Builder, y: ir.Value, s: int, v: View) -> ir.Value:
    """``y`` moved by ``s`` positions along axis 1 (on the 2-D view, ``s * inner`` columns),
    ones filling in (towards the end unless reverse). A static length (s < n): Slice, then
    Pad, or ones Concat-ed for 8-byte types without ``Target.pad_shifts``.
    A run-time length (Concat: always n long) and the 2-D view: Pad, then ``Slice(0, n)``
    (reverse: ``Slice(s, s + n)``), bounds in [0, n + s] (a shift by s >= n leaves n ones; no
    bound below 0, which some runtimes' Slice does not clamp, and no Pad of an empty tensor
    kept, which some fill with 0: docs/targets.md names them)."""
    width = times(b, s, v.inner) if v.flat else s
    rank = 2 if v.flat else 3
    pads: list[Dim] = [0] * (2 * rank)  # width ones before axis 1 (reverse: after it)
    pads[rank + 1 if v.reverse else 1] = width
    concat = not v.target.pad_shifts and (v.dtype is None or v.dtype.itemsize == 8)
    if v.flat or (v.static_length is None and not concat):
        total = times(b, v.length, v.inner) if v.flat else v.length
        padded = b.op("Pad", y, shape_of(b, *pads), v.one)
        if not v.reverse:
            return b.op("Slice", padded, b.const([0]), v.tensor(b, total), b.const([1]))
        end = times(b, width, total, "Add") if v.flat else times(b, total, s, "Add")
        return b.op("Slice", padded, v.tensor(b, width), v.tensor(b, end), b.const([1]))
    ones = v.ones(b, b.slice_axis(y, 1, 0, s)) if concat else None
    kept = b.slice_axis(y, 1, s, END) if v.reverse else b.slice_axis(y, 1, 0, -s)
    if ones is None:
        return b.op("Pad", kept, shape_of(b, *pads), v.one)
    return b.op("Concat", *((kept, ones) if v.reverse else (ones, kept)), axis=1)


def _steps(b: Builder, y: ir.Value, v: View, bound: int, first: int = 0) -> ir.Value:
    """The doubling steps ``first`` .. K - 1 along axis 1 of ``y``, K = ceil(log2(``bound``))."""
    for k in range(first, (bound - 1).bit_length()):
        y = b.op("Mul", y, _shift(b, y, 1 << k, v))
    return y


def _blocked(b: Builder, x3: ir.Value, v: View, n: int) -> ir.Value:
    """The blocked form of the scan along axis 1 of ``x3``, n static; on the 2-D view
    (i static) a position is i columns and the carries (o * m, i) are tiled B times."""
    i = v.inner
    w = i if v.flat else 1  # columns per position
    assert isinstance(w, int), w
    m = -(-n // BLOCK)
    padded = m * BLOCK
    if padded != n:
        pads = [0, 0, 0, (padded - n) * w] if v.flat else [0, 0, 0, 0, padded - n, 0]
        x3 = b.op("Pad", x3, b.const(pads), v.one)
    om = times(b, v.outer, m)
    in_block = dataclasses.replace(v, outer=om, length=BLOCK)

    def shape(rows: Dim, positions: int) -> ir.Value:  # (rows, positions, i), or 2-D
        return shape_of(b, rows, positions * w) if v.flat else shape_of(b, rows, positions, i)

    blocks = b.reshape(x3, shape(om, BLOCK))
    yb = _steps(b, blocks, in_block, BLOCK)
    last = 0 if v.reverse else BLOCK - 1
    totals = b.slice_axis(yb, 1, last * w, (last + 1) * w)
    if near_one.wanted(v):
        totals = near_one.totals(b, v, totals, BLOCK, blocks=blocks, run=w)
    across = dataclasses.replace(v, length=m)
    totals = b.reshape(totals, shape(v.outer, m))
    carries = _shift(b, _steps(b, totals, across, m), 1, across)
    if v.flat:
        carries = b.reshape(carries, shape_of(b, om, i))
    if v.exclusive:
        yb = _shift(b, yb, 1, in_block)
    if v.flat:
        y = b.op("Mul", yb, b.op("Tile", carries, b.const([1, BLOCK])))
    else:
        y = b.op("Mul", yb, b.reshape(carries, shape_of(b, om, 1, i)))
    y = b.reshape(y, shape(v.outer, padded))
    return y if padded == n else b.slice_axis(y, 1, 0, n * w)


def _blocks(v: View, n: int) -> bool:
    """Whether the static length ``n`` takes the blocked form (module docstring)."""
    first = v.target.doubling_blocked_from
    if first is not None and n >= first:
        return True
    return v.dtype == ir.DataType.FLOAT and n > ACCURATE_BLOCKED_ABOVE


def build(b: Builder, x3: ir.Value, v: View) -> ir.Value:
    """The scan along axis 1 of ``x3`` (in the compute type)."""
    static = v.static_length
    if static is not None and _blocks(v, static) and (not v.flat or isinstance(v.inner, int)):
        return _blocked(b, x3, v, static)
    bound = static if static is not None else v.spec.max_length
    assert bound is not None
    y = _shift(b, x3, 1, v) if v.exclusive else x3
    first = 0
    if near_one.wanted(v) and bound > ACCURATE_BLOCKED_ABOVE:
        # the first steps in offset windows, as the blocked form's blocks (Accuracy)
        first = WINDOW_STEPS
        y = near_one.windows(
            b, v, y, first, lambda t, s, fill: _shift(b, t, s, dataclasses.replace(v, one=fill))
        )
    y = _steps(b, y, v, bound, first)
    if static is not None:
        return y if y is not x3 else b.op("Identity", x3)
    # A run-time length above the bound must fail, not return a partial product.
    n = v.length
    assert not isinstance(n, int)
    middle = guarded_length(b, v, n, bound)
    if v.flat:
        return b.reshape(y, shape_of(b, v.outer, times(b, middle, v.inner)))
    return b.reshape(y, shape_of(b, v.outer, middle, v.inner))
