"""The pass: find every CumProd, validate it, choose a lowering, swap the nodes.

``CumProd(x, axis) -> <lowering's subgraph of older ai.onnx ops>``, in the main graph, in
If / Loop / Scan bodies at any depth and in every model-local function. Every node is
validated and planned before the first one is replaced, so a bad node leaves the model as it
was. The swap is done in one place with ``ir.convenience.replace_nodes_and_values``, which
keeps the output's name, type and shape (graph outputs keep their names).
"""

from __future__ import annotations

import collections
import dataclasses
import logging

import onnx
import onnx_ir as ir

from rewriter import lowerings
from rewriter.errors import InvalidCumProdError
from rewriter.graphs import ONNX_DOMAINS, walk_model
from rewriter.site import CumProdSite, inspect_cumprod
from rewriter.types import infer_types

__all__ = ["DecomposeCumProdPass", "Planned", "decompose_cumprod", "plan_cumprods"]

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Planned:
    """A validated CumProd and the lowering chosen for it."""

    site: CumProdSite
    lowering: lowerings.Lowering


def _is_cumprod(node: ir.Node) -> bool:
    return node.op_type == "CumProd" and node.domain in ONNX_DOMAINS


def plan_cumprods(model: ir.Model, strategy: str = "auto") -> list[Planned]:
    """Validate every CumProd in ``model`` and choose its lowering; changes nothing.

    Raises:
        InvalidCumProdError: a malformed CumProd.
        StrategyError: ``strategy`` cannot compute one of the nodes exactly.
        ValueError: an unknown strategy name.
    """
    if strategy not in lowerings.STRATEGIES:
        raise ValueError(
            f"unknown strategy {strategy!r}; choose one of {', '.join(lowerings.STRATEGIES)}"
        )
    found = [where for where in walk_model(model) if _is_cumprod(where.node)]
    if not found:
        return []
    types = infer_types(model)
    plans = []
    for where in found:
        if where.opset < 26:
            raise InvalidCumProdError(
                where.node.name or "",
                where.location,
                f"CumProd needs ai.onnx opset >= 26, found {where.opset}",
            )
        site = inspect_cumprod(
            where.node, location=where.location, opset=where.opset, scope=where.scope, types=types
        )
        plans.append(Planned(site, lowerings.choose(site, strategy)))
    return plans


def _replace(plan: Planned, names: lowerings.NameSource) -> None:
    site = plan.site
    node = site.node
    graph = node.graph
    assert graph is not None
    builder = lowerings.Builder(site.opset, names, node.name or "CumProd")
    y = lowerings.lower(builder, site, plan.lowering)
    axis = site.axis_value
    ir.convenience.replace_nodes_and_values(
        graph, node, [node], builder.nodes, [node.outputs[0]], [y]
    )
    _drop_if_dead(axis)
    logger.debug("lowered CumProd %r in %s with %s", node.name, site.location, plan.lowering.name)


def _drop_if_dead(axis: ir.Value) -> None:
    """Remove the axis constant (initializer or Constant node) when the CumProd was its only
    user, so the rewritten model carries no dead weight (onnxruntime warns about it)."""
    if axis.uses() or axis.is_graph_input() or axis.is_graph_output():
        return
    producer = axis.producer()
    if producer is not None and producer.op_type == "Constant" and producer.graph is not None:
        if len(producer.outputs) == 1:
            producer.graph.remove(producer, safe=True)
    elif axis.is_initializer() and axis.graph is not None and axis.name is not None:
        axis.graph.initializers.pop(axis.name)


class DecomposeCumProdPass(ir.passes.InPlacePass):
    """Replace every ai.onnx CumProd with an equivalent subgraph of older ops.

    Rewrites CumProd in the main graph, in subgraphs at any depth and in model-local
    functions, for every element type, both attributes, constant or run-time axes. A model
    without CumProd is returned unchanged; a second run changes nothing.

    Attributes:
        strategy: ``"auto"`` or a lowering name (see :data:`rewriter.lowerings.STRATEGIES`).
        plans: The nodes rewritten by the last call, with the lowering used for each.
    """

    def __init__(self, strategy: str = "auto") -> None:
        super().__init__()
        if strategy not in lowerings.STRATEGIES:
            raise ValueError(
                f"unknown strategy {strategy!r}; choose one of {', '.join(lowerings.STRATEGIES)}"
            )
        self.strategy = strategy
        self.plans: list[Planned] = []

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        self.plans = plan_cumprods(model, self.strategy)
        if self.plans:
            names = lowerings.NameSource.for_model(model)
            for plan in self.plans:
                _replace(plan, names)
            counts = collections.Counter(plan.lowering.name for plan in self.plans)
            logger.info(
                "lowered %d CumProd node(s): %s",
                len(self.plans),
                ", ".join(f"{n} {name}" for name, n in sorted(counts.items())),
            )
        return ir.passes.PassResult(model, modified=bool(self.plans))


def decompose_cumprod(
    model: onnx.ModelProto | ir.Model, *, strategy: str = "auto"
) -> onnx.ModelProto | ir.Model:
    """Lower every CumProd in ``model``.

    An ``onnx.ModelProto`` is not modified: a new ModelProto is returned (a copy when there
    was nothing to lower). An ``onnx_ir.Model`` is rewritten in place and returned.

    Raises:
        CumProdError: (a ValueError) naming the first node that cannot be lowered; the model
            is then left as it was.
    """
    rewrite = DecomposeCumProdPass(strategy)
    if isinstance(model, ir.Model):
        return rewrite(model).model
    ir_model = ir.serde.deserialize_model(model)
    if not rewrite(ir_model).modified:
        copy = onnx.ModelProto()
        copy.CopyFrom(model)
        return copy
    return ir.serde.serialize_model(ir_model)
