"""If nodes with a constant condition that hold or feed a CumProd: the branch taken, inlined.

``y = If(Constant(c)) {then} {else}`` ->
``<the nodes of the branch c selects>; y = Identity(<that branch's output>)``, for

- an If in a Loop / Scan body or an If branch whose ``y`` a CumProd reads (directly or
  through Identity). onnxruntime (1.20.1 and 1.32 measured, optimisation level basic and up)
  folds such an If itself, and when the If sits in a Loop body and a ``Shape`` reads its
  output, the value is lost: "Missing Input: y" at run time (right with optimisations off).
  Every lowering reads ``Shape`` of the CumProd's input, so the rewrite of a model that runs
  would not;
- an If anywhere (the main graph included) whose branches hold a CumProd. onnxruntime
  1.32's ConstantFolding inlines it (``Graph::InlineIfSubgraph``) and crashes the process
  (SIGSEGV, in most loads) when its branches hold a lowering's If / Scan nodes, where the
  original's CumProd loads (tests/test_structure_fuzz.py, CONSTANT_IF_CRASH).

Inlining here, as onnxruntime would, leaves it no such If to fold. The taken branch's
initializers move with it (as Constant nodes in a function body), and onnx_ir's
``NameFixPass`` then keeps the moved nodes' and values' names apart from the graph's own.
"""

from __future__ import annotations

import logging

import onnx_ir as ir
from onnx_ir.passes import common

from rewriter.graphs import ONNX_DOMAINS, holds_cumprod

__all__ = ["inline_constant_ifs"]

logger = logging.getLogger(__name__)


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
    if cond is None or cond.is_graph_input():  # an initializer a feed may override
        return None
    tensor = ir.convenience.get_const_tensor(cond)
    if tensor is None or tensor.size != 1:
        return None
    return bool(tensor.numpy().reshape(()))


def _move_initializers(branch: ir.Graph, graph: ir.Graph, node: ir.Node, body: bool) -> None:
    """The taken branch's initializers, moved before ``node``: registered in ``graph``, or as
    Constant nodes in a function body (which has no initializers)."""
    for name in list(branch.initializers):
        value = branch.initializers.pop(name)
        if body:
            tensor = value.const_value
            assert tensor is not None  # (an initializer)
            const = ir.Node("", "Constant", [], [ir.AttrTensor("value", tensor)], name=name)
            const.outputs[0].name = name
            const.outputs[0].type, const.outputs[0].shape = value.type, value.shape
            graph.insert_before(node, const)
            ir.convenience.replace_all_uses_with(value, const.outputs[0])
            continue
        k = 0
        while value.name in graph.initializers:  # unique in the graph: NameFixPass does the rest
            value.name = f"{name}__inlined_{k}"
            k += 1
        graph.register_initializer(value)


def _inline(node: ir.Node, taken_branch: bool, body: bool) -> None:
    graph = node.graph
    assert graph is not None
    branch = node.attributes["then_branch" if taken_branch else "else_branch"].as_graph()
    _move_initializers(branch, graph, node, body)
    moved = list(branch)
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
    cond = node.inputs[0]
    assert cond is not None  # (a constant condition)
    graph.remove(node, safe=True)
    source = cond.producer()
    unread = not cond.uses() and not cond.is_graph_output()
    if source is not None and source.graph is graph and unread:
        graph.remove(source, safe=True)  # its Constant, read by nothing else


def inline_constant_ifs(model: ir.Model) -> int:
    """Inline the Ifs this module's docstring describes; returns how many."""
    candidates = list(ir.traversal.RecursiveGraphIterator(model.graph))
    for function in model.functions.values():
        candidates.extend(ir.traversal.RecursiveGraphIterator(function.graph))
    bodies = [function.graph for function in model.functions.values()]
    count = 0
    for node in candidates:
        if node.op_type != "If" or node.domain not in ONNX_DOMAINS:
            continue
        chosen = _condition(node)
        if chosen is None:
            continue
        read = node.graph is not model.graph and any(_read_by_cumprod(v) for v in node.outputs)
        branches = (node.attributes[k].as_graph() for k in ("then_branch", "else_branch"))
        if not read and not any(holds_cumprod(b) for b in branches):
            continue
        logger.debug("If '%s': constant condition %s, branch inlined", node.name, chosen)
        _inline(node, chosen, body=any(node.graph is b for b in bodies))
        count += 1
    if count:  # the moved nodes and values may share names with the graph's own
        common.NameFixPass()(model)
        logger.info("inlined %d If node(s) with a constant condition read by a CumProd", count)
    return count
