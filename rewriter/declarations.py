"""Declared shapes the rewrite must not build on, and how they are repaired.

A lowering reads x's dims at run time (``Shape``), but onnxruntime folds a ``Shape`` from a
declared shape into a constant; a declaration no runtime checks (a stale ``value_info``, a
Loop body's carried value that is not a fixed point, a Scan state declared with another
shape than its initial value's) would then size the lowering wrongly. So, from the types
:mod:`rewriter.types` infers: main-graph declarations that contradict inference are cleared
(onnx's full check refuses them); on the way to a CumProd (:func:`cumprod_cone`), the static
dims inference does not confirm are blanked on computed values and subgraph inputs; a graph
output the rewrite cannot confirm becomes an ``Identity`` of the computed value, so the
model's interface keeps its declarations.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import onnx
import onnx_ir as ir

from rewriter.protos import proto_graphs
from rewriter.serde import call_onnx_api
from rewriter.types import _MAIN, Definitions, TypeTable, function_scope, inferred_dims

__all__ = [
    "cumprod_cone",
    "drop_unconfirmed_shapes",
    "stale_shapes",
    "unconfirmed_computed_shapes",
    "unconfirmed_subgraph_inputs",
]

logger = logging.getLogger(__name__)


def _declared_dims(value: ir.Value) -> list[int | None] | None:
    if value.shape is None:
        return None
    return [d if isinstance(d, int) else None for d in value.shape.dims]


def stale_shapes(model: ir.Model, types: TypeTable) -> list[ir.Value]:
    """Main-graph values whose declared shape contradicts inference (stale ``value_info``)."""
    stale = []
    for node in ir.traversal.RecursiveGraphIterator(model.graph):
        for value in node.outputs:
            declared = _declared_dims(value)
            inferred = inferred_dims(types.get_proto(_MAIN, value.name or ""))
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
                inferred = inferred_dims(types.get_proto(scope, value.name or ""))
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
                inferred = inferred_dims(types.get_proto(scope, value.name or ""))
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
        _scan_outputs_keep_their_rank(model, types)
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


def _scan_outputs_keep_their_rank(model: ir.Model, types: TypeTable) -> None:
    """Give each Scan body output (in the main graph's subgraphs and in function bodies)
    that declares no shape the rank onnx's inference gives it with every declaration taken
    as it is (as onnxruntime takes them), its dims unknown. Called before a subgraph input
    whose rank inference does not confirm loses its declaration: a Scan body output computed
    from it (a Loop body's carried value a nested Scan returns, the Loop's own carried value
    growing) would have no shape, and onnxruntime refuses a Scan body output without one
    ("Subgraph must have the shape set for all outputs"). The rank alone: nothing in the body
    is computed from it, and the Scan's outputs have that rank when the original runs. A
    function body is inferred as a graph whose inputs have the types its call sites agree on
    (onnxruntime infers it inlined, with the caller's types)."""
    _give_scan_outputs_rank(model.graph, _declared_inference(model, None, types))
    for function in model.functions.values():
        if any(n.op_type == "Scan" for n in ir.traversal.RecursiveGraphIterator(function.graph)):
            _give_scan_outputs_rank(function.graph, _declared_inference(model, function, types))


def _declared_inference(
    model: ir.Model, function: ir.Function | None, types: TypeTable
) -> dict[str, onnx.TypeProto | None]:
    """The types onnx's inference gives every value of the main graph (``function`` None) or
    of a function body, with the declarations in it taken as they are; by name, sibling
    subgraphs' definitions merged; empty where inference fails."""
    try:
        if function is None:
            graph = call_onnx_api(
                lambda proto: onnx.shape_inference.infer_shapes(proto, strict_mode=False).graph,
                model,
            )
        else:
            graph = _infer_function_body(model, function, types)
    except Exception as exc:  # noqa: BLE001 - the outputs stay as they are
        logger.debug("shape inference failed, Scan body outputs left as declared: %s", exc)
        return {}
    found = Definitions()
    for sub in proto_graphs(graph):
        for vi in [*sub.input, *sub.value_info, *sub.output]:
            if vi.HasField("type"):
                found.add(vi.name, vi.type)
    return found.types


def _infer_function_body(
    model: ir.Model, function: ir.Function, types: TypeTable
) -> onnx.GraphProto:
    """onnx's inference on ``function``'s body made a model's graph, its inputs typed as its
    call sites agree (untyped where they do not)."""
    proto = ir.serde.serialize_function(function)
    scope = function_scope(function)
    inputs = []
    for name in proto.input:
        info = onnx.ValueInfoProto(name=name)
        known = types.get_proto(scope, name)
        if known is not None:
            info.type.CopyFrom(known)
        inputs.append(info)
    graph = onnx.helper.make_graph(
        list(proto.node), proto.name, inputs, [onnx.ValueInfoProto(name=o) for o in proto.output]
    )
    standalone = onnx.helper.make_model(
        graph,
        opset_imports=list(proto.opset_import),
        functions=[ir.serde.serialize_function(f) for f in model.functions.values()],
        ir_version=model.ir_version,
    )
    return onnx.shape_inference.infer_shapes(standalone, strict_mode=False).graph


def _give_scan_outputs_rank(top: ir.Graph, inferred: dict[str, onnx.TypeProto | None]) -> None:
    for node in ir.traversal.RecursiveGraphIterator(top):
        if node.op_type != "Scan" or node.domain not in ("", "ai.onnx"):
            continue
        for body in _subgraphs(node):
            for value in body.outputs:
                dims = inferred_dims(inferred.get(value.name or ""))
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
