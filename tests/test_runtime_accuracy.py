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

import numpy as np
import onnx
import pytest
from onnx import TensorProto

import rewriter
from tests import runtime_harness
from tests.helpers import cumprod_model, float32_ulps, swinging

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


def _near_one_input(case: tuple[object, ...]) -> np.ndarray:
    shape = case[2]
    assert isinstance(shape, tuple)
    return (1 + np.random.default_rng(1).normal(0, 1e-4, shape)).astype(np.float32)


def _near_one_case(case: tuple[object, ...]) -> runtime_harness.Case:
    runtime, strategy, shape, axis, *run_time = case
    assert isinstance(runtime, str) and isinstance(strategy, str)
    assert isinstance(shape, tuple) and isinstance(axis, int)
    dims = [*shape]
    if run_time:
        dims[axis] = "N"
    model = cumprod_model(TensorProto.FLOAT, dims, axis)
    lowered = rewriter.decompose_cumprod(
        model, strategy=strategy, target=runtime, max_length=8192 if run_time else None
    )
    assert isinstance(lowered, onnx.ModelProto)
    return lowered, {"x": _near_one_input(case)}


def _swing_case(case: tuple[object, ...]) -> runtime_harness.Case:
    runtime, strategy, shape, axis = case
    assert isinstance(runtime, str) and isinstance(strategy, str)
    assert isinstance(shape, tuple) and isinstance(axis, int)
    lowered = rewriter.decompose_cumprod(
        cumprod_model(TensorProto.FLOAT, [*shape], axis), strategy=strategy, target=runtime
    )
    assert isinstance(lowered, onnx.ModelProto)
    return lowered, {"x": swinging(shape, axis)}


def _opted_in(runtime: str) -> bool:
    return runtime != "tflite" or os.environ.get("CUMPROD_TFLITE") == "1"


_BATCHES: dict[str, dict[str, runtime_harness.Result]] = {}  # runtime -> its cases' results


def _batch(
    runtime: str, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, runtime_harness.Result]:
    """Every case of this module on ``runtime`` in one runner process, run by the first of
    its tests (a runner's start costs about 1.3 s of CPU): the case's name -> its outputs, or
    why there are none (a lowering that raised, or the runtime's error)."""
    if runtime not in _BATCHES:
        work: dict[str, runtime_harness.Case] = {}
        done: dict[str, runtime_harness.Result] = {}
        builders = [("near_one", c, _near_one_case) for c in _CASES]
        builders += [("swing", c, _swing_case) for c in _SWING_CASES]
        for kind, case, build in builders:
            if case[0] != runtime:
                continue
            name = _id(kind, case)
            try:
                work[name] = build(case)  # type: ignore[arg-type]
            except Exception as exc:  # noqa: BLE001 - reported by that case's test alone
                done[name] = f"lowering raised {type(exc).__name__}: {exc}"
        folder = tmp_path_factory.mktemp(f"accuracy-{runtime}")
        timeout = runtime_harness.DEFAULT_TIMEOUT * len(work)  # the whole runner process
        done.update(runtime_harness.run_cases(runtime, work, folder, timeout=timeout))
        _BATCHES[runtime] = done
    return _BATCHES[runtime]


def _id(kind: str, case: tuple[object, ...]) -> str:
    """A case's file name in the runner's folder: its kind and its index there."""
    cases: list[tuple[object, ...]] = [*(_CASES if kind == "near_one" else _SWING_CASES)]
    return f"{kind}{cases.index(case)}"


@pytest.mark.parametrize("case", [pytest.param(c, id="-".join(map(str, c))) for c in _CASES])
def test_factors_near_one_on_the_runtime(
    case: tuple[object, ...], tmp_path_factory: pytest.TempPathFactory
) -> None:
    runtime, _, shape, axis, *_ = case
    assert isinstance(runtime, str) and isinstance(shape, tuple) and isinstance(axis, int)
    if not _opted_in(runtime):
        pytest.skip("tflite is the opt-in heavy tier: set CUMPROD_TFLITE=1")
    runtime_harness.require(runtime)
    x = _near_one_input(case)
    got = _batch(runtime, tmp_path_factory)[_id("near_one", case)]
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
    case: tuple[str, str, tuple[int, int], int], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Factors of 2^+-70 whose running product stays within 2^+-70 while a product of a few
    of them reaches 2^+-140 (``tests.helpers.swinging``): every element as numpy's float32
    product gives it (powers of two: exact), on the runtime itself."""
    runtime, _, shape, axis = case
    runtime_harness.require(runtime)
    x = swinging(shape, axis)
    got = _batch(runtime, tmp_path_factory)[_id("swing", case)]
    assert not isinstance(got, str), got
    expected = np.cumprod(x, axis=axis)
    assert np.isfinite(expected).all()
    np.testing.assert_array_equal(got[0], expected)
