"""Walking a model in protobuf form: its graphs, nodes and tensors at any depth.

The command line reads a model's protobuf (external data not loaded) before onnx_ir does, to
locate and check every external tensor, and the passes look at parts onnx_ir does not carry
(training_info, sparse initializers): they all walk it with these.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import onnx

__all__ = [
    "model_graphs",
    "model_node_lists",
    "model_tensors",
    "node_subgraphs",
    "proto_graphs",
    "proto_nodes",
]


def node_subgraphs(node: onnx.NodeProto) -> list[onnx.GraphProto]:
    """The graphs ``node``'s attributes hold (not theirs): the one step every walk here takes."""
    found: list[onnx.GraphProto] = []
    for attr in node.attribute:
        if attr.type == onnx.AttributeProto.GRAPH:
            found.append(attr.g)
        elif attr.type == onnx.AttributeProto.GRAPHS:
            found.extend(attr.graphs)
    return found


def proto_nodes(nodes: Iterable[onnx.NodeProto]) -> Iterator[onnx.NodeProto]:
    """``nodes`` and the nodes of their subgraphs at any depth, each node before its
    subgraphs' nodes."""
    for node in nodes:
        yield node
        for sub in node_subgraphs(node):
            yield from proto_nodes(sub.node)


def proto_graphs(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    """``graph`` and its subgraphs at any depth."""
    yield graph
    yield from _subgraphs(graph.node)


def _subgraphs(nodes: Iterable[onnx.NodeProto]) -> Iterator[onnx.GraphProto]:
    for node in nodes:
        for sub in node_subgraphs(node):
            yield from proto_graphs(sub)


def model_graphs(proto: onnx.ModelProto, training: bool = True) -> Iterator[onnx.GraphProto]:
    """The main graph, the subgraphs of function bodies and (with ``training``) the
    training_info graphs, each with its subgraphs at any depth."""
    yield from proto_graphs(proto.graph)
    for function in proto.functions:
        yield from _subgraphs(function.node)
    for info in proto.training_info if training else ():
        for part in ("initialization", "algorithm"):
            if info.HasField(part):
                yield from proto_graphs(getattr(info, part))


def model_node_lists(
    proto: onnx.ModelProto, training: bool = True
) -> Iterator[tuple[str, Iterable[onnx.NodeProto]]]:
    """(where, its nodes) for every graph of :func:`model_graphs` and every function body."""
    for graph in model_graphs(proto, training):
        yield f"graph '{graph.name}'", graph.node
    for function in proto.functions:
        yield f"function '{function.domain}.{function.name}'", function.node


def model_tensors(proto: onnx.ModelProto, training: bool = True) -> Iterator[onnx.TensorProto]:
    """Every TensorProto of the model that can hold external data: initializers (sparse
    ones' values and indices too) and tensor attributes of every graph (main, function
    bodies, their subgraphs, with ``training`` training_info)."""
    for graph in model_graphs(proto, training):
        yield from graph.initializer
        for sparse in graph.sparse_initializer:
            yield sparse.values
            yield sparse.indices
    for _, nodes in model_node_lists(proto, training):
        for node in nodes:
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.TENSOR:
                    yield attr.t
                elif attr.type == onnx.AttributeProto.TENSORS:
                    yield from attr.tensors
