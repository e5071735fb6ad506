"""``loop``: the sequential running product, carried through an ONNX Loop.

Formula, for the scanned axis ``a`` of length n (after a flip when ``reverse``)::

    acc_0 = ones(shape of x without a)
    acc_i = acc_{i-1} * Gather(x, i, axis=a)       i = 0 .. n-1   (Loop scan output)
    y     = Transpose(Stack_i(acc_i)) moving the stacked axis back to a
    exclusive: y = Slice(Pad(y, one slice of 1s before a), drop the last)
    reverse:   x and y flipped along a (Slice with step -1)

Accuracy: the same multiplications in the same order as the sequential kernel, so integers
are bit-exact with wraparound, and float32 / float64 match ORT's native kernel bit for bit
(error at position k at most (k - 1) * 2^-p relative, p = 24 / 53). float16 and bfloat16 are
multiplied in float32 and rounded once at the end (ORT computes float16 the same way).

Cost: n Loop iterations (each a Gather and a Mul over one slice), one Transpose unless a = 0,
plus two Slices per flip and a Pad + Slice for exclusive; about 8 nodes. Needs a static axis
and a known rank (a run-time axis goes through an If over the rank's axes).
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from rewriter.lowerings.builder import Builder
from rewriter.site import CumProdSite

__all__ = ["build", "compute_dtype", "max_ulps", "unsupported"]

_WIDER = {ir.DataType.FLOAT16: ir.DataType.FLOAT, ir.DataType.BFLOAT16: ir.DataType.FLOAT}


def unsupported(site: CumProdSite) -> str | None:
    return None if site.rank is not None else "strategy 'loop' needs the rank of x to be known"


def compute_dtype(dtype: ir.DataType) -> ir.DataType:
    return _WIDER.get(dtype, dtype)


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


def build(b: Builder, x: ir.Value, axis: int, site: CumProdSite, *, dtype: ir.DataType) -> ir.Value:
    """``x`` is in the compute type ``dtype``; ``axis`` is static and non-negative."""
    rank = site.rank
    assert rank is not None
    if site.reverse:
        x = b.flip(x, axis)
    y = _running_product(b, x, axis, rank, dtype=dtype, length_hint=site.scan_length)
    if site.exclusive:
        y = b.shift_exclusive(y, axis, rank, dtype)
    if site.reverse:
        y = b.flip(y, axis)
    return y


def _running_product(
    b: Builder, x: ir.Value, axis: int, rank: int, *, dtype: ir.DataType, length_hint: int | None
) -> ir.Value:
    """The inclusive scan along ``axis``: Loop, then the stacked axis moved back."""
    shape = b.op("Shape", x)
    length = b.op("Gather", shape, b.const(axis), axis=0)
    rest = b.op("Gather", shape, b.const([d for d in range(rank) if d != axis]), axis=0)
    ones = b.op("ConstantOfShape", rest, value=ir.tensor([1], dtype=dtype))

    body = b.child()
    i = body.value("i", ir.DataType.INT64, ir.Shape([]))
    cond_in = body.value("cond", ir.DataType.BOOL, ir.Shape([]))
    acc_in = body.value("acc", dtype)
    acc_out = body.op("Mul", acc_in, body.op("Gather", x, i, axis=axis))
    cond_out = body.op("Identity", cond_in)
    scan_out = body.op("Identity", acc_out)
    for value in (cond_out, acc_out, scan_out):
        value.type = ir.TensorType(ir.DataType.BOOL if value is cond_out else dtype)
    graph = body.graph([i, cond_in, acc_in], [cond_out, acc_out, scan_out], "cumprod_loop_body")
    # An explicit true condition (an empty one is allowed, but onnx.reference then never loops).
    true = b.const(True)
    _, stacked = b.op_multi("Loop", length, true, ones, n_out=2, body=graph)

    # Give the stacked output its shape [n, rest...] (a Reshape copies nothing in onnxruntime):
    # with zero iterations onnxruntime returns it with shape [0], and onnx.reference
    # concatenates the iterations (np.vstack) instead of stacking them.
    length_1d = b.op("Reshape", length, b.const([1]))
    full = b.op("Concat", length_1d, rest, axis=0)
    if b.opset >= 14 or (length_hint or 0) > 0:
        stacked = b.reshape(stacked, full)
    else:  # without allowzero a 0 in ``full`` would copy a dim the [0]-shaped output lacks
        stacked = b.op(
            "If",
            b.op("Equal", length, b.const(0)),
            then_branch=b.subgraph(
                lambda sb: sb.op("ConstantOfShape", full, value=ir.tensor([1], dtype=dtype)),
                dtype,
                "cumprod_empty",
            ),
            else_branch=b.subgraph(
                lambda sb: sb.op("Reshape", stacked, full), dtype, "cumprod_stacked"
            ),
        )
    if axis == 0:
        return stacked
    return b.op("Transpose", stacked, perm=[*range(1, axis + 1), 0, *range(axis + 1, rank)])
