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
from collections.abc import Callable, Iterator

import onnx_ir as ir
from onnx_ir.passes.common import CheckerPass, _c_api_utils

from rewriter.graphs import graphs_of

__all__ = ["InMemoryCheckerPass", "graphs_of", "replace_tensors", "tensors_in_memory"]


def replace_tensors(
    model: ir.Model,
    new: Callable[[ir.Graph, ir.TensorProtocol, bool], ir.TensorProtocol],
) -> Callable[[], None]:
    """Give every tensor of ``model`` (the initializers and tensor attributes of every graph
    and function, at any depth) the one ``new(graph, tensor, is_initializer)`` returns for
    it (the same object: left as it is); return a function that puts the old ones back."""
    values: list[tuple[ir.Value, ir.TensorProtocol]] = []
    attributes: list[tuple[ir.Node, ir.Attr]] = []
    for graph in graphs_of(model):
        for value in graph.initializers.values():
            tensor = value.const_value
            if tensor is not None and (replaced := new(graph, tensor, True)) is not tensor:
                values.append((value, tensor))
                value.const_value = replaced
        for node in graph:
            for name, attr in list(node.attributes.items()):
                if attr.is_ref() or attr.value is None:
                    continue
                if attr.type == ir.AttributeType.TENSOR:
                    old = [attr.value]
                elif attr.type == ir.AttributeType.TENSORS:
                    old = list(attr.value)
                else:
                    continue
                tensors = [new(graph, tensor, False) for tensor in old]
                if all(t is o for t, o in zip(tensors, old)):
                    continue
                given = tensors[0] if attr.type == ir.AttributeType.TENSOR else tensors
                attributes.append((node, attr))
                node.attributes[name] = ir.Attr(name, attr.type, given)

    def restore() -> None:
        for value, tensor in values:
            value.const_value = tensor
        for node, attr in attributes:
            node.attributes[attr.name] = attr

    return restore


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

    def copy(graph: ir.Graph, tensor: ir.TensorProtocol, initializer: bool) -> ir.TensorProtocol:
        if not isinstance(tensor, ir.ExternalTensor):
            return tensor
        if initializer and for_save and id(graph) in saved:
            return tensor
        lifted = tensor.nbytes > _c_api_utils._BIG_TENSOR_SIZE_LIMIT
        if initializer and not for_save and graph is model.graph and lifted:
            return tensor
        return ir.Tensor(tensor.numpy(), dtype=tensor.dtype, name=tensor.name)

    restore = replace_tensors(model, copy)
    try:
        yield
    finally:
        restore()


class InMemoryCheckerPass(CheckerPass):
    """onnx_ir's ``CheckerPass``, with the external tensors it would leave as file
    references read into memory for the check (:func:`tensors_in_memory`). The model is
    left as it was."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        with tensors_in_memory(model):
            return super().call(model)
