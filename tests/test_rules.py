"""The onnxscript rule set (rewriter.rules) against the pass on the same models: each lowering
once per axis form (every type and attribute combination among them); If / Loop bodies and
functions; types known only from inference; composition with other rules; and every check
that refuses a node says why. Results are held to the contract of tests/bounds.py."""

from __future__ import annotations

import copy
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np
import onnx
import onnx_ir as ir
import onnxscript.rewriter
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator
from onnxscript.rewriter import (
    MatchingTracer,
    MatchResult,
    MatchStatus,
    RewriteRuleClassBase,
    RewriteRuleSet,
)
from onnxscript.rewriter.rules.common import successive_relu_rule

import rewriter
from rewriter.rules import cumprod_rule, cumprod_rules
from tests.bounds import check, factor_counts, ulp_bound
from tests.helpers import (
    ALL_TYPES,
    LOCAL,
    TYPE_NAMES,
    check_against_native,
    check_result,
    cumprod_function,
    cumprod_model,
    feed,
    local_model,
    lower_or_refused,
    native,
    op_types,
    ort_strategies,
    random_data,
    run_ort,
    strategies_for,
)
from tests.test_nesting import FUNCTION_MODEL, IF_MODEL, LOOP_MODEL, NESTED_MODEL

SHAPE = (3, 4, 5)
AXIS_FORMS = {"initializer": 1, "constant": -1, "input": -2}


ATTRS = [(0, 0), (1, 1), (1, 0), (0, 1)]


def _grid() -> list[tuple]:
    """Each lowering once per axis form, the types and attributes rotating so that every type
    and every attribute combination meets the rules. ``auto`` and ``dynamic`` at a static
    length emit another strategy's graph (asserted in test_auto_and_dynamic_are_aliases)."""
    cells, k = [], 0
    for strategy in ort_strategies():
        if strategy == "auto":
            continue
        types = [t for t in ALL_TYPES if strategy in strategies_for(t)]
        for form in AXIS_FORMS:
            if strategy == "dynamic" and form != "input":
                continue
            ex, rev = ATTRS[k % len(ATTRS)]
            cells.append((types[k % len(types)], ex, rev, form, strategy))
            k += 1
    return cells


GRID = _grid()


def _case_id(case: tuple) -> str:
    elem_type, ex, rev, form, strategy = case
    return f"{TYPE_NAMES[elem_type]}-ex{ex}-rev{rev}-{form}-{strategy}"


def _with_rules(model: onnx.ModelProto, strategy: str = "auto") -> onnx.ModelProto:
    bound = 64 if strategy == "doubling" else None  # as tests.helpers.lower_or_refused
    rules = cumprod_rules(strategy, max_length=bound)
    rewritten = onnxscript.rewriter.rewrite(model, pattern_rewrite_rules=rules)
    onnx.checker.check_model(rewritten, full_check=True)
    return rewritten


def _with_pass(model: onnx.ModelProto, strategy: str = "auto") -> onnx.ModelProto:
    return _pass_and_lowerings(model, strategy)[0]


def _pass_and_lowerings(model: onnx.ModelProto, strategy: str) -> tuple[onnx.ModelProto, list[str]]:
    bound = 64 if strategy == "doubling" else None  # as tests.helpers.lower_or_refused
    rewrite = rewriter.DecomposeCumProdPass(strategy, max_length=bound)
    ir_model = ir.serde.deserialize_model(model)
    rewrite(ir_model)
    return ir.serde.serialize_model(ir_model), [plan.lowering.name for plan in rewrite.plans]


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view(f"u{a.dtype.itemsize}") if a.dtype.kind == "f" else a


def _same(a: list[np.ndarray], b: list[np.ndarray]) -> None:
    """Bit for bit (the same subgraph computes both)."""
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x.dtype == y.dtype and x.shape == y.shape
        np.testing.assert_array_equal(_bits(x), _bits(y))


@pytest.mark.parametrize("case", GRID, ids=_case_id)
def test_rules_and_pass_agree(case: tuple) -> None:
    elem_type, ex, rev, form, strategy = case
    axis = AXIS_FORMS[form]
    model = cumprod_model(elem_type, SHAPE, axis, exclusive=ex, reverse=rev, axis_form=form)
    by_rules = _with_rules(model, strategy)
    assert "CumProd" not in op_types(by_rules)
    # the same lowering: the same ops (Constant nodes aside: the rewriter folds some away)
    by_pass, (used,) = _pass_and_lowerings(model, strategy)
    assert sorted(t for t in op_types(by_rules) if t != "Constant") == sorted(
        t for t in op_types(by_pass) if t != "Constant"
    )

    x = random_data(elem_type, SHAPE, np.random.default_rng(zlib.crc32(_case_id(case).encode())))
    feeds = {"x": feed(elem_type, x)}
    if form == "input":
        feeds["axis"] = np.array(axis, np.int64)
    got = run_ort(by_rules, feeds)
    _same(got, run_ort(by_pass, feeds))
    problem = check_result(elem_type, used, got[0], x, axis, exclusive=ex, reverse=rev)
    assert problem is None, problem


NESTED = {"if": IF_MODEL, "loop": LOOP_MODEL, "function": FUNCTION_MODEL, "nested": NESTED_MODEL}
NESTED_FEEDS = {
    "if": lambda rng, cond: {
        "x": rng.uniform(0.5, 2, (2, 5)).astype(np.float32),
        "cond": np.array(cond),
    },
    "loop": lambda rng, cond: {
        "x": rng.integers(-50, 50, (3, 4)).astype(np.int64),
        "trips": np.array(3, np.int64),
    },
    "function": lambda rng, cond: {
        "a": rng.uniform(-2, 2, (2, 3)).astype(np.float32),
        "b": rng.uniform(-2, 2, (4, 2)).astype(np.float32),
        "n": rng.integers(-9, 9, 5).astype(np.int64),
    },
    "nested": lambda rng, cond: {
        "x": rng.uniform(0.5, 1.5, (3, 6)),
        "cond": np.array(cond),
        "ax": np.array(-1, np.int64),
    },
}


NESTED_CASES = [
    (name, strategy)
    for name, other in zip(NESTED, ("logsum", "radix", "scan", "doubling"))
    for strategy in ("auto", other)
]


@pytest.mark.parametrize(("name", "strategy"), NESTED_CASES)
def test_subgraphs_and_functions(name: str, strategy: str) -> None:
    """If branches, a Loop body using an outer value, functions called with two types, and a
    function > If > Loop with a run-time axis: rewritten everywhere, as by the pass."""
    model = onnx.parser.parse_model(NESTED[name])
    by_rules = _with_rules(model, strategy)
    if lower_or_refused(model, strategy) is None:  # the pass refuses it (asserted): so do rules
        assert "CumProd" in op_types(by_rules)
        return
    assert "CumProd" not in op_types(by_rules)
    by_pass = _with_pass(model, strategy)
    rng = np.random.default_rng(5)
    for cond in (True, False):
        feeds = NESTED_FEEDS[name](rng, cond)
        got = run_ort(by_rules, feeds)
        _same(got, run_ort(by_pass, feeds))
        # against the spec's CumProd (onnx.reference) on the original model; <= 6 factors
        for y, want in zip(got, ReferenceEvaluator(model).run(None, feeds)):
            if np.issubdtype(want.dtype, np.integer):
                np.testing.assert_array_equal(y, want)
            else:
                np.testing.assert_allclose(y, want, rtol=8 * np.finfo(want.dtype).eps)


TWO_TYPES_MODEL = """
<ir_version: 11, opset_import: ["" : 26, "local" : 1]>
main (float[2, 6] x1, int64[6, 2] x2) => (float[2, 6] y1, int64[6, 2] y2) {
    y1 = local.F (x1)
    y2 = local.F (x2)
}
<domain: "local", opset_import: ["" : 26]>
F (v) => (w) {
    ax = Constant <value = int64 {0}> ()
    w = CumProd (v, ax)
}
"""


@pytest.mark.parametrize("strategy", ["auto", "scan"])
def test_a_type_generic_lowering_makes_onnx_ir_warn_nothing(
    strategy: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Found by a review: a function called with two element types gets a lowering without a
    type (through the rules), whose Scan body values had a shape and no type, which onnx_ir
    skipped with a warning per value when it serialized them (16 lines)."""
    model = onnx.parser.parse_model(TWO_TYPES_MODEL)
    with caplog.at_level("WARNING"):
        rewritten = _with_rules(model, strategy)
    assert "CumProd" not in op_types(rewritten)
    assert not [r.getMessage() for r in caplog.records if r.name.startswith("onnx_ir")]
    rng = np.random.default_rng(4)
    x1 = rng.uniform(0.5, 1.5, (2, 6)).astype(np.float32)
    x2 = rng.integers(-9, 9, (6, 2)) | 1
    y1, y2 = run_ort(rewritten, {"x1": x1, "x2": x2})
    np.testing.assert_allclose(y1, np.cumprod(x1.astype(np.float64), 0), rtol=1e-6)
    np.testing.assert_array_equal(y2, np.cumprod(x2, 0))


def test_auto_and_dynamic_are_aliases() -> None:
    """Through the rules too, auto emits the graph of the lowering it picks, and dynamic at
    a static length emits scan's: the grid runs each graph once."""
    model = cumprod_model(TensorProto.FLOAT, SHAPE, 1, exclusive=1, reverse=1)
    _, (picked,) = _pass_and_lowerings(model, "auto")
    assert op_types(_with_rules(model, "auto")) == op_types(_with_rules(model, picked))
    assert op_types(_with_rules(model, "dynamic")) == op_types(_with_rules(model, "scan"))


UNTYPED = """
<ir_version: 11, opset_import: ["" : 26]>
main (int64[N, 4] x) => (int64[N, 4] y) {
    sq = Mul (x, x)
    ax = Constant <value = int64 {1}> ()
    y = CumProd <exclusive = 1> (sq, ax)
}
"""


def test_types_from_inference_when_the_model_has_none() -> None:
    """``sq`` has no value_info: its type and rank come from shape inference, as in the pass
    (an int64 CumProd needs the rank for loop)."""
    model = onnx.parser.parse_model(UNTYPED)
    assert not model.graph.value_info
    by_rules = _with_rules(model)
    assert "CumProd" not in op_types(by_rules)
    x = np.random.default_rng(3).integers(-(2**40), 2**40, (5, 4)).astype(np.int64)
    (y,) = run_ort(by_rules, {"x": x})
    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    np.testing.assert_array_equal(y, want)
    _same([y], run_ort(_with_pass(model), {"x": x}))


def test_a_declared_intermediate_shape_that_inference_confirms_is_used() -> None:
    """``sq`` declared in value_info: the rule once took the declaration as untrusted and ran
    no inference, so the rank was unknown and tract (which needs it) was left its CumProd."""
    model = onnx.parser.parse_model(UNTYPED.replace("N, 4", "5, 4"))
    model.graph.value_info.append(helper.make_tensor_value_info("sq", TensorProto.INT64, [5, 4]))
    rules = cumprod_rules(target="tract")
    rewritten = onnxscript.rewriter.rewrite(model, pattern_rewrite_rules=rules)
    assert "CumProd" not in op_types(rewritten)
    x = np.random.default_rng(7).integers(-(2**40), 2**40, (5, 4)).astype(np.int64)
    (y,) = run_ort(rewritten, {"x": x})
    np.testing.assert_array_equal(y, ReferenceEvaluator(model).run(None, {"x": x})[0])


def test_composes_with_other_rules() -> None:
    text = """
    <ir_version: 11, opset_import: ["" : 26]>
    main (float[3, 4] x) => (float[3, 4] y) {
        a = Relu (x)
        b = Relu (a)
        ax = Constant <value = int64 {0}> ()
        y = CumProd <reverse = 1> (b, ax)
    }
    """
    model = onnx.parser.parse_model(text)
    rules = RewriteRuleSet([cumprod_rule(), successive_relu_rule])
    rewritten = onnxscript.rewriter.rewrite(model, pattern_rewrite_rules=rules)
    onnx.checker.check_model(rewritten, full_check=True)
    types = op_types(rewritten)
    assert "CumProd" not in types and types.count("Relu") == 1
    x = np.random.default_rng(4).uniform(-2, 2, (3, 4)).astype(np.float32)
    (y,) = run_ort(rewritten, {"x": x})
    # auto lowers it with an exact kernel: within k - 1 ulps of the float64 product
    want = np.flip(np.cumprod(np.flip(np.maximum(x, 0).astype(np.float64), 0), 0), 0)
    bound = ulp_bound("scan", np.float32, factor_counts(x.shape, 0, False, True))
    assert check(y, want, np.float32, bound) is None


def test_ai_onnx_domain_spelled_out() -> None:
    model = cumprod_model(TensorProto.FLOAT, (2, 3), 1)
    model.graph.node[0].domain = "ai.onnx"
    rewritten = _with_rules(model)
    assert "CumProd" not in op_types(rewritten)
    x = np.random.default_rng(6).uniform(0.5, 2, (2, 3)).astype(np.float32)
    (y,) = run_ort(rewritten, {"x": x})
    bound = ulp_bound("chain", np.float32, factor_counts(x.shape, 1, False, False))
    assert check(y, np.cumprod(x.astype(np.float64), 1), np.float32, bound) is None


def test_graph_output_name_is_kept() -> None:
    model = cumprod_model(TensorProto.INT32, (2, 3), 1)
    rewritten = _with_rules(model)
    assert [o.name for o in rewritten.graph.output] == ["y"]


# -- refused nodes: each failed check says why -------------------------------------------------


def _single(
    node: onnx.NodeProto,
    *,
    x_type: int = TensorProto.FLOAT,
    x_shape: list | None = None,
    initializers: list | None = None,
    opset: int = 26,
    extra_nodes: list | None = None,
) -> onnx.ModelProto:
    shape = [2, 3] if x_shape is None else x_shape
    graph = helper.make_graph(
        [*(extra_nodes or []), node],
        "main",
        [helper.make_tensor_value_info("x", x_type, shape)],
        [helper.make_tensor_value_info("y", x_type, shape)],
        initializers or [],
    )
    return helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid("custom", 1)],
    )


def _axis(
    value: object, dims: list[int] | None = None, elem: int = TensorProto.INT64
) -> onnx.TensorProto:
    values = value if isinstance(value, list) else [value]
    return helper.make_tensor("axis", elem, [] if dims is None else dims, values)


_SCAN = helper.make_node("CumProd", ["x", "axis"], ["y"], name="scan")
REFUSED = {
    "opset 25": (
        _single(_SCAN, initializers=[_axis(0)], opset=25),
        "auto",
        "CumProd needs ai.onnx opset >= 26, found 25",
    ),
    "axis of shape [1]": (
        _single(_SCAN, initializers=[_axis(1, [1])]),
        "auto",
        "axis must be a 0-D tensor",
    ),
    "axis out of range": (
        _single(_SCAN, initializers=[_axis(2)]),
        "auto",
        "axis 2 is out of range [-2, 1]",
    ),
    "float axis": (
        _single(_SCAN, initializers=[_axis(1.0, elem=TensorProto.FLOAT)]),
        "auto",
        "axis has element type float;",
    ),
    "rank-0 x": (
        _single(_SCAN, x_shape=[], initializers=[_axis(0)]),
        "auto",
        "x is a scalar (rank 0)",
    ),
    "int8 x": (
        _single(_SCAN, x_type=TensorProto.INT8, initializers=[_axis(0)]),
        "auto",
        "x has element type int8",
    ),
    "logsum on int64": (
        _single(_SCAN, x_type=TensorProto.INT64, initializers=[_axis(0)]),
        "logsum",
        "strategy 'logsum' is inexact for int64",
    ),
    "type unknown": (
        _single(
            helper.make_node("CumProd", ["t", "axis"], ["y"], name="scan"),
            initializers=[_axis(0)],
            extra_nodes=[helper.make_node("Opaque", ["x"], ["t"], domain="custom")],
        ),
        "logsum",
        "strategy 'logsum' is inexact for an unknown type",
    ),
    "rank unknown for chain": (
        _single(
            helper.make_node("CumProd", ["t", "axis"], ["y"], name="scan"),
            initializers=[_axis(0)],
            extra_nodes=[helper.make_node("Opaque", ["x"], ["t"], domain="custom")],
        ),
        "chain",
        "strategy 'chain' needs the length of the scanned axis to be static, or a bound",
    ),
}


@pytest.mark.parametrize("case", REFUSED, ids=list(REFUSED))
def test_each_refusal_says_why_and_changes_nothing(case: str) -> None:
    model, strategy, problem = REFUSED[case]
    rule = cumprod_rule(strategy)
    ir_model = ir.serde.deserialize_model(model)
    tracer = MatchingTracer()
    RewriteRuleSet([rule]).apply_to_model(ir_model, tracer=tracer)
    (info,) = tracer.best_matches_map[rule]
    assert info.status == MatchStatus.CONDITION_FAILED
    assert info.root_node.name == "scan"
    reason = info.match_result.reason
    assert problem in reason, reason
    assert reason.startswith("CumProd node 'scan' in graph 'main': "), reason

    rewritten = onnxscript.rewriter.rewrite(model, pattern_rewrite_rules=RewriteRuleSet([rule]))
    assert "CumProd" in op_types(rewritten)


def _warnings(caplog: pytest.LogCaptureFixture, logger: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == logger and r.levelname == "WARNING"]


@pytest.mark.parametrize("case", REFUSED, ids=list(REFUSED))
def test_each_node_left_in_place_is_warned_once(
    case: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The tracer is opt-in; a CumProd the rule leaves alone is also a logged warning, once
    per model however often the rewriter checks it; the same rule set applied to another
    model warns about that one too (a review from outside found a reused rule set silent
    about every model after the first)."""
    model, strategy, problem = REFUSED[case]
    rules = cumprod_rules(strategy)
    for _ in range(2):  # the second time on another model (the same content)
        caplog.clear()
        with caplog.at_level("WARNING"):
            onnxscript.rewriter.rewrite(model, pattern_rewrite_rules=rules)
        (message,) = _warnings(caplog, "rewriter.rules")
        assert message.startswith("CumProd node 'scan' in graph 'main': "), message
        assert problem in message and message.endswith("the rule leaves this CumProd in place")
    ir_model = ir.serde.deserialize_model(model)
    caplog.clear()
    with caplog.at_level("WARNING"):
        for _ in range(2):  # the same model twice: it was warned about
            rules.apply_to_model(ir_model)
    assert len(_warnings(caplog, "rewriter.rules")) == 1


@pytest.mark.parametrize(
    ("target", "axis_input"), [("iree", False), ("iree", True), ("portable", False)]
)
def test_target_warnings_as_the_pass_gives_them(
    target: str, axis_input: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """A run-time length past the bound, or a run-time axis out of range, is not refused at
    run time on these targets; the rule warns about it as the pass does."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, "n"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, "n"])
    inputs, initializers = [x], []
    if axis_input:
        inputs.append(helper.make_tensor_value_info("axis", TensorProto.INT64, []))
    else:
        initializers.append(_axis(1))
    graph = helper.make_graph([_SCAN], "main", inputs, [y], initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26)])
    with caplog.at_level("WARNING"):
        rules = cumprod_rules(target=target, max_length=16)
        rewritten = onnxscript.rewriter.rewrite(model, pattern_rewrite_rules=rules)
        rewriter.decompose_cumprod(model, target=target, max_length=16)
    assert "CumProd" not in op_types(rewritten)
    from_rules = _warnings(caplog, "rewriter.rules")
    from_pass = _warnings(caplog, "rewriter.lower")
    assert from_rules == from_pass
    expected = ["check the length bound (16)"]  # with a run-time axis, any dim is the length
    if axis_input:
        expected.append("range-check the run-time axis")
    if target == "iree":
        expected.append("flushes subnormal results to zero")
    assert len(from_rules) == len(expected), from_rules
    for text in expected:
        assert any(text in m for m in from_rules), (text, from_rules)


@pytest.fixture
def inference_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A 1 appended each time the rule runs shape inference (``rules.infer_types``)."""
    import rewriter.rules

    calls: list[int] = []
    real = rewriter.rules.infer_types

    def counted(model: ir.Model) -> object:
        calls.append(1)
        return real(model)

    monkeypatch.setattr(rewriter.rules, "infer_types", counted)
    return calls


def test_no_shape_inference_for_a_main_graph_input(inference_calls: list[int]) -> None:
    """x a main-graph input (its declaration is checked at run time): no inference, which the
    rule would otherwise run once per visited subgraph (50 If branches: 3.9 s against 1.0 s);
    a value inside a branch still gets it."""
    model = cumprod_model(TensorProto.INT64, (3, 5), 1)
    assert "CumProd" not in op_types(_with_rules(model))
    assert inference_calls == []
    model = onnx.parser.parse_model(UNTYPED)  # x squared first: an intermediate
    assert "CumProd" not in op_types(_with_rules(model))
    assert inference_calls == [1]


@pytest.mark.parametrize("form", ["value_int", "value"])
def test_a_constant_axis_by_reference_in_a_function(form: str) -> None:
    """Found by a review from outside: F's axis is Constant(value_int=@axis) (or value=@axis):
    the rule set crashed reading the unresolved reference (a PassError traceback). It is a
    run-time axis for the rules now; the result matches the original on onnxruntime."""
    constant = helper.make_node("Constant", [], ["c"])
    attr = onnx.AttributeProto()
    attr.name, attr.ref_attr_name = form, "axis"
    attr.type = onnx.AttributeProto.INT if form == "value_int" else onnx.AttributeProto.TENSOR
    constant.attribute.append(attr)
    opset = [helper.make_opsetid("", 26)]
    f = helper.make_function(
        "loc",
        "F",
        ["x"],
        ["y"],
        [constant, helper.make_node("CumProd", ["x", "c"], ["y"])],
        opset,
        attributes=["axis"],
    )
    value = 1 if form == "value_int" else helper.make_tensor("t", TensorProto.INT64, [], [1])
    graph = helper.make_graph(
        [helper.make_node("F", ["a"], ["o"], domain="loc", axis=value)],
        "g",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("o", TensorProto.FLOAT, [2, 3])],
    )
    model = helper.make_model(
        graph, opset_imports=[*opset, helper.make_opsetid("loc", 1)], functions=[f], ir_version=10
    )
    rewritten = onnxscript.rewriter.rewrite(model, pattern_rewrite_rules=cumprod_rules())
    assert "CumProd" not in op_types(rewritten)
    a = np.array([[1, 2, 3], [-4, 5, 0.5]], dtype=np.float32)
    np.testing.assert_array_equal(run_ort(rewritten, {"a": a})[0], np.cumprod(a, axis=1))


@pytest.mark.parametrize("case", REFUSED, ids=list(REFUSED))
def test_the_pass_refuses_each_node_the_rule_leaves(case: str) -> None:
    """The pass refuses what the rule leaves in place, for the same reason (a CumProd in a
    model importing opset 25, where it does not exist, was lowered once the pass's own
    opset check was loosened: found by mutation)."""
    model, strategy, problem = REFUSED[case]
    with pytest.raises(rewriter.CumProdError) as refused:
        rewriter.decompose_cumprod(model, strategy=strategy)
    assert problem in str(refused.value), str(refused.value)


def test_rules_say_the_functions_stay(caplog: pytest.LogCaptureFixture) -> None:
    model = local_model(
        [helper.make_node("B", ["x"], ["y"], domain=LOCAL)],
        [helper.make_tensor_value_info("x", TensorProto.INT32, [3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.INT32, [3, 4])],
        [cumprod_function("B")],
    )
    x = np.arange(1, 13, dtype=np.int32).reshape(3, 4)
    with caplog.at_level("WARNING", logger="rewriter.rules"):
        check_against_native(model, {"x": x}, "rules", target="tract")
    assert "the model's functions stay functions, which tract does not load" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="rewriter.rules"):
        check_against_native(model, {"x": x}, "rules", target="onnxruntime")
    assert "functions stay" not in caplog.text


# CumProds in the main graph (one fed by another through a Neg), an If branch and a function;
# integers, so that onnxruntime's native CumProd is the reference bit for bit.
def _three_places(elem: str, shape: str, between: str) -> onnx.ModelProto:
    return onnx.parser.parse_model(f"""
<ir_version: 11, opset_import: ["" : 26, "local" : 1]>
main ({elem}[{shape}] x, bool cond) => ({elem}[{shape}] y, {elem}[{shape}] z, {elem}[{shape}] w) {{
    ax = Constant <value = int64 {{1}}> ()
    p = CumProd (x, ax)
    m = {between} (p)
    y = CumProd <exclusive = 1> (m, ax)
    z = If (cond) <
        then_branch = t_g () => ({elem}[{shape}] t) {{
            ax0 = Constant <value = int64 {{0}}> ()
            t = CumProd <reverse = 1> (x, ax0)
        }},
        else_branch = e_g () => ({elem}[{shape}] e) {{ e = Identity (x) }}
    >
    w = local.F (x)
}}
<domain: "local", opset_import: ["" : 26]>
F (v) => (o) {{
    a = Constant <value = int64 {{-1}}> ()
    o = CumProd <exclusive = 1, reverse = 1> (v, a)
}}
""")


# model A's Neg marks the point where the other model is rewritten in the middle of A's visit
MODEL_A = _three_places("int32", "3, 4", "Neg")
MODEL_B = _three_places("int64", "2, 5", "Abs")
FEEDS_A = {"x": np.arange(-5, 7, dtype=np.int32).reshape(3, 4)}
FEEDS_B = {"x": np.array([[3, -2, 7, 1, -1], [1 << 20, 1 << 21, 5, -3, 9]], np.int64)}


def _rule_state(rules: RewriteRuleSet) -> dict[str, object]:
    """The attributes of the rule object behind the set's CumProd rule (its visitor methods
    are bound to it)."""
    (rule,) = [r for r in rules if str(r).startswith("CumProdTo")]
    instance = rule.graph_pre_visitor.__self__  # type: ignore[union-attr]
    return vars(instance)


def _assert_unchanged(state: dict[str, object], before: dict[str, object], copied: object) -> None:
    assert state.keys() == before.keys()
    for key, value in state.items():
        assert value is before[key], key  # nothing replaced ...
    assert state == copied  # ... nor changed in place


def _native_results(rewritten: onnx.ModelProto, original: onnx.ModelProto, feeds: dict) -> None:
    assert "CumProd" not in op_types(rewritten)
    onnx.checker.check_model(rewritten, full_check=True)
    for cond in (True, False):
        run = {**feeds, "cond": np.array(cond)}
        got, want = run_ort(rewritten, run), native(original, run)
        assert len(got) == len(want) == 3
        for a, e in zip(got, want):
            assert a.dtype == e.dtype and a.shape == e.shape
            np.testing.assert_array_equal(a, e)


def test_a_rewrite_leaves_the_rule_object_unchanged() -> None:
    """The rule object holds its configuration only: the model's facts (types, names, the
    warnings given) and the plan for a node live with the model, not on the rule, so a
    rewrite of CumProds in the main graph, an If branch and a function changes none of its
    attributes (tract: the functions-stay warning is given)."""
    rules = cumprod_rules(target="tract")
    state = _rule_state(rules)
    before, copied = dict(state), copy.deepcopy(state)
    model = ir.serde.deserialize_model(MODEL_A)
    graphs = [model.graph, *model.functions.values()]
    cumprods = [n for g in graphs for n in ir.traversal.RecursiveGraphIterator(g)]
    cumprods = [n for n in cumprods if n.op_type == "CumProd"]
    assert len(cumprods) == 4
    onnxscript.rewriter.rewrite(model, pattern_rewrite_rules=rules)
    _native_results(ir.serde.serialize_model(model), MODEL_A, FEEDS_A)
    _assert_unchanged(state, before, copied)
    for node in cumprods:
        assert not node.meta, node  # the plan for each went with its rewrite


class _OtherModelMidway(RewriteRuleClassBase):
    """Matches Neg and, the first time, calls ``midway`` (then leaves the Neg alone)."""

    def __init__(self, midway: Callable[[], None]) -> None:
        super().__init__(name="OtherModelMidway")
        self.midway = midway
        self.calls = 0

    def pattern(self, op: Any, x: ir.Value) -> ir.Value:
        return op.Neg(x)  # type: ignore[no-any-return]

    def check(self, context: Any, x: ir.Value, **_: Any) -> MatchResult:  # type: ignore[override]
        self.calls += 1
        if self.calls == 1:
            self.midway()
        return MatchResult().fail("only a point in the visit")

    def rewrite(self, op: Any, x: ir.Value, **_: Any) -> None:
        raise AssertionError("never rewrites")


def test_one_rule_set_for_two_models_interleaved(caplog: pytest.LogCaptureFixture) -> None:
    """One rule set rewrites model B in the middle of model A's main-graph visit (between
    A's two main-graph CumProds): both give onnxruntime's native results, the warnings are
    those of each model rewritten alone (once per model each), and the rule object is not
    changed at any point."""

    def alone(original: onnx.ModelProto) -> list[str]:
        caplog.clear()
        with caplog.at_level("WARNING"):
            rewritten = onnxscript.rewriter.rewrite(
                original, pattern_rewrite_rules=cumprod_rules(target="tract")
            )
        _native_results(rewritten, original, FEEDS_A if original is MODEL_A else FEEDS_B)
        return _warnings(caplog, "rewriter.rules")

    expected = alone(MODEL_A) + alone(MODEL_B)
    assert expected  # the functions-stay warning, for each model

    rewritten_b: list[onnx.ModelProto] = []

    def b_midway() -> None:
        _assert_unchanged(state, before, copied)  # during A's visit
        rewritten_b.append(onnxscript.rewriter.rewrite(MODEL_B, pattern_rewrite_rules=rules))
        _assert_unchanged(state, before, copied)

    rules = RewriteRuleSet([_OtherModelMidway.rule(b_midway), cumprod_rule(target="tract")])
    state = _rule_state(rules)
    before, copied = dict(state), copy.deepcopy(state)

    caplog.clear()
    with caplog.at_level("WARNING"):
        rewritten_a = onnxscript.rewriter.rewrite(MODEL_A, pattern_rewrite_rules=rules)
    (model_b,) = rewritten_b
    assert sorted(_warnings(caplog, "rewriter.rules")) == sorted(expected)
    _assert_unchanged(state, before, copied)
    _native_results(rewritten_a, MODEL_A, FEEDS_A)
    _native_results(model_b, MODEL_B, FEEDS_B)


def test_a_model_changed_between_two_rewrites_is_seen_anew() -> None:
    """The facts the rule keeps with a model are those of one visit: the same rule set
    applied again after the model changed (its ai.onnx import raised from 25, where the rule
    leaves the CumProd, to 26) lowers the CumProd it left, as a fresh rule set would."""
    original = cumprod_model(TensorProto.INT32, (3, 4), 1, exclusive=1)
    model = ir.serde.deserialize_model(original)
    model.opset_imports[""] = 25
    rules = cumprod_rules()
    rules.apply_to_model(model)
    assert "CumProd" in [node.op_type for node in model.graph]
    model.opset_imports[""] = 26
    rules.apply_to_model(model)
    rewritten = ir.serde.serialize_model(model)
    assert "CumProd" not in op_types(rewritten)
    x = np.arange(-5, 7, dtype=np.int32).reshape(3, 4)
    np.testing.assert_array_equal(run_ort(rewritten, {"x": x})[0], native(original, {"x": x})[0])


@pytest.mark.parametrize("strategy", ["auto", "scan"])
def test_shape_inference_once_per_graph_visit(strategy: str, inference_calls: list[int]) -> None:
    """Ten CumProds in a chain in one graph, each x an intermediate: inference runs once
    for the graph's visit, not once per CumProd, also where each lowering brings a Scan
    whose body onnxscript visits in between (it ran ten times there before the facts were
    kept per visit with the model; 50 such CumProds took 16 times as long)."""
    nodes, previous = [], "x"
    for i in range(10):
        nodes.append(helper.make_node("Neg", [previous], [f"n{i}"]))
        cumprod = helper.make_node("CumProd", [f"n{i}", "axis"], [f"c{i}"], exclusive=i % 2)
        nodes.append(cumprod)
        previous = f"c{i}"
    nodes.append(helper.make_node("Identity", [previous], ["y"]))
    graph = helper.make_graph(
        nodes,
        "main",
        [helper.make_tensor_value_info("x", TensorProto.INT32, [3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.INT32, [3, 4])],
        [_axis(1)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26)])
    rewritten = _with_rules(model, strategy)
    assert "CumProd" not in op_types(rewritten)
    if strategy == "scan":
        assert op_types(rewritten).count("Scan") == 10
    assert inference_calls == [1]
    x = np.arange(-5, 7, dtype=np.int32).reshape(3, 4)
    np.testing.assert_array_equal(run_ort(rewritten, {"x": x})[0], native(model, {"x": x})[0])
