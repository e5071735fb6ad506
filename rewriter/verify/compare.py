"""Comparison rules for CumProd results, shared by ``--verify`` and the tests.

- Integers: bit-exact (wraparound included).
- Floats: NaN where the reference is NaN, the same infinity where it is infinite, the same
  sign where it is zero; elsewhere within a bound in ulps of the output type, measured
  against a reference computed in higher precision (:func:`numpy_cumprod` in float64, or
  longdouble for float64).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import onnx_ir as ir

__all__ = ["PRECISION", "Comparison", "compare", "factor_counts", "numpy_cumprod", "ulp_error"]

# Significand bits (with the implicit one) and smallest normal exponent, per float type.
PRECISION: dict[ir.DataType, tuple[int, int]] = {
    ir.DataType.BFLOAT16: (8, -126),
    ir.DataType.FLOAT16: (11, -14),
    ir.DataType.FLOAT: (24, -126),
    ir.DataType.DOUBLE: (53, -1022),
}


def _ulp(reference: np.ndarray, dtype: ir.DataType) -> np.ndarray:
    """The ulp of ``dtype`` at each (finite) reference value, in longdouble."""
    bits, emin = PRECISION[dtype]
    ref = np.abs(reference.astype(np.longdouble))
    with np.errstate(divide="ignore"):
        exponent = np.floor(np.log2(np.where(ref > 0, ref, 1)))
    exponent = np.maximum(exponent, emin)
    return np.asarray(np.ldexp(np.longdouble(1), (exponent - (bits - 1)).astype(np.int64)))


def ulp_error(actual: np.ndarray, reference: np.ndarray, dtype: ir.DataType) -> np.ndarray:
    """|actual - reference| in ulps of ``dtype`` at the reference (finite positions only)."""
    act = actual.astype(np.longdouble)
    ref = reference.astype(np.longdouble)
    finite = np.isfinite(ref) & np.isfinite(act)
    error = np.zeros(ref.shape, dtype=np.longdouble)
    with np.errstate(invalid="ignore"):
        diff = np.abs(np.where(finite, act - ref, 0))
    error[finite] = (diff / _ulp(np.where(finite, ref, 1), dtype))[finite]
    return error


@dataclasses.dataclass(frozen=True)
class Comparison:
    """The outcome of comparing one output.

    Attributes:
        ok: Whether every element meets the rule.
        worst: The largest error (ulps for floats, count of differing elements for integers).
        detail: One line saying what differs, empty when ok.
    """

    ok: bool
    worst: float
    detail: str = ""


def compare(
    actual: np.ndarray,
    reference: np.ndarray,
    dtype: ir.DataType,
    max_ulps: float | np.ndarray = 0.0,
) -> Comparison:
    """Compare ``actual`` (in ``dtype``) with ``reference``.

    For integers ``reference`` must be in ``dtype`` and equality is exact. For floats,
    ``reference`` may be wider (float64 / longdouble); it is rounded to ``dtype`` to decide
    where results are infinite or zero (a zero met by a nonzero of the same sign counts in
    ulps of the subnormal spacing), and ``max_ulps`` (scalar or per element) bounds the
    error elsewhere.
    """
    if actual.shape != reference.shape:
        return Comparison(False, float("inf"), f"shape {actual.shape} != {reference.shape}")
    if dtype not in PRECISION:
        differ = int(np.count_nonzero(actual != reference))
        where = np.argwhere(actual != reference)[:1].tolist()
        detail = f"{differ} element(s) differ, first at {where}" if differ else ""
        return Comparison(differ == 0, float(differ), detail)

    act = actual.astype(np.float64) if dtype != ir.DataType.DOUBLE else actual
    ref_wide = reference.astype(np.longdouble)
    with np.errstate(over="ignore", invalid="ignore"):  # overflow to inf is the rounding
        ref_t = reference.astype(np.float64).astype(dtype.numpy()).astype(act.dtype)
    bad_nan = np.isnan(ref_wide) != np.isnan(act)
    # a zero the reference rounds to, met by a subnormal of the same sign: an error in
    # ulps like any other (a product at the bottom of the range, rounded the other way)
    near_zero = (ref_t == 0) & np.isfinite(act) & (act != 0)
    near_zero &= np.signbit(act) == np.signbit(ref_t)
    special = np.isinf(ref_t) | ((ref_t == 0) & ~near_zero)
    bad_special = (
        special & ~np.isnan(act) & ((act != ref_t) | (np.signbit(act) != np.signbit(ref_t)))
    )
    regular = ~special & ~np.isnan(ref_wide)
    errors = np.where(regular, ulp_error(act, ref_wide, dtype), 0)
    bound = np.broadcast_to(np.asarray(max_ulps, dtype=np.longdouble), errors.shape)
    bad_error = regular & (errors > bound)
    worst = float(errors.max()) if errors.size else 0.0
    for mask, what in (
        (bad_nan, "NaN where the reference is not (or the reverse)"),
        (bad_special, "infinity/zero/sign differs from the reference"),
        (bad_error, "error above the bound"),
    ):
        if mask.any():
            first = tuple(np.argwhere(mask)[0].tolist())
            return Comparison(
                False,
                worst,
                f"{what}, first at {first}: got {float(act[first]):.17g}, reference "
                f"{float(ref_wide[first]):.17g} (error there {float(errors[first]):.3g} ulp, "
                f"bound {float(bound[first]):.3g})",
            )
    return Comparison(True, worst)


def factor_counts(shape: tuple[int, ...], axis: int, exclusive: bool, reverse: bool) -> np.ndarray:
    """How many factors each output element of a CumProd multiplies (for error bounds)."""
    n = shape[axis]
    counts = np.arange(n) if exclusive else np.arange(1, n + 1)
    if reverse:
        counts = counts[::-1]
    view = [1] * len(shape)
    view[axis] = n
    return np.broadcast_to(counts.reshape(view), shape)


def numpy_cumprod(
    x: np.ndarray, axis: int, exclusive: bool, reverse: bool, dtype: Any
) -> np.ndarray:
    """CumProd by numpy in ``dtype`` (exclusive: a shifted input with 1 first; reverse:
    flipped). Integers wrap around as the spec's do."""
    with np.errstate(all="ignore"):
        a = x.astype(dtype)
        if reverse:
            a = np.flip(a, axis)
        n = a.shape[axis]
        if exclusive and n:
            first = np.ones_like(np.take(a, [0], axis=axis))
            a = np.concatenate([first, np.take(a, np.arange(n - 1), axis=axis)], axis=axis)
        out = np.cumprod(a, axis=axis, dtype=dtype)
        if reverse:
            out = np.flip(out, axis)
    return np.ascontiguousarray(out)
