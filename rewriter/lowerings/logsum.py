"""``logsum``: the product as the exponential of a running sum of logarithms.

Formula (along the axis, with CumSum's own ``exclusive`` / ``reverse``)::

    y = sign * Exp(CumSum(Log(Abs(x))))
    sign = 1 - 2 * Mod(CumSum(Cast(signbit(x))), 2)     signbit(x) = x < 0  or  1/x < 0

computed in float64 (Cast in, Cast out). ``signbit`` counts -0.0 and -inf as negative, so the
sign of a zero comes out as the sequential product gives it, and the sign is applied by Mul,
not Where (Where is slow and turns -0.0 into +0.0). Zeros give Log = -inf and Exp = 0; a zero
followed by an infinity gives NaN (-inf + inf), as 0 * inf does; NaN propagates.

Accuracy: float32, float16 and bfloat16 inputs come out correctly rounded up to a rare
double-rounding tie: at most 1 ulp of the input type while every prefix product stays inside
that type's normal range (the float64 sum's error, about k * max|log prefix| * 2^-53, is far
below half an ulp of float32 for any practical length). Where the true product leaves the
range the result is inf or 0 as rounding gives it, while a sequential product may already
have saturated earlier. For float64 inputs the error is relative, about
(k + 1) * max_j |log|prefix_j|| * 2^-53: looser than the sequential kernel (k ulps), so
``auto`` does not pick this for float64. Integers are not exact past 2^53: refused.

Cost: 12 elementwise nodes and 2 CumSum; about 10 passes over memory in float64.
Works for a run-time axis and an unknown rank (CumSum takes the axis as an input).
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from rewriter.lowerings.builder import Builder
from rewriter.site import FLOAT_TYPES, CumProdSite

__all__ = ["build", "compute_dtype", "max_ulps", "unsupported"]


def unsupported(site: CumProdSite) -> str | None:
    if site.dtype not in FLOAT_TYPES:
        return (
            f"strategy 'logsum' is inexact for {site.dtype.name.lower()} (products past 2^53 "
            "are rounded); use 'loop' or 'auto'"
        )
    return None


def compute_dtype(dtype: ir.DataType) -> ir.DataType:
    return ir.DataType.DOUBLE


def max_ulps(dtype: ir.DataType, factors: np.ndarray) -> np.ndarray:
    """The guaranteed bound, in ulps of ``dtype``, for a product of ``factors`` inputs whose
    prefix products all stay inside ``dtype``'s normal range.

    float32 / float16 / bfloat16: 1 ulp (correct rounding of a float64 result good to ~2^-40).
    float64: each log and each addition adds at most 745 * 2^-53 absolute error to the sum
    (|log| <= 745 in float64), Exp one ulp: at most 1490 * k + 2 ulps.
    """
    if dtype == ir.DataType.DOUBLE:
        return 1490.0 * factors + 2.0
    return np.ones_like(factors, dtype=np.float64)


def build(
    b: Builder, x: ir.Value, axis: ir.Value | int, site: CumProdSite, *, dtype: ir.DataType
) -> ir.Value:
    """``x`` is float64 (``dtype``); ``axis`` an int or a 0-D int32/int64 value."""
    axis_value = b.const(axis) if isinstance(axis, int) else axis
    scan = {"exclusive": int(site.exclusive), "reverse": int(site.reverse)}
    f64 = dtype  # compute_dtype is always float64
    zero = b.const(0.0, f64)

    log_abs = b.op("Log", b.op("Abs", x))
    magnitude = b.op("Exp", b.op("CumSum", log_abs, axis_value, **scan))

    negative = b.op("Or", b.op("Less", x, zero), b.op("Less", b.op("Reciprocal", x), zero))
    count = b.op("CumSum", b.cast(negative, f64), axis_value, **scan)
    odd = b.op("Mod", count, b.const(2.0, f64), fmod=1)
    sign = b.op("Sub", b.const(1.0, f64), b.op("Add", odd, odd))
    return b.op("Mul", sign, magnitude)
