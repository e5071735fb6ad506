"""``logsum32``: ``logsum``'s formula computed in float32, for runtimes without float64.

See :mod:`rewriter.lowerings.logsum` for the formula and the derivation of the bound:
178 * k + 2 ulps of float32 for a product of k factors whose prefix products stay in the
normal range (converted to the output type's ulps for float16 / bfloat16, plus the final
rounding). Float inputs only; float64 inputs are refused (the point is not to compute in
float64, and float32 cannot hold them).
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from rewriter.lowerings.builder import Builder
from rewriter.lowerings.logsum import exclusive_cumsum_refusal, log_exp
from rewriter.lowerings.view import View
from rewriter.site import ScanSpec
from rewriter.targets import Target

__all__ = ["build", "compute_dtype", "max_ulps", "unsupported"]

_NARROW = frozenset({ir.DataType.FLOAT, ir.DataType.FLOAT16, ir.DataType.BFLOAT16})


def unsupported(spec: ScanSpec, target: Target) -> str | None:
    if spec.dtype not in _NARROW:
        kind = spec.dtype.name.lower() if spec.dtype is not None else "an unknown type"
        return f"strategy 'logsum32' computes in float32 and is inexact for {kind}"
    return exclusive_cumsum_refusal("logsum32", spec, target)


def compute_dtype(dtype: ir.DataType | None) -> ir.DataType:
    return ir.DataType.FLOAT


def max_ulps(dtype: ir.DataType, factors: np.ndarray) -> np.ndarray:
    """178 * k + 2 ulps of float32, in ulps of ``dtype`` (plus half an ulp of rounding);
    no bound for float64, which this lowering refuses."""
    if dtype == ir.DataType.DOUBLE:
        return np.full(factors.shape, np.inf)
    bound32 = 178.0 * factors.astype(np.float64) + 2.0
    if dtype == ir.DataType.FLOAT:
        return bound32
    bits = 11 if dtype == ir.DataType.FLOAT16 else 8
    return 0.5 + bound32 * 2.0 ** (bits - 24)


def build(b: Builder, x3: ir.Value, v: View) -> ir.Value:
    """The scan along axis 1 of ``x3`` (float32)."""
    return log_exp(b, x3, v, ir.DataType.FLOAT)
