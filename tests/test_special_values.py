"""0, -0.0, ±inf, NaN, subnormals and overflow, as numpy (onnx.reference) gives them."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from onnx import TensorProto

import rewriter
from tests.bounds import PRECISION, check, ulp_bound
from tests.helpers import (
    FLOATS,
    TYPE_NAMES,
    counts,
    cumprod_model,
    np_dtype,
    reference,
    run_ort,
    strategies_for,
)

ATTRS = list(itertools.product([0, 1], [0, 1]))


def _run(elem_type: int, x: np.ndarray, strategy: str, exclusive: int, reverse: int) -> np.ndarray:
    model = cumprod_model(elem_type, list(x.shape), -1, exclusive=exclusive, reverse=reverse)
    rewritten = rewriter.decompose_cumprod(model, strategy=strategy)
    feed = x.astype(np.float32) if elem_type == TensorProto.BFLOAT16 else x
    return run_ort(rewritten, {"x": feed})[0]


def _bound(
    strategy: str, dtype: np.dtype, shape: tuple[int, ...], exclusive: int, reverse: int
) -> float | np.ndarray:
    """0 (exact: every product here is a power of two), except float64 through logsum, whose
    Log and Exp round even on powers of two: held to the contract's figures
    (tests/bounds.py)."""
    if strategy == "logsum" and dtype == np.float64:
        return ulp_bound(strategy, dtype, counts(shape, -1, exclusive, reverse))
    return 0.0


# auto and dynamic emit another strategy's graph on these static shapes (test_branches).
FLOAT_CASES = [(t, s) for t in FLOATS for s in strategies_for(t) if s not in ("auto", "dynamic")]
FLOAT_IDS = [f"{TYPE_NAMES[t]}-{s}" for t, s in FLOAT_CASES]
# Two attribute pairs per (type, lowering), rotating so each lowering meets all four.
SPECIAL_CELLS = [
    (t, s, *ATTRS[(i + j) % 4]) for i, (t, s) in enumerate(FLOAT_CASES) for j in (0, 2)
]


def _specials(elem_type: int) -> np.ndarray:
    """Rows of special values whose products are exact in the type (powers of two that
    neither leave the range nor land on a rounding tie)."""
    _, emin = PRECISION[str(np_dtype(elem_type))]
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


@pytest.mark.parametrize(
    ("elem_type", "strategy", "exclusive", "reverse"),
    SPECIAL_CELLS,
    ids=[f"{TYPE_NAMES[t]}-{s}-ex{e}rev{r}" for t, s, e, r in SPECIAL_CELLS],
)
def test_special_values_as_numpy_gives_them(
    elem_type: int, strategy: str, exclusive: int, reverse: int
) -> None:
    x = _specials(elem_type)
    actual = _run(elem_type, x, strategy, exclusive, reverse)
    expected = reference(x, -1, exclusive, reverse)
    # Every product is exact: NaN positions, infinities, signed zeros and values all equal.
    dtype = np_dtype(elem_type)
    bound = _bound(strategy, dtype, x.shape, exclusive, reverse)
    problem = check(actual, expected.astype(np.float64), dtype, bound)
    assert problem is None, problem
    zeros = expected.astype(np.float64) == 0
    assert np.array_equal(np.signbit(actual[zeros]), np.signbit(expected[zeros].astype(np.float64)))


@pytest.mark.parametrize(("elem_type", "strategy"), FLOAT_CASES, ids=FLOAT_IDS)
def test_overflow_to_inf(elem_type: int, strategy: str) -> None:
    """Products that leave the range for good become ±inf in every lowering."""
    _, emin = PRECISION[str(np_dtype(elem_type))]
    big = 2.0 ** (-emin // 2 + 4)  # big * big is far past the largest finite value
    x = np.array([[big, big, big, 2.0], [-big, big, 1.0, -big]]).astype(np_dtype(elem_type))
    actual = _run(elem_type, x, strategy, 0, 0)
    expected = reference(x, -1, 0, 0).astype(np.float64)
    assert np.isinf(expected[:, 1:]).all()
    dtype = np_dtype(elem_type)
    problem = check(actual, expected, dtype, _bound(strategy, dtype, x.shape, 0, 0))
    assert problem is None, problem
