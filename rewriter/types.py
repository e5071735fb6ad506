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

import onnx
import onnx_ir as ir

from rewriter.protos import proto_graphs, proto_nodes
from rewriter.serde import call_onnx_api, overridable_shapes

__all__ = [
    "Definitions",
    "FunctionKey",
    "TypeTable",
    "call_sites",
    "function_key",
    "function_scope",
    "functions_in_call_order",
    "infer_function_types",
    "infer_types",
    "inferred_dims",
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
        seen = Definitions()
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
            found = [inferred_dims(seen.types.get(name)) for name in (carried[key].initial, out)]
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


class Definitions:
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
    found = Definitions()
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
    found: Definitions,
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
    found = Definitions()
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


def inferred_dims(type_proto: onnx.TypeProto | None) -> list[int | None] | None:
    """The dims a type gives (None where not static); None without a shape."""
    if type_proto is None or not type_proto.HasField("tensor_type"):
        return None
    tt = type_proto.tensor_type
    if not tt.HasField("shape"):
        return None
    return [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]
