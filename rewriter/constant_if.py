"""If nodes with a constant condition whose output a CumProd reads, inside a subgraph: the
branch taken, inlined.

``y = If(Constant(c)) {then} {else}`` in a Loop / Scan body or an If branch, with ``y``
read by a CumProd (directly or through Identity) ->
``<the nodes of the branch c selects>; y = Identity(<that branch's output>)``.

onnxruntime (1.20.1 and 1.32 measured, optimisation level basic and up) folds such an If
itself, and when the If sits in a Loop body and a ``Shape`` reads its output, the value is
lost: "Missing Input: y" at run time (right with optimisations off). Every lowering reads
``Shape`` of the CumProd's input, so the rewrite of a model that runs would not: the
branch is inlined here first, as onnxruntime would, which leaves it no If to fold. The
main graph's Ifs are left alone (onnxruntime folds those right).
"""

from __future__ import annotations

import logging

import onnx_ir as ir

from rewriter.graphs import ONNX_DOMAINS

__all__ = ["inline_constant_ifs"]

logger = logging.getLogger(__name__)


def _taken_names(model: ir.Model) -> set[str]:
    graphs = [model.graph, *(f.graph for f in model.functions.values())]
    names: set[str] = set()
    for top in graphs:
        names.update(v.name or "" for v in top.inputs)
        names.update(top.initializers)
        for node in ir.traversal.RecursiveGraphIterator(top):
            names.update(v.name or "" for v in node.outputs)
            for attr in node.attributes.values():
                subs = (
                    [attr.as_graph()]
                    if attr.type == ir.AttributeType.GRAPH
                    else attr.as_graphs()
                    if attr.type == ir.AttributeType.GRAPHS
                    else []
                )
                for sub in subs:
                    names.update(v.name or "" for v in sub.inputs)
    return names


def _read_by_cumprod(value: ir.Value) -> bool:
    """Whether a CumProd reads ``value`` as x, directly or through Identity nodes."""
    for use in value.uses():
        node = use.node
        if node.domain not in ONNX_DOMAINS:
            continue
        if node.op_type == "CumProd" and use.idx == 0:
            return True
        if node.op_type == "Identity" and _read_by_cumprod(node.outputs[0]):
            return True
    return False


def _condition(node: ir.Node) -> bool | None:
    cond = node.inputs[0] if node.inputs else None
    tensor = ir.convenience.get_const_tensor(cond) if cond is not None else None
    if tensor is None or tensor.size != 1:
        return None
    return bool(tensor.numpy().reshape(()))


def _inline(node: ir.Node, taken: set[str], taken_branch: bool) -> None:
    graph = node.graph
    assert graph is not None
    branch = node.attributes["then_branch" if taken_branch else "else_branch"].as_graph()
    moved = list(branch)
    for inner in moved:
        for value in inner.outputs:
            name = value.name or "if_value"
            if name in taken:  # a sibling subgraph's name: made unique in its new scope
                k = 0
                while f"{name}__inlined_{k}" in taken:
                    k += 1
                value.name = f"{name}__inlined_{k}"
            taken.add(value.name or "")
    outputs = list(branch.outputs)
    branch.outputs.clear()
    for inner in moved:
        branch.remove(inner)
    graph.insert_before(node, moved)
    for out, result in zip(node.outputs, outputs):
        shown = ir.Value(name=out.name, type=out.type, shape=out.shape)
        out.name = None
        identity = ir.Node("", "Identity", [result], outputs=[shown])
        graph.insert_before(node, identity)
        ir.convenience.replace_all_uses_with(out, shown, replace_graph_outputs=True)
    graph.remove(node, safe=True)


def inline_constant_ifs(model: ir.Model) -> int:
    """Inline the Ifs this module's docstring describes; returns how many."""
    candidates = []
    tops = [*(f.graph for f in model.functions.values())]
    for node in ir.traversal.RecursiveGraphIterator(model.graph):
        if node.graph is not model.graph:
            candidates.append(node)
    for top in tops:
        candidates.extend(ir.traversal.RecursiveGraphIterator(top))
    count = 0
    taken: set[str] | None = None
    for node in candidates:
        if node.op_type != "If" or node.domain not in ONNX_DOMAINS:
            continue
        chosen = _condition(node)
        if chosen is None or not any(_read_by_cumprod(v) for v in node.outputs):
            continue
        taken = _taken_names(model) if taken is None else taken
        logger.debug("If '%s': constant condition %s, branch inlined", node.name, chosen)
        _inline(node, taken, chosen)
        count += 1
    if count:
        logger.info("inlined %d If node(s) with a constant condition read by a CumProd", count)
    return count
