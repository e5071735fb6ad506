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

from rewriter import lowerings, opset
from rewriter.errors import InvalidCumProdError
from rewriter.graphs import ONNX_DOMAINS, ai_onnx_opset, walk_model
from rewriter.site import CumProdSite, inspect_cumprod
from rewriter.targets import DEFAULT_TARGET, TARGETS, Target, target_named
from rewriter.types import TypeTable, infer_types

__all__ = ["DecomposeCumProdPass", "Planned", "decompose_cumprod", "plan_cumprods"]

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Planned:
    """A validated CumProd and the lowering chosen for it."""

    site: CumProdSite
    lowering: lowerings.Lowering


def _is_cumprod(node: ir.Node) -> bool:
    return node.op_type == "CumProd" and node.domain in ONNX_DOMAINS


def plan_cumprods(
    model: ir.Model,
    strategy: str = "auto",
    types: TypeTable | None = None,
    target: Target | None = None,
) -> list[Planned]:
    """Validate every CumProd in ``model`` and choose its lowering; changes nothing.

    Raises:
        InvalidCumProdError: a malformed CumProd.
        StrategyError: ``strategy`` cannot compute one of the nodes exactly.
        ValueError: an unknown strategy name.
    """
    lowerings.check_strategy(strategy)
    found = [where for where in walk_model(model) if _is_cumprod(where.node)]
    if not found:
        return []
    types = types or infer_types(model)
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
        plans.append(Planned(site, lowerings.choose(site, strategy, target)))
    return plans


def _replace(plan: Planned, names: lowerings.NameSource, build_opset: int, target: Target) -> None:
    """Swap one CumProd for its lowering, built with the signatures of ai.onnx ``build_opset``."""
    site = plan.site
    node = site.node
    assert node is not None and site.axis_value is not None
    graph = node.graph
    assert graph is not None
    builder = lowerings.Builder(build_opset, names, node.name or "CumProd")
    y = lowerings.lower(builder, site, plan.lowering, target)
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
    without CumProd is returned unchanged (unless ``target_opset`` asks for another opset);
    a second run changes nothing. Every node is checked before the first one is changed.

    Attributes:
        strategy: ``"auto"`` or a lowering name (see :data:`rewriter.lowerings.STRATEGIES`).
        target_opset: The ai.onnx version the output must import (11 to the model's own);
            None keeps the model's.
        target: The runtime whose kernel gaps to work around (see :data:`rewriter.TARGETS`).
        plans: The nodes rewritten by the last call, with the lowering used for each.
    """

    def __init__(
        self,
        strategy: str = "auto",
        *,
        target_opset: int | None = None,
        target: str = DEFAULT_TARGET,
    ) -> None:
        super().__init__()
        lowerings.check_strategy(strategy)
        target_named(target)
        self.strategy = strategy
        self.target_opset = target_opset
        self.target = target
        self.plans: list[Planned] = []

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        current = ai_onnx_opset(model.opset_imports)
        lower_opset = self.target_opset is not None and self.target_opset != current
        has_cumprod = any(_is_cumprod(where.node) for where in walk_model(model))
        if not (has_cumprod or lower_opset):
            self.plans = []
            return ir.passes.PassResult(model, modified=False)
        types = infer_types(model)
        self.plans = plan_cumprods(model, self.strategy, types, TARGETS[self.target])
        build_opset = self.target_opset or current
        opset_plan = opset.OpsetPlan()
        if lower_opset:
            assert self.target_opset is not None
            cumprods = [plan.site.node for plan in self.plans if plan.site.node is not None]
            opset_plan = opset.check_target_opset(model, self.target_opset, types, exclude=cumprods)
        names = lowerings.NameSource.for_model(model)
        for plan in self.plans:
            _replace(plan, names, build_opset, TARGETS[self.target])
        if self.plans:
            counts = collections.Counter(plan.lowering.name for plan in self.plans)
            logger.info(
                "lowered %d CumProd node(s): %s",
                len(self.plans),
                ", ".join(f"{n} {name}" for name, n in sorted(counts.items())),
            )
        if lower_opset:
            assert self.target_opset is not None
            opset.apply_target_opset(model, self.target_opset, opset_plan)
        return ir.passes.PassResult(model, modified=True)


def decompose_cumprod(
    model: onnx.ModelProto | ir.Model,
    *,
    strategy: str = "auto",
    target_opset: int | None = None,
    target: str = DEFAULT_TARGET,
) -> onnx.ModelProto | ir.Model:
    """Lower every CumProd in ``model`` (and, with ``target_opset``, the model's opset).

    An ``onnx.ModelProto`` is not modified: a new ModelProto is returned (a copy when there
    was nothing to do). An ``onnx_ir.Model`` is rewritten in place and returned.

    Raises:
        CumProdError: (a ValueError) naming the first node that cannot be lowered.
        OpsetError: (a ValueError) listing every node that blocks ``target_opset``.
        In both cases the model is left as it was.
    """
    rewrite = DecomposeCumProdPass(strategy, target_opset=target_opset, target=target)
    if isinstance(model, ir.Model):
        return rewrite(model).model
    ir_model = ir.serde.deserialize_model(model)
    if not rewrite(ir_model).modified:
        copy = onnx.ModelProto()
        copy.CopyFrom(model)
        return copy
    return ir.serde.serialize_model(ir_model)
