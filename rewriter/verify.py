"""Comparison rules for CumProd results, shared by ``--verify`` and the tests.

- Integers: bit-exact (wraparound included).
- Floats: NaN where the reference is NaN, the same infinity where it is infinite, the same
  sign where it is zero; elsewhere within a bound in ulps of the output type, measured
  against a reference computed in higher precision.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any

import numpy as np
import onnx_ir as ir

__all__ = [
    "PRECISION",
    "Comparison",
    "OutputCheck",
    "VerifyResult",
    "compare",
    "factor_counts",
    "random_inputs",
    "ulp_error",
    "verify_model",
]

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
    where results are infinite or zero, and ``max_ulps`` (scalar or per element) bounds the
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
    ref_t = reference.astype(np.float64).astype(dtype.numpy()).astype(act.dtype)
    bad_nan = np.isnan(ref_wide) != np.isnan(act)
    special = np.isinf(ref_t) | (ref_t == 0)
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
                f"{what} at {first}: got {act[first]!r}, reference {ref_wide[first]!r}"
                f" (error {float(errors[first]):.3g} ulp, bound {float(bound[first]):.3g})",
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


# -- checking a rewritten model against its original ----------------------------------------

DEFAULT_DIM = 3


@dataclasses.dataclass(frozen=True)
class OutputCheck:
    """How one graph output compared over all runs (worst case)."""

    name: str
    dtype: str
    ok: bool
    worst: float
    bound: float
    detail: str = ""


@dataclasses.dataclass(frozen=True)
class VerifyResult:
    """The outcome of :func:`verify_model`.

    Attributes:
        ok: Every output of every run met its rule.
        runs: How many random input sets were run.
        reference: What ran the original: ``onnxruntime`` or ``onnx.reference``.
        outputs: Per output, the worst error seen.
    """

    ok: bool
    runs: int
    reference: str
    outputs: tuple[OutputCheck, ...]


def _concrete_shape(shape: ir.Shape | None, dims: Mapping[str, int]) -> tuple[int, ...]:
    if shape is None:
        return (DEFAULT_DIM,)
    out = []
    for d in shape.dims:
        if isinstance(d, int):
            out.append(d)
        else:
            out.append(dims.get(str(d.value), DEFAULT_DIM) if d.value is not None else DEFAULT_DIM)
    return tuple(out)


def random_inputs(
    model: ir.Model, rng: np.random.Generator, dims: Mapping[str, int] | None = None
) -> dict[str, np.ndarray]:
    """Random feeds for every graph input that is not an initializer.

    Floats: sign * 2^U(-1, 1) (products stay in range for long scans). Integers: 0..3, and
    0 for scalars (valid as an index or a run-time axis of any rank). Booleans: random.
    Symbolic dims take ``dims[name]``, else :data:`DEFAULT_DIM`.
    """
    dims = dims or {}
    feeds: dict[str, np.ndarray] = {}
    for value in model.graph.inputs:
        if value.is_initializer() or value.name is None:
            continue
        dtype = value.dtype
        if dtype is None:
            raise ValueError(f"graph input '{value.name}' has no element type")
        shape = _concrete_shape(value.shape, dims)
        np_type = dtype.numpy()
        if dtype in PRECISION:
            data = np.exp2(rng.uniform(-1, 1, shape)) * rng.choice([-1.0, 1.0], shape)
        elif dtype == ir.DataType.BOOL:
            data = rng.random(shape) < 0.5
        else:
            data = rng.integers(0, 4, shape) if shape else np.zeros(shape, dtype=np.int64)
        feeds[value.name] = np.asarray(data).astype(np_type)
    return feeds


def _ort_session(path: str) -> Any:
    import onnxruntime as ort

    ort.set_default_logger_severity(3)
    options = ort.SessionOptions()
    options.log_severity_level = 3
    return ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])


def _run_reference(path: str, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    from onnx.reference import ReferenceEvaluator

    return list(ReferenceEvaluator(path).run(None, feeds))


def verify_model(
    original: str | os.PathLike[str],
    rewritten: str | os.PathLike[str],
    *,
    bound_ulps: float,
    runs: int = 3,
    dims: Mapping[str, int] | None = None,
    seed: int = 0,
) -> VerifyResult:
    """Run ``original`` and ``rewritten`` on ``runs`` random input sets and compare outputs.

    The original runs in onnxruntime when it can load it, else in ``onnx.reference``; the
    rewritten model runs in onnxruntime. Integer outputs must be equal; float outputs equal
    in NaN / inf / signed-zero positions and within ``bound_ulps`` elsewhere (the rewrite's
    own bound plus the reference kernel's).
    """
    import onnx

    original, rewritten = str(original), str(rewritten)
    model = ir.load(rewritten)
    rng = np.random.default_rng(seed)
    try:
        reference_session = _ort_session(original)
        reference = "onnxruntime"
    except Exception:  # noqa: BLE001 - an ORT without CumProd: use the spec
        reference_session = None
        reference = "onnx.reference"
    session = _ort_session(rewritten)
    names = [o.name or "" for o in model.graph.outputs]
    dtypes = [o.dtype for o in model.graph.outputs]
    worst: dict[str, OutputCheck] = {}
    for _ in range(runs):
        feeds = random_inputs(model, rng, dims)
        if reference_session is not None:
            expected = reference_session.run(None, feeds)
        else:
            expected = _run_reference(original, feeds)
        actual = session.run(None, feeds)
        for name, declared, act, exp in zip(names, dtypes, actual, expected):
            dtype = declared or ir.DataType(
                onnx.helper.np_dtype_to_tensor_dtype(np.asarray(act).dtype)
            )
            bound = bound_ulps if dtype in PRECISION else 0.0
            result = compare(np.asarray(act), np.asarray(exp), dtype, bound)
            previous = worst.get(name)
            if previous is None or (
                previous.ok and (not result.ok or result.worst > previous.worst)
            ):
                worst[name] = OutputCheck(
                    name, dtype.name.lower(), result.ok, result.worst, bound, result.detail
                )
    outputs = tuple(worst[n] for n in names if n in worst)
    return VerifyResult(all(o.ok for o in outputs), runs, reference, outputs)
