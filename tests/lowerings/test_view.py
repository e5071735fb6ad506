"""The canonical view, explored: ranks 0-5, static / symbolic dims / unknown rank, constant or
run-time axis of either sign, empty dims, at ai.onnx opsets 11, 13, 14, 21 and 26. Every
lowering is compared bit for bit with numpy (int64, wraparound included) on onnxruntime."""

from __future__ import annotations

import itertools
import os

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

import rewriter
from tests.helpers import (
    ALL_TYPES,
    TARGET_REFUSALS,
    TYPE_NAMES,
    cumprod_model,
    feed,
    op_types,
    random_data,
    reference,
    run_ort,
    sprinkle_specials,
)

OPSETS = [11, 13, 14, 21, 26]
EXACT = ["auto", "loop", "scan", "chain", "blocked", "radix", "dynamic", "doubling"]
SETTINGS = settings(
    max_examples=int(os.environ.get("CUMPROD_VIEW_EXAMPLES", "60")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=os.environ.get("CI") != "true",  # CI explores the day's seed (conftest.py)
)


def _numpy(x: np.ndarray, axis: int, exclusive: int, reverse: int) -> np.ndarray:
    """CumProd from its definition, in x's type (int64 wraps)."""
    y = np.flip(x, axis) if reverse else x
    out = np.cumprod(y, axis=axis, dtype=x.dtype)
    if exclusive and x.shape[axis] > 0:
        ones = np.ones_like(np.take(out, [0], axis=axis))
        out = np.concatenate([ones, np.take(out, range(out.shape[axis] - 1), axis=axis)], axis)
    return np.flip(out, axis) if reverse else out


@st.composite
def cases(draw: st.DrawFn) -> dict:
    rank = draw(st.integers(1, 5))
    shape = tuple(draw(st.lists(st.integers(0, 4), min_size=rank, max_size=rank)))
    if draw(st.booleans()) and rank <= 2:  # a longer axis sometimes
        shape = (*shape[:-1], draw(st.integers(5, 40)))
    return {
        "shape": shape,
        "axis": draw(st.integers(-rank, rank - 1)),
        "form": draw(st.sampled_from(["static", "symbolic", "mixed", "unknown rank"])),
        "runtime_axis": draw(st.booleans()),
        "exclusive": draw(st.integers(0, 1)),
        "reverse": draw(st.integers(0, 1)),
        "opset": draw(st.sampled_from(OPSETS)),
        "strategy": draw(st.sampled_from(EXACT)),
        "target": draw(st.sampled_from(list(rewriter.TARGETS))),
        "seed": draw(st.integers(0, 2**16)),
    }


def _dim(form: str, prefix: str, k: int, size: int) -> int | str:
    """A declared dim: static, symbolic, or (``mixed``) symbolic at even positions only, so
    that a view's outer or inner product has static and symbolic factors."""
    static = form == "static" or (form == "mixed" and k % 2 == 1)
    return size if static else f"{prefix}{k}"


def _model(case: dict) -> onnx.ModelProto:
    shape, axis, form = case["shape"], case["axis"], case["form"]
    declared = [_dim(form, "d", k, d) for k, d in enumerate(shape)]
    nodes = []
    inputs = [helper.make_tensor_value_info("x", TensorProto.INT64, declared)]
    initializers = []
    x = "x"
    if form == "unknown rank":  # Reshape to a shape whose length is symbolic: rank unknown
        inputs.append(helper.make_tensor_value_info("shape", TensorProto.INT64, ["r"]))
        nodes.append(helper.make_node("Reshape", ["x", "shape"], ["xr"]))
        x = "xr"
    if case["runtime_axis"]:
        inputs.append(helper.make_tensor_value_info("axis", TensorProto.INT64, []))
    else:
        initializers.append(helper.make_tensor("axis", TensorProto.INT64, [], [axis]))
    nodes.append(
        helper.make_node(
            "CumProd", [x, "axis"], ["y"], exclusive=case["exclusive"], reverse=case["reverse"]
        )
    )
    out = [_dim(form, "o", k, d) for k, d in enumerate(shape)]
    graph = helper.make_graph(
        nodes,
        "view",
        inputs,
        [helper.make_tensor_value_info("y", TensorProto.INT64, out)],
        initializers,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26)])


def _rewrite(case: dict) -> onnx.ModelProto | None:
    """The case's model rewritten, or None when the tool refuses it for a documented reason
    (a target opset below what the target's runtime imports, or tests.helpers.TARGET_REFUSALS)."""
    options = {"strategy": case["strategy"], "max_length": 64, "target": case["target"]}
    if case["opset"] != 26:
        options["target_opset"] = case["opset"]
    try:
        return rewriter.decompose_cumprod(_model(case), **options)  # type: ignore[arg-type]
    except rewriter.OpsetError as error:
        assert case["opset"] < rewriter.TARGETS[case["target"]].min_opset, str(error)
    except rewriter.StrategyError as error:
        assert any(r in str(error) for r in TARGET_REFUSALS), str(error)
    return None


@pytest.mark.parametrize("target", list(rewriter.TARGETS))
def test_every_refusal_is_documented(target: str) -> None:
    """Every strategy x opset x view form x axis form x exclusive on ``target``, rewritten only:
    the exploring sweep below may draw any of these, so none may refuse for a reason the tests
    do not know."""
    for strategy, opset, form, runtime_axis, exclusive in itertools.product(
        EXACT, OPSETS, ["static", "symbolic", "unknown rank"], [False, True], [0, 1]
    ):
        case = {"shape": (2, 3), "axis": 1, "form": form, "runtime_axis": runtime_axis}
        case |= {"exclusive": exclusive, "reverse": 0, "opset": opset}
        _rewrite(case | {"strategy": strategy, "target": target})


@SETTINGS
@given(case=cases())
def test_every_view_and_lowering_is_exact(case: dict) -> None:
    rewritten = _rewrite(case)
    if rewritten is None:
        return
    onnx.checker.check_model(rewritten, full_check=True)
    rng = np.random.default_rng(case["seed"])
    x = rng.integers(-(2**62), 2**62, case["shape"], dtype=np.int64)
    x = np.where(rng.random(case["shape"]) < 0.5, x, rng.integers(-3, 4, case["shape"]))
    x |= 1  # odd: no running product turns to 0 and hides the positions after it
    feeds = {"x": x}
    if case["form"] == "unknown rank":
        feeds["shape"] = np.array(case["shape"], dtype=np.int64)
    if case["runtime_axis"]:
        feeds["axis"] = np.array(case["axis"], dtype=np.int64)
    (y,) = run_ort(rewritten, feeds)
    expected = _numpy(x, case["axis"], case["exclusive"], case["reverse"])
    assert y.shape == expected.shape
    np.testing.assert_array_equal(y, expected)


@pytest.mark.parametrize("strategy", EXACT)
def test_a_static_dim_beside_symbolic_ones_counts_in_the_view(strategy: str) -> None:
    """x [B, 3, N, 4]: the view's outer product B * 3 and inner N * 4 mix static and
    symbolic factors (found by mutation: dropping the static factor was not seen, as the
    sweep's dims were all static or all symbolic)."""
    for axis in (0, 1, 2, 3):
        case = {"shape": (2, 3, 5, 4), "axis": axis, "form": "mixed", "runtime_axis": False}
        case |= {"exclusive": 0, "reverse": 1, "opset": 26}
        case |= {"strategy": strategy, "target": "onnxruntime"}
        rewritten = _rewrite(case)
        assert rewritten is not None
        x = np.random.default_rng(axis).integers(-3, 4, case["shape"]) | 1
        (y,) = run_ort(rewritten, {"x": x})
        np.testing.assert_array_equal(y, _numpy(x, axis, 0, 1))


@pytest.mark.parametrize("runtime_axis", [False, True])
def test_rank_zero_fails_like_native(runtime_axis: bool) -> None:
    """A rank-0 x: refused when the rank is static; at run time (unknown rank), the rewritten
    model fails as onnxruntime's native kernel does."""
    case = {
        "shape": (3,),
        "axis": 0,
        "form": "unknown rank",
        "runtime_axis": runtime_axis,
        "exclusive": 0,
        "reverse": 0,
    }
    model = _model(case)
    rewritten = rewriter.decompose_cumprod(model)
    feeds = {"x": np.array([5], dtype=np.int64), "shape": np.zeros((0,), dtype=np.int64)}
    if runtime_axis:
        feeds["axis"] = np.array(0, dtype=np.int64)
    with pytest.raises(Exception):  # noqa: B017 - onnxruntime's own error
        run_ort(model, feeds)
    with pytest.raises(Exception):  # noqa: B017
        run_ort(rewritten, feeds)
    static = helper.make_model(
        helper.make_graph(
            [helper.make_node("CumProd", ["x", "axis"], ["y"])],
            "scalar",
            [helper.make_tensor_value_info("x", TensorProto.INT64, [])],
            [helper.make_tensor_value_info("y", TensorProto.INT64, [])],
            [helper.make_tensor("axis", TensorProto.INT64, [], [0])],
        ),
        opset_imports=[helper.make_opsetid("", 26)],
    )
    with pytest.raises(rewriter.InvalidCumProdError, match="rank 0"):
        rewriter.decompose_cumprod(static)


@pytest.mark.parametrize("target", ["onnxruntime", "tflite", "portable"])
@pytest.mark.parametrize("elem_type", ALL_TYPES, ids=TYPE_NAMES.get)
def test_length_1_is_x_or_ones_without_a_view(target: str, elem_type: int) -> None:
    """Along an axis of static length 1 the scan is x itself (exclusive: ones), bit for bit
    (-0.0, NaN kept), for static and symbolic dims, built with no Reshape (IREE failed at run
    time on the view (o, 1, 1) over symbolic dims: tests/test_runtime_tables.py)."""
    rng = np.random.default_rng(elem_type)
    for dims, axis, (ex, rev) in itertools.product(
        (("a", "b", 1), (2, 1, 3), ("a", 1)), (-1, 1), ((0, 0), (1, 0), (1, 1), (0, 1))
    ):
        if dims[axis] != 1:
            continue
        model = cumprod_model(elem_type, dims, axis, exclusive=ex, reverse=rev)
        lowered = rewriter.decompose_cumprod(model, target=target)
        assert "Reshape" not in op_types(lowered), (dims, axis)
        shape = tuple(3 if isinstance(d, str) else d for d in dims)
        x = sprinkle_specials(elem_type, random_data(elem_type, shape, rng), rng, 0.5)
        got = run_ort(lowered, {"x": feed(elem_type, x)})[0]
        want = feed(elem_type, reference(x, axis, ex, rev))
        np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8), str((dims, ex)))
