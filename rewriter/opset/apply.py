"""Carrying out an opset plan (see :mod:`rewriter.opset`): defaults dropped, forms respelled,
onnx's version converter on the nodes that need it, the opset imports and IR version set."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import onnx
import onnx_ir as ir

from rewriter.errors import OpsetError
from rewriter.graphs import ONNX_DOMAINS, NameSource, ai_onnx_opset, walk_model
from rewriter.opset.check import OpsetPlan, check_target_opset
from rewriter.opset.rules import constant_tensor
from rewriter.serde import call_onnx_api, deserialize_model, overridable_shapes, restore_shapes
from rewriter.types import TypeTable, infer_types, proto_nodes

__all__ = ["TargetOpsetPass", "apply_target_opset", "ir_version_for"]

logger = logging.getLogger(__name__)

_HIDDEN = "cumprod_rewriter.keep"  # a private domain that hides nodes from the converter
_FUNCTION_IR = 8  # model-local functions need IR version 8


def ir_version_for(model: ir.Model, target: int) -> int:
    """The IR version that goes with ai.onnx ``target`` (8 at least with functions), never
    higher than the model's own."""
    wanted = onnx.helper.find_min_ir_version_for([onnx.helper.make_opsetid("", target)])
    if model.functions:
        wanted = max(wanted, _FUNCTION_IR)
    return min(model.ir_version, wanted)


def _set_opset(model: ir.Model, target: int) -> None:
    for imports in [model.opset_imports, *(f.opset_imports for f in model.functions.values())]:
        imports.pop("ai.onnx", None)
        imports[""] = target
    model.ir_version = ir_version_for(model, target)


def _run_converter(model: ir.Model, target: int, convert: set[int]) -> ir.Model:
    """onnx's converter on the main graph, every node but those in ``convert`` hidden in a
    private domain so the converter passes them by; large initializers lifted out."""
    hidden: list[ir.Node] = []
    for where in walk_model(model):
        if (
            where.scope == ""
            and where.node.domain in ONNX_DOMAINS
            and id(where.node) not in convert
        ):
            hidden.append(where.node)
    inputs = {v.name for v in model.graph.inputs}
    initializers = dict(model.graph.initializers)
    tensors = {name: value.const_value for name, value in initializers.items()}
    declared = overridable_shapes(model)  # the converted model's would be the tensors'

    def convert_proto(proto: onnx.ModelProto) -> onnx.ModelProto:
        del proto.functions[:]
        proto.opset_import.append(onnx.helper.make_opsetid(_HIDDEN, 1))
        return onnx.version_converter.convert_version(proto, target)

    for node in hidden:
        node.domain = _HIDDEN
    try:
        converted = call_onnx_api(convert_proto, model)
    except (RuntimeError, ValueError, onnx.checker.ValidationError) as exc:
        ops = sorted({n.op_type for n in model.graph.all_nodes() if id(n) in convert})  # type: ignore[attr-defined]
        raise OpsetError(
            target,
            f"onnx's version converter failed on {', '.join(ops)}: {' '.join(str(exc).split())}",
        ) from exc
    finally:
        for node in hidden:
            node.domain = ""
    for node in proto_nodes(converted.graph.node):
        if node.domain == _HIDDEN:
            node.domain = ""
    kept = [o for o in converted.opset_import if o.domain != _HIDDEN]
    del converted.opset_import[:]
    converted.opset_import.extend(kept)
    result = deserialize_model(converted)
    # Initializers went in as graph inputs (the large ones without data): put them back,
    # those the graph also takes as inputs too (onnx_ir lifted the large ones out).
    graph = result.graph
    for value in list(graph.inputs):
        name = value.name or ""
        if name not in initializers:
            continue
        if name not in inputs:
            graph.inputs.remove(value)
        if name in graph.initializers:
            graph.initializers[name].const_value = tensors[name]
        else:
            value.const_value = tensors[name]
            graph.register_initializer(value)
    restore_shapes(result, declared)
    return result


class TargetOpsetPass(ir.passes.InPlacePass):
    """Lower the model's ai.onnx opset to ``target`` (see the module docstring).

    Every node is classified first; a blocker raises :class:`OpsetError` before anything
    changes. Runs after the CumProd lowering (whose nodes are built at ``target``).
    """

    def __init__(
        self, target: int, *, exclude: Sequence[ir.Node] = (), known: TypeTable | None = None
    ) -> None:
        """``exclude``: nodes already built at ``target``; ``known``: types inferred before
        they were built, for the values they left as they were (both read when the pass
        runs: onnx's inference cannot type the nodes built at ``target`` while the model
        imports its own opset, nor what comes after them)."""
        super().__init__()
        self.target = target
        self.exclude = exclude
        self.known = known

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        if ai_onnx_opset(model.opset_imports) == self.target:
            return ir.passes.PassResult(model, modified=False)
        types = infer_types(model)
        if self.known is not None:
            types.take_from(self.known)
        plan = check_target_opset(model, self.target, types, exclude=self.exclude)
        apply_target_opset(model, self.target, plan)
        return ir.passes.PassResult(model, modified=True)


def apply_target_opset(model: ir.Model, target: int, plan: OpsetPlan) -> None:
    """Set the model (and its functions) to ai.onnx ``target``, carrying out what
    :func:`check_target_opset` planned. In place."""
    for node, name in plan.drop_defaults:
        node.attributes.pop(name, None)
    for node in plan.last_axis:
        node.attributes["axis"] = ir.AttrInt64("axis", -1)
    for node in plan.constant_values:
        tensor = constant_tensor(node)
        assert tensor is not None
        node.attributes.clear()
        node.attributes["value"] = ir.AttrTensor("value", tensor)
    names = NameSource.for_model(model) if plan.split_sizes else None
    for node, sizes in plan.split_sizes:
        node.attributes.pop("num_outputs")
        if target >= 13:
            assert names is not None  # a name no graph, subgraph or function uses
            tensor = ir.tensor(sizes, dtype=ir.DataType.INT64)
            constant = ir.node(
                "Constant", [], attributes={"value": tensor}, name=names.fresh("split_sizes")
            )
            constant.outputs[0].name = names.fresh("split_sizes")
            assert node.graph is not None
            node.graph.insert_before(node, constant)
            node.resize_inputs(2)
            node.replace_input_with(1, constant.outputs[0])
        else:
            node.attributes["split"] = ir.AttrInt64s("split", sizes)
    if plan.convert:
        converted = _run_converter(model, target, set(map(id, plan.convert)))
        model.graph = converted.graph  # type: ignore[misc]
    _set_opset(model, target)
    logger.info("lowered ai.onnx opset to %d (IR version %d)", target, model.ir_version)
