"""Where a product tree is less accurate than onnxruntime's native sequential kernel on
inputs that are not at the range's edge (found by a review from outside; the README's
Guarantees say so). Each known gap is a strict xfail against the native kernel: it starts
passing, and so fails here, the day the lowering is fixed. ``scan`` (the sequential
product) runs the same checks unmarked, so the checks themselves can pass.

References: onnxruntime's native CumProd on the same input, and numpy in float64.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto

import rewriter
from tests.helpers import cumprod_model, run_ort

TREE_GAP = "product trees round factors near 1 downwards (README, Guarantees): not yet fixed"
SWING_GAP = "a tree's partial products overflow where the prefixes swing by 2^140: not yet fixed"


def _ulps(y: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """Error of float32 ``y`` in float32 ulps of the float64 ``exact``."""
    return np.abs(y.astype(np.float64) - exact) / np.spacing(np.abs(exact).astype(np.float32))


def _native_and_lowered(
    shape: tuple[int, int], axis: int, x: np.ndarray, strategy: str
) -> tuple[np.ndarray, np.ndarray, str]:
    model = cumprod_model(TensorProto.FLOAT, shape, axis)
    lowered = rewriter.decompose_cumprod(model, strategy=strategy)
    ops = {n.op_type for n in lowered.graph.node}
    assert "CumProd" not in ops
    return run_ort(model, {"x": x})[0], run_ort(lowered, {"x": x})[0], str(sorted(ops))


@pytest.mark.parametrize(
    ("strategy", "shape", "axis"),
    [
        pytest.param("scan", (4, 4000), 1, id="scan-last"),
        pytest.param("scan", (4000, 4), 0, id="scan-first"),
        pytest.param(
            "auto",
            (4, 4000),
            1,
            id="auto-last",
            marks=pytest.mark.xfail(strict=True, raises=AssertionError, reason=TREE_GAP),
        ),
        pytest.param(
            "auto",
            (4000, 4),
            0,
            id="auto-first",
            marks=pytest.mark.xfail(strict=True, raises=AssertionError, reason=TREE_GAP),
        ),
    ],
)
def test_factors_near_one_as_accurate_as_native(
    strategy: str, shape: tuple[int, int], axis: int
) -> None:
    """float32 x = 1 + N(0, 1e-4): the lowering's worst and mean errors within 1.25x the native
    kernel's (the README gives the trees' measured errors: their rounding is one-sided there)."""
    x = (1 + np.random.default_rng(1).normal(0, 1e-4, shape)).astype(np.float32)
    native, got, ops = _native_and_lowered(shape, axis, x, strategy)
    exact = np.cumprod(x.astype(np.float64), axis=axis)
    mine, theirs = _ulps(got, exact), _ulps(native, exact)
    assert mine.max() <= 1.25 * theirs.max(), (mine.max(), theirs.max(), ops)
    assert mine.mean() <= 1.25 * theirs.mean(), (mine.mean(), theirs.mean(), ops)


@pytest.mark.parametrize(
    "strategy",
    [
        "scan",
        pytest.param(
            "auto", marks=pytest.mark.xfail(strict=True, raises=AssertionError, reason=SWING_GAP)
        ),
    ],
)
def test_prefixes_swinging_within_range_as_native(strategy: str) -> None:
    """float32 factors 2^±70 whose running product stays within 2^±70 (far from float32's
    2^128): every element as the native kernel gives it (the powers of two multiply exactly)."""
    # log2 of the factors: -70, 0, 0, 0, then (70, 70, -70, -70) repeated: the running
    # product's log2 stays within [-70, 70], a block's partial products reach +-140
    walk = np.resize(np.array([-70, 0, 0, 0] + [70, 70, -70, -70] * 1024), 4096)
    x = np.ldexp(np.float32(1), np.stack([walk] * 3, 1))
    x = x.astype(np.float32)
    native, got, ops = _native_and_lowered((4096, 3), 0, x, strategy)
    assert np.isfinite(native).all()
    np.testing.assert_array_equal(got, native, err_msg=ops)
