"""Lowering every CumProd of a model in place: each node validated into a
:class:`~rewriter.site.CumProdSite`, planned (``lowerings.choose``), then replaced in one
place with ``ir.convenience.replace_nodes_and_values`` (which keeps the output's name, type
and shape); and the per-node warnings a plan carries (the target's own limits, named).
:class:`LowerCumProdPass` is step 2 of :mod:`rewriter.decompose`."""

from __future__ import annotations

import collections
import dataclasses
import logging

import onnx_ir as ir

from rewriter import lowerings
from rewriter.constant_if import inline_constant_ifs
from rewriter.declarations import drop_unconfirmed_shapes
from rewriter.errors import (
    InvalidCumProdError,
)
from rewriter.graphs import ONNX_DOMAINS, is_cumprod, walk_model
from rewriter.site import CumProdSite, inspect_cumprod
from rewriter.targets import DEFAULT_TARGET, TARGETS, Target, target_named
from rewriter.types import TypeTable, infer_types

__all__ = [
    "LowerCumProdPass",
    "Planned",
    "has_cumprod",
    "loop_warnings",
    "node_warnings",
    "own_loop_warnings",
    "plan_cumprods",
    "warning_lines",
]

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Planned:
    """A validated CumProd and the lowering chosen for it."""

    site: CumProdSite
    lowering: lowerings.Lowering


def has_cumprod(model: ir.Model) -> bool:
    return any(is_cumprod(where.node) for where in walk_model(model))


def plan_cumprods(
    model: ir.Model,
    strategy: str = "auto",
    types: TypeTable | None = None,
    target: Target | None = None,
    *,
    max_length: int | None = None,
    build_opset: int | None = None,
) -> list[Planned]:
    """Validate every CumProd in ``model`` and choose its lowering, to be built at ai.onnx
    ``build_opset`` (each node's own when None); changes nothing.

    Function bodies are read as they are: run :class:`SpecializeFunctionsPass` first for
    attributes given by reference (an unresolved reference is reported as an error).

    Raises:
        InvalidCumProdError: a malformed CumProd.
        StrategyError: ``strategy`` cannot compute one of the nodes exactly.
        ValueError: an unknown strategy name.
    """
    lowerings.check_strategy(strategy)
    runtime = target or TARGETS[DEFAULT_TARGET]
    found = [where for where in walk_model(model) if is_cumprod(where.node)]
    if not found:
        return []
    types = types or infer_types(model)
    plans = []
    for where in found:
        if where.opset < 26:
            raise InvalidCumProdError(
                where.name,
                where.location,
                f"CumProd needs ai.onnx opset >= 26, found {where.opset}",
            )
        site = inspect_cumprod(where, types)
        if max_length is not None and site.spec.length is None and site.spec.max_length is None:
            site = dataclasses.replace(
                site, spec=dataclasses.replace(site.spec, max_length=max_length)
            )
        opset = build_opset or site.opset
        plans.append(Planned(site, lowerings.choose(site, strategy, runtime, opset)))
    return plans


def _replace(
    plan: Planned, names: lowerings.NameSource, build_opset: int | None, target: Target
) -> list[ir.Node]:
    """Swap one CumProd for its lowering, built with the signatures of ai.onnx ``build_opset``
    (the node's own opset when None); return the nodes built, those of their subgraphs too."""
    node = plan.site.node
    assert node is not None
    graph = node.graph
    assert graph is not None
    # the inputs as they are now: a CumProd lowered before this one may have replaced the
    # value x (or the axis) was when the site was planned (x -> CumProd -> t -> CumProd)
    x = node.inputs[0]
    assert x is not None  # (inspect_cumprod checked it)
    site = dataclasses.replace(plan.site, x=x, axis_value=node.inputs[1])
    builder = lowerings.Builder(build_opset or site.opset, names, node.name or "CumProd")
    y = lowerings.lower(builder, site, plan.lowering, target)
    ir.convenience.replace_nodes_and_values(
        graph, node, [node], builder.nodes, [node.outputs[0]], [y]
    )
    spec = site.spec
    if site.in_scan and y.shape is None and spec.dims is not None and spec.dtype is not None:
        # The output has x's type and shape: onnxruntime wants a shape on a Scan body's
        # outputs, and an If below opset 14 leaves its output without one
        y.type = ir.TensorType(spec.dtype)
        y.shape = ir.Shape(list(spec.dims))
    if site.axis_value is not None:
        _drop_if_dead(site.axis_value)
    _drop_unused(graph, builder.nodes)
    logger.debug("lowered CumProd %r in %s with %s", node.name, site.location, plan.lowering.name)
    kept = [new for new in builder.nodes if new.graph is not None]
    built = list(kept)
    for new in kept:
        for attr in new.attributes.values():
            if attr.type == ir.AttributeType.GRAPH:
                built.extend(ir.traversal.RecursiveGraphIterator(attr.as_graph()))
    return built


def _drop_unused(graph: ir.Graph, nodes: list[ir.Node]) -> None:
    """Remove the nodes of ``nodes`` (in ``graph``) whose outputs nothing reads, and the same
    in their subgraphs (an If branch's helper Constant): consumers come after producers, so
    one pass back removes chains too."""
    for node in reversed(nodes):
        for attr in node.attributes.values():
            if attr.type == ir.AttributeType.GRAPH:
                sub = attr.as_graph()
                _drop_unused(sub, list(sub))
        if not any(out.uses() or out.is_graph_output() for out in node.outputs):
            graph.remove(node, safe=True)  # a helper value the lowering did not use after all


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


class LowerCumProdPass(ir.passes.InPlacePass):
    """Replace every ai.onnx CumProd with an equivalent subgraph of older ops (in place).

    Every node is validated and planned before the first one is replaced. Expects function
    attributes by reference to be resolved (:class:`SpecializeFunctionsPass`).

    Attributes:
        strategy: ``"auto"`` or a lowering name (see :data:`rewriter.lowerings.STRATEGIES`).
        target: The runtime the output is for (see :data:`rewriter.TARGETS`).
        build_opset: The ai.onnx version the new nodes are built for (None: the node's own).
        max_length: A bound on scan lengths known only at run time (for ``doubling``).
        plans: The nodes rewritten by the last call, with the lowering used for each.
        types: The types inferred by the last call, before it rewrote anything (filled in
            place): :class:`TargetOpsetPass` reads them for the values the rewrite kept.
        built: The nodes the last call built (those in their subgraphs too), all at
            ``build_opset``: :class:`TargetOpsetPass` leaves them alone (onnx's type inference
            cannot type them in the opset-``build_opset`` forms while the model still
            imports its own opset). Filled in place, so a pass given it before sees them.
    """

    def __init__(
        self,
        strategy: str = "auto",
        *,
        target: str = DEFAULT_TARGET,
        build_opset: int | None = None,
        max_length: int | None = None,
    ) -> None:
        super().__init__()
        lowerings.check_strategy(strategy)
        self.strategy = strategy
        self.target = target_named(target)
        self.build_opset = lowerings.whole_number("build_opset", build_opset, 1)
        self.max_length = lowerings.whole_number("max_length", max_length, 1)
        self.plans: list[Planned] = []
        self.built: list[ir.Node] = []
        self.types = TypeTable()

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        self.plans = []
        self.built.clear()
        self.types.clear()
        if not has_cumprod(model):
            return ir.passes.PassResult(model, modified=False)
        inline_constant_ifs(model)  # onnxruntime's own folding of them loses values
        types = infer_types(model)
        self.types.take_from(types)
        plans = plan_cumprods(
            model,
            self.strategy,
            types,
            self.target,
            max_length=self.max_length,
            build_opset=self.build_opset,
        )
        drop_unconfirmed_shapes(model, types)
        for plan in plans:
            for line in warning_lines(plan.site, plan.lowering, self.target):
                logger.warning("%s", line)
        for line in [*own_loop_warnings(model, self.target), *loop_warnings(model, self.target)]:
            logger.warning("%s", line)
        names = lowerings.NameSource.for_model(model)
        for plan in plans:
            self.built.extend(_replace(plan, names, self.build_opset, self.target))
        counts = collections.Counter(plan.lowering.name for plan in plans)
        logger.info(
            "lowered %d CumProd node(s): %s",
            len(plans),
            ", ".join(f"{n} {name}" for name, n in sorted(counts.items())),
        )
        self.plans = plans
        return ir.passes.PassResult(model, modified=True)


def own_loop_warnings(model: ir.Model, target: Target) -> list[str]:
    """A line for each of the model's own Loop / Scan nodes the target's runtime lacks
    (:meth:`Target.lacked_loops`): the rewrite keeps them, so the output will not load
    there. Called before the CumProds are replaced: the lowerings' own nodes are not seen."""
    lacked = target.lacked_loops()
    return [
        f"{where.node.op_type} '{where.node.name or ''}' in {where.location} is the model's "
        f"own: it needs {target.lacking([where.node.op_type])}, and the rewrite keeps it "
        f"(target {target.name})"
        for where in walk_model(model)
        if where.node.domain in ONNX_DOMAINS and where.node.op_type in lacked
    ]


def loop_warnings(model: ir.Model, target: Target) -> list[str]:
    """A line for each Loop whose body (its own nodes, not nested bodies') holds two or more
    CumProds, on a target whose runtime gets such a Loop wrong (``Target.loop_with_cumprods``).
    Called before the CumProds are replaced."""
    if target.loop_with_cumprods is None:
        return []
    lines = []
    for where in walk_model(model):
        node = where.node
        if (
            node.op_type != "Loop"
            or node.domain not in ONNX_DOMAINS
            or "body" not in node.attributes
        ):
            continue
        count = sum(1 for n in node.attributes["body"].as_graph() if is_cumprod(n))
        if count >= 2:
            lines.append(
                f"Loop '{node.name or ''}' in {where.location} holds {count} CumProds: "
                f"{target.loop_with_cumprods} (target {target.name})"
            )
    return lines


def warning_lines(site: CumProdSite, lowering: lowerings.Lowering, target: Target) -> list[str]:
    """:func:`node_warnings` as logged lines naming the node, its place and the target."""
    return [
        f"CumProd '{site.name}' in {site.location}: {message} (target {target.name})"
        for message in node_warnings(site, lowering, target)
    ]


def node_warnings(site: CumProdSite, lowering: lowerings.Lowering, target: Target) -> list[str]:
    """What a user of ``target`` should know about this node's lowering: the target's limit
    for its element type (e.g. subnormals flushed), a type-generic lowering (x's element type
    not known: computed in x's own type), and what the lowered node cannot refuse
    at run time there (``run_time_checks``): a length past the bound, for a lowering that
    takes one, and a run-time axis (neither for an empty x: its output is x, read from
    neither), and a length known only at run time inside an If branch where the runtime
    resolves no symbol there (``symbols_in_if``: it fails at run time)."""
    spec = site.spec
    limit = target.limit_for(spec.dtype)
    warnings = [] if limit is None else [limit.message]
    if site.in_if and not target.symbols_in_if and spec.length is None and not spec.static_dims:
        warnings.append(
            f"{target.name} resolves no symbolic dim of the model inside an If branch: "
            "this CumProd's length is known only at run time, so its lowering fails there "
            "at run time when the branch runs (a static length works)"
        )
    if spec.dtype is None:
        warnings.append(
            "x's element type is not known here, so the lowering multiplies in x's own "
            "type: float16 / bfloat16 less accurately than the native kernel (which "
            "multiplies in float32), uint32 / uint64 only on runtimes with those Muls"
            + (
                ""
                if target.bfloat16_math
                else f"; if x is bfloat16 the output fails to load on {target.name}, which "
                "has no bfloat16 Mul / Expand"
            )
        )
    if target.run_time_checks or spec.empty:
        return warnings
    runtime = (
        f"{target.name} does not"
        if target.run_time_checks is False
        else f"the {target.name} target's runtime may not"
    )
    if spec.length is None and not spec.static_dims and lowering.length != "any":
        warnings.append(
            f"{runtime} check the length bound ({spec.max_length}) at run time: "
            "a longer input gives wrong values past it instead of failing"
        )
    if spec.axis is None:
        warnings.append(
            f"{runtime} range-check the run-time axis: one out of range scans "
            "another axis instead of failing"
        )
    return warnings
