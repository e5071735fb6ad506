"""``rewriter.declarations``: declared shapes the rewrite must not build on (stale or
unconfirmed value_info, Loop body inputs declared for one iteration, ranks that change) are
dropped on the way to a CumProd and kept off it; references: onnxruntime's native CumProd,
numpy, onnx.reference."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import rewriter
from tests.helpers import (
    LOCAL,
    OPSET,
    VIA,
    check_against_native,
    local_model,
    loop_model,
    odd_ints,
    op_types,
    parse_local,
    rewrite_via,
    run_ort,
)


def _neg_then_cumprod(dims: str, declared: str) -> onnx.ModelProto:
    """y = CumProd(h, 1), h = -x, x and y int64[dims], h declared int64[declared]."""
    return parse_local(f"""main (int64[{dims}] x) => (int64[{dims}] y) <int64[{declared}] h> {{
        h = Neg(x)
        axis = Constant<value_int = 1>()
        y = CumProd(h, axis)
    }}""")


@pytest.mark.parametrize("via", VIA)
def test_stale_value_info_is_not_trusted(via: str) -> None:
    model = _neg_then_cumprod("2, 5", "10, 1, 1")
    x = np.arange(1, 11, dtype=np.int64).reshape(2, 5)
    # The checker takes the stale value_info (full_check would refuse it): check without.
    onnx.checker.check_model(model)
    rewritten = rewrite_via(model, via)
    onnx.checker.check_model(rewritten, full_check=True)
    assert "CumProd" not in op_types(rewritten)
    (y,) = run_ort(rewritten, {"x": x})
    np.testing.assert_array_equal(y, np.cumprod(-x, axis=1))


@pytest.mark.parametrize("target", ["onnxruntime", "tract", "portable"])
@pytest.mark.parametrize("via", VIA)
def test_value_info_inference_cannot_confirm_is_not_kept(via: str, target: str) -> None:
    """Found by a review from outside: h declares [2, 6] (written for one batch size), x is
    [N, M] and the model is fed [6, 2]. Inference cannot confirm the declaration, which the
    rewrite kept: onnxruntime folded the lowering's Shape(h) from it ((2, 6), wrong values,
    on every target). A computed value's unconfirmed static dims are dropped now."""
    model = _neg_then_cumprod("N, M", "2, 6")
    x = np.arange(1, 13, dtype=np.int64).reshape(6, 2)
    rewritten = check_against_native(model, {"x": x}, via, target=target, max_length=16)
    (y,) = run_ort(rewritten, {"x": x})
    np.testing.assert_array_equal(y, np.cumprod(-x, axis=1))  # not only native's word for it


@pytest.mark.parametrize("declared", ["x", "x as an output", "upstream"])
def test_a_traced_shape_of_a_reshape_is_not_folded(declared: str) -> None:
    """Found by a review from outside: x = Reshape(a, s) with s a graph input, declared (3, 2)
    (traced once), fed s = (2, 3): onnxruntime folded the lowering's Shape(x) from the
    declaration (3 rows of 2, wrong values). The same with x also a graph output declared
    (3, 2) (kept: its rank, for the checker) and with the declaration upstream of x."""
    head = "t" if declared == "upstream" else "x"
    nodes = [helper.make_node("Reshape", ["a", "s"], [head])]
    if declared == "upstream":
        nodes.append(helper.make_node("Relu", ["t"], ["x"]))
    nodes += [
        helper.make_node("Constant", [], ["axis"], value_int=1),
        helper.make_node("CumProd", ["x", "axis"], ["y"]),
    ]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["p", "q"])]
    if declared == "x as an output":
        outputs.append(helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 2]))
    model = local_model(
        nodes,
        [
            helper.make_tensor_value_info("a", TensorProto.FLOAT, [6]),
            helper.make_tensor_value_info("s", TensorProto.INT64, [2]),
        ],
        outputs,
    )
    if declared != "x as an output":
        model.graph.value_info.append(
            helper.make_tensor_value_info(head, TensorProto.FLOAT, [3, 2])
        )
    a = np.arange(1, 7, dtype=np.float32)
    feeds = {"a": a, "s": np.array([2, 3], dtype=np.int64)}
    rewritten = check_against_native(model, feeds)
    np.testing.assert_array_equal(run_ort(rewritten, feeds)[0], np.cumprod(a.reshape(2, 3), 1))


@pytest.mark.parametrize("via", VIA)
def test_declared_shapes_off_the_way_to_a_cumprod_are_kept(via: str) -> None:
    """Found by a review from outside: the declared shapes inference cannot confirm were
    blanked in the whole model, also of values no CumProd is computed from (a contrib op's
    output, whose shape no later tool can infer again). Only those on the way to a CumProd
    are (onnxruntime may fold a lowering's Shape from them); the others stay as declared,
    in the main graph and in a function body."""
    body = helper.make_function(
        LOCAL,
        "Side",
        ["a"],
        ["b"],
        [helper.make_node("Relu", ["a"], ["inner"]), helper.make_node("Neg", ["inner"], ["b"])],
        OPSET,
    )
    body.value_info.append(helper.make_tensor_value_info("inner", TensorProto.FLOAT, [4, 5]))
    model = local_model(
        [
            helper.make_node("Gelu", ["q"], ["g1"], domain="com.microsoft"),
            helper.make_node("Relu", ["g1"], ["z"]),
            helper.make_node("Relu", ["x"], ["r"]),
            helper.make_node("Neg", ["r"], ["w"]),
            helper.make_node("Side", ["x"], ["s"], domain=LOCAL),
            helper.make_node("Neg", ["x"], ["h"]),
            helper.make_node("CumProd", ["h", "axis"], ["y"]),
        ],
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 5]),
            helper.make_tensor_value_info("q", TensorProto.FLOAT, [4, 5]),
        ],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["N", 5]) for n in ("y", "w", "s")]
        + [helper.make_tensor_value_info("z", TensorProto.FLOAT, [4, 5])],
        functions=[body],
        initializers=[helper.make_tensor("axis", TensorProto.INT64, [], [1])],
    )
    model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    for name in ("g1", "r", "h"):  # r and h written for a batch of 4
        model.graph.value_info.append(
            helper.make_tensor_value_info(name, TensorProto.FLOAT, [4, 5])
        )
    rewritten = rewrite_via(model, via)
    declared = {
        v.name: [
            d.dim_value if d.HasField("dim_value") else None for d in v.type.tensor_type.shape.dim
        ]
        for v in rewritten.graph.value_info
    }
    assert declared["g1"] == [4, 5] and declared["r"] == [4, 5], declared
    assert declared.get("h", [None, 5]) == [None, 5], declared  # on the way: not built on
    (function,) = rewritten.functions
    (inner,) = function.value_info
    assert [d.dim_value for d in inner.type.tensor_type.shape.dim] == [4, 5]
    x = np.arange(1, 16, dtype=np.float32).reshape(3, 5) / 4
    (y, *_) = run_ort(rewritten, {"x": x, "q": np.ones((4, 5), np.float32)})
    np.testing.assert_array_equal(y, np.cumprod(-x, axis=1))


def _declared_for_a_batch_of_4(kind: str) -> onnx.ModelProto:
    """x [N, 5]; c = Neg(x) declares [4, 5] (written for a batch of 4), and reaches a CumProd
    along axis 0 through ``kind``: a function's input, a Scan's state, an If branch's
    outer-scope read."""
    c_nodes = [helper.make_node("Neg", ["x"], ["c"])]
    axis0 = helper.make_tensor("axis", TensorProto.INT64, [], [0])
    functions = []
    if kind == "function input":
        functions = [
            helper.make_function(
                LOCAL,
                "Scanned",
                ["a"],
                ["b"],
                [
                    helper.make_node("Constant", [], ["ax"], value_int=0),
                    helper.make_node("CumProd", ["a", "ax"], ["b"]),
                ],
                OPSET,
            )
        ]
        nodes = [*c_nodes, helper.make_node("Scanned", ["c"], ["y"], domain=LOCAL)]
    elif kind == "scan state":
        body = helper.make_graph(
            [
                helper.make_node("Constant", [], ["ax"], value_int=0),
                helper.make_node("CumProd", ["s_in", "ax"], ["s_out"]),
                helper.make_node("Identity", ["e"], ["e_out"]),
            ],
            "body",
            [
                helper.make_tensor_value_info("s_in", TensorProto.FLOAT, None),
                helper.make_tensor_value_info("e", TensorProto.FLOAT, [1]),
            ],
            [
                helper.make_tensor_value_info("s_out", TensorProto.FLOAT, None),
                helper.make_tensor_value_info("e_out", TensorProto.FLOAT, [1]),
            ],
        )
        nodes = [
            *c_nodes,
            helper.make_node("Scan", ["c", "steps"], ["y", "unused"], body=body, num_scan_inputs=1),
        ]
    else:  # an If branch reading c from the outer scope
        branch = helper.make_graph(
            [helper.make_node("Relu", ["c"], ["t"])],
            "branch",
            [],
            [helper.make_tensor_value_info("t", TensorProto.FLOAT, None)],
        )
        nodes = [
            *c_nodes,
            helper.make_node("If", ["flag"], ["i"], then_branch=branch, else_branch=branch),
            helper.make_node("CumProd", ["i", "axis"], ["y"]),
        ]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 5])]
    if kind == "scan state":
        inputs.append(helper.make_tensor_value_info("steps", TensorProto.FLOAT, [2, 1]))
    if kind == "if branch":
        inputs.append(helper.make_tensor_value_info("flag", TensorProto.BOOL, []))
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 5])]
    if kind == "scan state":
        outputs.append(helper.make_tensor_value_info("unused", TensorProto.FLOAT, [2, 1]))
    model = local_model(nodes, inputs, outputs, functions, [axis0] if kind == "if branch" else [])
    model.graph.value_info.append(helper.make_tensor_value_info("c", TensorProto.FLOAT, [4, 5]))
    return model


@pytest.mark.parametrize(
    ("kind", "target"),
    [
        ("function input", "onnxruntime"),
        ("function input", "tract"),  # the function inlined
        ("scan state", "onnxruntime"),  # (tract refuses a CumProd in a Scan body)
        ("if branch", "onnxruntime"),
        ("if branch", "tract"),
    ],
)
def test_a_declared_shape_reaching_a_cumprod_through_a_call_or_subgraph(
    kind: str, target: str
) -> None:
    """Found by a review of cumprod_cone: each way a declared shape reaches a CumProd other
    than node inputs (a function input back to its call, a subgraph input back to its node,
    a subgraph's outer-scope read) must count as on the way, or its unconfirmed [4, 5] is
    kept and onnxruntime folds the lowering's Shape from it (fed a batch of 3). Native
    onnxruntime refuses some of these originals for the declaration itself: numpy is the
    reference."""
    model = _declared_for_a_batch_of_4(kind)
    x = np.arange(1, 16, dtype=np.float32).reshape(3, 5) / 4
    feeds: dict[str, np.ndarray] = {"x": x}
    if kind == "scan state":
        feeds["steps"] = np.zeros((2, 1), np.float32)
    if kind == "if branch":
        feeds["flag"] = np.array(True)
    rewritten = rewrite_via(model, target=target)
    assert "CumProd" not in op_types(rewritten)
    onnx.checker.check_model(rewritten, full_check=True)
    want = np.cumprod(-x, axis=0)
    if kind == "scan state":
        want = np.cumprod(want, axis=0)  # two steps
    if kind == "if branch":
        want = np.cumprod(np.maximum(-x, 0), axis=0)
    np.testing.assert_allclose(run_ort(rewritten, feeds)[0], want, rtol=1e-6)


def test_a_stale_shape_off_the_way_to_a_cumprod_is_still_dropped() -> None:
    """Found by the same review: a declaration contradicting inference ([3, 5] for a [2, 5]
    value), after the CumProd, must still be dropped (onnx's full check refuses the output
    otherwise), not only on the way to a CumProd."""
    model = local_model(
        [
            helper.make_node("Relu", ["x"], ["r"]),
            helper.make_node("CumProd", ["r", "axis"], ["y"]),
            helper.make_node("Neg", ["y"], ["z"]),
        ],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 5])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 5])],
        initializers=[helper.make_tensor("axis", TensorProto.INT64, [], [1])],
    )
    model.graph.value_info.append(helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 5]))
    x = np.arange(1, 11, dtype=np.float32).reshape(2, 5) / 4
    rewritten = rewrite_via(model)
    onnx.checker.check_model(rewritten, full_check=True)
    np.testing.assert_allclose(run_ort(rewritten, {"x": x})[0], -np.cumprod(x, 1), rtol=1e-6)


def test_an_unconfirmed_graph_output_read_by_another_node_keeps_its_rank() -> None:
    """Found by the same review, in the fix above before it kept ranks: a graph output r
    declared (2, 3) that inference cannot confirm and another node reads lost its shape, and
    the checker refused the rewrite ("Field 'shape' of 'type' is required")."""
    model = local_model(
        [
            helper.make_node("Reshape", ["a", "s"], ["r"]),
            helper.make_node("Relu", ["r"], ["z"]),
            helper.make_node("CumProd", ["b", "axis"], ["y"]),
        ],
        [
            helper.make_tensor_value_info("a", TensorProto.FLOAT, [6]),
            helper.make_tensor_value_info("s", TensorProto.INT64, [2]),
            helper.make_tensor_value_info("b", TensorProto.FLOAT, [2, 3]),
        ],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 3]) for n in ("r", "z", "y")],
        initializers=[helper.make_tensor("axis", TensorProto.INT64, [], [1])],
    )
    feeds = {
        "a": np.arange(1, 7, dtype=np.float32),
        "s": np.array([2, 3], dtype=np.int64),
        "b": np.arange(1, 7, dtype=np.float32).reshape(2, 3),
    }
    rewritten = check_against_native(model, feeds)
    r = next(o for o in rewritten.graph.output if o.name == "r")
    assert len(r.type.tensor_type.shape.dim) == 2


@pytest.mark.parametrize("via", VIA)
@pytest.mark.parametrize("declared", [[3, 4], [6, 2], ["A", 4]])
def test_a_loop_body_input_declared_with_stale_dims(declared: list[int | str], via: str) -> None:
    """A Loop body's carried input declared with dims it does not have (no runtime checks
    them, so onnxruntime runs the original): the lowering must not take them, and the
    declaration is dropped, since onnxruntime folds Shape of the input from it."""
    nodes = [
        helper.make_node("Constant", [], ["ax"], value_int=1),
        helper.make_node("CumProd", ["acc", "ax"], ["out"]),
    ]
    model = loop_model(nodes, TensorProto.INT64, declared, [4, 3], [4, 3])
    check_against_native(model, {"x": odd_ints((4, 3), 4), "n": np.array(2, np.int64)}, via)


def test_a_loop_body_input_declared_with_stale_dims_inside_a_function() -> None:
    """The same Loop inside a model-local function: the body input's stale declaration is
    dropped there too (found by mutation: kept, onnxruntime still gave the right values, but
    the lowering's Shape of that input sits next to a declaration that contradicts it)."""
    nodes = [
        helper.make_node("Constant", [], ["ax"], value_int=1),
        helper.make_node("CumProd", ["acc", "ax"], ["out"]),
    ]
    loop = loop_model(nodes, TensorProto.INT64, [3, 4], [4, 3], [4, 3]).graph.node[0]
    f = helper.make_function(LOCAL, "F", ["n", "x"], ["y"], [loop], OPSET)
    model = local_model(
        [helper.make_node("F", ["n", "x"], ["y"], domain=LOCAL)],
        [
            helper.make_tensor_value_info("n", TensorProto.INT64, []),
            helper.make_tensor_value_info("x", TensorProto.INT64, [4, 3]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.INT64, [4, 3])],
        [f],
    )
    rewritten = check_against_native(model, {"x": odd_ints((4, 3), 4), "n": np.array(2, np.int64)})
    (body,) = [a.g for n in rewritten.functions[0].node for a in n.attribute if a.name == "body"]
    acc = next(v for v in body.input if v.name == "acc")
    assert not any(d.HasField("dim_value") for d in acc.type.tensor_type.shape.dim)


@pytest.mark.parametrize("via", VIA)
def test_a_stale_loop_body_input_read_inside_an_if_of_the_body(via: str) -> None:
    """The body's carried v is declared [2, 3] but doubles along axis 0 every iteration, and
    the CumProd reading it sits in an If inside the body: the declaration of the body input
    around the If is dropped too (found by mutation: with only the If's own inputs checked,
    onnxruntime folded Shape(v) from [2, 3] and failed in the lowering's Reshape). The
    reference is onnx.reference: onnxruntime's own CumProd fails on the original."""
    f32 = TensorProto.FLOAT
    then = helper.make_graph(
        [helper.make_node("CumProd", ["v", "ax"], ["c"])],
        "then",
        [],
        [helper.make_tensor_value_info("c", f32, [None, 3])],
    )
    other = helper.make_graph(
        [helper.make_node("Identity", ["v"], ["e"])],
        "else",
        [],
        [helper.make_tensor_value_info("e", f32, [None, 3])],
    )
    body = helper.make_graph(
        [
            helper.make_node("If", ["cin"], ["w"], then_branch=then, else_branch=other),
            helper.make_node("Concat", ["w", "w"], ["vn"], axis=0),
            helper.make_node("Identity", ["cin"], ["cout"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cin", TensorProto.BOOL, []),
            helper.make_tensor_value_info("v", f32, [2, 3]),
        ],
        [
            helper.make_tensor_value_info("cout", TensorProto.BOOL, []),
            helper.make_tensor_value_info("vn", f32, [None, 3]),
        ],
    )
    model = local_model(
        [helper.make_node("Loop", ["n", "cond", "x"], ["y"], body=body)],
        [
            helper.make_tensor_value_info("x", f32, [2, 3]),
            helper.make_tensor_value_info("n", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
        ],
        [helper.make_tensor_value_info("y", f32, [None, 3])],
        initializers=[helper.make_tensor("ax", TensorProto.INT64, [], [0])],
    )
    x = np.array([[1, -2, 0.5], [2, 0.25, -1]], np.float32)  # exact products in any order
    rewritten = rewrite_via(model, via)
    onnx.checker.check_model(rewritten, full_check=True)
    for trips in (1, 3):
        feeds = {"x": x, "n": np.array(trips, np.int64), "cond": np.array(True)}
        expected = ReferenceEvaluator(model).run(None, feeds)[0]
        np.testing.assert_array_equal(run_ort(rewritten, feeds)[0], expected)


@pytest.mark.parametrize("via", VIA)
def test_a_loop_body_value_that_changes_shape_between_iterations(via: str) -> None:
    """The body transposes its carried value, declared [2, 3] (right for the first iteration
    only): the rule path once baked the declaration in (wrong values from the second)."""
    nodes = [
        helper.make_node("Constant", [], ["ax"], value_int=1),
        helper.make_node("CumProd", ["acc", "ax"], ["cp"]),
        helper.make_node("Transpose", ["cp"], ["out"], perm=[1, 0]),
    ]
    model = loop_model(nodes, TensorProto.INT64, [2, 3], [2, 3], [None, None], declared_out=[3, 2])
    for trips in (1, 2, 3):
        check_against_native(model, {"x": odd_ints((2, 3), 5), "n": np.array(trips, np.int64)}, via)


@pytest.mark.parametrize("declared", [["k"], [None]])
@pytest.mark.parametrize("target", ["onnxruntime", "spec"])
def test_a_loop_carried_value_that_changes_rank(declared: list, target: str) -> None:
    """A Loop body's carried value declared rank 1 that is rank 2 from the second iteration
    on (a valid model: the checker passes it, onnxruntime runs it). onnxruntime folded the
    lowering's Shape(Shape(v)) from the declared rank and scanned axis 0 instead of -1:
    wrong values, no error (found by a review from outside). The declared rank is now
    dropped like unconfirmed static dims; the Loop's count and condition keep theirs
    (onnxruntime's Loop refuses them without)."""

    def const(name: str, value: np.ndarray) -> onnx.NodeProto:
        return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(value))

    vi = helper.make_tensor_value_info
    body = helper.make_graph(
        [
            const("a", np.array(-1, np.int64)),
            helper.make_node("CumProd", ["v", "a"], ["cp"], name="scan"),
            const("sh", np.array([3, 3], np.int64)),
            helper.make_node("Expand", ["cp", "sh"], ["e"]),
            const("rows", np.array([[1], [2], [3]], np.int64)),
            helper.make_node("Add", ["e", "rows"], ["v2"]),
            helper.make_node("Identity", ["cond"], ["more"]),
        ],
        "body",
        [
            vi("i", TensorProto.INT64, []),
            vi("cond", TensorProto.BOOL, []),
            vi("v", TensorProto.INT64, declared),
        ],
        [vi("more", TensorProto.BOOL, []), vi("v2", TensorProto.INT64, [3, 3])],
    )
    graph = helper.make_graph(
        [helper.make_node("Loop", ["n", "", "v0"], ["vf"], body=body)],
        "g",
        [vi("n", TensorProto.INT64, []), vi("v0", TensorProto.INT64, [3])],
        [vi("vf", TensorProto.INT64, ["p", "q"])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26)], ir_version=11)
    onnx.checker.check_model(model, full_check=True)
    rewritten = rewriter.decompose_cumprod(model, target=target)
    for n in (1, 2, 3):
        feeds = {"n": np.array(n, np.int64), "v0": np.array([2, 3, 5], np.int64)}
        v = feeds["v0"]
        for _ in range(n):  # numpy's loop, the reference
            v = np.broadcast_to(np.cumprod(v, axis=-1), (3, 3)) + np.array([[1], [2], [3]])
        (got,) = run_ort(rewritten, feeds)
        np.testing.assert_array_equal(got, v, err_msg=f"n={n}")
