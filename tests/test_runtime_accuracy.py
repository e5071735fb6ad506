"""Float32 product trees on the real runtimes, on factors near 1 (x = 1 + N(0, 1e-4)), where
float32 block totals round one way (README, Guarantees): their worst and mean errors within
1.25x those of numpy's sequential float32 product (the native kernel's order). Targets that
compute float64 take float64 totals and carries (``rewriter/lowerings/wide.py``); OpenVINO
(float64 computed in float32) and blocked ``doubling`` take the offset totals
(``rewriter/lowerings/near_one.py``); TFLite's cases are the opt-in tier (CUMPROD_TFLITE=1).

References: numpy's float32 ``cumprod`` and the float64 product, never the tool.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto

import rewriter
from tests.helpers import cumprod_model, float32_ulps, swinging
from tests.runtime_harness import run_cases

# (runtime, strategy, shape, axis), and "N" where the axis's length is known only at run
# time (max_length 8192); tinygrad compiles for minutes: one case
_CASES: list[tuple[object, ...]] = [
    ("tract", "carry", (4, 4000), 1),
    ("tract", "radix", (4000, 4), 0),
    ("tract", "auto", (4000, 4), 0),
    ("iree", "carry", (4, 4000), 1),
    ("iree", "radix", (4000, 4), 0),
    ("iree", "auto", (4, 4000), 1),  # blocked doubling, offset totals
    ("iree", "auto", (4, 100), 1),  # the same, blocked for its accuracy only (n > 64)
    ("iree", "auto", (4, 4000), 1, "N"),  # plain doubling, the offset windows
    ("tinygrad", "carry", (4, 2000), 1),
    ("openvino", "carry", (4, 4000), 1),  # offset totals (no float64)
    ("openvino", "auto", (4, 4000), 1),  # blocked doubling
    ("openvino", "auto", (4, 1000), 1),  # blocked for its accuracy only (below 2000)
    ("openvino", "auto", (4000, 4), 0),  # radix
    ("tflite", "auto", (4, 4000), 1),  # blocked doubling on the 2-D view (opt-in tier)
    ("tflite", "auto", (3000, 4), 0),
    ("tflite", "auto", (4, 4000), 1, "N"),  # plain doubling, the offset windows
]


@pytest.mark.parametrize("case", [pytest.param(c, id="-".join(map(str, c))) for c in _CASES])
def test_factors_near_one_on_the_runtime(case: tuple[object, ...], tmp_path: Path) -> None:
    runtime, strategy, shape, axis, *run_time = case
    assert isinstance(runtime, str) and isinstance(strategy, str)
    assert isinstance(shape, tuple) and isinstance(axis, int)
    if runtime == "tflite" and os.environ.get("CUMPROD_TFLITE") != "1":
        pytest.skip("tflite is the opt-in heavy tier: set CUMPROD_TFLITE=1")
    x = (1 + np.random.default_rng(1).normal(0, 1e-4, shape)).astype(np.float32)
    dims = [*shape]
    if run_time:
        dims[axis] = "N"
    model = cumprod_model(TensorProto.FLOAT, dims, axis)
    lowered = rewriter.decompose_cumprod(
        model, strategy=strategy, target=runtime, max_length=8192 if run_time else None
    )
    (got,) = run_cases(runtime, {"near_one": (lowered, {"x": x})}, tmp_path).values()
    assert not isinstance(got, str), got
    exact = np.cumprod(x.astype(np.float64), axis=axis)
    mine, theirs = float32_ulps(got[0], exact), float32_ulps(np.cumprod(x, axis=axis), exact)
    assert mine.max() <= 1.25 * theirs.max(), (mine.max(), theirs.max())
    assert mine.mean() <= 1.25 * theirs.mean(), (mine.mean(), theirs.mean())


# (runtime, strategy, shape, axis) on targets that compute float64 (IREE's auto is doubling,
# whose offset totals start each block from 1: not here)
_SWING_CASES = [
    ("tract", "carry", (3, 4096), 1),
    ("tract", "radix", (4096, 3), 0),
    ("tract", "auto", (4096, 3), 0),
    ("tinygrad", "carry", (3, 1024), 1),
    ("iree", "carry", (4096, 3), 0),
]


@pytest.mark.parametrize("case", [pytest.param(c, id="-".join(map(str, c))) for c in _SWING_CASES])
def test_prefixes_swinging_within_range_on_the_runtime(
    case: tuple[str, str, tuple[int, int], int], tmp_path: Path
) -> None:
    """Factors of 2^+-70 whose running product stays within 2^+-70 while a product of a few
    of them reaches 2^+-140 (``tests.helpers.swinging``): every element as numpy's float32
    product gives it (powers of two: exact), on the runtime itself."""
    runtime, strategy, shape, axis = case
    x = swinging(shape, axis)
    lowered = rewriter.decompose_cumprod(
        cumprod_model(TensorProto.FLOAT, [*shape], axis), strategy=strategy, target=runtime
    )
    (got,) = run_cases(runtime, {"swing": (lowered, {"x": x})}, tmp_path).values()
    assert not isinstance(got, str), got
    expected = np.cumprod(x, axis=axis)
    assert np.isfinite(expected).all()
    np.testing.assert_array_equal(got[0], expected)
