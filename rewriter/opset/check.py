"""Which ai.onnx nodes can be expressed at a target opset, and how (see :mod:`rewriter.opset`):
every node classified before anything changes, blockers collected into one error."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

import onnx
import onnx_ir as ir

from rewriter.errors import Blocker, OpsetError
from rewriter.graphs import ONNX_DOMAINS, Located, walk_model
from rewriter.opset.rules import constant_tensor, meaning_lost, no_effect, split_sizes
from rewriter.types import FunctionKey, TypeTable, call_sites, function_scope

__all__ = ["MIN_TARGET_OPSET", "OpsetPlan", "check_target_opset"]

MIN_TARGET_OPSET = 11


def _schema(op_type: str, version: int) -> onnx.defs.OpSchema | None:
    try:
        return onnx.defs.get_schema(op_type, version, "")
    except onnx.defs.SchemaError:
        return None


def _signature(schema: onnx.defs.OpSchema) -> tuple[object, ...]:
    """Everything about a schema except the types it allows."""
    params = [
        [(p.name, p.option, p.is_homogeneous, p.min_arity) for p in group]
        for group in (schema.inputs, schema.outputs)
    ]
    attrs = sorted(
        (name, a.type, a.required, a.default_value.SerializeToString())
        for name, a in schema.attributes.items()
    )
    return (*params, attrs, schema.min_input, schema.max_input, schema.min_output)


def _allowed(schema: onnx.defs.OpSchema, index: int, is_input: bool) -> set[str] | None:
    params = schema.inputs if is_input else schema.outputs
    if not params:
        return None
    param = params[min(index, len(params) - 1)]  # variadic: the last one repeats
    for constraint in schema.type_constraints:
        if constraint.type_param_str == param.type_str:
            return set(constraint.allowed_type_strs)
    return {param.type_str}


def _type_string(dtype: ir.DataType | None) -> str | None:
    if dtype is None:
        return None
    name = onnx.helper.tensor_dtype_to_string(int(dtype)).lower().replace("tensorproto.", "")
    return f"tensor({name})"


def _types_not_allowed(
    where: Located,
    then: onnx.defs.OpSchema,
    now: onnx.defs.OpSchema,
    types: TypeTable,
    *,
    function_inputs: frozenset[int] = frozenset(),
    never_called: frozenset[str] = frozenset(),
) -> str | None:
    """Why the node's element types do not fit ``then`` (None: they do): a type it does not
    allow, or a type not known because of where it comes from (:func:`_unknown_origin`: a
    contrib op's output, a function's input) where ``then`` allows fewer types than ``now``,
    the node's own version (an int8 output feeding a Relu going below 14). In a function
    the main graph never calls (its scope in ``never_called``) the reason says so, and how
    to go on."""
    bad, unknown = [], []
    node = where.node
    for is_input, values in ((True, node.inputs), (False, node.outputs)):
        for index, value in enumerate(values):
            allowed = None if value is None else _allowed(then, index, is_input)
            if value is None or allowed is None:
                continue
            dtype, _ = types.lookup(where.scope, value)
            name = _type_string(dtype)
            if name is None:
                if types.has_type(where.scope, value) or not _unknown_origin(
                    value, where.scope, types, function_inputs
                ):
                    continue  # a sequence, optional or map (onnx's checker checks those), or
                    # a value of a subgraph onnx's inference left untyped
                newer = _allowed(now, index, is_input)
                if newer is None or not newer <= allowed:
                    unknown.append(value.name or "")
            elif name.startswith("tensor(") and name not in allowed:
                bad.append(f"{value.name}: {name}")
    older = f"{node.op_type}-{then.since_version}"
    if bad:
        return f"{older} does not allow {', '.join(bad)}"
    if unknown:
        unused = (
            " (the main graph never calls this function: without it, e.g. after onnx_ir's "
            "RemoveUnusedFunctionsPass, the rest can be lowered)"
            if where.scope in never_called
            else ""
        )
        return (
            f"the element type of {', '.join(unknown)} is not known, and {older} allows fewer "
            f"types than {node.op_type}-{now.since_version}{unused}"
        )
    return None


def _unknown_origin(
    value: ir.Value, scope: str, types: TypeTable, function_inputs: frozenset[int]
) -> bool:
    """Whether an untyped ``value`` is untyped because of where it comes from: a node that
    is not ai.onnx (a contrib op, whose output type onnx's inference cannot know) or a
    function's input (its callers may pass any type), directly or through ai.onnx nodes
    whose inputs are untyped too (QuantizeLinear -> Abs -> Relu). Not a subgraph's own input
    that inference left untyped."""
    stack, seen = [value], set()
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        producer = current.producer()
        if producer is None:
            if id(current) in function_inputs:
                return True
            continue
        if producer.domain not in ONNX_DOMAINS:
            return True
        stack.extend(v for v in producer.inputs if v is not None and not types.has_type(scope, v))
    return False


def _never_called(model: ir.Model) -> frozenset[str]:
    """The type-table scopes of the model's functions that running the main graph never
    calls, directly or through other functions (those onnx_ir's RemoveUnusedFunctionsPass
    removes)."""
    reached: set[FunctionKey] = set()
    pending: list[ir.Graph | ir.Function] = [model.graph]
    while pending:
        for _, key in call_sites(model, pending.pop()):
            if key not in reached:
                reached.add(key)
                pending.append(model.functions[key])
    return frozenset(
        function_scope(function) for key, function in model.functions.items() if key not in reached
    )


def _overridable_inputs(node: ir.Node) -> list[str]:
    """The node's inputs that are initializers the main graph also takes as inputs (a caller
    may feed another value): onnx's converter would freeze their default value into an
    attribute (ReduceMean-18's axes into ReduceMean-13's), and the fed value would be
    ignored or rejected."""
    return [
        v.name or ""
        for v in node.inputs
        if v is not None and v.is_graph_input() and v.is_initializer()
    ]


# Ops whose meaning changed between versions without their signature saying so
# (GridSample-20 renamed its modes; RoiAlign-16 added coordinate_transformation_mode, whose
# default half_pixel is not RoiAlign-10's fixed output_half_pixel; GroupNormalization-21
# scales per channel where 18 scaled per group, ...): always left to onnx's converter.
_MEANING_CHANGED = frozenset({"GridSample", "GroupNormalization", "Resize", "RoiAlign", "Upsample"})


def _node_fits(
    node: ir.Node,
    then: onnx.defs.OpSchema,
    now: onnx.defs.OpSchema,
    droppable: frozenset[str] = frozenset(),
) -> bool:
    """Whether this node, as written, means the same under the older schema: it uses no
    input or attribute the older one lacks (but the ``droppable`` ones, which change nothing
    here), every attribute it leaves out has the same default
    in both, the older one has no attribute with a default that the newer one dropped (DFT-20
    took ``axis`` as an input, default -2, where DFT-17's attribute defaults to 1), and the
    op's meaning did not change in between."""
    if node.op_type in _MEANING_CHANGED:
        return False
    used_inputs = max((i + 1 for i, v in enumerate(node.inputs) if v is not None), default=0)
    if not then.min_input <= used_inputs <= then.max_input:
        return False
    if len(node.outputs) > then.max_output:
        return False
    for name, attr in node.attributes.items():
        old = then.attributes.get(name)
        if old is None and name in droppable:
            continue  # spelled out at the newer schema's default, or no effect: as if absent
        if old is None or str(old.type).rsplit(".", 1)[-1] != attr.type.name:
            return False
    for name, old in then.attributes.items():
        new = now.attributes.get(name)
        if name in node.attributes:
            continue
        if new is None:  # moved to an input, or dropped
            if old.required or old.default_value.name:
                return False  # the older op applies its default: DFT's axis 1, not -2
            continue  # optional without a default (Reduce*'s axes, Split's split): as absent
        if old.default_value.SerializeToString() != new.default_value.SerializeToString():
            return False
    return True


def _is_default(attr: ir.Attr, schema: onnx.defs.OpSchema) -> bool:
    """Whether ``attr`` has the default value ``schema`` gives it (``allowzero=0``,
    ``reduction="none"``)."""
    declared = schema.attributes.get(attr.name)
    if declared is None or not declared.default_value.name or attr.is_ref():
        return False
    default = onnx.helper.get_attribute_value(declared.default_value)
    if attr.type == ir.AttributeType.STRING:
        return isinstance(default, bytes) and attr.value == default.decode()
    return attr.type == ir.AttributeType.INT and attr.value == default


def _blocker(where: Located, schema: onnx.defs.OpSchema, reason: str) -> Blocker:
    node = where.node
    return Blocker(node.op_type, schema.since_version, where.location, node.name or "", reason)


@dataclasses.dataclass
class OpsetPlan:
    """What lowering the opset takes, decided before anything is changed.

    Attributes:
        convert: The nodes onnx's version converter has to adapt.
        last_axis: Softmax / LogSoftmax / Hardmax nodes going below 13 that scan their last
            axis: they mean the same there once ``axis=-1`` is written out (their default
            axis was 1 before 13).
        drop_defaults: Attributes the older schema lacks, spelled out at their default
            (``Reshape allowzero=0``) or to no effect (``Cast saturate`` to a type that is not
            float8): removed, which means the same.
        split_sizes: Split-18 nodes with ``num_outputs`` (what ``torch.chunk`` exports) over a
            static dim going below 18, and the sizes that ``num_outputs`` means there: written
            out as the ``split`` input (13 and later) or attribute (11, 12).
        constant_values: Constant nodes with ``value_float(s)`` / ``value_int(s)`` /
            ``value_string(s)`` going to 11 (they came with Constant-12): written as
            ``value``, the same tensor.
    """

    convert: list[ir.Node] = dataclasses.field(default_factory=list)
    last_axis: list[ir.Node] = dataclasses.field(default_factory=list)
    drop_defaults: list[tuple[ir.Node, str]] = dataclasses.field(default_factory=list)
    split_sizes: list[tuple[ir.Node, list[int]]] = dataclasses.field(default_factory=list)
    constant_values: list[ir.Node] = dataclasses.field(default_factory=list)


# Before opset 13 these flatten the input to 2-D from ``axis`` on; onnx's version converter
# relabels them without adapting (seen with onnx 1.23: Softmax-13 axis=1 on a 3-D input kept
# as Softmax-11 axis=1, a different result). Only the last axis means the same in both.
_FLATTENED_BEFORE_13 = frozenset({"Softmax", "LogSoftmax", "Hardmax"})


def _flattened_reason(where: Located, types: TypeTable) -> str | None:
    """None when a Softmax-like node scans its last axis (so it keeps its meaning below 13)."""
    node = where.node
    x = node.inputs[0] if node.inputs else None
    _, shape = types.lookup(where.scope, x) if x is not None else (None, None)
    axis = node.attributes.get_int("axis", -1)
    rank = shape.rank() if shape is not None else None
    if rank == 0:
        return f"a 0-D input (invalid: {node.op_type} needs rank >= 1)"
    if rank is not None and -rank <= axis < rank and axis % rank == rank - 1:
        return None
    return (
        f"{node.op_type} below opset 13 flattens the input from its axis on; only the last "
        "axis means the same (and the rank must be known)"
    )


def check_target_opset(
    model: ir.Model, target: int, types: TypeTable, *, exclude: Iterable[ir.Node] = ()
) -> OpsetPlan:
    """Classify every ai.onnx node (but ``exclude``d ones) for lowering to ``target``.

    Raises:
        OpsetError: listing every node that cannot be lowered.
    """
    current = model.opset_imports.get("", model.opset_imports.get("ai.onnx", 0))
    if not MIN_TARGET_OPSET <= target <= current:
        raise OpsetError(
            target,
            f"the target must be between {MIN_TARGET_OPSET} and the model's own opset {current}",
        )
    skip = set(map(id, exclude))
    function_inputs = frozenset(id(v) for f in model.functions.values() for v in f.inputs)
    never_called = _never_called(model)
    blockers: list[Blocker] = []
    plan = OpsetPlan()
    for where in walk_model(model):
        node = where.node
        if node.domain not in ONNX_DOMAINS or id(node) in skip:
            continue
        now = _schema(node.op_type, where.opset)
        if now is None:
            continue  # not an ai.onnx op at all: onnx's checker reports it
        then = _schema(node.op_type, target)
        if then is None:
            blockers.append(
                _blocker(where, now, f"{node.op_type} does not exist at opset {target}")
            )
            continue
        if then.since_version == now.since_version:
            continue
        if where.opset < target:  # a function importing an older ai.onnx than the target
            raised = (  # the input fails onnx's checker: the model's opset is later still
                f"its function imports ai.onnx {where.opset}, older than the model's, where "
                f"{node.op_type} is another version (the input fails onnx's checker); at "
                f"opset {target} it would be {node.op_type}-{then.since_version}, which may "
                "mean something else"
            )
            blockers.append(_blocker(where, now, raised))
            continue
        references = sorted(name for name, attr in node.attributes.items() if attr.is_ref())
        if references:  # SpecializeFunctionsPass resolves them first in DecomposeCumProdPass
            unresolved = (
                f"its attribute {', '.join(references)} refers to an attribute of the "
                "function, not resolved per call, and the older form depends on its value"
            )
            blockers.append(_blocker(where, now, unresolved))
            continue
        lost = meaning_lost(where, then, now, types)
        if lost is not None:
            blockers.append(_blocker(where, now, lost))
            continue
        if node.op_type == "Constant" and then.since_version < 12 and constant_tensor(node):
            plan.constant_values.append(node)
            continue
        if node.op_type == "Split" and now.since_version >= 18 > then.since_version:
            sizes = split_sizes(where, types)
            if sizes is not None:
                plan.split_sizes.append((node, sizes))
                bad = _types_not_allowed(
                    where,
                    then,
                    now,
                    types,
                    function_inputs=function_inputs,
                    never_called=never_called,
                )
                if bad:
                    blockers.append(_blocker(where, now, bad))
                continue
        # absent from the older schema and spelled out at their default or to no effect:
        # dropped (also before onnx's converter, which keeps them, e.g. ReduceSum-13's
        # noop_with_empty_axes=0); not where the older op's own behaviour differs from that
        # default (RoiAlign-16's coordinate_transformation_mode="half_pixel")
        droppable = frozenset(
            name
            for name, attr in node.attributes.items()
            if name not in then.attributes
            and node.op_type not in _MEANING_CHANGED
            and (_is_default(attr, now) or no_effect(where, attr, types))
        )
        plan.drop_defaults.extend((node, name) for name in sorted(droppable))
        if node.op_type in _FLATTENED_BEFORE_13 and then.since_version < 13:
            reason = _flattened_reason(where, types)
            if reason is not None:
                blockers.append(_blocker(where, now, reason))
                continue
            plan.last_axis.append(node)
        elif _signature(then) != _signature(now) and not _node_fits(node, then, now, droppable):
            if where.scope or where.depth:  # checked here, before anything is changed
                place = "functions" if where.scope else "subgraphs"
                reason = f"it would need onnx's version converter, which does not adapt {place}"
                blockers.append(_blocker(where, now, reason))
            elif overridable := _overridable_inputs(node):
                reason = (
                    f"onnx's version converter would freeze {', '.join(overridable)} (an "
                    "initializer the graph also takes as an input, so a caller may feed "
                    "another value) into the node"
                )
                blockers.append(_blocker(where, now, reason))
            plan.convert.append(node)
            # onnx's converter reads a constant input (ReduceSum-13's axes into ReduceSum-12's
            # attribute) from a Constant's ``value`` only: its value_ints is written as that
            for value in node.inputs:
                producer = value.producer() if value is not None else None
                if (
                    producer is not None
                    and producer.op_type == "Constant"
                    and producer.domain in ONNX_DOMAINS
                    and constant_tensor(producer) is not None
                    and producer not in plan.constant_values
                ):
                    plan.constant_values.append(producer)
            continue
        bad = _types_not_allowed(
            where, then, now, types, function_inputs=function_inputs, never_called=never_called
        )
        if bad:
            blockers.append(_blocker(where, now, bad))
    if blockers:
        raise OpsetError(target, blockers)
    return plan
