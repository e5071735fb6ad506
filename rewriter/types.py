"""Element types and shapes of CumProd inputs, without touching the model.

A CumProd's input is usually an intermediate value with no ``value_info``. Its type decides
the lowering, so we ask onnx's own shape inference, on a serialized copy of the model (the
model keeps its ``value_info`` exactly as it was):

- main graph and its subgraphs: ``onnx.shape_inference.infer_shapes``;
- model-local functions: types are not stored for function bodies (a function can be called
  with several types), so they are propagated node by node with
  ``onnx.shape_inference.infer_node_outputs`` from the input types at each call site. A function
  whose call sites disagree on a type the CumProd depends on yields no type for it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

import onnx
import onnx_ir as ir

__all__ = ["TypeTable", "infer_types", "proto_nodes"]

logger = logging.getLogger(__name__)

TypeKey = tuple[str, str]  # (scope, value name); scope is "" for the main graph
_MAIN = ""


class TypeTable:
    """Known (dtype, shape) per value name and scope, from inference on a copy."""

    def __init__(self) -> None:
        self._types: dict[TypeKey, onnx.TypeProto] = {}

    def set(self, scope: str, name: str, type_proto: onnx.TypeProto) -> None:
        self._types[(scope, name)] = type_proto

    def get_proto(self, scope: str, name: str) -> onnx.TypeProto | None:
        return self._types.get((scope, name))

    def lookup(self, scope: str, value: ir.Value) -> tuple[ir.DataType | None, ir.Shape | None]:
        """The value's dtype and shape: its own if it has them, else the inferred ones."""
        dtype = value.dtype
        shape = value.shape
        tp = self._types.get((scope, value.name or ""))
        if tp is not None and tp.HasField("tensor_type"):
            tt = tp.tensor_type
            if dtype is None and tt.elem_type:
                dtype = ir.DataType(tt.elem_type)
            if shape is None and tt.HasField("shape"):
                dims: list[int | str | None] = []
                for d in tt.shape.dim:
                    if d.HasField("dim_value"):
                        dims.append(d.dim_value)
                    else:
                        dims.append(d.dim_param or None)
                shape = ir.Shape(dims)
        return dtype, shape


def function_scope(function: ir.Function | onnx.FunctionProto) -> str:
    """The scope key of a model-local function: ``domain::name[:overload]``."""
    overload = getattr(function, "overload", "")
    return f"{function.domain}::{function.name}" + (f":{overload}" if overload else "")


def _collect_graph_types(table: TypeTable, graph: onnx.GraphProto) -> None:
    for vi in [*graph.input, *graph.value_info, *graph.output]:
        if vi.HasField("type"):
            table.set(_MAIN, vi.name, vi.type)
    for init in graph.initializer:
        table.set(_MAIN, init.name, onnx.helper.make_tensor_type_proto(init.data_type, init.dims))
    for node in graph.node:
        for attr in node.attribute:
            for sub in [attr.g, *attr.graphs] if attr.type in (5, 10) else []:
                _collect_graph_types(table, sub)


def _merge(a: onnx.TypeProto | None, b: onnx.TypeProto | None) -> onnx.TypeProto | None:
    """What two call sites agree on: the element type, and the dims both share."""
    if a is None or b is None or not a.HasField("tensor_type") or not b.HasField("tensor_type"):
        return None
    ta, tb = a.tensor_type, b.tensor_type
    if ta.elem_type != tb.elem_type:
        return None
    if not (ta.HasField("shape") and tb.HasField("shape")) or len(ta.shape.dim) != len(
        tb.shape.dim
    ):
        return onnx.helper.make_tensor_type_proto(ta.elem_type, None)
    dims = [
        da if da == db else onnx.TensorShapeProto.Dimension()
        for da, db in zip(ta.shape.dim, tb.shape.dim)
    ]
    merged = onnx.helper.make_tensor_type_proto(ta.elem_type, [])
    merged.tensor_type.shape.dim.extend(dims)
    return merged


def proto_nodes(nodes: Iterable[onnx.NodeProto]) -> Iterable[onnx.NodeProto]:
    """``nodes`` and the nodes of their subgraphs at any depth (protobuf form)."""
    for node in nodes:
        yield node
        for attr in node.attribute:
            for sub in [attr.g, *attr.graphs] if attr.type in (5, 10) else []:
                yield from proto_nodes(sub.node)


def _propagate_function(
    function: onnx.FunctionProto, input_types: list[onnx.TypeProto | None]
) -> dict[str, onnx.TypeProto]:
    """Types of a function body's values given its input types (ai.onnx ops only)."""
    known: dict[str, onnx.TypeProto] = {
        name: tp for name, tp in zip(function.input, input_types) if tp is not None
    }
    version = {o.domain: o.version for o in function.opset_import}.get("", 1)
    _propagate_nodes(function.node, known, version, list(function.opset_import))
    return known


def _propagate_nodes(
    nodes: Iterable[onnx.NodeProto],
    known: dict[str, onnx.TypeProto],
    version: int,
    opsets: list[onnx.OperatorSetIdProto],
) -> None:
    """Add the output types of ai.onnx ``nodes`` (and of nodes in their subgraphs) to ``known``."""
    for node in nodes:
        for attr in node.attribute:
            for sub in [attr.g, *attr.graphs] if attr.type in (5, 10) else []:
                known.update({vi.name: vi.type for vi in sub.input if vi.HasField("type")})
                _propagate_nodes(sub.node, known, version, opsets)
        if (node.domain or "") not in ("", "ai.onnx"):
            continue
        try:
            schema = onnx.defs.get_schema(node.op_type, version, "")
            outputs = onnx.shape_inference.infer_node_outputs(
                schema, node, known, opset_imports=opsets
            )
        except Exception as exc:  # noqa: BLE001 - best effort; gaps are reported later
            logger.debug("no type inference for %s: %s", node.op_type, exc)
            continue
        known.update(outputs)


def infer_types(model: ir.Model) -> TypeTable:
    """Infer value types of ``model`` on a serialized copy; ``model`` is not modified."""
    table = TypeTable()
    proto = ir.to_proto(model)
    try:
        proto = onnx.shape_inference.infer_shapes(proto, strict_mode=False)
    except Exception as exc:  # noqa: BLE001 - keep the declared types
        logger.debug("shape inference failed, using declared types only: %s", exc)
    _collect_graph_types(table, proto.graph)

    functions = {(f.domain, f.name, f.overload): f for f in proto.functions}
    # Input types seen at call sites, per function and input position (None: disagreement).
    seen: dict[tuple[str, str, str], list[onnx.TypeProto | None]] = {}
    pending = [(_MAIN, list(proto_nodes(proto.graph.node)))]
    done: set[tuple[str, str, str]] = set()
    while pending:
        scope, nodes = pending.pop()
        for node in nodes:
            key = (node.domain, node.op_type, node.overload)
            function = functions.get(key)
            if function is None:
                continue
            types = [table.get_proto(scope, name) if name else None for name in node.input]
            if key in seen:
                types = [_merge(a, b) for a, b in zip(seen[key], types)]
            seen[key] = types
        for key, types in seen.items():
            if key in done:
                continue
            done.add(key)
            function = functions[key]
            fscope = function_scope(function)
            for name, tp in _propagate_function(function, list(types)).items():
                table.set(fscope, name, tp)
            pending.append((fscope, list(proto_nodes(function.node))))
    return table
