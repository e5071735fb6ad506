"""Between onnx's protobuf and onnx_ir: reading a model into the IR with what onnx_ir 1.1
drops (function input types, the declaration of a graph input that is also an output),
writing those declarations back, and calling onnx's C API on an IR model without its large
tensors while keeping the shapes an input-and-initializer declares."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypeVar

import onnx
import onnx_ir as ir
from onnx_ir.passes.common import _c_api_utils

__all__ = [
    "OUTPUT_DECLARATION",
    "call_onnx_api",
    "deserialize_model",
    "kept_output_declarations",
    "overridable_shapes",
    "restore_output_declarations",
    "restore_shapes",
]


def deserialize_model(proto: onnx.ModelProto) -> ir.Model:
    """``onnx_ir.serde.deserialize_model``, plus the element types that model-local
    functions declare for their inputs in ``FunctionProto.value_info`` (IR >= 10), which
    onnx_ir 1.1 does not read: without them a function that no call site types is lowered
    type-generically. Not the declared shapes: a function may be called with other shapes,
    and onnxruntime would fold a lowering's ``Shape`` of the input from them.

    A main-graph input that is also a graph output is one value in onnx_ir, with one
    declaration: it keeps the input's (onnx_ir would take the output's, so a rewritten model
    would refuse feeds the original took: ``float[N]`` declared ``float[4]`` as an output);
    the output's is kept in the value's ``meta`` for :func:`restore_output_declarations`."""
    model = ir.serde.deserialize_model(proto)
    outputs = {value.name: value for value in proto.graph.output}
    for value, info in zip(model.graph.inputs, proto.graph.input):
        if info.name in outputs and value.name == info.name and info.HasField("type"):
            value.type = ir.serde.deserialize_type_proto_for_type(info.type)
            value.shape = ir.serde.deserialize_type_proto_for_shape(info.type)
            value.meta[OUTPUT_DECLARATION] = outputs[info.name].SerializeToString()
    for function_proto in proto.functions:
        declared = {vi.name: vi for vi in function_proto.value_info if vi.HasField("type")}
        key = (function_proto.domain, function_proto.name, function_proto.overload)
        function = model.functions.get(key)
        if function is None or not declared:
            continue
        for value in function.inputs:
            info = declared.get(value.name or "")
            if info is None or value.type is not None or not info.type.HasField("tensor_type"):
                continue
            if info.type.tensor_type.elem_type:
                value.type = ir.TensorType(ir.DataType(info.type.tensor_type.elem_type))
    return model


OUTPUT_DECLARATION = "cumprod_rewriter.output_declaration"


def kept_output_declarations(model: ir.Model) -> dict[str, bytes]:
    """The graph-output declarations :func:`deserialize_model` kept aside for the graph
    inputs that are still outputs (serialized ValueInfoProtos by name)."""
    return {
        value.name or "": value.meta[OUTPUT_DECLARATION]
        for value in model.graph.inputs
        if OUTPUT_DECLARATION in value.meta and value.is_graph_output()
    }


def restore_output_declarations(proto: onnx.ModelProto, kept: Mapping[str, bytes]) -> None:
    """Give ``proto``'s graph outputs the declarations in ``kept``
    (:func:`kept_output_declarations`): onnx_ir writes the one declaration it holds for an
    input that is also an output for both."""
    for info in proto.graph.output:
        if info.name in kept:
            info.type.CopyFrom(onnx.ValueInfoProto.FromString(kept[info.name]).type)


_R = TypeVar("_R")


def call_onnx_api(func: Callable[[onnx.ModelProto], _R], model: ir.Model) -> _R:
    """onnx_ir's ``call_onnx_api`` (the model without its large tensors), leaving the
    declared shapes of initializers that are also graph inputs as they were (it sets a missing
    shape from the tensor, and the output would then refuse feeds of another shape)."""
    saved = overridable_shapes(model)
    try:
        return _c_api_utils.call_onnx_api(func, model)
    finally:
        restore_shapes(model, saved)


def overridable_shapes(model: ir.Model) -> dict[str, ir.Shape | None]:
    """The declared shapes of the initializers that are also graph inputs (a feed may
    replace them, of another shape where the declaration allows it)."""
    return {v.name: v.shape for v in model.graph.inputs if v.is_initializer() and v.name}


def restore_shapes(model: ir.Model, shapes: dict[str, ir.Shape | None]) -> None:
    """Give those inputs their declared shapes back (onnx_ir's checker and C API calls set a
    missing one from the tensor)."""
    for value in model.graph.inputs:
        if value.name in shapes and value.is_initializer():
            value.shape = shapes[value.name]
