"""``doubling``: a log-depth scan (Hillis-Steele) with no control flow, for any length.

Formula, on the (o, n, i) view of x, with K = ceil(log2(N)) steps for a bound N >= n::

    y_0 = x3
    y_{k+1} = y_k * shift(y_k, 2^k)          k = 0 .. K-1
    shift(y, s)[:, j] = y[:, j - s] for j >= s, 1 before    (reverse: y[:, j + s], 1 after)
                      = Slice(Pad(Slice(y, 0, -s), s ones before), 0, n)
    exclusive: y = shift(y_K, 1)

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
bfloat16 multiplied in float32, rounded once.

Cost: K steps of (Slice, Pad, Slice, Mul) over the whole tensor: about 4 K passes over
memory and 4 K + 4 nodes (K = 16 for n = 65536). No Loop, Scan or If, no Transpose: for
runtimes without control flow and for lengths known only at run time.
"""

from __future__ import annotations

import math

import numpy as np
import onnx_ir as ir

from rewriter.lowerings import loop
from rewriter.lowerings.builder import Builder
from rewriter.lowerings.view import Dim, View, shape_of, times
from rewriter.site import ScanSpec
from rewriter.targets import Target

__all__ = ["build", "compute_dtype", "max_ulps", "steps", "unsupported"]

compute_dtype = loop.compute_dtype
max_ulps = loop.max_ulps
_INT64_MAX = int(np.iinfo(np.int64).max)


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


def _shift(b: Builder, y: ir.Value, s: int, n: ir.Value, v: View) -> ir.Value:
    """``y`` moved by ``s`` along axis 1, ones filling in (towards the end unless reverse)."""
    if v.flat:
        return _shift_flat(b, y, s, v)
    pads = [0, 0, 0, 0, 0, 0]
    if v.reverse:
        kept = b.slice_axis(y, 1, s, _INT64_MAX)
        pads[4] = s
    else:
        kept = b.slice_axis(y, 1, 0, -s)
        pads[1] = s
    padded = b.op("Pad", kept, b.const(pads), v.one)
    return b.op("Slice", padded, b.const([0]), n, b.const([1]))


def build(b: Builder, x3: ir.Value, v: View) -> ir.Value:
    """The scan along axis 1 of ``x3`` (in the compute type)."""
    static = v.static_length
    bound = static if static is not None else v.spec.max_length
    assert bound is not None
    n = v.tensor(b, v.length)
    y = x3
    for k in range(steps(bound)):
        y = b.op("Mul", y, _shift(b, y, 1 << k, n, v))
    if v.exclusive:
        y = _shift(b, y, 1, n, v)
    if static is not None:
        return y if y is not x3 else b.op("Identity", x3)
    # A run-time length above the bound must fail, not return a partial product.
    fits = b.cast(b.op("Less", n, b.const([bound + 1])), ir.DataType.INT64)
    middle = b.op("Sub", b.op("Add", n, b.const([1])), fits)
    if v.flat:
        return b.reshape(y, shape_of(b, v.outer, times(b, middle, v.inner)))
    shape = b.op("Concat", v.tensor(b, v.outer), middle, v.tensor(b, v.inner), axis=0)
    return b.reshape(y, shape)
