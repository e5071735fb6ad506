"""rewriter/constant_if.py: an If with a constant condition, inlined where onnxruntime's own
folding of it would lose a value or crash (issue 56). Each model runs natively (onnxruntime
1.32's CumProd) and rewritten, bit for bit."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

import rewriter
from tests.test_structures import assert_runs_the_same

CONSTANT_IF_IN_LOOP = """
<ir_version: 10, opset_import: ["" : 26]>
g (float[4] x, int64 trip, bool cond) => (float[4] f) {{
  f = Loop(trip, cond, x) <body = lb (int64 i, bool c, float[4] cv) => (bool co, float[4] w) {{
    co = Identity(c)
    flag = Constant<value = bool {{{flag}}}>()
    v = Mul(cv, cv)
    r = If(flag) <then_branch = tb () => (float[4] t) {{ t = Mul(v, v) }},
                  else_branch = eb () => (float[4] e) {{ e = Identity(v) }}>
    ax = Constant<value = int64 ax {{0}}>()
    {read}
  }}>
}}
"""


@pytest.mark.parametrize("read", ["w = CumProd(r, ax)", "r2 = Identity(r)\n w = CumProd(r2, ax)"])
@pytest.mark.parametrize("flag", [0, 1])
def test_constant_if_in_a_loop_body_read_by_a_cumprod(flag: int, read: str) -> None:
    """Issue 56: onnxruntime folds an If with a Constant condition in a Loop body and loses
    its output when a Shape reads it ("Missing Input: r"), as every lowering does; the
    rewrite inlines the branch itself first (onnxruntime 1.32 here; 1.20.1 does the same)."""
    model = onnx.parser.parse_model(CONSTANT_IF_IN_LOOP.format(flag=flag, read=read))
    feeds = {
        "x": np.array([0.5, -2.0, 1.25, 4.0], np.float32),
        "trip": np.array(2, np.int64),
        "cond": np.array(True),
    }
    assert_runs_the_same(model, feeds)
    assert not [
        n.op_type
        for n in rewriter.decompose_cumprod(model).graph.node[0].attribute[0].g.node
        if n.op_type == "If" and n.input[0] == "flag"
    ]


CONSTANT_IF_IN_MAIN = """
<ir_version: 10, opset_import: ["" : 26]>
g (int32[N, 3] x{inputs}) => (int32[N, 3] r) {{
  {flag}
  r = If(flag) <then_branch = tb () => (int32[N, 3] t) {{
                  ax = Constant<value = int64 ax {{1}}>()
                  t = CumProd(x, ax) }},
                else_branch = eb () => (int32[N, 3] e) {{ e = Identity(x) }}>
}}
"""


@pytest.mark.parametrize("flag", [0, 1])
def test_constant_if_in_the_main_graph_holding_a_cumprod_is_inlined(flag: int) -> None:
    """Issue 56: onnxruntime 1.32 crashes folding a main-graph If with a Constant condition
    whose branch holds a lowering's If / Scan nodes (test_structure_fuzz's CONSTANT_IF_CRASH):
    the rewrite inlines the branch taken itself, Constant condition included."""
    text = CONSTANT_IF_IN_MAIN.format(inputs="", flag=f"flag = Constant<value = bool {{{flag}}}>()")
    model = onnx.parser.parse_model(text)
    assert_runs_the_same(model, {"x": np.array([[2, -3, 5], [7, 1, -1]], np.int32)})
    rewritten = rewriter.decompose_cumprod(model)
    assert "flag" not in [o for n in rewritten.graph.node for o in list(n.input) + list(n.output)]


def test_if_on_an_initializer_a_feed_may_override_is_kept() -> None:
    """An initializer that is also a graph input is not a constant: its If stays, and the
    branch the feed selects runs."""
    text = CONSTANT_IF_IN_MAIN.format(inputs=", bool flag", flag="")
    graph = onnx.parser.parse_model(text)
    graph.graph.initializer.append(onnx.helper.make_tensor("flag", onnx.TensorProto.BOOL, [], [1]))
    x = np.array([[2, -3, 5], [7, 1, -1]], np.int32)
    for fed in (True, False):
        assert_runs_the_same(graph, {"x": x, "flag": np.array(fed)})
    rewritten = rewriter.decompose_cumprod(graph)
    assert [n.op_type for n in rewritten.graph.node if n.input and n.input[0] == "flag"] == ["If"]


def _branch_with_weight_and_clashing_names(in_function: bool) -> onnx.ModelProto:
    """r = Identity(If(Constant true) {t = CumProd(x * w, 1), w a branch initializer} {x}),
    the branch's Mul named as that Identity ("n0"); in a function body when ``in_function``."""
    w = onnx.numpy_helper.from_array(np.array([[3, -1, 2]], np.int32), "w")
    then = onnx.helper.make_graph(
        [
            onnx.helper.make_node("Mul", ["x", "w"], ["xw"], name="n0"),
            onnx.helper.make_node("Constant", [], ["ax"], name="n1", value_int=1),
            onnx.helper.make_node("CumProd", ["xw", "ax"], ["t"], name="n2"),
        ],
        "then",
        [],
        [onnx.helper.make_tensor_value_info("t", onnx.TensorProto.INT32, None)],
        [w],
    )
    other = onnx.helper.make_graph(
        [onnx.helper.make_node("Identity", ["x"], ["e"], name="n0")],
        "else",
        [],
        [onnx.helper.make_tensor_value_info("e", onnx.TensorProto.INT32, None)],
    )
    nodes = [
        onnx.helper.make_node(
            "Constant", [], ["c"], name="c0", value=onnx.helper.make_tensor("c", 9, [], [1])
        ),
        onnx.helper.make_node("If", ["c"], ["s"], name="n1", then_branch=then, else_branch=other),
        onnx.helper.make_node("Identity", ["s"], ["r"], name="n0"),
    ]
    io = (
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.INT32, [2, 3])],
        [onnx.helper.make_tensor_value_info("r", onnx.TensorProto.INT32, [2, 3])],
    )
    opsets = [onnx.helper.make_opsetid("", 26)]
    if not in_function:
        graph = onnx.helper.make_graph(nodes, "g", *io)
        return onnx.helper.make_model(graph, opset_imports=opsets, ir_version=10)
    function = onnx.helper.make_function("local", "F", ["x"], ["r"], nodes, opsets)
    call = onnx.helper.make_node("F", ["x"], ["r"], name="n0", domain="local")
    graph = onnx.helper.make_graph([call], "g", *io)
    opsets.append(onnx.helper.make_opsetid("local", 1))
    return onnx.helper.make_model(graph, opset_imports=opsets, ir_version=10, functions=[function])


@pytest.mark.parametrize("in_function", [False, True], ids=["main", "function"])
def test_an_inlined_branch_keeps_its_weights_and_unique_node_names(in_function: bool) -> None:
    """The taken branch's initializer moves with its nodes (a Constant in a function body,
    which has no initializers), and its nodes' names, the graph's own here, are made unique:
    the full check passes and onnxruntime gives the native results."""
    model = _branch_with_weight_and_clashing_names(in_function)
    rewritten = rewriter.decompose_cumprod(model)
    onnx.checker.check_model(rewritten, full_check=True)
    graph = rewritten.functions[0] if in_function else rewritten.graph
    names = [n.name for n in graph.node]
    assert len(names) == len(set(names)), names
    assert_runs_the_same(model, {"x": np.array([[2, -3, 5], [7, 1, -1]], np.int32)})
