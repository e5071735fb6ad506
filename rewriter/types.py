"""Element types and shapes of values, without touching the model.

A CumProd's input is usually an intermediate value with no ``value_info``, and when it has
one it may be stale. Its type decides the lowering, so types come from onnx's own shape
inference, run on a copy of the model whose intermediate ``value_info``, output shapes and
subgraph input shapes are removed (only the main graph's inputs and initializers are taken as
declared: a Loop body's declared input shape, say, is not checked by any runtime):

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

Values are looked up by name per scope (the main graph with its subgraphs, or one function
with its subgraphs). Sibling subgraphs may reuse a name (two If branches, two Loop bodies
both defining ``h``): such a name keeps only what all its definitions agree on, like two call
sites of a function, so that one body's static dims are never taken for another's.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TypeVar

import onnx
import onnx_ir as ir
from onnx_ir.passes.common import _c_api_utils

from rewriter.protos import proto_graphs, proto_nodes

__all__ = [
    "FunctionKey",
    "TypeTable",
    "call_sites",
    "deserialize_model",
    "drop_unconfirmed_shapes",
    "function_key",
    "function_scope",
    "functions_in_call_order",
    "infer_function_types",
    "infer_types",
    "kept_output_declarations",
    "proto_nodes",
    "restore_output_declarations",
    "stale_shapes",
    "unconfirmed_subgraph_inputs",
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

    def __init__(self, main: ir.Graph | None = None) -> None:
        self._types: dict[TypeKey, onnx.TypeProto] = {}
        self._main = main  # the graph whose inputs' declared shapes are trusted

    def set(self, scope: str, name: str, type_proto: onnx.TypeProto) -> None:
        self._types[(scope, name)] = type_proto

    def take_from(self, other: TypeTable) -> None:
        """Take ``other``'s types, where they name an element type, over this table's
        (types inferred before a rewrite that keeps every kept name's type and shape, when
        inference after it lost some: a node built at an older opset stops it)."""
        for key, type_proto in other._types.items():
            tensor = type_proto.tensor_type if type_proto.HasField("tensor_type") else None
            if tensor is None or tensor.elem_type or key not in self._types:
                self._types[key] = type_proto

    def clear(self) -> None:
        self._types.clear()

    def get_proto(self, scope: str, name: str) -> onnx.TypeProto | None:
        return self._types.get((scope, name))

    def has_type(self, scope: str, value: ir.Value) -> bool:
        """Whether the value's type is known at all (a tensor's element type, or a sequence,
        optional or map type)."""
        tp = self._types.get((scope, value.name or ""))
        return value.type is not None or (tp is not None and tp.WhichOneof("value") is not None)

    def lookup(self, scope: str, value: ir.Value) -> tuple[ir.DataType | None, ir.Shape | None]:
        """The value's dtype and shape: the inferred ones; declared ones only for the main
        graph's inputs and for initializers (a declared ``value_info``, or the declared input
        of a subgraph or function, may be stale)."""
        main_input = value.is_graph_input() and (self._main is None or value.graph is self._main)
        trusted = main_input or value.is_initializer()
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


Kept = Mapping[tuple[int, int], frozenset[int]]
"""Loop carried declarations kept for inference: (the body's ordinal in :func:`proto_graphs`
order, the input's index in the body) -> the positions of the declared static dims made
unknown (those inference does not confirm)."""


def _forget_declared(proto: onnx.ModelProto, kept: Kept | None = None) -> None:
    """Remove what may be stale: intermediate value_info, graph output shapes and the shapes
    of subgraph inputs (inference gives them from the node: a Scan body's the slices', a
    Loop body's carried values none, since they may change shape between iterations), but
    the Loop carried values in ``kept`` (whose declaration :func:`_carried_fixed_point`
    confirms), each with its unconfirmed static dims made unknown; the Loop's final value of
    each of those is declared the same (onnx's inference gives it no shape: a CumProd of it
    in an enclosing Loop body left that body's carried value unconfirmed, and a Scan there
    returning it without a shape). An output that is also the main graph's input or an
    initializer keeps its shape: onnx's inference takes the output's declaration for such a
    name, and a cleared one left every value computed from it of unknown rank (a static
    model was refused for targets that need a known rank)."""
    kept = kept or {}
    carried = {(c.body, c.index): c for c in _loop_carried(proto)}
    graphs = list(proto_graphs(proto.graph))
    for ordinal, graph in enumerate(graphs):
        del graph.value_info[:]
        given = {t.name for t in graph.initializer}
        if graph is proto.graph:
            given |= {value.name for value in graph.input}
        given |= {graph.input[k].name for g, k in kept if g == ordinal}
        stale = [*graph.output] if graph is proto.graph else [*graph.input, *graph.output]
        for value in stale:
            if value.type.HasField("tensor_type") and value.name not in given:
                value.type.tensor_type.ClearField("shape")
    for (g, k), blanked in kept.items():
        declared = graphs[g].input[k].type
        for position in blanked:
            declared.tensor_type.shape.dim[position].Clear()
        final, parent = carried[(g, k)].final, graphs[carried[(g, k)].parent]
        if not final or final in {v.name for v in [*parent.input, *parent.output]}:
            continue
        info = onnx.ValueInfoProto(name=final)
        info.type.CopyFrom(declared)
        parent.value_info.append(info)


@dataclasses.dataclass(frozen=True)
class _Carried:
    """A Loop carried input with a declared shape: its body's and the Loop's graph's
    ordinals in :func:`proto_graphs` order, its index in the body, the Loop's input that
    starts it and the Loop's output that ends it ("" where absent)."""

    body: int
    index: int
    parent: int
    initial: str
    final: str


def _loop_carried(proto: onnx.ModelProto) -> list[_Carried]:
    """The Loop carried inputs with a declared shape, in the main graph and its subgraphs."""
    found: list[_Carried] = []
    count = 0

    def walk(graph: onnx.GraphProto) -> None:  # the preorder of proto_graphs
        nonlocal count
        here = count
        count += 1
        for node in graph.node:
            for attr in node.attribute:
                for sub in [attr.g, *attr.graphs] if attr.type in (5, 10) else []:
                    loop = node.op_type == "Loop" and node.domain in ("", "ai.onnx")
                    if loop and attr.name == "body":
                        for k in range(2, len(sub.input)):
                            t = sub.input[k].type
                            if t.HasField("tensor_type") and t.tensor_type.HasField("shape"):
                                initial = node.input[k] if k < len(node.input) else ""
                                final = node.output[k - 2] if k - 2 < len(node.output) else ""
                                found.append(_Carried(count, k, here, initial, final))
                    walk(sub)

    walk(proto.graph)
    return found


def _carried_fixed_point(
    proto: onnx.ModelProto, infer: Callable[[onnx.ModelProto, Kept], onnx.GraphProto]
) -> onnx.GraphProto:
    """``infer(proto, kept)`` with ``kept`` the Loop carried inputs whose declaration is a
    fixed point: inference with the declarations kept gives the Loop's initial value and the
    body's carried output the declared rank, and the static dims kept (the others made
    unknown), so every iteration's value has them (the Loop's final value too).
    onnx's inference gives a carried input no shape (it may change between iterations), so
    a nested Scan whose outputs are computed from it had none, which onnxruntime refuses.
    A static dim not confirmed (a growing Concat, a stale declaration) is made unknown, a
    rank not confirmed drops the declaration, since onnxruntime would fold a lowering's
    ``Shape`` from them. Starts from every declaration as it is; each round (one inference)
    blanks or drops what the last did not confirm, until nothing changes."""
    bodies = list(proto_graphs(proto.graph))
    carried = {(c.body, c.index): c for c in _loop_carried(proto)}
    declared = {key: _declared_proto_dims(bodies[key[0]].input[key[1]].type) for key in carried}
    kept: dict[tuple[int, int], frozenset[int]] = {key: frozenset() for key in carried}
    while True:
        work = onnx.ModelProto()
        work.CopyFrom(proto)
        graph = infer(work, kept)
        if not kept:
            return graph
        seen = _Definitions()
        for sub in proto_graphs(graph):
            for vi in [*sub.input, *sub.value_info, *sub.output]:
                if vi.HasField("type"):
                    seen.add(vi.name, vi.type)
            for init in sub.initializer:
                seen.add(init.name, onnx.helper.make_tensor_type_proto(init.data_type, init.dims))
        confirmed: dict[tuple[int, int], frozenset[int]] = {}
        for key, blanked in kept.items():
            want = declared[key]
            out = (
                bodies[key[0]].output[key[1] - 1].name
                if key[1] - 1 < len(bodies[key[0]].output)
                else ""
            )
            found = [_inferred_dims(seen.types.get(name)) for name in (carried[key].initial, out)]
            if want is None or any(dims is None or len(dims) != len(want) for dims in found):
                continue
            confirmed[key] = blanked | {
                p
                for p, d in enumerate(want)
                if d is not None and any(dims[p] != d for dims in found)  # type: ignore[index]
            }
        if confirmed == kept:
            return graph
        kept = confirmed


def _declared_proto_dims(type_proto: onnx.TypeProto) -> list[int | None] | None:
    if not type_proto.tensor_type.HasField("shape"):
        return None
    return [
        d.dim_value if d.HasField("dim_value") else None for d in type_proto.tensor_type.shape.dim
    ]


class _Definitions:
    """Types by name where a name may be defined in several sibling subgraphs: a name seen
    again keeps what its definitions agree on (:func:`_merge`); None where they disagree on
    the element type."""

    def __init__(self) -> None:
        self.types: dict[str, onnx.TypeProto | None] = {}

    def add(self, name: str, type_proto: onnx.TypeProto) -> None:
        if name in self.types and self.types[name] != type_proto:
            self.types[name] = _merge(self.types[name], type_proto)
        else:
            self.types[name] = type_proto


def _collect_graph_types(table: TypeTable, graph: onnx.GraphProto) -> None:
    found = _Definitions()
    for sub in proto_graphs(graph):
        named = {vi.name: vi for vi in [*sub.input, *sub.value_info, *sub.output]}
        for vi in named.values():  # one entry per name and graph
            if vi.HasField("type"):
                found.add(vi.name, vi.type)
        for init in sub.initializer:
            found.add(init.name, onnx.helper.make_tensor_type_proto(init.data_type, init.dims))
    for name, type_proto in found.types.items():
        if type_proto is not None:
            table.set(_MAIN, name, type_proto)


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


def _element_type_only(type_proto: onnx.TypeProto) -> onnx.TypeProto:
    """``type_proto`` without its shape (a subgraph input's declared shape may be stale)."""
    copy = onnx.TypeProto()
    copy.CopyFrom(type_proto)
    if copy.HasField("tensor_type"):
        copy.tensor_type.ClearField("shape")
    return copy


Functions = Mapping[FunctionKey, ir.Function]


def _propagate_nodes(
    nodes: Iterable[onnx.NodeProto],
    known: dict[str, onnx.TypeProto],
    version: int,
    opsets: list[onnx.OperatorSetIdProto],
    found: _Definitions,
    *,
    functions: Functions,
    calling: tuple[FunctionKey, ...],
) -> None:
    """Add the output types of ai.onnx ``nodes`` and of calls to model-local
    ``functions`` (and of nodes in their subgraphs) to ``known`` (the types in scope as the
    nodes are visited) and to ``found`` (every definition of a name, merged across sibling
    subgraphs). ``calling``: the functions being propagated through (no cycle)."""
    for node in nodes:
        for attr in node.attribute:
            for sub in [attr.g, *attr.graphs] if attr.type in (5, 10) else []:
                for vi in sub.input:
                    if vi.HasField("type"):
                        known[vi.name] = _element_type_only(vi.type)
                        found.add(vi.name, known[vi.name])
                _propagate_nodes(
                    sub.node, known, version, opsets, found, functions=functions, calling=calling
                )
        key = (node.domain or "", node.op_type, node.overload)
        if key in functions and key not in calling:
            callee = functions[key]
            inner = _propagate_function(
                callee, [known.get(i) for i in node.input], functions, (*calling, key)
            )
            for name, out in zip(node.output, callee.outputs):
                if name and out.name in inner:
                    known[name] = inner[out.name]
                    found.add(name, inner[out.name])
            continue
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
        if node.op_type == "If":
            outputs = _if_outputs(node, outputs, known)
        known.update(outputs)
        for name, type_proto in outputs.items():
            found.add(name, type_proto)


def _if_outputs(
    node: onnx.NodeProto, inferred: dict[str, onnx.TypeProto], known: dict[str, onnx.TypeProto]
) -> dict[str, onnx.TypeProto]:
    """An If's output types: onnx's (from the branches' declared outputs), or where those
    give no element type (branches that declare none), what both branches' propagated output
    types agree on (:func:`_merge`)."""
    branches = {a.name: a.g for a in node.attribute if a.type == onnx.AttributeProto.GRAPH}
    then, other = branches.get("then_branch"), branches.get("else_branch")
    if then is None or other is None:
        return inferred
    result = dict(inferred)
    for k, name in enumerate(node.output):
        have = result.get(name)
        if not name or (have is not None and have.tensor_type.elem_type):
            continue
        if k >= len(then.output) or k >= len(other.output):
            continue
        merged = _merge(known.get(then.output[k].name), known.get(other.output[k].name))
        if merged is not None:
            result[name] = merged
    return result


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


def _propagate_function(
    function: ir.Function,
    input_types: list[onnx.TypeProto | None],
    functions: Functions,
    calling: tuple[FunctionKey, ...] = (),
) -> dict[str, onnx.TypeProto]:
    """Types of a function body's values given its input types (ai.onnx ops, and calls to
    the model's other functions)."""
    proto = ir.serde.serialize_function(function)
    known: dict[str, onnx.TypeProto] = {
        name: tp for name, tp in zip(proto.input, input_types) if tp is not None
    }
    for vi in proto.value_info:  # IR >= 10 functions may declare their values' types
        if vi.HasField("type") and vi.name in proto.input and vi.name not in known:
            known[vi.name] = vi.type
    version = {o.domain: o.version for o in proto.opset_import}.get("", 1)
    found = _Definitions()
    for name, type_proto in known.items():
        found.add(name, type_proto)
    _propagate_nodes(
        proto.node,
        known,
        version,
        list(proto.opset_import),
        found,
        functions=functions,
        calling=calling,
    )
    return {name: tp for name, tp in found.types.items() if tp is not None}


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


def _forget_defaults(proto: onnx.ModelProto, declared: dict[str, onnx.TypeProto]) -> None:
    """Make the initializers that are also graph inputs plain inputs of their declared
    type: a feed may replace them (value and shape), so inference must not read the default
    (a Reshape's shape from it would be taken as the shape)."""
    kept = [t for t in proto.graph.initializer if t.name not in declared]
    del proto.graph.initializer[:]
    proto.graph.initializer.extend(kept)
    for value in proto.graph.input:
        if value.name in declared:
            value.type.CopyFrom(declared[value.name])


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


def _main_graph_types(model: ir.Model) -> onnx.GraphProto:
    overridable = overridable_shapes(model)
    declared = {  # before call_onnx_api sets shapes from the tensors
        v.name: ir.serde.serialize_value(v).type
        for v in model.graph.inputs
        if v.name in overridable
    }

    def infer_once(proto: onnx.ModelProto, kept: Kept) -> onnx.GraphProto:
        _forget_declared(proto, kept)
        _forget_defaults(proto, declared)
        try:
            proto = onnx.shape_inference.infer_shapes(proto, strict_mode=False, data_prop=True)
        except Exception as exc:  # noqa: BLE001 - keep the declared types
            logger.debug("shape inference failed, using declared types only: %s", exc)
        return proto.graph

    return call_onnx_api(lambda proto: _carried_fixed_point(proto, infer_once), model)


def infer_types(model: ir.Model) -> TypeTable:
    """Infer value types of ``model``; ``model`` is left as it was."""
    table = TypeTable(model.graph)
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
        inputs = seen.get(key, [])
        for name, tp in _propagate_function(function, inputs, model.functions, (key,)).items():
            table.set(fscope, name, tp)
        record(fscope, function)


def _declared_dims(value: ir.Value) -> list[int | None] | None:
    if value.shape is None:
        return None
    return [d if isinstance(d, int) else None for d in value.shape.dims]


def _inferred_dims(type_proto: onnx.TypeProto | None) -> list[int | None] | None:
    if type_proto is None or not type_proto.HasField("tensor_type"):
        return None
    tt = type_proto.tensor_type
    if not tt.HasField("shape"):
        return None
    return [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]


def stale_shapes(model: ir.Model, types: TypeTable) -> list[ir.Value]:
    """Main-graph values whose declared shape contradicts inference (stale ``value_info``)."""
    stale = []
    for node in ir.traversal.RecursiveGraphIterator(model.graph):
        for value in node.outputs:
            declared = _declared_dims(value)
            inferred = _inferred_dims(types.get_proto(_MAIN, value.name or ""))
            if declared is None or inferred is None:
                continue
            if len(inferred) != len(declared) or any(
                a is not None and b is not None and a != b for a, b in zip(inferred, declared)
            ):
                stale.append(value)
    return stale


def _subgraphs(node: ir.Node) -> Iterator[ir.Graph]:
    for attr in node.attributes.values():
        if attr.type == ir.AttributeType.GRAPH:
            yield attr.as_graph()
        elif attr.type == ir.AttributeType.GRAPHS:
            yield from attr.as_graphs()


def _owned_subgraphs(top: ir.Graph) -> list[tuple[ir.Graph, ir.Node]]:
    """Every subgraph below ``top``, at any depth, with the node that owns it."""
    return [
        (sub, node) for node in ir.traversal.RecursiveGraphIterator(top) for sub in _subgraphs(node)
    ]


def unconfirmed_subgraph_inputs(
    model: ir.Model, types: TypeTable
) -> list[tuple[ir.Value, list[int | None] | None]]:
    """Inputs of every subgraph whose declared rank or static dims shape inference does not
    confirm: a Loop body's carried value whose declaration is not a fixed point of the loop
    (its rank may change between iterations too; see :func:`_carried_fixed_point`), a
    Scan body's state declared with another shape than its initial value's, whose
    declaration no runtime checks, but from which onnxruntime folds a Shape of it (and of
    what is computed from it) into a constant, and sizes the body's outputs: a lowering that
    reads the dims at run time would read the declaration, and a body output whose stale
    declaration the rewrite blanks would take the input's (onnxruntime then failed with
    "pre-allocated output has shape {5} but the computed output shape is {2}"). With the
    inferred dims."""
    scopes = [(_MAIN, model.graph)]
    scopes += [(function_scope(f), f.graph) for f in model.functions.values()]
    unconfirmed: list[tuple[ir.Value, list[int | None] | None]] = []
    for scope, top in scopes:
        for graph, owner in _owned_subgraphs(top):
            fixed = 2 if owner.op_type == "Loop" else 0
            for value in graph.inputs[fixed:]:  # a Loop's count and condition: scalars
                declared = _declared_dims(value)
                if declared is None:
                    continue
                # the rank alone too: a Loop body's carried value may change rank between
                # iterations, and onnxruntime folded Shape(Shape(v)) from a declared one
                inferred = _inferred_dims(types.get_proto(scope, value.name or ""))
                if (
                    inferred is None
                    or len(inferred) != len(declared)
                    or any(d is not None and d != e for d, e in zip(declared, inferred))
                ):
                    unconfirmed.append((value, inferred))
    return unconfirmed


def _confirms(declared: list[int | None], inferred: list[int | None] | None) -> bool:
    """Whether inference gives every static dim of a declared shape."""
    return (
        inferred is not None
        and len(inferred) == len(declared)
        and all(d is None or d == e for d, e in zip(declared, inferred))
    )


def _blank_unconfirmed(declared: ir.Shape, inferred: list[int | None] | None) -> ir.Shape:
    """``declared`` with its static dims that ``inferred`` does not give made unknown (the
    rank is kept: the checker wants a shape on a graph's outputs)."""
    same_rank = inferred is not None and len(inferred) == len(declared)
    return ir.Shape(
        [
            d if not isinstance(d, int) or (same_rank and inferred[k] == d) else None  # type: ignore[index]
            for k, d in enumerate(declared.dims)
        ]
    )


def unconfirmed_computed_shapes(
    model: ir.Model, types: TypeTable
) -> list[tuple[ir.Value, list[int | None] | None]]:
    """Values computed by a node (main graph, subgraphs, function bodies) whose declared
    static dims inference does not confirm, with the inferred dims: a ``value_info`` written
    for other input shapes (a function's, made graph-level by inlining; an exporter's for one
    batch size), from
    which onnxruntime would fold a lowering's ``Shape`` of the value, or of what is computed
    from it, into a constant. Not the main graph's outputs that nothing reads (the model's
    interface, from which nothing is folded)."""
    scopes = [(_MAIN, model.graph)]
    scopes += [(function_scope(f), f.graph) for f in model.functions.values()]
    found: list[tuple[ir.Value, list[int | None] | None]] = []
    for scope, top in scopes:
        for node in ir.traversal.RecursiveGraphIterator(top):
            for value in node.outputs:
                declared = _declared_dims(value)
                if declared is None or all(d is None for d in declared):
                    continue
                if value.is_graph_output() and value.graph is model.graph and not value.uses():
                    continue
                inferred = _inferred_dims(types.get_proto(scope, value.name or ""))
                if not _confirms(declared, inferred):
                    found.append((value, inferred))
    return found


def cumprod_cone(model: ir.Model) -> set[int]:
    """The ids of the values a CumProd's inputs are computed from, at any distance: through
    node inputs, what the outputs of a subgraph or a model-local function body a node on the
    way runs are computed from (outer-scope reads too), a subgraph's inputs back to its
    node's inputs and its own outputs (a Loop's carried values), a function's inputs back to
    every call's inputs. Their declared shapes are the ones onnxruntime may fold a
    lowering's ``Shape`` from."""
    functions = {id(f.graph): f.identifier() for f in model.functions.values()}
    owner: dict[int, ir.Node] = {}
    calls: dict[tuple[str, str, str], list[ir.Node]] = {}
    todo: list[ir.Value | None] = []
    for top in (model.graph, *(f.graph for f in model.functions.values())):
        for node in ir.traversal.RecursiveGraphIterator(top):
            for sub in _subgraphs(node):
                owner[id(sub)] = node
            calls.setdefault((node.domain, node.op_type, node.overload), []).append(node)
            if node.op_type == "CumProd" and node.domain in ("", "ai.onnx"):
                todo.extend(node.inputs)
    seen: set[int] = set()
    visited: set[int] = set()

    def run(node: ir.Node) -> None:
        if id(node) in visited:
            return
        visited.add(id(node))
        todo.extend(node.inputs)
        bodies = list(_subgraphs(node))
        called = model.functions.get((node.domain, node.op_type, node.overload))
        if called is not None:
            bodies.append(called.graph)
        for body in bodies:  # what reaches its outputs (an outer-scope read too)
            todo.extend(body.outputs)

    while todo:
        value = todo.pop()
        if value is None or id(value) in seen:
            continue
        seen.add(id(value))
        producer = value.producer()
        if producer is not None:
            run(producer)
        elif value.graph is not None and id(value.graph) in owner:  # a subgraph's input
            todo.extend(owner[id(value.graph)].inputs)
            todo.extend(value.graph.outputs)
        elif value.graph is not None and id(value.graph) in functions:  # a function's input
            for call in calls.get(functions[id(value.graph)], []):
                todo.extend(call.inputs)
    return seen


def drop_unconfirmed_shapes(model: ir.Model, types: TypeTable) -> None:
    """Clear the declared shapes a lowering must not build on: main-graph values whose
    declaration contradicts inference (:func:`stale_shapes`; everywhere: onnx's full check
    refuses them), and, on the way to a CumProd (:func:`cumprod_cone`; elsewhere they are kept
    as declared), the declared static dims of computed values and subgraph inputs that
    inference does not confirm (:func:`unconfirmed_computed_shapes`,
    :func:`unconfirmed_subgraph_inputs`: made unknown, the rank kept; a subgraph input whose
    rank inference does not confirm loses its shape).

    A main-graph output that a CumProd reads keeps its declaration as the model's output:
    the value computed is renamed and the output becomes an ``Identity`` of it (its shape is
    the one cleared), so the interface stays as it was and nothing is folded from it."""
    cone = cumprod_cone(model)
    for stale in stale_shapes(model, types):
        logger.warning(
            "value '%s' declares shape %s, which contradicts shape inference: dropped",
            stale.name,
            stale.shape,
        )
        (_inner_of_output(model, stale, types) if id(stale) in cone else stale).shape = None
    for computed, inferred in unconfirmed_computed_shapes(model, types):
        if id(computed) not in cone:
            continue
        value = _inner_of_output(model, computed, types)
        assert value.shape is not None
        blanked = _blank_unconfirmed(value.shape, inferred)
        logger.info(
            "value '%s' declares shape %s, which shape inference does not confirm: %s is "
            "kept (onnxruntime would fold the lowering's Shape from the rest)",
            value.name,
            value.shape,
            blanked,
        )
        value.shape = blanked
    unconfirmed = [
        (value, inferred)
        for value, inferred in unconfirmed_subgraph_inputs(model, types)
        if id(value) in cone
    ]
    if any(inferred is None or len(inferred) != len(v.shape or ()) for v, inferred in unconfirmed):
        _scan_outputs_keep_their_rank(model)
    for value, inferred in unconfirmed:
        assert value.shape is not None
        # the rank where inference confirms it: a Scan in the body returning the value (or
        # what is computed from it) needs a shape on onnxruntime, the rank is enough
        same_rank = inferred is not None and len(inferred) == len(value.shape)
        kept = _blank_unconfirmed(value.shape, inferred) if same_rank else None
        logger.info(
            "subgraph input '%s' declares shape %s, which shape inference does not "
            "confirm: %s is kept (onnxruntime would fold the lowering's Shape from the rest)",
            value.name,
            value.shape,
            kept,
        )
        value.shape = kept


def _scan_outputs_keep_their_rank(model: ir.Model) -> None:
    """Give each Scan body output of the main graph's subgraphs that declares no shape the
    rank onnx's inference gives it with every declaration taken as it is (as onnxruntime
    takes them), its dims unknown. Called before a subgraph input whose rank inference does
    not confirm loses its declaration: a Scan body output computed from it (a Loop body's
    carried value a nested Scan returns, the Loop's own carried value growing) would have
    no shape, and onnxruntime refuses a Scan body output without one ("Subgraph must have
    the shape set for all outputs"). The rank alone: nothing in the body is computed from
    it, and the Scan's outputs have that rank when the original runs."""
    try:
        declared = call_onnx_api(
            lambda proto: onnx.shape_inference.infer_shapes(proto, strict_mode=False).graph, model
        )
    except Exception as exc:  # noqa: BLE001 - the outputs stay as they are
        logger.debug("shape inference failed, Scan body outputs left as declared: %s", exc)
        return
    found = _Definitions()
    for sub in proto_graphs(declared):
        for vi in [*sub.input, *sub.value_info, *sub.output]:
            if vi.HasField("type"):
                found.add(vi.name, vi.type)
    for node in ir.traversal.RecursiveGraphIterator(model.graph):
        if node.op_type != "Scan" or node.domain not in ("", "ai.onnx"):
            continue
        for body in _subgraphs(node):
            for value in body.outputs:
                dims = _inferred_dims(found.types.get(value.name or ""))
                if value.shape is None and dims is not None:
                    logger.info(
                        "Scan body output '%s' takes the rank %d its declarations give",
                        value.name,
                        len(dims),
                    )
                    value.shape = ir.Shape([None] * len(dims))


def _inner_of_output(model: ir.Model, value: ir.Value, types: TypeTable) -> ir.Value:
    """``value`` itself, or when it is a main-graph output that nodes read: the value under
    a new name, the output now ``Identity`` of it under the old name with the declaration
    (type and shape) as it was. Its inferred type is kept under the new name."""
    graph = model.graph
    if value.graph is not graph or not value.is_graph_output() or not value.uses():
        return value
    name = value.name or ""
    taken = {v.name for v in graph.inputs} | {n.name for n in graph.initializers.values()}
    for node in ir.traversal.RecursiveGraphIterator(graph):
        taken.update(v.name for v in node.outputs)
    fresh, k = f"{name}__computed", 0
    while fresh in taken:
        k += 1
        fresh = f"{name}__computed_{k}"
    declared = types.get_proto(_MAIN, name)
    value.name = fresh
    if declared is not None:
        types.set(_MAIN, fresh, declared)
    shown = ir.Value(name=name, type=value.type, shape=value.shape)
    graph.append(ir.Node("", "Identity", [value], outputs=[shown], name=f"{name}__output"))
    for index, output in enumerate(graph.outputs):
        if output is value:
            graph.outputs[index] = shown
    return value
