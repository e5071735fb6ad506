"""What each target promises about the graph it gets: ops it must not contain, no float64
compute where the runtime has none, a warning (naming node and runtime) for each result the
runtime cannot compute exactly. The values themselves are checked on the real runtimes
(tests/test_runtimes*.py) and, for every target, on onnxruntime
(tests/lowerings/test_branches.py)."""

from __future__ import annotations

import dataclasses
import itertools
import logging

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from onnx import TensorProto

import rewriter
from tests.helpers import (
    ALL_TYPES,
    TYPE_NAMES,
    all_nodes,
    cumprod_in_if_model,
    cumprod_model,
    declared_refusal,
    op_types,
    reference,
    refuses_broadly,
    run_ort,
    scan_body_model,
)

FORMS = [
    ((4, 40), 1, "initializer"),  # static
    (("N", 40), 0, "initializer"),  # a length known only at run time
    ((4, 5, 6), -1, "input"),  # a run-time axis
]


def _float64_compute(model: onnx.ModelProto) -> list[str]:
    """Casts to float64 and float64 constants the rewrite introduced."""
    bad = []
    for node in all_nodes(model):
        for attr in node.attribute:
            if node.op_type == "Cast" and attr.name == "to" and attr.i == TensorProto.DOUBLE:
                bad.append(f"Cast {node.name}")
            if attr.type == onnx.AttributeProto.TENSOR and attr.t.data_type == TensorProto.DOUBLE:
                bad.append(f"{node.op_type} {node.name}")
    return bad


@pytest.mark.parametrize("target", [t for t, v in rewriter.TARGETS.items() if v.missing_ops])
@pytest.mark.parametrize("elem_type", ALL_TYPES, ids=TYPE_NAMES.get)
def test_no_missing_op_and_no_float64_compute(target: str, elem_type: int) -> None:
    """At the model's opset and at every lower one a lowering takes: a graph without the
    target's missing ops, or a StrategyError (never an op the runtime lacks)."""
    spec = rewriter.TARGETS[target]
    first = 13 if elem_type == TensorProto.BFLOAT16 else 11
    for (dims, axis, form), opset in itertools.product(FORMS, (None, 14, 13, first)):
        model = cumprod_model(elem_type, dims, axis, exclusive=1, reverse=1, axis_form=form)
        try:
            lowered = rewriter.decompose_cumprod(
                model, target=target, max_length=64, target_opset=opset
            )
        except rewriter.OpsetError as exc:  # below what the runtime imports
            assert opset is not None and opset < spec.min_opset and "importer" in str(exc), exc
            continue
        except rewriter.StrategyError as exc:  # an If the runtime lacks, below opset 14
            if declared_refusal(target, exc):  # what tvm / ncnn refuse, as data
                continue
            assert opset is not None and opset < 14 and "opset 14" in str(exc), exc
            continue
        assert isinstance(lowered, onnx.ModelProto)
        ops = {n.op_type for n in all_nodes(lowered)}
        assert not ops & spec.missing_ops, (form, ops & spec.missing_ops)
        if not spec.float64 and elem_type != TensorProto.DOUBLE:
            assert _float64_compute(lowered) == [], form


def test_portable_is_the_strictest() -> None:
    portable = rewriter.TARGETS["portable"]
    assert {"Loop", "Scan", "If"} <= portable.missing_ops
    assert not portable.float64 and not portable.runtime_view


@pytest.mark.parametrize(
    ("target", "elem_type"),
    [
        (t, e)
        for t, v in rewriter.TARGETS.items()
        for limit in v.limits
        for e in ALL_TYPES
        if v.limit_for(ir.DataType(e)) is limit
    ],
)
def test_a_runtime_limit_is_one_warning_naming_node_and_runtime(
    target: str, elem_type: int, caplog: pytest.LogCaptureFixture
) -> None:
    model = cumprod_model(elem_type, (3, 4), 1)
    with caplog.at_level(logging.WARNING, logger="rewriter"):
        rewriter.decompose_cumprod(model, target=target)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert "'cumprod'" in warnings[0] and f"(target {target})" in warnings[0]


@pytest.mark.parametrize(
    ("dims", "axis", "warned"),
    [(["N", 8], 0, True), (["N", "M"], 1, True), (["N", 8], 1, False), ([6, 8], 0, False)],
)
def test_a_run_time_length_in_an_if_branch_is_warned_on_tract_only(
    dims: list[int | str], axis: int, warned: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """tract resolves no symbolic dim inside an If branch (``Target.symbols_in_if``; the
    failure itself: tests/test_runtimes.py): one warning naming the node there where the
    scanned length is known only at run time, none for a static length; none on the
    targets that resolve them."""
    model = cumprod_in_if_model(dims, axis)
    for target in [t for t in rewriter.TARGETS if not refuses_broadly(t)]:
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="rewriter"):
            rewriter.decompose_cumprod(model, target=target, max_length=64)
        lines = [r.getMessage() for r in caplog.records if "If branch" in r.getMessage()]
        expected = warned and target == "tract"
        assert len(lines) == expected, (target, lines)
        assert all("CumProd 'scan' in graph 'in_if' > If 'pick'" in line for line in lines)


@pytest.mark.parametrize("target", ["onnxruntime", "spec"])
def test_no_warning_where_the_runtime_is_exact(
    target: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="rewriter"):
        for elem_type in ALL_TYPES:
            rewriter.decompose_cumprod(cumprod_model(elem_type, (3, 4), 1), target=target)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


@pytest.mark.parametrize(
    "target",
    [t for t, v in rewriter.TARGETS.items() if not v.float64 and not refuses_broadly(t)],
)
def test_logsum_computes_in_float32_where_float64_is_not(target: str) -> None:
    """OpenVINO computes float64 in float32 (measured: logsum 2 to ~1000 ulps off there);
    TFLite keeps a Cast to float64 as float32; portable promises no float64 compute: logsum
    computes in float32 there, and refuses float64 inputs, which float32 cannot hold."""
    model = cumprod_model(TensorProto.FLOAT, (3, 4), 1)
    if target == "openvino":  # its Exp(NaN) is +inf (tests/test_runtime_tables.py)
        with pytest.raises(rewriter.StrategyError, match="NaN would come out as inf"):
            rewriter.decompose_cumprod(model, strategy="logsum", target=target)
        return
    lowered = rewriter.decompose_cumprod(model, strategy="logsum", target=target)
    casts = {a.i for n in lowered.graph.node if n.op_type == "Cast" for a in n.attribute}
    assert TensorProto.DOUBLE not in casts, casts
    assert "Log" in {n.op_type for n in lowered.graph.node}
    double = cumprod_model(TensorProto.DOUBLE, (3, 4), 1)
    with pytest.raises(rewriter.StrategyError, match="float32 cannot hold float64 inputs"):
        rewriter.decompose_cumprod(double, strategy="logsum", target=target)


@pytest.mark.parametrize(("target", "instead"), [("tract", "'auto'"), ("spec", "'loop' or 'auto'")])
def test_logsum_on_integers_suggests_only_what_the_target_has(target: str, instead: str) -> None:
    """Found by a review from outside: on tract and tinygrad (no Loop) the refusal said
    "use 'loop' or 'auto'", and 'loop' is refused there too."""
    model = cumprod_model(TensorProto.INT32, (3, 4), 1)
    with pytest.raises(rewriter.StrategyError, match=f"is inexact for int32.*; use {instead}$"):
        rewriter.decompose_cumprod(model, strategy="logsum", target=target)


def test_openvino_refuses_an_exclusive_loop_over_a_run_time_length_below_opset_14() -> None:
    """OpenVINO 2026.4 computes it wrong (tests/test_runtime_tables.py runs it there)."""
    model = cumprod_model(TensorProto.FLOAT, ("A", "N"), 1, exclusive=1)
    with pytest.raises(rewriter.StrategyError, match=r"openvino.*opset 14"):
        rewriter.decompose_cumprod(model, strategy="loop", target="openvino", target_opset=13)
    for options in (
        {"target": "openvino", "target_opset": 14},
        {"target": "onnxruntime", "target_opset": 13},
    ):
        rewriter.decompose_cumprod(model, strategy="loop", **options)  # no refusal
    # (symbolic dims below opset 14 need an If, which OpenVINO's output does not use); with
    # static dims a run-time axis still gives a run-time length: the Loop then runs over a
    # slab of ones (a zero-trip Loop's output keeps the wrong shape there), sliced off again
    x = np.arange(1, 22, dtype=np.float32).reshape(3, 7) / 8
    for exclusive, axis_form, axes in ((0, "input", (1, 0, -2)), (1, "initializer", (1,))):
        model = cumprod_model(
            TensorProto.FLOAT, (3, 7), 1, exclusive=exclusive, axis_form=axis_form
        )
        for opset in (11, 13):
            lowered = rewriter.decompose_cumprod(
                model, strategy="loop", target="openvino", target_opset=opset
            )
            assert "If" not in {node.op_type for node in all_nodes(lowered)}
            for axis in axes:
                feeds = {"x": x} | ({"axis": np.array(axis)} if axis_form == "input" else {})
                np.testing.assert_array_equal(
                    run_ort(lowered, feeds)[0], reference(x, axis, exclusive, 0)
                )


@pytest.mark.parametrize(
    "target",
    [t for t, v in rewriter.TARGETS.items() if "If" in v.missing_ops and not refuses_broadly(t)],
)
def test_no_if_below_opset_14_is_a_refusal_where_dims_may_be_zero(target: str) -> None:
    """Below opset 14 a view of x with unknown dims sits in If(Size(x) == 0, ...): a target
    without If gets a clear refusal naming the opset, not an If (nor a wrong empty result)."""
    model = cumprod_model(TensorProto.FLOAT, ("A", "N"), 1)
    with pytest.raises(rewriter.StrategyError, match="opset 14"):
        rewriter.decompose_cumprod(model, target=target, target_opset=13, max_length=8)
    for opset in (14, None):
        lowered = rewriter.decompose_cumprod(model, target=target, target_opset=opset, max_length=8)
        assert "If" not in {node.op_type for node in all_nodes(lowered)}
    static = cumprod_model(TensorProto.FLOAT, (3, 7), 1, axis_form="input")
    lowered = rewriter.decompose_cumprod(static, target=target, target_opset=13)
    assert "If" not in {node.op_type for node in all_nodes(lowered)}


@pytest.mark.parametrize("strategy", ["radix", "carry"])
def test_lowerings_wrong_on_the_runtime_are_refused(strategy: str) -> None:
    """radix converts with onnx2tf but computes wrong values on TFLite (the opt-in tier of
    tests/test_runtimes_iree_tflite.py showed it); carry is built the same way."""
    model = cumprod_model(TensorProto.FLOAT, (3, 40), 1)
    with pytest.raises(rewriter.StrategyError, match="wrong values on tflite"):
        rewriter.decompose_cumprod(model, strategy=strategy, target="tflite")
    rewriter.decompose_cumprod(model, strategy=strategy, target="tinygrad")  # elsewhere: fine


@pytest.mark.parametrize(
    ("target", "shape", "axis_form", "strategy", "warned"),
    [
        ("iree", ("a", "n"), "initializer", "auto", ["length bound (16)"]),
        ("iree", (3, 4), "input", "auto", ["run-time axis"]),
        ("iree", ("a", "n"), "input", "auto", ["length bound (16)", "run-time axis"]),
        ("iree", (3, 4), "initializer", "auto", []),
        ("iree", ("a", "n"), "initializer", "logsum", []),  # no bound: nothing to check
        ("portable", ("a", "n"), "initializer", "auto", ["length bound (16)"]),
        ("portable", ("a", "n"), "input", "auto", ["length bound (16)", "run-time axis"]),
        ("openvino", ("a", "n"), "input", "auto", []),
        ("tinygrad", ("a", "n"), "input", "auto", []),
        # an empty x is Identity(x): neither the axis nor the length is read
        ("iree", (0, 4), "input", "auto", []),
        ("portable", ("a", 0), "input", "auto", []),
    ],
)
def test_a_runtime_without_run_time_checks_warns_what_it_cannot_refuse(  # noqa: PLR0917
    target: str,
    shape: tuple[int | str, ...],
    axis_form: str,
    strategy: str,
    warned: list[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """IREE 3.13 neither fails a Reshape that does not fit its data nor a Gather out of range,
    so an input longer than max_length, or a run-time axis out of range, gives wrong values
    there instead of failing (docs/runtime-probe-iree-tflite.md): one warning each, for a
    lowering that takes the bound. ``portable``'s runtimes are not known: it warns that they
    may not check."""
    elem = TensorProto.FLOAT if strategy == "logsum" else TensorProto.INT32
    model = cumprod_model(elem, shape, 1, axis_form=axis_form)
    with caplog.at_level(logging.WARNING, logger="rewriter"):
        rewriter.decompose_cumprod(model, target=target, strategy=strategy, max_length=16)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    warnings = [w for w in warnings if " not check" in w or " not range-check" in w]
    assert len(warnings) == len(warned), warnings
    for what, warning in zip(warned, warnings):
        assert what in warning and f"(target {target})" in warning


def test_tract_refuses_what_it_cannot_load_for_a_run_time_length() -> None:
    """tract 0.23 loads no Pad or Reshape sized from a length known only at run time (the
    bounded lowerings' padding, doubling's guard): those are refused for such a length, with
    max_length given; Scan and the logsum lowerings take it, and over static dims a run-time
    axis (each candidate axis static) keeps every lowering."""
    symbolic = cumprod_model(TensorProto.FLOAT, ("a", "n"), 1)
    for strategy in ("doubling", "radix", "carry", "chain", "blocked"):
        with pytest.raises(rewriter.StrategyError, match="tract cannot load a Pad or Reshape"):
            rewriter.decompose_cumprod(symbolic, strategy=strategy, target="tract", max_length=16)
        rewriter.decompose_cumprod(symbolic, strategy=strategy, target="openvino", max_length=16)
    for strategy in ("auto", "scan", "logsum"):
        rewriter.decompose_cumprod(symbolic, strategy=strategy, target="tract", max_length=16)
    static = cumprod_model(TensorProto.FLOAT, (3, 5), 1, axis_form="input")
    for strategy in ("doubling", "radix", "carry", "chain"):
        rewriter.decompose_cumprod(static, strategy=strategy, target="tract")


def test_iree_takes_only_doubling_over_a_run_time_length() -> None:
    """IREE 3.13 did not compile ``chain`` over a length known only at run time (padded to
    max_length) and failed at run time on ``radix`` and ``carry`` there along the last axis
    ("mismatching contracting dimension"; found by a review from outside with a forced
    strategy): they are refused there with a clear reason (Target.padded_lowerings);
    ``doubling`` is ``auto``'s pick, and over a static length every lowering is kept."""
    symbolic = cumprod_model(TensorProto.FLOAT, ("a", "n"), 1)
    for strategy in ("radix", "carry", "chain"):
        with pytest.raises(rewriter.StrategyError, match=r"iree failed to compile .*'doubling'"):
            rewriter.decompose_cumprod(symbolic, strategy=strategy, target="iree", max_length=16)
        rewriter.decompose_cumprod(symbolic, strategy=strategy, target="portable", max_length=16)
    rewrite = rewriter.DecomposeCumProdPass(target="iree", max_length=16)
    rewrite(ir.serde.deserialize_model(symbolic))
    assert [plan.lowering.name for plan in rewrite.plans] == ["doubling"]
    rewriter.decompose_cumprod(symbolic, strategy="doubling", target="iree", max_length=16)
    static = cumprod_model(TensorProto.FLOAT, ("a", 5), 1)
    for strategy in ("radix", "carry", "chain", "doubling"):
        rewriter.decompose_cumprod(static, strategy=strategy, target="iree")


def test_openvino_refusals_say_if_is_not_used_there() -> None:
    """OpenVINO has If; its target's output does not use it (Target.avoided_ops), and a
    refusal must not say OpenVINO lacks it."""
    model = cumprod_model(TensorProto.FLOAT, ("a", "n"), 1)
    with pytest.raises(rewriter.StrategyError) as refused:
        rewriter.decompose_cumprod(model, strategy="dynamic", target="openvino")
    assert "If, which the openvino target does not use" in str(refused.value)
    assert "lacks" not in str(refused.value)
    with pytest.raises(rewriter.StrategyError, match="If and Scan, which iree lacks"):
        rewriter.decompose_cumprod(model, strategy="dynamic", target="iree")


@pytest.mark.parametrize(
    "target",
    [t for t, v in rewriter.TARGETS.items() if "If" in v.missing_ops and not refuses_broadly(t)],
)
def test_length_1_below_opset_14_needs_no_if(target: str) -> None:
    """Found by a review from outside: a static length-1 axis with symbolic dims was refused
    below opset 14 for the If that guards a view, but a scan of length 1 builds no view."""
    first = max(13, rewriter.TARGETS[target].min_opset)
    for opset, exclusive in itertools.product(sorted({11, first, 13} - {12}), (0, 1)):
        if opset < rewriter.TARGETS[target].min_opset:
            continue
        model = cumprod_model(TensorProto.INT32, ("a", 1), 1, exclusive=exclusive)
        lowered = rewriter.decompose_cumprod(model, target=target, target_opset=opset)
        assert not {"If", "Reshape"} & {node.op_type for node in all_nodes(lowered)}
        x = np.array([[3], [-5], [7]], np.int32)
        (y,) = run_ort(lowered, {"x": x})
        np.testing.assert_array_equal(y, np.ones_like(x) if exclusive else x)


def test_a_cumprod_in_a_scan_body() -> None:
    """Found by a review from outside: a CumProd inside a Scan body got a Scan of its own
    there. tract 0.23 carried the inner Scan's state from one outer step to the next (wrong
    values) and failed to load an exclusive chain there: refused. OpenVINO 2026.4 failed to
    convert the nested Scan: no Scan there (a length known only at run time takes doubling,
    with a bound). onnxruntime runs nested Scans: unchanged."""
    symbolic = scan_body_model(TensorProto.FLOAT, ("a", "b", "c"), 1)
    static = scan_body_model(TensorProto.FLOAT, (2, 3, 4), 1, exclusive=1)
    for model in (symbolic, static):
        with pytest.raises(rewriter.StrategyError, match="tract computed a CumProd lowered"):
            rewriter.decompose_cumprod(model, target="tract", max_length=8)
    with pytest.raises(rewriter.StrategyError, match="inside a Scan body, where openvino"):
        rewriter.decompose_cumprod(symbolic, target="openvino")
    with pytest.raises(rewriter.StrategyError, match="inside a Scan body, where openvino"):
        rewriter.decompose_cumprod(static, strategy="scan", target="openvino")
    x = np.exp2(np.random.default_rng(3).integers(-2, 3, size=(2, 3, 4))).astype(np.float32)
    for model, options, exclusive in (
        (symbolic, {"target": "openvino", "max_length": 8}, 0),
        (static, {"target": "openvino"}, 1),
        (symbolic, {"target": "onnxruntime"}, 0),
    ):
        lowered = rewriter.decompose_cumprod(model, **options)
        scans = [node.op_type for node in all_nodes(lowered)].count("Scan")
        assert (scans > 1) == (options["target"] == "onnxruntime"), (options, scans)
        (y,) = run_ort(lowered, {"x": x})
        np.testing.assert_array_equal(y, reference(x, 2, exclusive, 0))


def test_iree_refuses_logsum_for_an_exclusive_scan() -> None:
    """Found by a review from outside: IREE 3.13 computed CumSum(exclusive=1) as the
    inclusive sum minus x, so a forced logsum gave NaN at every zero or infinity
    of an exclusive scan ([0, 2, 3] -> [nan, 0, 0]): refused there (Target.exclusive_cumsum);
    inclusive scans, and other targets, keep them."""
    exclusive = cumprod_model(TensorProto.FLOAT, (2, 5), 1, exclusive=1, reverse=1)
    with pytest.raises(rewriter.StrategyError, match="iree computes as the inclusive sum"):
        rewriter.decompose_cumprod(exclusive, strategy="logsum", target="iree")
    rewriter.decompose_cumprod(exclusive, strategy="logsum", target="tinygrad")
    inclusive = cumprod_model(TensorProto.FLOAT, (2, 5), 1, reverse=1)
    rewriter.decompose_cumprod(inclusive, strategy="logsum", target="iree")


def test_unknown_rank_refusal_names_the_rank_not_a_run_time_axis() -> None:
    """A constant axis over x of unknown rank, on a target that takes no shape computed at
    run time: the refusal said "a shape computed from a run-time axis" (found by a review
    from outside); the axis is constant, the rank is what is not known."""
    model = onnx.parser.parse_model(
        '<ir_version: 10, opset_import: ["" : 26]>'
        " main (float[4] x, int64[r] s) => (float y) {"
        " xr = Reshape (x, s) ax = Constant <value = int64 {0}> () y = CumProd (xr, ax) }"
    )
    with pytest.raises(rewriter.StrategyError) as refused:
        rewriter.decompose_cumprod(model, target="tract")
    assert "the rank of x is not known" in str(refused.value)
    assert "run-time axis" not in str(refused.value)


@pytest.mark.parametrize("target", [t for t in rewriter.TARGETS if not refuses_broadly(t)])
def test_below_opset_14_symbolic_dims_need_an_if_the_target_takes(target: str) -> None:
    """Below opset 14 a Reshape reads 0 as "copy this dim", so x over symbolic dims is
    lowered inside an If (empty or not). A target that lacks If, or whose If goes wrong
    there (tinygrad runs both branches: the lowered one failed on an empty x; found by a
    review from outside), refuses with one line; the others build the If."""
    model = cumprod_model(TensorProto.FLOAT, ("a", "b"), 0, exclusive=1, reverse=1)
    spec = rewriter.TARGETS[target]
    assert spec.min_opset <= 13
    options = {"target": target, "target_opset": 13, "max_length": 8}
    if "If" in spec.missing_ops:
        with pytest.raises(rewriter.StrategyError, match="use --target-opset 14 or later"):
            rewriter.decompose_cumprod(model, **options)  # type: ignore[arg-type]
    else:
        lowered = rewriter.decompose_cumprod(model, **options)  # type: ignore[arg-type]
        assert "If" in {n.op_type for n in all_nodes(lowered)}
    assert ("If" in spec.missing_ops) == (
        target in {"openvino", "tract", "iree", "tinygrad", "portable", "mnn", "tvm", "ncnn"}
    )


def _loop_model() -> onnx.ModelProto:
    """y = a Loop whose body scans its carried value with a CumProd (the carried value's
    declared shape is not trusted inside the body, so x's rank is not known there)."""
    body = onnx.helper.make_graph(
        [
            onnx.helper.make_node(
                "Constant",
                [],
                ["ax"],
                value=onnx.helper.make_tensor("a", TensorProto.INT64, [], [-1]),
            ),
            onnx.helper.make_node("CumProd", ["v", "ax"], ["v2"], name="inner"),
            onnx.helper.make_node("Identity", ["cin"], ["cout"]),
        ],
        "body",
        [
            onnx.helper.make_tensor_value_info("i", TensorProto.INT64, []),
            onnx.helper.make_tensor_value_info("cin", TensorProto.BOOL, []),
            onnx.helper.make_tensor_value_info("v", TensorProto.FLOAT, [4, 6]),
        ],
        [
            onnx.helper.make_tensor_value_info("cout", TensorProto.BOOL, []),
            onnx.helper.make_tensor_value_info("v2", TensorProto.FLOAT, [4, 6]),
        ],
    )
    graph = onnx.helper.make_graph(
        [
            onnx.helper.make_node(
                "Constant",
                [],
                ["go"],
                value=onnx.helper.make_tensor("t", TensorProto.BOOL, [], [True]),
            ),
            onnx.helper.make_node("Loop", ["trip", "go", "x"], ["y"], body=body, name="steps"),
        ],
        "g",
        [
            onnx.helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 6]),
            onnx.helper.make_tensor_value_info("trip", TensorProto.INT64, []),
        ],
        [onnx.helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 6])],
    )
    return onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 26)])


@pytest.mark.parametrize(
    "target", [t for t in rewriter.TARGETS if "Loop" in rewriter.TARGETS[t].missing_ops]
)
def test_a_refusal_inside_the_models_own_loop_says_so(target: str) -> None:
    """``loop`` asked for on a runtime without Loop, for a CumProd inside the model's own
    Loop: the refusal gives its own reason and says the model cannot run there anyway (no
    target refuses the default for this model, so the test above does not reach it)."""
    with pytest.raises(rewriter.StrategyError) as refused:
        rewriter.decompose_cumprod(_loop_model(), target=target, strategy="loop", max_length=16)
    assert f"strategy 'loop' needs Loop, which {target} lacks" in str(refused.value)
    assert f"(it also sits in the model's own Loop, which {target} lacks" in str(refused.value)


@pytest.mark.parametrize("target", list(rewriter.TARGETS))
def test_the_models_own_loop_on_a_target_without_loop_is_said(
    target: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A CumProd in the model's own Loop, for a runtime without Loop: the output cannot run
    there whatever the tool does. A refusal says so beside its own reason (it blamed only
    the unknown rank; found by a review from outside); a rewrite warns once, naming the
    Loop. Runtimes with Loop hear nothing of it."""
    spec = rewriter.TARGETS[target]
    caplog.set_level(logging.WARNING, logger="rewriter")
    try:
        rewriter.decompose_cumprod(_loop_model(), target=target, max_length=16)
    except rewriter.StrategyError as error:
        assert "Loop" in spec.missing_ops, str(error)
        assert f"the model's own Loop, which {target} lacks" in str(error)
        return
    own = [r.getMessage() for r in caplog.records if "is the model's own" in r.getMessage()]
    if "Loop" in spec.lacked_loops():
        assert own == [
            f"Loop 'steps' in graph 'g' is the model's own: it needs Loop, which {target} "
            f"lacks, and the rewrite keeps it (target {target})"
        ]
    else:
        assert own == []
    assert ("Loop" in spec.lacked_loops()) == (
        target in {"tract", "iree", "tinygrad", "portable", "tflite", "mnn", "tvm", "ncnn"}
    )


def test_a_refusal_of_autos_pick_says_it_is_autos() -> None:
    """With no strategy chosen, "strategy 'doubling' needs a bound" named a lowering the user
    never asked for, which auto does not even take on tinygrad once a bound is given (found
    by a review of the README). Asked for by name, the refusal names it as before."""
    model = cumprod_model(TensorProto.FLOAT, (3, "n"), 1)
    with pytest.raises(rewriter.StrategyError, match=r"on tinygrad auto needs a bound on the l"):
        rewriter.decompose_cumprod(model, target="tinygrad")
    with pytest.raises(rewriter.StrategyError, match="strategy 'doubling' needs a bound"):
        rewriter.decompose_cumprod(model, target="tinygrad", strategy="doubling")
    bounded = rewriter.decompose_cumprod(model, target="tinygrad", max_length=64)
    assert "Loop" not in {n.op_type for n in all_nodes(bounded)}


def test_a_refusal_names_lacked_and_avoided_ops_apart() -> None:
    """tinygrad has an If (it runs both branches), which this tool does not build there:
    "needs If and Scan, which tinygrad lacks" was untrue (found by a review of the diff)."""
    targets = rewriter.TARGETS
    assert (
        targets["tinygrad"].lacking(["If", "Scan"])
        == "Scan, which tinygrad lacks, and If, which the tinygrad target does not use"
    )
    assert targets["openvino"].lacking(["If"]) == "If, which the openvino target does not use"
    assert targets["iree"].lacking(["Scan", "If"]) == "If and Scan, which iree lacks"


@pytest.mark.parametrize("strategy", ["doubling", "carry", "radix", "chain"])
def test_the_length_guard_only_where_a_reshape_checks_sizes(
    strategy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lowering over a length n known only at run time, padded to max_length, reshapes its
    result to n + 1 - (n < max_length + 1) so that a longer input fails (a size the data does
    not have) where the runtime checks Reshapes. On a runtime that does not (IREE 3.13:
    ``run_time_checks`` False) the guard fails nothing, and it made the output's dim a value
    computed on the device: IREE's local-task driver read it back wrong under load
    (tests/test_runtime_tables.py::test_iree_run_time_length_output_shapes_under_load).
    There the lowering reshapes to n as it is. A test-only target without run-time checks
    (IREE itself takes only doubling over such a length) runs on onnxruntime."""
    unchecked = dataclasses.replace(
        rewriter.TARGETS["spec"], name="test-unchecked", run_time_checks=False
    )
    monkeypatch.setitem(rewriter.TARGETS, unchecked.name, unchecked)
    model = cumprod_model(TensorProto.INT32, ("a", "n"), 1, exclusive=1)
    x = np.arange(1, 25, dtype=np.int32).reshape(2, 12) % 7 - 3
    longer = np.ones((2, 20), np.int32)
    for target, guarded in (("spec", True), ("test-unchecked", False)):
        lowered = rewriter.decompose_cumprod(model, strategy=strategy, target=target, max_length=16)
        assert ("Less" in op_types(lowered)) == guarded, target
        (y,) = run_ort(lowered, {"x": x})
        np.testing.assert_array_equal(y, reference(x, 1, 1, 0))
        if guarded:
            with pytest.raises(Exception, match=r"(?i)reshape"):
                run_ort(lowered, {"x": longer})


def test_no_lowering_module_tests_a_target_by_name() -> None:
    """Lowering modules read target facts (``Target`` fields), never which table or target it
    is: no ``Target.auto`` compared, no comparison with a target's name. (The registry hands
    ``Target.auto`` to ``auto.pick``, uncompared.)"""
    import ast
    from pathlib import Path

    from rewriter.targets import TARGETS

    folder = Path(rewriter.__file__).parent / "lowerings"
    names = set(TARGETS)
    found = []
    for path in sorted(folder.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Compare):
                continue
            for side in (node.left, *node.comparators):
                named = isinstance(side, ast.Constant) and side.value in names
                read = isinstance(side, ast.Attribute) and side.attr == "auto"
                if named or read:
                    found.append(f"{path.name}:{node.lineno}")
    assert not found, found
