"""Property-based tests: random shapes (scanned lengths up to a few thousand in the long
sweep), axes and axis forms, attributes, all eight types, every strategy and every target,
special values mixed into the data, against onnx.reference (integers, bit-exact) and a
float64 / longdouble product (floats, within the contract of tests/bounds.py).

Locally the examples are derandomized (the same each run, so a run is reproducible); with
CI=true hypothesis explores the day's examples (tests/conftest.py: the seed is the date
unless CUMPROD_HYPOTHESIS_SEED is set), and a failure prints the ``@reproduce_failure``
blob. The target only changes which ops and compute types the output uses: every output
runs on onnxruntime, which has all of them.
"""

from __future__ import annotations

import itertools
import os

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from onnx import TensorProto

import rewriter
from rewriter.targets import TARGETS
from tests.helpers import (
    ALL_TYPES,
    INTS,
    NOT_ON_ORT,
    TARGET_REFUSALS,
    TYPE_NAMES,
    check_result,
    cumprod_model,
    declared_refusal,
    feed,
    op_types,
    ort_strategies,
    random_data,
    run_ort,
    sprinkle_specials,
)

EXPLORE = os.environ.get("CI") == "true"


def _settings(examples: int) -> settings:
    return settings(
        max_examples=examples,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        derandomize=not EXPLORE,
        print_blob=True,
    )


# Where the lowerings' code branches on the scanned length (rewriter/lowerings/*.py).
BRANCH_LENGTHS = [0, 1, 2, 3, 8, 9, 16, 17, 64, 65, 255, 256, 257, 512, 513, 1024, 1025, 4097]


@st.composite
def cases(draw: st.DrawFn, long: bool) -> dict:
    rank = draw(st.integers(1, 4))
    axis = draw(st.integers(-rank, rank - 1))
    if long:
        n = draw(st.one_of(st.sampled_from(BRANCH_LENGTHS), st.integers(0, 5000)))
    else:
        n = draw(st.one_of(st.sampled_from([0, 1, 2, 3, 8, 9, 17]), st.integers(0, 40)))
    room = max(1, 4096 // max(n, 1))  # keep the tensor small
    shape = [draw(st.integers(0 if draw(st.booleans()) else 1, min(4, room))) for _ in range(rank)]
    shape[axis % rank] = n
    return {
        "shape": tuple(shape),
        "axis": axis,
        "exclusive": draw(st.integers(0, 1)),
        "reverse": draw(st.integers(0, 1)),
        "axis_form": draw(st.sampled_from(["initializer", "constant", "input"])),
        "axis_type": draw(st.sampled_from([TensorProto.INT64, TensorProto.INT32])),
        # which dims the model declares symbolic (the view computed at run time)
        "symbolic": draw(st.lists(st.booleans(), min_size=rank, max_size=rank)),
        "elem_type": draw(st.sampled_from(ALL_TYPES)),
        "strategy": draw(st.sampled_from(ort_strategies())),
        "target": draw(st.sampled_from(list(TARGETS))),
        "special_rate": draw(st.sampled_from([0.0, 0.0, 0.02, 0.2])),
        "seed": draw(st.integers(0, 2**32 - 1)),
    }


def rewrite_case(case: dict) -> tuple[rewriter.DecomposeCumProdPass, onnx.ModelProto] | None:
    """The case's pass and rewritten model, or None when it refuses for a documented reason."""
    shape, axis, elem_type = case["shape"], case["axis"], case["elem_type"]
    strategy, target = case["strategy"], case["target"]
    dims = [f"d{k}" if sym else d for k, (d, sym) in enumerate(zip(shape, case["symbolic"]))]
    model = cumprod_model(
        elem_type,
        dims,
        axis,
        exclusive=case["exclusive"],
        reverse=case["reverse"],
        axis_form=case["axis_form"],
        axis_type=case["axis_type"],
    )
    bound = max(*shape, 1)
    rewrite = rewriter.DecomposeCumProdPass(strategy, target=target, max_length=bound)
    try:
        rewritten = rewrite(ir.serde.deserialize_model(model)).model
    except rewriter.StrategyError as error:
        if declared_refusal(target, error):  # tvm / ncnn: what their runtimes cannot take
            return None
        assert any(reason in str(error) for reason in TARGET_REFUSALS), str(error)
        if elem_type in INTS:
            # doubling's guard: tract loads no Reshape sized from a run-time length
            why = ("lacks", "does not use", "run-time axis")
            why += ("sized from a length",) * (strategy == "doubling")
            assert strategy not in ("auto", "loop", "scan", "dynamic", "doubling") or any(
                reason in str(error) for reason in why
            ), str(error)
        return None
    proto = ir.serde.serialize_model(rewritten)
    kinds = set(op_types(proto))
    assert "CumProd" not in kinds
    assert not kinds & TARGETS[target].missing_ops, (target, kinds)
    return rewrite, proto


@pytest.mark.parametrize("target", list(TARGETS))
def test_every_refusal_is_documented(target: str) -> None:
    """Every type x strategy x axis form x static / symbolic dims on ``target``, rewritten
    only: the exploring sweeps may draw any of these, so none may refuse for a reason the tests
    do not know, or leave an op the target lacks."""
    for elem_type, strategy, axis_form, symbolic in itertools.product(
        ALL_TYPES, rewriter.STRATEGIES, ["initializer", "input"], [False, True]
    ):
        case = {"shape": (2, 3), "axis": 1, "exclusive": 0, "reverse": 0}
        case |= {"axis_form": axis_form, "axis_type": TensorProto.INT64}
        case |= {"symbolic": [symbolic] * 2, "elem_type": elem_type}
        rewrite_case(case | {"strategy": strategy, "target": target})


def case_feeds(case: dict, x: np.ndarray) -> dict[str, np.ndarray]:
    """The rewritten model's inputs: x (as the test model takes it) and, where the case's axis
    is a graph input, the axis in its type."""
    feeds = {"x": feed(case["elem_type"], x)}
    if case["axis_form"] == "input":
        axis_dtype = np.int64 if case["axis_type"] == TensorProto.INT64 else np.int32
        feeds["axis"] = np.array(case["axis"], dtype=axis_dtype)
    return feeds


def run_case(case: dict) -> None:
    result = rewrite_case(case)
    if result is None:
        return
    rewrite, proto = result
    shape, axis, ex, rev = case["shape"], case["axis"], case["exclusive"], case["reverse"]
    elem_type = case["elem_type"]
    (plan,) = rewrite.plans
    if plan.lowering.name in NOT_ON_ORT:  # auto's tinygrad graph from n = 1024: wrong on
        return  # onnxruntime by design; run on tinygrad in tests/lowerings/test_masked.py

    rng = np.random.default_rng(case["seed"])
    x = sprinkle_specials(elem_type, random_data(elem_type, shape, rng), rng, case["special_rate"])
    (actual,) = run_ort(proto, case_feeds(case, x))
    name = plan.lowering.name
    if name == "logsum" and not TARGETS[case["target"]].float64:
        name = "logsum32"  # the contract's row for logsum computed in float32
    problem = check_result(elem_type, name, actual, x, axis, exclusive=ex, reverse=rev)
    assert problem is None, f"{TYPE_NAMES[elem_type]} {name} {case}: {problem}"


@_settings(100)
@given(case=cases(long=False))
def test_sweep(case: dict) -> None:
    """Short lengths, every strategy, target and type: the fast tier's sweep."""
    run_case(case)


# 250 a run: CI=true draws a new day's 250 every day (500 took 31 s of one CI worker at load
# 7, 2000 took 147 s); CUMPROD_SWEEP=N runs N (500: the former budget).
LONG_SWEEP = int(os.environ.get("CUMPROD_SWEEP", "250"))


@pytest.mark.slow
@_settings(LONG_SWEEP)
@given(case=cases(long=True))
def test_long_sweep(case: dict) -> None:
    """Lengths at and around every branch point and up to 5000 (CUMPROD_SWEEP examples)."""
    run_case(case)


@pytest.mark.parametrize("strategy", ["loop", "scan"])
@_settings(10)
@given(case=cases(long=False))
def test_sequential_lowerings_are_bitwise_ort_native(strategy: str, case: dict) -> None:
    """These lowerings multiply in the native kernel's order: the same bits (bfloat16 aside:
    onnxruntime has no bfloat16 CumProd)."""
    elem_type = case["elem_type"]
    if elem_type == TensorProto.BFLOAT16:
        elem_type = TensorProto.FLOAT
    shape, axis, ex, rev = case["shape"], case["axis"], case["exclusive"], case["reverse"]
    model = cumprod_model(elem_type, shape, axis, exclusive=ex, reverse=rev)
    rng = np.random.default_rng(case["seed"])
    x = sprinkle_specials(elem_type, random_data(elem_type, shape, rng), rng, case["special_rate"])
    (native,) = run_ort(model, {"x": x})
    (lowered,) = run_ort(rewriter.decompose_cumprod(model, strategy=strategy), {"x": x})
    # IEEE 754 leaves a NaN result's sign and payload to the implementation (a vectorised
    # and a scalar loop differ): NaN where native has NaN, every other element bit for bit.
    if native.dtype.kind == "f":
        nan = np.isnan(native)
        np.testing.assert_array_equal(np.isnan(lowered), nan)
        native, lowered = native[~nan], lowered[~nan]
    assert native.tobytes() == lowered.tobytes()


SWING_TARGETS = sorted(name for name, target in TARGETS.items() if target.float64)
TREES = ["auto", "carry", "radix", "blocked", "dynamic", "scan"]


@st.composite
def swing_cases(draw: st.DrawFn) -> dict:
    """float32 cases of lengths 17-3000 (the branch points among them: shorter axes are one
    chain), a tree strategy and a target that computes float64."""
    case = draw(cases(long=False))
    n = draw(st.one_of(st.sampled_from(BRANCH_LENGTHS[6:-1]), st.integers(17, 3000)))
    rank, axis = len(case["shape"]), case["axis"]
    shape = list(case["shape"])
    room = max(1, 4096 // max(n, 1))
    shape = [min(d, room, 3) for d in shape]
    shape[axis % rank] = n
    return case | {
        "shape": tuple(shape),
        "elem_type": TensorProto.FLOAT,
        "strategy": draw(st.sampled_from(TREES)),
        "target": draw(st.sampled_from(SWING_TARGETS)),
        "limit": draw(st.sampled_from([60, 100, 120])),
    }


def _swing_walk(shape: tuple[int, ...], axis: int, reverse: int, limit: int, seed: int):  # type: ignore[no-untyped-def]
    """float32 powers of two whose running product, in scan order, stays within 2^+-limit
    while single factors reach 2^+-limit: a product of a few of them (a block's own, from 1)
    can reach 2^+-2 limit, past float32's range."""
    rng = np.random.default_rng(seed)
    steps = np.moveaxis(np.zeros(shape, np.int64), axis, -1)
    running = np.zeros(steps.shape[:-1], np.int64)
    for k in range(steps.shape[-1]):
        low, high = np.maximum(-limit - running, -limit), np.minimum(limit - running, limit)
        step = rng.integers(low, high + 1)
        steps[..., k], running = step, running + step
    steps = np.moveaxis(steps, -1, axis)
    if reverse:
        steps = np.flip(steps, axis)
    return np.ldexp(np.float32(1), steps).astype(np.float32)


@_settings(60)
@given(case=swing_cases())
def test_swinging_prefixes_as_native(case: dict) -> None:
    """Where the running product stays in range but a block's own products would not, every
    float32 tree on a target that computes float64 gives the native kernel's bits (powers of
    two multiply exactly): each block starts from its float64 prefix (``lowerings/wide.py``)."""
    result = rewrite_case(case)
    if result is None:
        event("refused")
        return
    rewrite, proto = result
    (plan,) = rewrite.plans
    if plan.lowering.name == "doubling":  # IREE's auto on a last axis: blocks from 1 (README)
        event("doubling")
        return
    event("run")
    shape, axis = case["shape"], case["axis"]
    x = _swing_walk(shape, axis % len(shape), case["reverse"], case["limit"], case["seed"])
    model = cumprod_model(
        TensorProto.FLOAT, list(shape), axis, exclusive=case["exclusive"], reverse=case["reverse"]
    )
    (native,) = run_ort(model, {"x": x})
    (actual,) = run_ort(proto, case_feeds(case, x))
    assert np.isfinite(native).all()
    np.testing.assert_array_equal(actual, native, err_msg=str(case))
