"""0, -0.0, ±inf, NaN, subnormals and overflow, as numpy (onnx.reference) gives them."""

from __future__ import annotations

import itertools

import numpy as np
import onnx_ir as ir
import pytest
from onnx import TensorProto

import rewriter
from rewriter.lowerings import LOWERINGS
from rewriter.verify import PRECISION, compare
from tests.helpers import (
    FLOATS,
    TYPE_NAMES,
    counts,
    cumprod_model,
    np_dtype,
    reference,
    run_ort,
    strategies_for,
    wide_reference,
)

ATTRS = list(itertools.product([0, 1], [0, 1]))


def _run(elem_type: int, x: np.ndarray, strategy: str, exclusive: int, reverse: int) -> np.ndarray:
    model = cumprod_model(elem_type, list(x.shape), -1, exclusive=exclusive, reverse=reverse)
    rewritten = rewriter.decompose_cumprod(model, strategy=strategy)
    feed = x.astype(np.float32) if elem_type == TensorProto.BFLOAT16 else x
    return run_ort(rewritten, {"x": feed})[0]


def _bound(
    strategy: str, dtype: ir.DataType, shape: tuple[int, ...], exclusive: int, reverse: int
) -> float | np.ndarray:
    """0 (exact), except float64 through logsum, whose Log and Exp round even on powers of
    two: held to the bound logsum states."""
    if strategy == "logsum" and dtype == ir.DataType.DOUBLE:
        return LOWERINGS["logsum"].max_ulps(dtype, counts(shape, -1, exclusive, reverse))
    if strategy == "logsum32":  # float32 Log / Exp round: its stated 178 k + 2 ulps
        return LOWERINGS["logsum32"].max_ulps(dtype, counts(shape, -1, exclusive, reverse))
    return 0.0


FLOAT_CASES = [(t, s) for t in FLOATS for s in strategies_for(t)]
FLOAT_IDS = [f"{TYPE_NAMES[t]}-{s}" for t, s in FLOAT_CASES]


def _specials(elem_type: int) -> np.ndarray:
    """Rows of special values whose products are exact in the type (powers of two that
    neither leave the range nor land on a rounding tie)."""
    _, emin = PRECISION[ir.DataType(elem_type)]
    sub = 2.0 ** (emin - 3)  # a subnormal; times 2 or 0.5 a few times stays exact
    inf, nan = np.inf, np.nan
    rows = [
        [2.0, 0.0, 3.0, -1.0, 0.5],
        [-2.0, -0.0, -1.0, 4.0, 0.25],
        [-0.0, -0.0, -0.0, 2.0, -1.0],
        [1.0, inf, 0.5, -1.0, 0.0],
        [-inf, -1.0, 2.0, -inf, 0.5],
        [0.0, inf, 1.0, 2.0, -1.0],
        [1.0, nan, 2.0, 0.0, -inf],
        [-1.0, 2.0, nan, -0.0, 1.0],
        [sub, 2.0, -0.5, 0.5, 4.0],
        [-sub, -sub, 1.0, 2.0, 0.5],
    ]
    return np.array(rows, dtype=np.float64).astype(np_dtype(elem_type))


@pytest.mark.parametrize("exclusive,reverse", ATTRS)
@pytest.mark.parametrize(("elem_type", "strategy"), FLOAT_CASES, ids=FLOAT_IDS)
def test_special_values_as_numpy_gives_them(
    elem_type: int, strategy: str, exclusive: int, reverse: int
) -> None:
    x = _specials(elem_type)
    actual = _run(elem_type, x, strategy, exclusive, reverse)
    expected = reference(x, -1, exclusive, reverse)
    # Every product is exact: NaN positions, infinities, signed zeros and values all equal.
    dtype = ir.DataType(elem_type)
    bound = _bound(strategy, dtype, x.shape, exclusive, reverse)
    result = compare(actual, expected.astype(np.float64), dtype, bound)
    assert result.ok, result.detail
    zeros = expected.astype(np.float64) == 0
    assert np.array_equal(np.signbit(actual[zeros]), np.signbit(expected[zeros].astype(np.float64)))


@pytest.mark.parametrize(("elem_type", "strategy"), FLOAT_CASES, ids=FLOAT_IDS)
def test_overflow_to_inf(elem_type: int, strategy: str) -> None:
    """Products that leave the range for good become ±inf in every lowering."""
    _, emin = PRECISION[ir.DataType(elem_type)]
    big = 2.0 ** (-emin // 2 + 4)  # big * big is far past the largest finite value
    x = np.array([[big, big, big, 2.0], [-big, big, 1.0, -big]]).astype(np_dtype(elem_type))
    actual = _run(elem_type, x, strategy, 0, 0)
    expected = reference(x, -1, 0, 0).astype(np.float64)
    assert np.isinf(expected[:, 1:]).all()
    dtype = ir.DataType(elem_type)
    result = compare(actual, expected, dtype, _bound(strategy, dtype, x.shape, 0, 0))
    assert result.ok, result.detail


@pytest.mark.parametrize("elem_type", [TensorProto.FLOAT, TensorProto.DOUBLE], ids=TYPE_NAMES.get)
def test_transient_overflow_loop_saturates_logsum_does_not(elem_type: int) -> None:
    """A prefix product that overflows and comes back: the sequential lowering saturates
    to inf as numpy does; logsum gives the true (correctly rounded) product. Documented."""
    _, emin = PRECISION[ir.DataType(elem_type)]
    big = 2.0 ** (-emin - 2)
    x = np.array([[big, big, 1 / big, 1 / big]]).astype(np_dtype(elem_type))
    loop = _run(elem_type, x, "loop", 0, 0)
    assert compare(loop, reference(x, -1, 0, 0), ir.DataType(elem_type), 0.0).ok
    assert np.isinf(loop[0, 1:]).all()
    if elem_type == TensorProto.FLOAT:
        logsum = _run(elem_type, x, "logsum", 0, 0)
        assert compare(logsum, wide_reference(x, -1, 0, 0), ir.DataType(elem_type), 1.0).ok
        assert logsum[0, 3] == 1.0
