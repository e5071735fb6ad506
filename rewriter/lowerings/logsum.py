"""``logsum``: the product as the exponential of a running sum of logarithms.

Formula (on the (o, n, i) view of x, along axis 1, with CumSum's own ``exclusive`` /
``reverse``)::

    y = sign * Exp(CumSum(Log(Abs(x)))) * nonzero
    sign    = 1 - 2 * Mod(CumSum(Cast(signbit(x))), 2)     signbit(x) = x < 0  or  1/x < 0
    nonzero = Cast(CumSum(Cast(x == 0)) == 0)

computed in float64, or float32 on a target without float64 (:func:`build32`). ``signbit``
counts -0.0 and -inf as negative, so a zero's sign comes out as the sequential product
gives it; the sign is applied by Mul, not Where (slow, and it turns -0.0 into +0.0). A zero
factor gives 0 through ``nonzero`` whatever Exp(-inf) returns; 0 then inf gives NaN.

Accuracy (prefix products inside the type's normal range): in float64, float32 / float16 /
bfloat16 inputs are correctly rounded up to a rare double-rounding tie (1 ulp); float64
inputs within 1490 k + 2 ulps (:func:`max_ulps`), looser than the sequential kernel. In
float32, 178 k + 2 ulps of float32 (:func:`max_ulps32`); float64 inputs refused. Integers
are not exact past 2^53: refused. ``auto`` never picks it.

Cost: 15 elementwise nodes and 3 CumSum; about 12 passes over memory. No control flow.
"""

from __future__ import annotations

import functools

import numpy as np
import onnx_ir as ir

from rewriter.lowerings.builder import Builder
from rewriter.lowerings.view import View
from rewriter.site import FLOAT_TYPES, ScanSpec
from rewriter.targets import Target

__all__ = ["build", "build32", "max_ulps", "max_ulps32", "unsupported"]


def unsupported(spec: ScanSpec, target: Target) -> str | None:
    if spec.dtype not in FLOAT_TYPES:
        kind = spec.dtype.name.lower() if spec.dtype is not None else "an unknown type"
        instead = "'auto'" if "Loop" in target.missing_ops else "'loop' or 'auto'"
        return (
            f"strategy 'logsum' is inexact for {kind} (products past 2^53 "
            f"are rounded); use {instead}"
        )
    if spec.dtype == ir.DataType.DOUBLE and not target.float64:
        return (
            f"strategy 'logsum' computes in float32 on {target.name}, which has no float64, "
            "and float32 cannot hold float64 inputs: use 'auto'"
        )
    if spec.exclusive and not target.exclusive_cumsum:
        return (
            f"strategy 'logsum' takes an exclusive CumSum, which {target.name} computes as the "
            "inclusive sum minus x (NaN after a zero or an infinity): use 'auto'"
        )
    return None


def max_ulps(dtype: ir.DataType, factors: np.ndarray) -> np.ndarray:
    """The guaranteed bound, in ulps of ``dtype``, for a product of ``factors`` inputs whose
    prefix products all stay inside ``dtype``'s normal range, computed in float64.

    float32 / float16 / bfloat16: 1 ulp (correct rounding of a float64 result good to ~2^-40).
    float64: each log and each addition adds at most 745 * 2^-53 absolute error to the sum
    (|log| <= 745 in float64), Exp one ulp: at most 1490 * k + 2 ulps.
    """
    if dtype == ir.DataType.DOUBLE:
        return 1490.0 * factors + 2.0
    return np.ones_like(factors, dtype=np.float64)


def max_ulps32(dtype: ir.DataType, factors: np.ndarray) -> np.ndarray:
    """The bound computed in float32: 178 * k + 2 ulps of float32, in ulps of ``dtype``
    (plus half an ulp of rounding for float16 / bfloat16); float64 is refused there."""
    if dtype == ir.DataType.DOUBLE:
        return np.full(factors.shape, np.inf)
    bound32 = 178.0 * factors.astype(np.float64) + 2.0
    if dtype == ir.DataType.FLOAT:
        return bound32
    bits = 11 if dtype == ir.DataType.FLOAT16 else 8
    return 0.5 + bound32 * 2.0 ** (bits - 24)


def log_exp(b: Builder, x3: ir.Value, v: View, dtype: ir.DataType) -> ir.Value:
    """The scan along axis 1 of ``x3`` by the formula above, in ``dtype`` (x3 is in it)."""
    axis = b.const(1)
    scan = {"exclusive": int(v.exclusive), "reverse": int(v.reverse)}
    zero = b.const(0.0, dtype)

    log_abs = b.op("Log", b.op("Abs", x3))
    magnitude = b.op("Exp", b.op("CumSum", log_abs, axis, **scan))

    negative = b.op("Or", b.op("Less", x3, zero), b.op("Less", b.op("Reciprocal", x3), zero))
    count = b.op("CumSum", b.cast(negative, dtype), axis, **scan)
    odd = b.op("Mod", count, b.const(2.0, dtype), fmod=1)
    sign = b.op("Sub", b.const(1.0, dtype), b.op("Add", odd, odd))

    zeros = b.op("CumSum", b.cast(b.op("Equal", x3, zero), dtype), axis, **scan)
    nonzero = b.cast(b.op("Equal", zeros, zero), dtype)
    return b.op("Mul", b.op("Mul", sign, magnitude), nonzero)


build = functools.partial(log_exp, dtype=ir.DataType.DOUBLE)
build32 = functools.partial(log_exp, dtype=ir.DataType.FLOAT)  # a target without float64
