"""The walkers: ``rewriter.graphs`` over onnx_ir models (nodes with their place, graphs,
``is_cumprod``) and ``rewriter.protos`` over protobuf models; one model with a Loop whose body
holds an If, a Scan, and a model-local function, written as text."""

from __future__ import annotations

import onnx
import onnx.parser
import onnx_ir as ir
import pytest
from onnx import TensorProto, helper

import rewriter
from rewriter.graphs import graphs_of, is_cumprod, walk_model
from rewriter.protos import model_graphs, node_subgraphs, proto_nodes
from tests.helpers import (
    LOCAL,
    local_model,
)

MODEL = """
<ir_version: 10, opset_import: ["" : 26, "pkg" : 1]>
main (float[2, 3] x, int64 trips, bool c) => (float[2, 3] y, float[2, 3] s, float[2, 3] f) {
    y = Loop (trips, "", x) <body = loop_body (int64 i, bool cond, float[2, 3] acc)
            => (bool cond_out, float[2, 3] out) {
        cond_out = Identity (cond)
        out = If (c) <
            then_branch = then_g () => (float[2, 3] t) {
                ax = Constant <value_int = 1> ()
                t = CumProd (acc, ax)
            },
            else_branch = else_g () => (float[2, 3] e) { e = Identity (acc) }
        >
    }>
    s = Scan <num_scan_inputs = 1, body = scan_body (float[3] carry, float[3] row)
            => (float[3] carry_out, float[3] row_out) {
        carry_out = Identity (carry)
        row_out = Neg (row)
    }> (x, x)
    f = pkg.F (x)
}
<domain: "pkg", opset_import: ["" : 26]>
F (a) => (b) {
    zero = Constant <value_int = 0> ()
    b = CumProd (a, zero)
}
"""


def _proto() -> onnx.ModelProto:
    return onnx.parser.parse_model(MODEL)


def test_walk_model_gives_each_node_its_place() -> None:
    places = [
        (w.node.op_type, w.location, w.depth, w.in_scan, w.in_if, w.scope)
        for w in walk_model(ir.serde.deserialize_model(_proto()))
    ]
    assert ("Loop", "graph 'main'", 0, False, False, "") in places
    cumprods = [p[1:5] for p in places if p[0] == "CumProd"]
    assert cumprods == [
        ("graph 'main' > Loop '' body > If '' then_branch", 2, False, True),
        ("function 'pkg.F'", 0, False, False),
    ]
    assert [p[5] != "" for p in places if p[0] == "CumProd"] == [False, True]  # its scope
    assert [p[1:5] for p in places if p[0] == "Neg"] == [
        ("graph 'main' > Scan '' body", 1, True, False)
    ]


def test_walk_model_visits_a_node_before_its_subgraphs() -> None:
    order = [w.node.op_type for w in walk_model(ir.serde.deserialize_model(_proto()))]
    assert order.index("Loop") < order.index("If") < order.index("CumProd")
    assert order.index("Scan") < order.index("Neg")


def test_graphs_of_and_model_graphs_find_every_graph() -> None:
    proto = _proto()
    names = sorted(g.name for g in graphs_of(ir.serde.deserialize_model(proto)))
    # the function's body is a graph too (onnx_ir names it after the function)
    assert {"main", "loop_body", "then_g", "else_g", "scan_body"} <= set(names)
    assert len(names) == 6
    assert sorted(g.name for g in model_graphs(proto)) == sorted(
        ["main", "loop_body", "then_g", "else_g", "scan_body"]
    )


def test_proto_walkers_and_is_cumprod() -> None:
    proto = _proto()
    nodes = list(proto_nodes(proto.graph.node))
    assert sum(map(is_cumprod, nodes)) == 1  # the function's is not in the main graph
    assert sum(map(is_cumprod, proto_nodes(proto.functions[0].node))) == 1
    (loop,) = [n for n in proto.graph.node if n.op_type == "Loop"]
    assert [g.name for g in node_subgraphs(loop)] == ["loop_body"]
    (if_node,) = [n for n in nodes if n.op_type == "If"]
    assert [g.name for g in node_subgraphs(if_node)] == ["then_g", "else_g"]
    other = onnx.helper.make_node("CumProd", ["x", "a"], ["y"], domain="com.other")
    assert not is_cumprod(other) and not node_subgraphs(other)


def test_subgraph_initializer_named_like_a_generated_value() -> None:
    then = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["t"])],
        "then",
        [],
        [helper.make_tensor_value_info("t", TensorProto.FLOAT, [3])],
        [helper.make_tensor("cumprod_Constant_0", TensorProto.FLOAT, [1], [1.0])],
    )
    model = local_model(
        [
            helper.make_node("Constant", [], ["axis"], value_int=0),
            helper.make_node("CumProd", ["x", "axis"], ["c"], name="cumprod"),
            helper.make_node("If", ["b"], ["y"], then_branch=then, else_branch=then),
            helper.make_node("Add", ["y", "c"], ["z"]),
        ],
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [3]),
            helper.make_tensor_value_info("b", TensorProto.BOOL, []),
        ],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [3])],
    )
    rewritten = rewriter.decompose_cumprod(model, strategy="chain")
    assert isinstance(rewritten, onnx.ModelProto)
    onnx.checker.check_model(rewritten, full_check=True)


def _called_twice(second_rank: int) -> onnx.ModelProto:
    """y = F(F(x)[..]) with F(a) = CumProd(a, 1) (node 'cp'): the second call on a tensor of
    rank ``second_rank`` (rank 1: the axis is out of range for that call only)."""
    f = helper.make_function(
        LOCAL,
        "F",
        ["a"],
        ["b"],
        [
            helper.make_node("Constant", [], ["ax"], value=helper.make_tensor("v", 7, [], [1])),
            helper.make_node("CumProd", ["a", "ax"], ["b"], name="cp"),
        ],
        [helper.make_opsetid("", 26)],
    )
    shape = helper.make_tensor("shape", TensorProto.INT64, [second_rank], [6, 1][:second_rank])
    return local_model(
        [
            helper.make_node("F", ["x"], ["f1"], domain=LOCAL, name="first"),
            helper.make_node("Reshape", ["f1", "shape"], ["r"]),
            helper.make_node("F", ["r"], ["y"], domain=LOCAL, name="second"),
        ],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [6, 1][:second_rank])],
        [f],
        [shape],
    )


@pytest.mark.parametrize("target", ["tract", "openvino"])
def test_an_inlined_node_is_named_as_in_the_input_model(target: str) -> None:
    """The inliner names a function's node anew in its second copy ('cp_2'), a name the
    input model lacks, and the message placed it in the main graph (session-32 note): errors,
    warnings and plans name the function's node and say it was inlined."""
    with pytest.raises(
        rewriter.InvalidCumProdError,
        match=r"^CumProd node 'cp' in function 'local\.F' \(inlined into graph 'main'\): axis 1 "
        r"is out of range \[-1, 0\] for rank 1$",
    ):
        rewriter.decompose_cumprod(_called_twice(1), target=target)
    model = ir.from_proto(_called_twice(2))
    rewrite = rewriter.DecomposeCumProdPass(target=target)
    rewrite(model)
    assert [(p.site.name, p.site.location) for p in rewrite.plans] == [
        ("cp", "function 'local.F' (inlined into graph 'main')")
    ] * 2
