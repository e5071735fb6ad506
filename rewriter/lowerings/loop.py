"""``loop``: the sequential running product, carried through an ONNX Loop.

Formula, on the (o, n, i) view of x (after a flip along n when ``reverse``)::

    acc_0 = ones(o, i)
    acc_k = acc_{k-1} * Gather(x3, k, axis=1)       k = 0 .. n-1   (Loop scan output)
    y3    = Transpose(Stack_k(acc_k), (1, 0, 2))
    exclusive: y3 = Slice(Pad(y3, one slice of 1s before n), drop the last)
    reverse:   x3 and y3 flipped along n (Slice with step -1)

Accuracy: the same multiplications in the same order as the sequential kernel, so integers
are bit-exact with wraparound, and float32 / float64 match ORT's native kernel bit for bit
(error at position k at most (k - 1) * 2^-p relative, p = 24 / 53). float16 and bfloat16 are
multiplied in float32 and rounded once at the end (ORT computes float16 the same way).

Cost: n Loop iterations (each a Gather and a Mul over an (o, i) slab), one Transpose unless
o = 1, plus two Slices per flip and a Pad + Slice for exclusive; about 12 nodes (on OpenVINO,
where the length may be 0, a Pad (one copy of x) and a Slice more: ``_running_product``).
Works for any rank, a run-time axis and run-time dims (the view is computed at run time).
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from rewriter.lowerings.builder import END, Builder
from rewriter.lowerings.view import View

__all__ = ["build", "compute_dtype", "max_ulps"]

_WIDER = {ir.DataType.FLOAT16: ir.DataType.FLOAT, ir.DataType.BFLOAT16: ir.DataType.FLOAT}


def compute_dtype(dtype: ir.DataType | None) -> ir.DataType | None:
    return None if dtype is None else _WIDER.get(dtype, dtype)


def max_ulps(dtype: ir.DataType, factors: np.ndarray) -> np.ndarray:
    """The guaranteed bound, in ulps of ``dtype``, for a product of ``factors`` inputs whose
    prefix products all stay inside ``dtype``'s normal range.

    float32 / float64: k - 1 roundings of relative size 2^-p each: k - 1 ulps (the sequential
    kernel's own bound; ORT's native kernel is bitwise the same). float16 / bfloat16: the float32
    product's (k - 1) * 2^-24, then one rounding: 0.5 + (k - 1) * 2^(p - 24) ulps.
    """
    k1 = np.maximum(factors.astype(np.float64) - 1, 0)
    if dtype in (ir.DataType.FLOAT16, ir.DataType.BFLOAT16):
        bits = 11 if dtype == ir.DataType.FLOAT16 else 8
        return 0.5 + k1 * 2.0 ** (bits - 24) * (1 + 2.0**-20)
    return k1 * (1 + 2.0**-20)


def flip(b: Builder, x3: ir.Value, v: View) -> ir.Value:
    """``x3`` reversed along axis 1: Slice with step -1, or ReverseSequence where the
    target cannot Slice backwards over a run-time length."""
    if v.target.slice_negative_step or isinstance(v.length, int):
        return b.flip(x3, 1)
    lengths = b.op("Expand", v.tensor(b, v.length), v.tensor(b, v.outer))
    return b.op("ReverseSequence", x3, lengths, batch_axis=0, time_axis=1)


def build(b: Builder, x3: ir.Value, v: View) -> ir.Value:
    """The scan along axis 1 of ``x3`` (in the compute type)."""
    if v.reverse:
        x3 = flip(b, x3, v)
    y3 = _running_product(b, x3, v)
    if v.exclusive:
        y3 = b.shift_exclusive(y3, v.one)
    if v.reverse:
        y3 = flip(b, y3, v)
    return y3


def _running_product(b: Builder, x3: ir.Value, v: View) -> ir.Value:
    """The inclusive scan along axis 1: Loop, then the stacked axis moved back; without
    ``Target.loop_empty_length``, where the length may be 0, a slab of ones before x3 (the
    Loop runs at least once) sliced off the result."""
    outer, length, inner = (v.tensor(b, d) for d in v.dims())
    guarded = not v.target.loop_empty_length and not (v.static_length or 0) > 0
    steps = length
    if guarded:
        x3 = b.op("Pad", x3, b.const([0, 1, 0, 0, 0, 0]), v.one)  # (Builder.shift_exclusive)
        steps = b.op("Add", length, b.const([1]))
    ones = b.op("Expand", v.one, b.op("Concat", outer, inner, axis=0))
    dtype = v.dtype

    body = b.child()
    i = body.value("i", ir.DataType.INT64, ir.Shape([]))
    cond_in = body.value("cond", ir.DataType.BOOL, ir.Shape([]))
    acc_in = body.value("acc", dtype)
    acc_out = body.op("Mul", acc_in, body.op("Gather", x3, i, axis=1))
    cond_out = body.op("Identity", cond_in)
    scan_out = body.op("Identity", acc_out)
    cond_out.type = ir.TensorType(ir.DataType.BOOL)
    for value in (acc_out, scan_out):
        if dtype is not None:
            value.type = ir.TensorType(dtype)
    graph = body.graph([i, cond_in, acc_in], [cond_out, acc_out, scan_out], "cumprod_loop_body")
    # An explicit true condition (an empty one is allowed, but onnx.reference then never loops).
    true = b.const(True)
    trip = b.op("Reshape", steps, b.const([]))
    _, stacked = b.op_multi("Loop", trip, true, ones, n_out=2, body=graph)

    # Give the stacked output its shape [n, o, i] (a Reshape copies nothing in onnxruntime):
    # with zero iterations onnxruntime returns it with shape [0], and onnx.reference
    # concatenates the iterations (np.vstack) instead of stacking them.
    full = b.op("Concat", steps, outer, inner, axis=0)
    if b.opset >= 14 or (v.static_length or 0) > 0 or guarded:
        stacked = b.reshape(stacked, full)
        if guarded:
            stacked = b.slice_axis(stacked, 0, 1, END)
    else:  # without allowzero a 0 in ``full`` would copy a dim the [0]-shaped output lacks
        stacked = b.op(
            "If",
            b.op("Equal", trip, b.const(0)),
            then_branch=b.subgraph(lambda sb: sb.op("Expand", v.one, full), dtype, "cumprod_empty"),
            else_branch=b.subgraph(
                lambda sb: sb.op("Reshape", stacked, full), dtype, "cumprod_stacked"
            ),
        )
    if v.outer == 1:
        return b.reshape(stacked, b.op("Concat", outer, length, inner, axis=0))
    return b.op("Transpose", stacked, perm=[1, 0, 2])
