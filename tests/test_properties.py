"""Property-based tests: random shapes, axes, attributes, types and strategies against
onnx.reference (integers, bit-exact) and a float64 / longdouble reference (floats, within the
bound each lowering states)."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto

import rewriter
from rewriter.verify import compare
from tests.helpers import (
    ALL_TYPES,
    EXACT_STRATEGIES,
    FLOATS,
    INTS,
    TYPE_NAMES,
    cumprod_model,
    expected_and_bound,
    feed,
    op_types,
    random_data,
    run_ort,
    strategies_for,
)

SEQUENTIAL = ["loop", "scan"]  # same multiplications, same order as the native kernel
SETTINGS = settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)


@st.composite
def cases(draw: st.DrawFn) -> dict:
    rank = draw(st.integers(1, 4))
    shape = tuple(draw(st.lists(st.integers(0, 5), min_size=rank, max_size=rank)))
    axis = draw(st.integers(-rank, rank - 1))
    if draw(st.booleans()):  # make the scanned axis length 0 or 1 more often
        shape = tuple(
            draw(st.sampled_from([0, 1])) if d == axis % rank else s for d, s in enumerate(shape)
        )
    return {
        "shape": shape,
        "axis": axis,
        "exclusive": draw(st.integers(0, 1)),
        "reverse": draw(st.integers(0, 1)),
        "axis_form": draw(st.sampled_from(["initializer", "constant", "input"])),
        "axis_type": draw(st.sampled_from([TensorProto.INT64, TensorProto.INT32])),
        "seed": draw(st.integers(0, 2**32 - 1)),
    }


def _run_case(elem_type: int, strategy: str, case: dict) -> None:
    shape, axis = case["shape"], case["axis"]
    ex, rev = case["exclusive"], case["reverse"]
    model = cumprod_model(
        elem_type,
        shape,
        axis,
        exclusive=ex,
        reverse=rev,
        axis_form=case["axis_form"],
        axis_type=case["axis_type"],
    )
    rewrite = rewriter.DecomposeCumProdPass(strategy)
    rewritten = rewrite(ir.serde.deserialize_model(model)).model
    assert "CumProd" not in op_types(ir.serde.serialize_model(rewritten))

    x = random_data(elem_type, shape, np.random.default_rng(case["seed"]))
    feeds = {"x": feed(elem_type, x)}
    if case["axis_form"] == "input":
        axis_dtype = np.int64 if case["axis_type"] == TensorProto.INT64 else np.int32
        feeds["axis"] = np.array(axis, dtype=axis_dtype)
    (actual,) = run_ort(rewritten, feeds)
    (plan,) = rewrite.plans
    expected, bound = expected_and_bound(
        elem_type, plan.lowering.name, x, axis, exclusive=ex, reverse=rev
    )
    result = compare(actual, expected, ir.DataType(elem_type), bound)
    assert result.ok, f"{TYPE_NAMES[elem_type]} {strategy} {case}: {result.detail}"


@pytest.mark.parametrize("elem_type", INTS, ids=TYPE_NAMES.get)
@pytest.mark.parametrize("strategy", EXACT_STRATEGIES)
@SETTINGS
@given(case=cases())
def test_integers_bit_exact(elem_type: int, strategy: str, case: dict) -> None:
    _run_case(elem_type, strategy, case)


@pytest.mark.parametrize(
    ("elem_type", "strategy"),
    [(t, s) for t in FLOATS for s in strategies_for(t)],
    ids=[f"{TYPE_NAMES[t]}-{s}" for t in FLOATS for s in strategies_for(t)],
)
@SETTINGS
@given(case=cases())
def test_floats_within_stated_bound(elem_type: int, strategy: str, case: dict) -> None:
    _run_case(elem_type, strategy, case)


@pytest.mark.parametrize(
    "elem_type", [t for t in ALL_TYPES if t != TensorProto.BFLOAT16], ids=TYPE_NAMES.get
)
@pytest.mark.parametrize("strategy", SEQUENTIAL)
@settings(max_examples=10, deadline=None, derandomize=True)
@given(case=cases())
def test_sequential_lowerings_are_bitwise_ort_native(
    elem_type: int, strategy: str, case: dict
) -> None:
    """These lowerings multiply in the native kernel's order: the same bits."""
    shape, axis, ex, rev = case["shape"], case["axis"], case["exclusive"], case["reverse"]
    model = cumprod_model(elem_type, shape, axis, exclusive=ex, reverse=rev)
    x = random_data(elem_type, shape, np.random.default_rng(case["seed"]))
    (native,) = run_ort(model, {"x": x})
    (lowered,) = run_ort(rewriter.decompose_cumprod(model, strategy=strategy), {"x": x})
    assert native.tobytes() == lowered.tobytes()
