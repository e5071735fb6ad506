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
from rewriter.lowerings import LOWERINGS
from rewriter.verify import compare
from tests.helpers import (
    ALL_TYPES,
    FLOATS,
    INTS,
    TYPE_NAMES,
    counts,
    cumprod_model,
    np_dtype,
    op_types,
    reference,
    run_ort,
    wide_reference,
)

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


def _int_data(elem_type: int, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    dtype = np_dtype(elem_type)
    info = np.iinfo(dtype)
    # Full-range values wrap around at once; small ones (incl. 0 and negatives) wrap later.
    big = rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)
    small = rng.integers(max(info.min, -7), 8, size=shape).astype(dtype)
    return np.where(rng.random(shape) < 0.5, big, small)


def _float_data(elem_type: int, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """sign * 2^U(-1, 1): no prefix product of <= 5 factors leaves any type's normal range."""
    values = np.exp2(rng.uniform(-1, 1, size=shape)) * rng.choice([-1.0, 1.0], size=shape)
    return values.astype(np_dtype(elem_type))


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
    rewritten = rewriter.decompose_cumprod(model, strategy=strategy)
    assert "CumProd" not in op_types(rewritten)

    rng = np.random.default_rng(case["seed"])
    make = _int_data if elem_type in INTS else _float_data
    x = make(elem_type, shape, rng)
    feeds = {"x": x.astype(np.float32) if elem_type == TensorProto.BFLOAT16 else x}
    if case["axis_form"] == "input":
        feeds["axis"] = np.array(
            axis, dtype=np.int64 if case["axis_type"] == TensorProto.INT64 else np.int32
        )
    (actual,) = run_ort(rewritten, feeds)

    dtype = ir.DataType(elem_type)
    if elem_type in INTS:
        result = compare(actual, reference(x, axis, ex, rev), dtype)
    else:
        chosen = "logsum" if strategy == "auto" and elem_type != TensorProto.DOUBLE else strategy
        chosen = "loop" if chosen == "auto" else chosen
        bound = LOWERINGS[chosen].max_ulps(dtype, counts(shape, axis, ex, rev))
        result = compare(actual, wide_reference(x, axis, ex, rev), dtype, bound)
    assert result.ok, f"{TYPE_NAMES[elem_type]} {strategy} {case}: {result.detail}"


@pytest.mark.parametrize("elem_type", INTS, ids=TYPE_NAMES.get)
@pytest.mark.parametrize("strategy", ["auto", "loop"])
@SETTINGS
@given(case=cases())
def test_integers_bit_exact(elem_type: int, strategy: str, case: dict) -> None:
    _run_case(elem_type, strategy, case)


@pytest.mark.parametrize("elem_type", FLOATS, ids=TYPE_NAMES.get)
@pytest.mark.parametrize("strategy", ["auto", "logsum", "loop"])
@SETTINGS
@given(case=cases())
def test_floats_within_stated_bound(elem_type: int, strategy: str, case: dict) -> None:
    _run_case(elem_type, strategy, case)


@pytest.mark.parametrize(
    "elem_type", [t for t in ALL_TYPES if t != TensorProto.BFLOAT16], ids=TYPE_NAMES.get
)
@settings(max_examples=10, deadline=None, derandomize=True)
@given(case=cases())
def test_loop_is_bitwise_ort_native(elem_type: int, case: dict) -> None:
    """The loop lowering multiplies in the native kernel's order: the same bits."""
    shape, axis, ex, rev = case["shape"], case["axis"], case["exclusive"], case["reverse"]
    model = cumprod_model(elem_type, shape, axis, exclusive=ex, reverse=rev)
    rng = np.random.default_rng(case["seed"])
    make = _int_data if elem_type in INTS else _float_data
    x = make(elem_type, shape, rng)
    (native,) = run_ort(model, {"x": x})
    (lowered,) = run_ort(rewriter.decompose_cumprod(model, strategy="loop"), {"x": x})
    assert native.tobytes() == lowered.tobytes()
