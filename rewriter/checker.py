"""onnx's checker on an in-memory model whose tensors are still in their data files.

onnx_ir's ``CheckerPass`` serializes the model for onnx's C API with the main graph's
initializers over ``_c_api_utils._BIG_TENSOR_SIZE_LIMIT`` bytes lifted out, and every other
external tensor kept as a reference to its data file. onnx's checker then looks for those
files relative to the working directory (a proto carries no folder), so a valid model whose
small initializers, subgraph initializers or ``Constant`` values are external was refused
whenever the command ran from another folder. onnx_ir's ``save`` moves only the
initializers of the main graph and its subgraphs to the new data file, so an external tensor
attribute, or an initializer in a function body's subgraph, kept pointing at a file the
output's folder does not have. :func:`tensors_in_memory` reads those tensors into memory for
the duration of such a step; :class:`InMemoryCheckerPass` is the checker pass that uses it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import onnx_ir as ir
from onnx_ir.passes.common import CheckerPass, _c_api_utils

__all__ = ["InMemoryCheckerPass", "graphs_of", "tensors_in_memory"]


def graphs_of(model: ir.Model) -> Iterator[ir.Graph]:
    """The main graph, every function's body, and their subgraphs at any depth."""
    roots: list[ir.Graph] = [model.graph]
    roots.extend(function.graph for function in model.functions.values())  # type: ignore[attr-defined]
    for root in roots:
        yield root
        yield from root.subgraphs()


def _in_memory(tensor: ir.TensorProtocol) -> ir.TensorProtocol:
    if isinstance(tensor, ir.ExternalTensor):
        return ir.Tensor(tensor.numpy(), dtype=tensor.dtype, name=tensor.name)
    return tensor


@contextlib.contextmanager
def tensors_in_memory(model: ir.Model, *, for_save: bool = False) -> Iterator[None]:
    """Within the block, every external tensor attribute (any node of any graph or
    function) is an in-memory copy of its data, and so are external initializers: for
    onnx's checker (default) every one but the main graph's over
    ``_c_api_utils._BIG_TENSOR_SIZE_LIMIT`` bytes (which onnx_ir's C-API call lifts out
    itself); ``for_save``, those of function bodies and their subgraphs (``ir.save`` moves
    the initializers of the main graph and its subgraphs into the new data file, no
    others). The model is restored afterwards. The copies cost their size in memory:
    subgraph initializers and tensor attributes are rarely large."""
    saved = {id(graph) for graph in model.graphs()} if for_save else set()
    values: list[tuple[ir.Value, ir.TensorProtocol]] = []
    attributes: list[tuple[ir.Node, ir.Attr]] = []
    try:
        for graph in graphs_of(model):
            for value in graph.initializers.values():
                tensor = value.const_value
                if not isinstance(tensor, ir.ExternalTensor):
                    continue
                if for_save:
                    if id(graph) in saved:
                        continue
                elif graph is model.graph and tensor.nbytes > _c_api_utils._BIG_TENSOR_SIZE_LIMIT:
                    continue
                values.append((value, tensor))
                value.const_value = _in_memory(tensor)
            for node in graph:
                for name, attr in list(node.attributes.items()):
                    if attr.is_ref():
                        continue
                    if attr.type == ir.AttributeType.TENSOR:
                        if not isinstance(attr.value, ir.ExternalTensor):
                            continue
                        new = ir.Attr(name, attr.type, _in_memory(attr.value))
                    elif attr.type == ir.AttributeType.TENSORS:
                        if not any(isinstance(t, ir.ExternalTensor) for t in attr.value):
                            continue
                        new = ir.Attr(name, attr.type, [_in_memory(t) for t in attr.value])
                    else:
                        continue
                    attributes.append((node, attr))
                    node.attributes[name] = new
        yield
    finally:
        for value, tensor in values:
            value.const_value = tensor
        for node, attr in attributes:
            node.attributes[attr.name] = attr


class InMemoryCheckerPass(CheckerPass):
    """onnx_ir's ``CheckerPass``, with the external tensors it would leave as file
    references read into memory for the check (:func:`tensors_in_memory`). The model is
    left as it was."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        with tensors_in_memory(model):
            return super().call(model)
