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
    all_nodes,
    check_against_native,
    functions_model,
    parse_local,
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


# R(x) = Relu(x), importing ai.onnx 18: onnx_ir's inliner takes one version per domain.
RELU_18 = """<domain: "local", opset_import: ["" : 18]>
R (x) => (y) { y = Relu(x) }"""


def _mismatched_function_model() -> onnx.ModelProto:
    """y = CumProd(R(x), 1), R(x) = Relu(x) in a function importing ai.onnx 18 (the model
    26): valid, but onnx_ir's inliner takes only one version per domain."""
    return parse_local(
        """main (float[2, 3] x) => (float[2, 3] y) <int64 axis = {1}> {
            r = local.R(x)
            [scan] y = CumProd(r, axis)
        }""",
        RELU_18,
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


def _call_model(outputs: list[str], *functions: str) -> onnx.ModelProto:
    """The main graph calls F on a: float [3, 4], its outputs ``outputs`` ("": unnamed), the
    named ones the graph's outputs (float [3, 4])."""
    named = ", ".join(f"float[3, 4] {n}" for n in outputs if n)
    results = ", ".join(n or '""' for n in outputs)
    return parse_local(
        f"main (float[3, 4] a) => ({named}) {{ {results} = local.F(a) }}", *functions
    )


# F(x) = (CumProd(x, 1), Identity(x), Neg(x)).
THREE_OUTPUTS = """F (x) => (y, z, w) {
    ax = Constant<value_int = 1>()
    y = CumProd(x, ax)
    z = Identity(x)
    w = Neg(x)
}"""


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
    check_against_native(_call_model(outputs, THREE_OUTPUTS), A34, target=target)


def test_an_unnamed_call_output_takes_no_name_of_an_unread_graph_input() -> None:
    """A graph input no node reads named as the pass would name an unnamed call output
    (``F_unused_1``): the new name must differ (found by mutation: the clash made the
    rewrite fail the checker, reported as the input model's fault)."""
    model = _call_model(["y1", "", "w1"], THREE_OUTPUTS)
    model.graph.input.append(helper.make_tensor_value_info("F_unused_1", TensorProto.FLOAT, [1]))
    check_against_native(model, A34 | {"F_unused_1": np.ones(1, np.float32)})


def test_inlined_names_kept_apart_from_names_in_subgraphs() -> None:
    """Found by a review from outside: F's value t inlined into the main graph, while an If
    branch defines its own t (valid: the checker and onnxruntime take it). onnx_ir's inliner
    keeps inlined names apart from those it has seen, not from a subgraph's: the rewrite
    failed the checker (not SSA). onnx_ir's NameFixPass runs after the inliner."""
    model = parse_local(
        """main (float[3, 4] a, bool c) => (float[3, 4] y1, float[3, 4] y2) {
            y1 = local.F(a)
            y2 = If(c) <
                else_branch = else () => (float[3, 4] e) { e = Neg(a) },
                then_branch = then () => (float[3, 4] t) { t = Abs(a) }
            >
        }""",
        """F (x) => (y) {
            ax = Constant<value_int = 1>()
            t = Neg(x)
            y = CumProd(t, ax)
        }""",
    )
    for c in (True, False):
        check_against_native(model, {**A34, "c": np.array(c)}, target="tract")


def test_a_function_nothing_calls_does_not_stop_the_inlining() -> None:
    """Found by a review from outside: an unused function calling one the inliner cannot
    take (another ai.onnx version) was refused; unused functions are dropped first."""
    model = parse_local(
        """main (float[3, 4] a) => (float[3, 4] y) {
            axis = Constant<value_int = 1>()
            y = CumProd(a, axis)
        }""",
        RELU_18.replace("R (x)", "G (x)"),
        "U (x) => (y) { y = local.G(x) }",
    )
    rewritten = check_against_native(model, A34, target="tract")
    assert not rewritten.functions


def _cycle() -> onnx.ModelProto:
    """A calls B, B calls A (invalid; the checker does not see it)."""
    return parse_local(
        """main (float[3, 4] a) => (float[3, 4] y) {
            b = local.A(a)
            axis = Constant<value_int = 1>()
            y = CumProd(b, axis)
        }""",
        "A (x) => (y) { y = local.B(x) }",
        "B (x) => (y) { y = local.A(x) }",
    )


def _passthrough() -> onnx.ModelProto:
    """F(x) = (CumProd(x, 1), x): a function returning its input (valid ONNX; onnxruntime
    does not load it); the inliner renamed the graph's input a to the call's output z1."""
    return _call_model(
        ["y1", "z1"],
        """F (x) => (y, x) {
            ax = Constant<value_int = 1>()
            y = CumProd(x, ax)
        }""",
    )


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
    model = parse_local(
        "main (float[N, M] a) => (float[N, M] y) { y = local.F(a) }",
        """F (x) => (y) <float[2, 6] t> {
            ax = Constant<value_int = 1>()
            t = Neg(x)
            u = CumProd(t, ax)
            y = Neg(u)
        }""",
    )
    a = np.array([[1, 2], [-3, 4], [0.5, 2], [0.5, 2], [2, -1], [3, 0.25]], np.float32)
    for target in INLINING_TARGETS:
        check_against_native(model, {"a": a}, target=target, max_length=16)
