"""The pass: find every CumProd, validate it, choose a lowering, swap the nodes.

``CumProd(x, axis) -> <lowering's subgraph of older ai.onnx ops>``, in the main graph, in
If / Loop / Scan bodies at any depth and in every model-local function. The work is three
small passes composed with ``ir.passes.PassManager`` on a clone of the model:

1. :class:`~rewriter.specialize.SpecializeFunctionsPass`: one call signature per function
   with a CumProd (attribute references resolved, one element type per input); for a
   target whose runtime loads no model-local function, :class:`~rewriter.inline.InlineFunctionsPass`
   instead (every call inlined);
2. :class:`~rewriter.lower.LowerCumProdPass`: every CumProd validated and planned, then each
   replaced in one place (``ir.convenience.replace_nodes_and_values``);
3. with ``target_opset``, :class:`~rewriter.opset.TargetOpsetPass`;

then onnx's checker (``full_check``). Only when all of them succeed does the clone's content
replace the model's, so an error leaves the model exactly as it was.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Sequence

import onnx
import onnx_ir as ir

from rewriter import lowerings
from rewriter.checker import InMemoryCheckerPass, graphs_of
from rewriter.errors import (
    CumProdError,
    InputModelError,
    pass_error_cause,
)
from rewriter.graphs import ONNX_DOMAINS, ai_onnx_opset
from rewriter.inline import function_passes
from rewriter.lower import (
    LowerCumProdPass,
    Planned,
    has_cumprod,
    plan_cumprods,
)
from rewriter.opset import MIN_TARGET_OPSET, OpsetError, TargetOpsetPass
from rewriter.protos import model_tensors, proto_graphs
from rewriter.serde import deserialize_model, overridable_shapes, restore_shapes
from rewriter.targets import DEFAULT_TARGET, Target, target_named
from rewriter.types import proto_nodes

__all__ = [
    "DecomposeCumProdPass",
    "LowerCumProdPass",
    "Planned",
    "decompose_cumprod",
    "plan_cumprods",
]

logger = logging.getLogger(__name__)


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
