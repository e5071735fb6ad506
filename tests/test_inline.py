"""``rewriter.inline``: model-local functions inlined for targets whose runtime loads none
(names kept apart, unnamed call outputs, unused functions, what the inliner cannot take
refused as a target error); each rewrite compared with onnxruntime's native CumProd."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import rewriter
from tests.helpers import (
    LOCAL,
    OPSET,
    all_nodes,
    check_against_native,
    functions_model,
    local_model,
    refuses_broadly,
)

INLINING_TARGETS = [
    name
    for name, t in rewriter.TARGETS.items()
    if not t.local_functions and not refuses_broadly(name)
]


def _functions_feeds() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(11)
    return {  # powers of two: every product is exact in float32, whatever the order
        "a": (np.exp2(rng.integers(-2, 3, (3, 5))) * rng.choice([-1, 1], (3, 5))).astype(
            np.float32
        ),
        "b": rng.integers(-(2**31), 2**31, (3, 5)).astype(np.int32) | 1,
    }


@pytest.mark.parametrize("target", INLINING_TARGETS)
def test_functions_are_inlined_for_a_runtime_that_loads_none(target: str) -> None:
    """OpenVINO, tract, IREE, tinygrad and onnx2tf load no model-local function (a call to
    one fails there; tests/test_runtime_tables.py runs this model on them): for their
    targets every call is inlined (attributes by reference through two calls, one function
    called with two element types, one without CumProd) and unused functions dropped."""
    assert {"openvino", "tract", "iree", "tinygrad", "tflite"} <= set(INLINING_TARGETS)
    model, _ = functions_model()
    rewritten = check_against_native(model, _functions_feeds(), target=target)
    assert not rewritten.functions
    assert {n.domain for n in all_nodes(rewritten)} <= {"", "ai.onnx"}
    assert [o.domain for o in rewritten.opset_import] == [""]  # tinygrad: no 'local'


def test_functions_stay_functions_for_onnxruntime() -> None:
    model, _ = functions_model()
    rewritten = check_against_native(model, _functions_feeds(), target="onnxruntime")
    # F specialised per call signature, G and K kept; Unused lowered type-generically
    assert {f.name for f in rewritten.functions} >= {"G", "K", "Unused"}


def _mismatched_function_model() -> onnx.ModelProto:
    """y = CumProd(R(x), 1), R(x) = Relu(x) in a function importing ai.onnx 18 (the model
    26): valid, but onnx_ir's inliner takes only one version per domain."""
    relu = helper.make_function(
        LOCAL,
        "R",
        ["x"],
        ["y"],
        [helper.make_node("Relu", ["x"], ["y"])],
        [helper.make_opsetid("", 18)],
    )
    return local_model(
        [
            helper.make_node("R", ["x"], ["r"], domain=LOCAL),
            helper.make_node("CumProd", ["r", "axis"], ["y"], name="scan"),
        ],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        [relu],
        [helper.make_tensor("axis", TensorProto.INT64, [], [1])],
    )


def test_a_function_the_inliner_cannot_take_is_refused_for_such_a_runtime() -> None:
    model = _mismatched_function_model()
    onnx.checker.check_model(model, full_check=True)
    with pytest.raises(
        rewriter.TargetError,
        match=r"^the openvino target loads no model-local function.*\(local\.R\): Opset "
        r"mismatch",
    ):
        rewriter.decompose_cumprod(model, target="openvino")
    x = np.array([[1, -2, 3], [4, 5, -6]], dtype=np.float32)
    check_against_native(model, {"x": x}, target="onnxruntime")  # kept there


def _call_model(
    function: onnx.FunctionProto, call: onnx.NodeProto, outputs: list[str]
) -> onnx.ModelProto:
    """The main graph is ``call`` on a: float [3, 4] (the outputs ``outputs``, float [3, 4])."""
    return local_model(
        [call],
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [3, 4])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [3, 4]) for n in outputs],
        [function],
    )


def _three_outputs() -> onnx.FunctionProto:
    """F(x) = (CumProd(x, 1), Identity(x), Neg(x))."""
    return helper.make_function(
        LOCAL,
        "F",
        ["x"],
        ["y", "z", "w"],
        [
            helper.make_node("Constant", [], ["ax"], value_int=1),
            helper.make_node("CumProd", ["x", "ax"], ["y"]),
            helper.make_node("Identity", ["x"], ["z"]),
            helper.make_node("Neg", ["x"], ["w"]),
        ],
        OPSET,
    )


A34 = {"a": (np.arange(1, 13, dtype=np.float32).reshape(3, 4) / 4)}


@pytest.mark.parametrize("target", ["onnxruntime", "tract"])
@pytest.mark.parametrize(
    "outputs", [["y1", "", "w1"], ["y1", "z1", ""]], ids=["middle", "trailing"]
)
def test_a_call_leaving_an_output_unnamed(target: str, outputs: list[str]) -> None:
    """Found by a review from outside: a call leaving an output unnamed (valid ONNX). The
    inliner gave the inlined Identity the empty name (no output: refused as a checker
    failure of the rewrite); a trailing one was dropped by onnx_ir's writer and the checker
    then refused the call, on every target, blaming the input. Unnamed call outputs are
    named first (rewriter.inline.NameCallOutputsPass)."""
    call = helper.make_node("F", ["a"], outputs, domain=LOCAL)
    model = _call_model(_three_outputs(), call, [n for n in outputs if n])
    check_against_native(model, A34, target=target)


def test_an_unnamed_call_output_takes_no_name_of_an_unread_graph_input() -> None:
    """A graph input no node reads named as the pass would name an unnamed call output
    (``F_unused_1``): the new name must differ (found by mutation: the clash made the
    rewrite fail the checker, reported as the input model's fault)."""
    call = helper.make_node("F", ["a"], ["y1", "", "w1"], domain=LOCAL)
    model = _call_model(_three_outputs(), call, ["y1", "w1"])
    model.graph.input.append(helper.make_tensor_value_info("F_unused_1", TensorProto.FLOAT, [1]))
    check_against_native(model, A34 | {"F_unused_1": np.ones(1, np.float32)})


def test_inlined_names_kept_apart_from_names_in_subgraphs() -> None:
    """Found by a review from outside: F's value t inlined into the main graph, while an If
    branch defines its own t (valid: the checker and onnxruntime take it). onnx_ir's inliner
    keeps inlined names apart from those it has seen, not from a subgraph's: the rewrite
    failed the checker (not SSA). onnx_ir's NameFixPass runs after the inliner."""
    f = helper.make_function(
        LOCAL,
        "F",
        ["x"],
        ["y"],
        [
            helper.make_node("Constant", [], ["ax"], value_int=1),
            helper.make_node("Neg", ["x"], ["t"]),
            helper.make_node("CumProd", ["t", "ax"], ["y"]),
        ],
        OPSET,
    )
    branch = helper.make_graph(
        [helper.make_node("Abs", ["a"], ["t"])],
        "then",
        [],
        [helper.make_tensor_value_info("t", TensorProto.FLOAT, [3, 4])],
    )
    other = helper.make_graph(
        [helper.make_node("Neg", ["a"], ["e"])],
        "else",
        [],
        [helper.make_tensor_value_info("e", TensorProto.FLOAT, [3, 4])],
    )
    model = local_model(
        [
            helper.make_node("F", ["a"], ["y1"], domain=LOCAL),
            helper.make_node("If", ["c"], ["y2"], then_branch=branch, else_branch=other),
        ],
        [
            helper.make_tensor_value_info("a", TensorProto.FLOAT, [3, 4]),
            helper.make_tensor_value_info("c", TensorProto.BOOL, []),
        ],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [3, 4]) for n in ("y1", "y2")],
        [f],
    )
    for c in (True, False):
        check_against_native(model, {**A34, "c": np.array(c)}, target="tract")


def test_a_function_nothing_calls_does_not_stop_the_inlining() -> None:
    """Found by a review from outside: an unused function calling one the inliner cannot
    take (another ai.onnx version) was refused; unused functions are dropped first."""
    g = helper.make_function(
        LOCAL,
        "G",
        ["x"],
        ["y"],
        [helper.make_node("Relu", ["x"], ["y"])],
        [helper.make_opsetid("", 18)],
    )
    unused = helper.make_function(
        LOCAL,
        "U",
        ["x"],
        ["y"],
        [helper.make_node("G", ["x"], ["y"], domain=LOCAL)],
        [*OPSET, helper.make_opsetid(LOCAL, 1)],
    )
    model = local_model(
        [
            helper.make_node("Constant", [], ["axis"], value_int=1),
            helper.make_node("CumProd", ["a", "axis"], ["y"]),
        ],
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4])],
        [g, unused],
    )
    rewritten = check_against_native(model, A34, target="tract")
    assert not rewritten.functions


def _cycle() -> onnx.ModelProto:
    """A calls B, B calls A (invalid; the checker does not see it)."""
    a, b = (
        helper.make_function(
            LOCAL,
            name,
            ["x"],
            ["y"],
            [helper.make_node(callee, ["x"], ["y"], domain=LOCAL)],
            [*OPSET, helper.make_opsetid(LOCAL, 1)],
        )
        for name, callee in (("A", "B"), ("B", "A"))
    )
    return local_model(
        [
            helper.make_node("A", ["a"], ["b"], domain=LOCAL),
            helper.make_node("Constant", [], ["axis"], value_int=1),
            helper.make_node("CumProd", ["b", "axis"], ["y"]),
        ],
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4])],
        [a, b],
    )


def _passthrough() -> onnx.ModelProto:
    """F(x) = (CumProd(x, 1), x): a function returning its input (valid ONNX; onnxruntime
    does not load it); the inliner renamed the graph's input a to the call's output z1."""
    f = helper.make_function(
        LOCAL,
        "F",
        ["x"],
        ["y", "x"],
        [
            helper.make_node("Constant", [], ["ax"], value_int=1),
            helper.make_node("CumProd", ["x", "ax"], ["y"]),
        ],
        OPSET,
    )
    call = helper.make_node("F", ["a"], ["y1", "z1"], domain=LOCAL)
    return _call_model(f, call, ["y1", "z1"])


@pytest.mark.parametrize(
    ("case", "problem"),
    [
        (_cycle, r"Cyclic dependency detected between functions: local::A -> local::B"),
        (_passthrough, r"inlining renames the graph's inputs or outputs \(\['a'\]"),
    ],
    ids=["cycle", "passthrough"],
)
def test_what_the_inliner_cannot_take_is_a_target_error(case, problem: str) -> None:  # type: ignore[no-untyped-def]
    """Found by a review from outside: a cycle raised onnx_ir's PreconditionError (not a
    ValueError), a function returning its input renamed the graph's input silently."""
    with pytest.raises(
        rewriter.TargetError, match=r"^the tract target loads no model-local " + ".*" + problem
    ):
        rewriter.decompose_cumprod(case(), target="tract")


def test_an_inlined_function_value_info_is_not_kept() -> None:
    """Found by a review from outside: F declares its value t [2, 6] (one call signature);
    the call takes [N, M], fed [6, 2]. Inlined, the declaration became the graph's, and
    onnxruntime folded the lowering's Shape(t) from it: (2, 6) and wrong values."""
    f = helper.make_function(
        LOCAL,
        "F",
        ["x"],
        ["y"],
        [
            helper.make_node("Constant", [], ["ax"], value_int=1),
            helper.make_node("Neg", ["x"], ["t"]),
            helper.make_node("CumProd", ["t", "ax"], ["u"]),
            helper.make_node("Neg", ["u"], ["y"]),
        ],
        OPSET,
    )
    f.value_info.extend([helper.make_tensor_value_info("t", TensorProto.FLOAT, [2, 6])])
    model = local_model(
        [helper.make_node("F", ["a"], ["y"], domain=LOCAL)],
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["N", "M"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", "M"])],
        [f],
    )
    a = np.array([[1, 2], [-3, 4], [0.5, 2], [0.5, 2], [2, -1], [3, 0.25]], np.float32)
    for target in INLINING_TARGETS:
        check_against_native(model, {"a": a}, target=target, max_length=16)
