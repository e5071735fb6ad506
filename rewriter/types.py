"""Element types and shapes of values, without touching the model.

A CumProd's input is usually an intermediate value with no ``value_info``, and when it has
one it may be stale. Its type decides the lowering, so types come from onnx's own shape
inference, run on a copy of the model whose intermediate ``value_info`` and output shapes are
removed (only graph inputs and initializers are taken as declared):

- main graph and its subgraphs: ``onnx.shape_inference.infer_shapes``, called through onnx_ir's
  initializer lifting (``call_onnx_api``), so weights are not serialized: peak memory does not
  grow with the size of inline weights;
- model-local functions: types are not stored for function bodies (a function can be called
  with several types), so they are propagated node by node with
  ``onnx.shape_inference.infer_node_outputs`` from the input types at its call sites, callers
  before callees (so a function called from a function gets its caller's types). Call sites
  that disagree keep what they share (the element type when equal, the dims that are equal);
  :mod:`rewriter.specialize` first gives every function with a CumProd one element type per
  input, so what remains to disagree is dims, which the lowerings take at run time.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator

import onnx
import onnx_ir as ir
from onnx_ir.passes.common import _c_api_utils

__all__ = [
    "FunctionKey",
    "TypeTable",
    "call_sites",
    "function_key",
    "function_scope",
    "functions_in_call_order",
    "infer_function_types",
    "infer_types",
    "proto_nodes",
]

logger = logging.getLogger(__name__)

TypeKey = tuple[str, str]  # (scope, value name); scope is "" for the main graph
FunctionKey = tuple[str, str, str]  # (domain, name, overload)
_MAIN = ""


def function_key(node_or_function: ir.Node | ir.Function) -> FunctionKey:
    if isinstance(node_or_function, ir.Node):
        return (node_or_function.domain, node_or_function.op_type, node_or_function.overload)
    return (node_or_function.domain, node_or_function.name, node_or_function.overload)


def function_scope(function: ir.Function | onnx.FunctionProto) -> str:
    """The scope key of a model-local function: ``domain::name[:overload]``."""
    overload = getattr(function, "overload", "")
    return f"{function.domain}::{function.name}" + (f":{overload}" if overload else "")


class TypeTable:
    """Known (dtype, shape) per value name and scope, from inference on a copy."""

    def __init__(self) -> None:
        self._types: dict[TypeKey, onnx.TypeProto] = {}

    def set(self, scope: str, name: str, type_proto: onnx.TypeProto) -> None:
        self._types[(scope, name)] = type_proto

    def get_proto(self, scope: str, name: str) -> onnx.TypeProto | None:
        return self._types.get((scope, name))

    def lookup(self, scope: str, value: ir.Value) -> tuple[ir.DataType | None, ir.Shape | None]:
        """The value's dtype and shape: the inferred ones; declared ones only for graph
        inputs and initializers (a declared ``value_info`` may be stale)."""
        trusted = value.is_graph_input() or value.is_initializer() or value.producer() is None
        dtype = value.dtype
        shape = value.shape if trusted else None
        tp = self._types.get((scope, value.name or ""))
        if tp is not None and tp.HasField("tensor_type"):
            tt = tp.tensor_type
            if tt.elem_type:
                dtype = ir.DataType(tt.elem_type)
            if tt.HasField("shape") and (shape is None or not trusted):
                dims: list[int | str | None] = []
                for d in tt.shape.dim:
                    if d.HasField("dim_value"):
                        dims.append(d.dim_value)
                    else:
                        dims.append(d.dim_param or None)
                shape = ir.Shape(dims)
        return dtype, shape


def proto_nodes(nodes: Iterable[onnx.NodeProto]) -> Iterator[onnx.NodeProto]:
    """``nodes`` and the nodes of their subgraphs at any depth (protobuf form)."""
    for node in nodes:
        yield node
        for attr in node.attribute:
            for sub in [attr.g, *attr.graphs] if attr.type in (5, 10) else []:
                yield from proto_nodes(sub.node)


def _proto_graphs(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    yield graph
    for node in graph.node:
        for attr in node.attribute:
            for sub in [attr.g, *attr.graphs] if attr.type in (5, 10) else []:
                yield from _proto_graphs(sub)


def _forget_declared(proto: onnx.ModelProto) -> None:
    """Remove what may be stale: intermediate value_info and graph output shapes."""
    for graph in _proto_graphs(proto.graph):
        del graph.value_info[:]
        for output in graph.output:
            if output.type.HasField("tensor_type"):
                output.type.tensor_type.ClearField("shape")


def _collect_graph_types(table: TypeTable, graph: onnx.GraphProto) -> None:
    for sub in _proto_graphs(graph):
        for vi in [*sub.input, *sub.value_info, *sub.output]:
            if vi.HasField("type"):
                table.set(_MAIN, vi.name, vi.type)
        for init in sub.initializer:
            table.set(
                _MAIN, init.name, onnx.helper.make_tensor_type_proto(init.data_type, init.dims)
            )


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


def _propagate_function(
    function: ir.Function, input_types: list[onnx.TypeProto | None]
) -> dict[str, onnx.TypeProto]:
    """Types of a function body's values given its input types (ai.onnx ops only)."""
    proto = ir.serde.serialize_function(function)
    known: dict[str, onnx.TypeProto] = {
        name: tp for name, tp in zip(proto.input, input_types) if tp is not None
    }
    for vi in proto.value_info:  # IR >= 10 functions may declare their values' types
        if vi.HasField("type") and vi.name in proto.input and vi.name not in known:
            known[vi.name] = vi.type
    version = {o.domain: o.version for o in proto.opset_import}.get("", 1)
    _propagate_nodes(proto.node, known, version, list(proto.opset_import))
    return known


def call_sites(
    model: ir.Model, scope_graph: ir.Graph | ir.Function
) -> Iterator[tuple[ir.Node, FunctionKey]]:
    """Calls to model-local functions in ``scope_graph`` and its subgraphs."""
    for node in ir.traversal.RecursiveGraphIterator(scope_graph):
        key = function_key(node)
        if key in model.functions:
            yield node, key


def functions_in_call_order(model: ir.Model) -> list[FunctionKey]:
    """Every model-local function, each after all functions that call it."""
    callees = {key: {k for _, k in call_sites(model, f)} for key, f in model.functions.items()}
    order: list[FunctionKey] = []
    state: dict[FunctionKey, int] = {}

    def visit(key: FunctionKey) -> None:  # depth-first post-order on "is called by"
        if state.get(key) == 2:
            return
        if state.get(key) == 1:
            raise ValueError(f"model-local function {key[0]}.{key[1]} calls itself")
        state[key] = 1
        for caller, called in callees.items():
            if key in called:
                visit(caller)
        state[key] = 2
        order.append(key)

    for key in model.functions:
        visit(key)
    return order


def _main_graph_types(model: ir.Model) -> onnx.GraphProto:
    def infer(proto: onnx.ModelProto) -> onnx.GraphProto:
        _forget_declared(proto)
        try:
            proto = onnx.shape_inference.infer_shapes(proto, strict_mode=False, data_prop=True)
        except Exception as exc:  # noqa: BLE001 - keep the declared types
            logger.debug("shape inference failed, using declared types only: %s", exc)
        return proto.graph

    return _c_api_utils.call_onnx_api(infer, model)


def infer_types(model: ir.Model) -> TypeTable:
    """Infer value types of ``model``; ``model`` is left as it was."""
    table = TypeTable()
    _collect_graph_types(table, _main_graph_types(model))
    infer_function_types(model, table)
    return table


def infer_function_types(model: ir.Model, table: TypeTable) -> None:
    """Add the types inside every model-local function to ``table``, which holds the main
    graph's (from :func:`infer_types`): propagated from the call sites, callers first."""
    seen: dict[FunctionKey, list[onnx.TypeProto | None]] = {}

    def record(scope: str, graph: ir.Graph | ir.Function) -> None:
        for node, key in call_sites(model, graph):
            types = [table.get_proto(scope, v.name or "") if v else None for v in node.inputs]
            if key in seen:
                types = [_merge(a, b) for a, b in zip(seen[key], types)]
            seen[key] = types

    record(_MAIN, model.graph)
    for key in functions_in_call_order(model):
        function = model.functions[key]
        fscope = function_scope(function)
        for name, tp in _propagate_function(function, seen.get(key, [])).items():
            table.set(fscope, name, tp)
        record(fscope, function)


def stale_shapes(model: ir.Model, types: TypeTable) -> list[ir.Value]:
    """Main-graph values whose declared shape contradicts inference (stale ``value_info``)."""
    stale = []
    for node in ir.traversal.RecursiveGraphIterator(model.graph):
        for value in node.outputs:
            if value.shape is None:
                continue
            tp = types.get_proto(_MAIN, value.name or "")
            if tp is None or not tp.HasField("tensor_type"):
                continue
            tt = tp.tensor_type
            if not tt.HasField("shape"):
                continue
            inferred = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]
            declared = list(value.shape.dims)
            if len(inferred) != len(declared) or any(
                isinstance(a, int) and isinstance(b, int) and a != b
                for a, b in zip(inferred, declared)
            ):
                stale.append(value)
    return stale
