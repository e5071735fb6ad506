"""The pass: find every CumProd, validate it, choose a lowering, swap the nodes.

``CumProd(x, axis) -> <lowering's subgraph of older ai.onnx ops>``, in the main graph, in
If / Loop / Scan bodies at any depth and in every model-local function. The work is three
small passes composed with ``ir.passes.PassManager`` on a clone of the model:

1. :class:`~rewriter.specialize.SpecializeFunctionsPass`: one call signature per function
   with a CumProd (attribute references resolved, one element type per input); for a
   target whose runtime loads no model-local function, :class:`~rewriter.inline.InlineFunctionsPass`
   instead (every call inlined);
2. :class:`LowerCumProdPass`: every CumProd validated and planned, then each replaced, in
   one place, with ``ir.convenience.replace_nodes_and_values`` (which keeps the output's
   name, type and shape);
3. with ``target_opset``, :class:`~rewriter.opset.TargetOpsetPass`;

then onnx's checker (``full_check``). Only when all of them succeed does the clone's content
replace the model's, so an error leaves the model exactly as it was.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import os
import re
from collections.abc import Sequence

import onnx
import onnx_ir as ir

from rewriter import lowerings
from rewriter.checker import InMemoryCheckerPass, graphs_of
from rewriter.constant_if import inline_constant_ifs
from rewriter.declarations import drop_unconfirmed_shapes
from rewriter.errors import (
    CumProdError,
    InputModelError,
    InvalidCumProdError,
    pass_error_cause,
)
from rewriter.graphs import ONNX_DOMAINS, ai_onnx_opset, walk_model
from rewriter.inline import function_passes
from rewriter.opset import MIN_TARGET_OPSET, OpsetError, TargetOpsetPass
from rewriter.protos import model_tensors, proto_graphs
from rewriter.serde import deserialize_model, overridable_shapes, restore_shapes
from rewriter.site import CumProdSite, inspect_cumprod
from rewriter.targets import DEFAULT_TARGET, TARGETS, Target, target_named
from rewriter.types import TypeTable, infer_types, proto_nodes

__all__ = [
    "DecomposeCumProdPass",
    "LowerCumProdPass",
    "Planned",
    "decompose_cumprod",
    "plan_cumprods",
]

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Planned:
    """A validated CumProd and the lowering chosen for it."""

    site: CumProdSite
    lowering: lowerings.Lowering


def _is_cumprod(node: ir.Node) -> bool:
    return node.op_type == "CumProd" and node.domain in ONNX_DOMAINS


def has_cumprod(model: ir.Model) -> bool:
    return any(_is_cumprod(where.node) for where in walk_model(model))


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
    found = [where for where in walk_model(model) if _is_cumprod(where.node)]
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
        for line in own_loop_warnings(model, self.target):
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
    if spec.length is None and not spec.static_dims and lowering.bounded:
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


def _commit(model: ir.Model, result: ir.Model) -> None:
    """Make ``model`` hold what ``result`` (a rewritten clone of it) holds."""
    model.graph = result.graph  # type: ignore[misc]
    model.functions.clear()
    model.functions.update(result.functions)
    model.ir_version = result.ir_version


class DecomposeCumProdPass(ir.passes.InPlacePass):
    """Replace every ai.onnx CumProd with an equivalent subgraph of older ops.

    Rewrites CumProd in the main graph, in subgraphs at any depth and in model-local
    functions (specialised per call signature), for every element type, both attributes,
    constant or run-time axes, known or unknown ranks. A model without CumProd is returned
    unchanged (unless ``target_opset`` asks for another opset); a second run changes
    nothing. The passes run on a clone: on any error the model is left as it was.

    Attributes:
        strategy: ``"auto"`` or a lowering name (see :data:`rewriter.lowerings.STRATEGIES`).
        target_opset: The ai.onnx version the output must import (11 to the model's own);
            None keeps the model's.
        target: The runtime the output is for (see :data:`rewriter.TARGETS`).
        max_length: A bound on scan lengths known only at run time (``doubling`` needs one).
        plans: The nodes rewritten by the last call, with the lowering used for each.
    """

    def __init__(
        self,
        strategy: str = "auto",
        *,
        target_opset: int | None = None,
        target: str = DEFAULT_TARGET,
        max_length: int | None = None,
    ) -> None:
        super().__init__()
        lowerings.check_strategy(strategy)
        target_named(target)
        self.strategy = strategy
        self.target_opset = lowerings.whole_number("target_opset", target_opset, 1)
        self.target = target
        self.max_length = lowerings.whole_number("max_length", max_length, 1)
        self.plans: list[Planned] = []

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        self.plans = []
        runtime = target_named(self.target)
        if (
            self.target_opset is not None
            and MIN_TARGET_OPSET <= self.target_opset < runtime.min_opset
        ):
            raise OpsetError(
                self.target_opset,
                f"{runtime.name}'s importer takes ai.onnx opset {runtime.min_opset} and later",
            )
        current = ai_onnx_opset(model.opset_imports)
        lower_opset = self.target_opset is not None and self.target_opset != current
        if not (has_cumprod(model) or lower_opset):
            return ir.passes.PassResult(model, modified=False)
        lower = LowerCumProdPass(
            self.strategy,
            target=self.target,
            build_opset=self.target_opset,
            max_length=self.max_length,
        )
        passes: list[ir.passes.PassBase] = [
            *function_passes(runtime, lower_opset=lower_opset),
            lower,
        ]
        if lower_opset:
            assert self.target_opset is not None
            passes.append(
                TargetOpsetPass(self.target_opset, exclude=lower.built, known=lower.types)
            )
        passes.append(InMemoryCheckerPass(full_check=True))
        declared = overridable_shapes(model)
        shapeless = sorted(name for name, shape in declared.items() if shape is None)
        if shapeless:  # onnx_ir's checker pass gives it the tensor's shape: it would pass
            raise InputModelError(
                "the input model fails the ONNX checker (full check) before any rewrite: "
                f"graph input '{shapeless[0]}' (also an initializer) declares no shape "
                "(Field 'shape' of 'type' is required but missing)"
            )
        work = model.clone()
        try:
            ir.passes.PassManager(passes)(work)
        except ir.passes.PassError as exc:
            cause = pass_error_cause(exc)
            if isinstance(
                cause, (onnx.checker.ValidationError, onnx.shape_inference.InferenceError)
            ):
                first = _checker_message(cause, work)
                before = _checker_problem(model)
                if before is not None:
                    raise InputModelError(
                        f"the input model fails the ONNX checker (full check) before any "
                        f"rewrite: {before}"
                    ) from cause
                if lower_opset:  # onnx's converter output, or a node relabelled as fitting
                    assert self.target_opset is not None
                    raise OpsetError(
                        self.target_opset, f"the model there fails the ONNX checker: {first}"
                    ) from cause
                raise CumProdError(
                    "", "the rewritten model", f"fails the ONNX checker: {first}"
                ) from cause
            if isinstance(cause, OpsetError) and (before := _checker_problem(model)):
                # an invalid input's node refused by the opset check: the input is the problem
                raise InputModelError(
                    "the input model fails the ONNX checker (full check) before any "
                    f"rewrite: {before}"
                ) from cause
            raise cause from None
        restore_shapes(work, declared)
        for kept, rewritten in (
            (model.graph.inputs, work.graph.inputs),
            (model.graph.outputs, work.graph.outputs),
        ):
            for old, new in zip(kept, rewritten):  # the interface as it was (names are kept)
                new.type, new.shape = old.type, old.shape
        _cap_ir_version(work, runtime)
        _commit(model, work)
        self.plans = lower.plans
        return ir.passes.PassResult(model, modified=True)


def _cap_ir_version(model: ir.Model, target: Target) -> None:
    """Give ``model`` the target's highest IR version (``Target.max_ir_version``) when it is
    above it and its opsets allow it (onnx's ``find_min_ir_version_for``).

    Raises:
        OpsetError: when the model's opsets need a higher IR version than the target takes.
    """
    cap = target.max_ir_version
    if cap is None or model.ir_version <= cap:
        return
    opsets = [onnx.helper.make_opsetid(d, v) for d, v in model.opset_imports.items()]
    needed = onnx.helper.find_min_ir_version_for(opsets, ignore_unknown=True)
    opset = ai_onnx_opset(model.opset_imports)
    if needed > cap:
        raise OpsetError(
            opset,
            f"{target.name}'s importer takes IR version {cap} and older, and opset {opset} "
            f"needs {needed}: pass a lower --target-opset",
        )
    logger.info("IR version %d -> %d for %s", model.ir_version, cap, target.name)
    model.ir_version = cap


_CHECKER_NODE = re.compile(r"Name: (.*?) OpType: (\S+)")


def _checker_message(exc: BaseException, model: ir.Model) -> str:
    """The first line of a checker or inference error, and where it is: the node that onnx's
    checker names on a later line ("==> Context: Bad node spec for node. Name: r OpType:
    Relu"), or for a ValueInfo without a type or a shape, which it does not name, the first
    graph input or output of ``model`` without one (the full check wants both)."""
    text = str(exc).strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    if node := _CHECKER_NODE.search(text):
        name, op_type = node.groups()
        where = f"node '{name}' ({op_type})" if name else f"a {op_type} node without a name"
        return f"{where}: {first}"
    lacks = {"'type' of 'value_info'": "type", "'shape' of 'type'": "shape"}
    missing = next((what for field, what in lacks.items() if field in first), None)
    if missing is None:
        return first
    for graph in graphs_of(model):
        for role, values in (("input", graph.inputs), ("output", graph.outputs)):
            for v in values:
                if (v.type if missing == "type" else v.shape) is None:
                    return f"{role} '{v.name}' of graph '{graph.name}' has no {missing} ({first})"
    return first


def _checker_problem(model: ir.Model) -> str | None:
    """The ONNX checker's (full check) first complaint about ``model``, None if it passes."""
    try:
        InMemoryCheckerPass(full_check=True)(model)
    except Exception as exc:  # noqa: BLE001 - a PassError around the checker's error
        return _checker_message(pass_error_cause(exc), model)
    return None


def check_training_info(
    infos: Sequence[onnx.TrainingInfoProto], opset: int, target_opset: int | None
) -> None:
    """training_info is carried as it is (onnx_ir does not load it): its graphs keep their
    nodes, CumProd included, at the model's opset ``opset``. With a ``target_opset`` other
    than ``opset`` a model whose training_info has nodes is refused (they would stand under
    an opset they were not written for, which onnx's checker does not look at); a CumProd
    there is warned about.

    Raises:
        OpsetError: with ``target_opset``, naming how many nodes training_info holds.
    """
    nodes = [
        node
        for info in infos
        for graph in (info.initialization, info.algorithm)
        for node in proto_nodes(graph.node)
    ]
    if nodes and target_opset is not None and target_opset != opset:
        raise OpsetError(
            target_opset,
            f"the model's training_info holds {len(nodes)} node(s) written for opset {opset}, "
            "which this tool carries as they are (drop training_info, or keep the opset)",
        )
    cumprods = sum(node.op_type == "CumProd" and node.domain in ONNX_DOMAINS for node in nodes)
    if cumprods:
        logger.warning(
            "the model's training_info keeps its %d CumProd node(s): training_info is "
            "carried as it is, not rewritten",
            cumprods,
        )


def _keep_untouched(original: onnx.ModelProto, rewritten: onnx.ModelProto) -> None:
    """Parts onnx_ir does not carry: training_info and sparse initializers."""
    if original.training_info and not rewritten.training_info:
        rewritten.training_info.extend(original.training_info)
    have = {s.values.name for s in rewritten.graph.sparse_initializer}
    rewritten.graph.sparse_initializer.extend(
        s for s in original.graph.sparse_initializer if s.values.name not in have
    )


def _refuse_unreachable_external_data(model: onnx.ModelProto) -> None:
    """A ModelProto loaded without its external data (``load_external_data=False``) carries
    no folder: onnx_ir reads each tensor's file from the working directory. One not found
    there failed later with a bare FileNotFoundError naming the file only."""
    for tensor in model_tensors(model, training=False):
        if tensor.data_location != onnx.TensorProto.EXTERNAL:
            continue
        location = {e.key: e.value for e in tensor.external_data}.get("location", "")
        if not os.path.isfile(location):
            raise InputModelError(
                f"tensor '{tensor.name}' keeps its data in '{location}', which is not found "
                f"from the working directory ({os.getcwd()}): pass the model with its data "
                "(onnx.load(path)), or an onnx_ir.Model from onnx_ir.load(path), which knows "
                "its folder"
            )


def _refuse_read_sparse_initializers(model: onnx.ModelProto) -> None:
    """onnx_ir does not load sparse initializers: one that a node reads (in any graph) would
    be a value with no definition (onnx_ir's cloner then fails). Unread ones in the main
    graph are carried over."""
    sparse = {s.values.name for g in proto_graphs(model.graph) for s in g.sparse_initializer}
    if not sparse:
        return
    for node in proto_nodes(model.graph.node):
        read = sparse.intersection(node.input)
        if read:
            shown = f"node '{node.name}'" if node.name else "an unnamed node"
            raise InputModelError(
                f"{shown} ({node.op_type}) reads the sparse initializer '{min(read)}', which "
                "onnx_ir cannot load: make it a dense initializer first"
            )


def decompose_cumprod(
    model: onnx.ModelProto | ir.Model,
    *,
    strategy: str = "auto",
    target_opset: int | None = None,
    target: str = DEFAULT_TARGET,
    max_length: int | None = None,
) -> onnx.ModelProto | ir.Model:
    """Lower every CumProd in ``model`` (and, with ``target_opset``, the model's opset).

    An ``onnx.ModelProto`` is not modified: a new ModelProto is returned (a copy when there
    was nothing to do). An ``onnx_ir.Model`` is rewritten in place and returned.

    Raises:
        CumProdError: (a ValueError) naming the first node that cannot be lowered.
        OpsetError: (a ValueError) listing every node that blocks ``target_opset``.
        In both cases the model is left as it was.
    """
    rewrite = DecomposeCumProdPass(
        strategy, target_opset=target_opset, target=target, max_length=max_length
    )
    if isinstance(model, ir.Model):
        return rewrite(model).model
    if not isinstance(model, onnx.ModelProto):
        raise TypeError(
            f"decompose_cumprod takes an onnx.ModelProto or an onnx_ir.Model, not "
            f"{type(model).__name__} (load a file with onnx.load or onnx_ir.load)"
        )
    _refuse_read_sparse_initializers(model)
    _refuse_unreachable_external_data(model)
    opset = ai_onnx_opset({o.domain: o.version for o in model.opset_import})
    check_training_info(model.training_info, opset, target_opset)
    ir_model = deserialize_model(model)
    if not rewrite(ir_model).modified:
        copy = onnx.ModelProto()
        copy.CopyFrom(model)
        return copy
    proto = ir.serde.serialize_model(ir_model)
    _keep_untouched(model, proto)
    keep_interface(model.graph, proto.graph)
    return proto


def keep_interface(original: onnx.GraphProto, rewritten: onnx.GraphProto) -> None:
    """Give ``rewritten``'s graph inputs and outputs the declarations ``original``'s have
    (names, types and declared shapes): a rewrite never changes a model's interface. onnx_ir
    holds one declaration per value, so an input that is also an output would carry one of
    the two for both, and the pass blanks a graph output's declared shape that inference
    does not confirm where a CumProd reads it (onnxruntime would fold a lowering's ``Shape``
    from it; the declaration back on the output is the model's own, as it was)."""
    for before, after in ((original.input, rewritten.input), (original.output, rewritten.output)):
        if [v.name for v in before] != [v.name for v in after]:
            logger.warning(
                "the rewritten graph's %s differ from the original's: declarations not restored",
                "inputs" if before is original.input else "outputs",
            )
            continue
        for old, new in zip(before, after):
            if old.HasField("type"):
                new.type.CopyFrom(old.type)
            else:
                new.ClearField("type")
