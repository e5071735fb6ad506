"""Small models the verify tests share: a CumProd with symbolic dims or a run-time axis, a
Loop around a body, and a way to insert nodes after an output's producer."""

from __future__ import annotations

from collections.abc import Callable

import onnx
from onnx import TensorProto, helper

__all__ = ["loop_model", "opset26", "reroute", "symbolic_model"]


def opset26(graph: onnx.GraphProto) -> onnx.ModelProto:
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26)], ir_version=10)


def reroute(model: onnx.ModelProto, output: str, nodes: list[onnx.NodeProto]) -> None:
    """Rename what computes ``output`` to ``<output>_inner`` and insert ``nodes``, which
    compute ``output`` from it, right after it."""
    at = next(i for i, node in enumerate(model.graph.node) if output in node.output)
    producer = model.graph.node[at]
    producer.output[list(producer.output).index(output)] = f"{output}_inner"
    for i, new in enumerate(nodes):
        model.graph.node.insert(at + 1 + i, new)


def loop_model(
    body_node: Callable[[], list[onnx.NodeProto]], declared: tuple[int, ...] | None = (2, 3)
) -> onnx.ModelProto:
    """y = Loop(trips, x) whose body maps its carried value ``acc`` (declared ``declared``,
    None: no shape) to ``out``."""
    shape = None if declared is None else list(declared)
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond"], ["cond_out"]),
            helper.make_node("Constant", [], ["ax"], value_int=1),
            *body_node(),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
            helper.make_tensor_value_info("acc", TensorProto.FLOAT, shape),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("out", TensorProto.FLOAT, shape),
        ],
    )
    graph = helper.make_graph(
        [helper.make_node("Loop", ["trips", "", "x"], ["y"], body=body)],
        "g",
        [
            helper.make_tensor_value_info("trips", TensorProto.INT64, []),
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
    )
    return opset26(graph)


def symbolic_model(elem: int, shape: list[int | str], axis: int | None) -> onnx.ModelProto:
    """CumProd over x with symbolic dims; ``axis`` None: a run-time axis input."""
    inputs = [helper.make_tensor_value_info("x", elem, shape)]
    initializers = []
    if axis is None:
        inputs.append(helper.make_tensor_value_info("axis", TensorProto.INT64, []))
    else:
        initializers.append(helper.make_tensor("axis", TensorProto.INT64, [], [axis]))
    graph = helper.make_graph(
        [helper.make_node("CumProd", ["x", "axis"], ["y"], name="cp")],
        "g",
        inputs,
        [helper.make_tensor_value_info("y", elem, shape)],
        initializers,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26)], ir_version=10)
