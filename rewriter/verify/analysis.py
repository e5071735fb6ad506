"""What a model's graph inputs are used for, and which outputs come from random draws: read
from the proto (main graph, subgraphs at any depth, model-local functions) before any run."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import onnx

from rewriter.graphs import ONNX_DOMAINS
from rewriter.protos import node_subgraphs, proto_nodes

__all__ = [
    "INDEX_POSITIONS",
    "RANDOM_OPS",
    "RICHER_POSITIONS",
    "cumprod_axis_inputs",
    "index_inputs",
    "random_outputs",
]

# ai.onnx inputs that index, count or shape something: position -> a value that is safe for
# any shape (0 for an index or axis, 1 where 0 would divide, repeat nothing or count zero).
INDEX_POSITIONS: dict[str, dict[int, int]] = {
    "Gather": {1: 0},
    "GatherElements": {1: 0},
    "GatherND": {1: 0},
    "Scatter": {1: 0},
    "ScatterElements": {1: 0},
    "ScatterND": {1: 0},
    "CumSum": {1: 0},
    "CumProd": {1: 0},
    "Slice": {1: 0, 2: 0, 3: 0, 4: 1},
    "Reshape": {1: 0},
    "Expand": {1: 1},
    "Tile": {1: 1},
    "Range": {0: 0, 1: 1, 2: 1},
    "OneHot": {0: 0, 1: 2},
    "Pad": {1: 0, 3: 0},
    "Squeeze": {1: 0},
    "Unsqueeze": {1: 0},
    "ReduceSum": {1: 0},
    "ReduceMean": {1: 0},
    "ReduceMax": {1: 0},
    "ReduceMin": {1: 0},
    "ReduceProd": {1: 0},
    "ReduceL1": {1: 0},
    "ReduceL2": {1: 0},
    "ReduceLogSum": {1: 0},
    "ReduceLogSumExp": {1: 0},
    "ReduceSumSquare": {1: 0},
    "TopK": {1: 1},
    "Split": {1: 1},
    "Resize": {1: 0, 2: 1, 3: 1},
    "Upsample": {1: 1},
    "ConstantOfShape": {0: 1},
    "Loop": {0: 1},
    "Trilu": {1: 0},
    "Div": {1: 1},
    "Mod": {1: 1},
    "BitShift": {1: 0},
    "Compress": {1: 1},
    "NonMaxSuppression": {2: 1},
    "SplitToSequence": {1: 1},
    "SequenceAt": {1: 0},
    "SequenceInsert": {2: 0},
    "SequenceErase": {1: 0},
    "Col2Im": {1: 1, 2: 1},
    "CenterCropPad": {1: 1},
    "DFT": {1: 1, 2: 0},
}


# What a first attempt feeds instead, so that more of the model runs: a Loop whose trip count
# is a graph input runs its body three times (once hides what changes between iterations).
# When the original fails on it, the safe values above are fed instead.
RICHER_POSITIONS: dict[str, dict[int, int]] = {"Loop": {0: 3}}


def _subgraph_inputs(node: onnx.NodeProto) -> list[str]:
    return [i.name for sub in node_subgraphs(node) for i in sub.input]


def _index_use(
    nodes: list[onnx.NodeProto],
    start: set[str],
    functions: Mapping[tuple[str, str], onnx.FunctionProto],
    positions: Mapping[str, Mapping[int, int]],
) -> int | None:
    """The value for a value (and what is computed from it) used at an index, axis, count or
    divisor position, from ``positions``; None when it is only data."""
    tainted = set(start)
    safe: int | None = None
    changed = True
    while changed:
        changed = False
        for node in nodes:
            used = [i for i, name in enumerate(node.input) if name and name in tainted]
            if not used:
                continue
            if node.domain in ONNX_DOMAINS:
                table = positions.get(node.op_type, {})
                for i in used:
                    if i in table:
                        safe = max(safe or 0, table[i])
            function = functions.get((node.domain, node.op_type))
            if function is not None:
                inner = {function.input[i] for i in used if i < len(function.input)}
                others = {k: v for k, v in functions.items() if v is not function}
                body = list(proto_nodes(function.node))
                found = _index_use(body, inner, others, positions)
                if found is not None:
                    safe = max(safe or 0, found)
            for name in (*node.output, *_subgraph_inputs(node)):
                if name and name not in tainted:
                    tainted.add(name)
                    changed = True
    return safe


def cumprod_axis_inputs(model: onnx.ModelProto) -> set[str]:
    """Graph inputs used (directly or through other ops) as a CumProd's axis and at no other
    index, axis, count, shape or divisor position: -1 is as safe for them as 0 (any rank),
    and feeding it too runs another axis, and a negative one, through the whole model."""
    functions = {(f.domain, f.name): f for f in model.functions}
    nodes = list(proto_nodes(model.graph.node))
    initializers = {t.name for t in model.graph.initializer}
    others = {op: table for op, table in INDEX_POSITIONS.items() if op != "CumProd"}
    found = set()
    for value in model.graph.input:
        if value.name in initializers:
            continue
        start = {value.name}
        if _index_use(nodes, start, functions, {"CumProd": {1: 0}}) is None:
            continue
        if _index_use(nodes, start, functions, {**others, **RICHER_POSITIONS}) is None:
            found.add(value.name)
    return found


def index_inputs(model: onnx.ModelProto, richer: bool = False) -> dict[str, int]:
    """Graph inputs used (directly or through other ops, in subgraphs and functions too) as an
    index, axis, count, shape or divisor, each with a value safe for any shape
    (:data:`INDEX_POSITIONS`), or with ``richer`` one that runs more of the model where it
    may (:data:`RICHER_POSITIONS`)."""
    positions = {**INDEX_POSITIONS, **RICHER_POSITIONS} if richer else INDEX_POSITIONS
    functions = {(f.domain, f.name): f for f in model.functions}
    nodes = list(proto_nodes(model.graph.node))
    initializers = {t.name for t in model.graph.initializer}
    found = {}
    for value in model.graph.input:
        if value.name in initializers:
            continue
        safe = _index_use(nodes, {value.name}, functions, positions)
        if safe is not None:
            found[value.name] = safe
    return found


# ai.onnx ops that draw random values. Unseeded, two runs differ; seeded, onnx.reference and
# onnxruntime draw other numbers (a RandomNormal with a seed gave other values in the
# original, run in onnx.reference, than in the rewritten model, run in onnxruntime), and a
# run of one model that the other does not make (a feed the original fails on) puts their
# draws out of step. Dropout draws too when its training_mode input is given (and not a
# constant false).
RANDOM_OPS = frozenset(
    {
        "RandomNormal",
        "RandomUniform",
        "RandomNormalLike",
        "RandomUniformLike",
        "Multinomial",
        "Bernoulli",
    }
)


# Operators whose outputs depend on their inputs' shapes only, not on their values: an output
# computed from a draw through one of them (Shape(RandomNormal(...))) is the same each run,
# unless the draw's shape itself came from drawn values (Shape(NonZero(draw))).
_SHAPE_ONLY_OPS = frozenset({"Shape", "Size"})


# Operators whose outputs' shapes follow from their inputs' shapes and attributes alone (never
# from an input's values): a drawn input leaves their output's shape the same each run. Any
# other operator given a drawn value (NonZero, Reshape, Expand, a Reduce with axes, ...) may
# shape its output by it.
_SHAPE_FOLLOWS_OPS = RANDOM_OPS | frozenset(
    {
        *("Abs", "Acos", "Acosh", "Asin", "Asinh", "Atan", "Atanh", "Ceil", "Cos", "Cosh"),
        *("Erf", "Exp", "Floor", "Identity", "IsInf", "IsNaN", "Log", "Neg", "Not"),
        *("Reciprocal", "Relu", "Round", "Sigmoid", "Sign", "Sin", "Sinh", "Softplus"),
        *("Softsign", "Sqrt", "Tan", "Tanh", "Cast", "CastLike", "BitwiseNot"),
        *("Add", "Sub", "Mul", "Div", "Pow", "Mod", "And", "Or", "Xor", "Equal", "Greater"),
        *("GreaterOrEqual", "Less", "LessOrEqual", "BitShift", "BitwiseAnd", "BitwiseOr"),
        *("BitwiseXor", "Max", "Min", "Sum", "Mean", "Where", "Clip", "PRelu"),
        *("Softmax", "LogSoftmax", "CumSum", "CumProd", "Transpose", "MatMul", "Dropout"),
    }
)


def _constants(
    nodes: Sequence[onnx.NodeProto], initializers: Sequence[onnx.TensorProto]
) -> dict[str, onnx.TensorProto]:
    """The initializers and Constant tensors of one graph (or function body), by name."""
    found = {t.name: t for t in initializers}
    for node in nodes:
        if node.op_type == "Constant" and node.domain in ONNX_DOMAINS and node.output:
            for attr in node.attribute:
                if attr.name == "value" and attr.type == onnx.AttributeProto.TENSOR:
                    found[node.output[0]] = attr.t
    return found


def _false(tensor: onnx.TensorProto | None) -> bool:
    """Whether ``tensor`` is a boolean constant all false (Dropout's training_mode off)."""
    if tensor is None or tensor.data_type != onnx.TensorProto.BOOL:
        return False
    try:
        return not np.any(onnx.numpy_helper.to_array(tensor))
    except Exception:  # noqa: BLE001 - one onnx cannot read (external data): not known false
        return False


def _draw(node: onnx.NodeProto, constants: Mapping[str, onnx.TensorProto]) -> str | None:
    """What random values ``node`` draws ("RandomNormal, no seed"), None when it draws none."""
    if node.domain not in ONNX_DOMAINS:
        return None
    dropout = node.op_type == "Dropout" and len(node.input) > 2 and node.input[2]
    if node.op_type not in RANDOM_OPS and not (
        dropout and not _false(constants.get(node.input[2]))
    ):
        return None
    seed = next(
        (onnx.helper.get_attribute_value(a) for a in node.attribute if a.name == "seed"), None
    )
    return f"{node.op_type}, " + ("no seed" if seed is None else f"seed {seed:g}")


def _draws(
    node: onnx.NodeProto,
    constants: Mapping[str, onnx.TensorProto],
    functions: Mapping[tuple[str, str], onnx.FunctionProto],
    where: str = "",
    seen: frozenset[tuple[str, str]] = frozenset(),
) -> list[str]:
    """The random draws ``node`` makes: its own, those of its subgraphs and of the
    model-local function it calls (and of what they call), each as "node 'N' (Op, seed)"
    and where it is."""
    found = []
    draw = _draw(node, constants)
    if draw is not None:
        shown = f"node '{node.name}'" if node.name else "an unnamed node"
        found.append(f"{shown} ({draw}){where}")
    for sub in node_subgraphs(node):
        inner = _constants(sub.node, sub.initializer)
        for child in sub.node:
            found += _draws(child, inner, functions, f" in graph '{sub.name}'", seen)
    key = (node.domain, node.op_type)
    function = functions.get(key)
    if function is not None and key not in seen:
        inner = _constants(function.node, ())
        for child in function.node:
            found += _draws(
                child, inner, functions, f" in function '{function.name}'", seen | {key}
            )
    return found


def random_outputs(model: onnx.ModelProto) -> dict[str, list[str]]:
    """Per graph output computed from random draws (:data:`RANDOM_OPS`, Dropout in training
    mode; in the main graph, a subgraph or a model-local function on the way), the nodes
    that draw them ("node 'noise' (RandomNormal, no seed)"). Such an output cannot be
    compared between two models, seeded or not. The values of :data:`_SHAPE_ONLY_OPS`
    (Shape, Size) are drawn only where their input's shape is: shapes are followed apart,
    drawn where an operator outside :data:`_SHAPE_FOLLOWS_OPS` takes a drawn value (or a
    subgraph does)."""
    functions = {(f.domain, f.name): f for f in model.functions}
    constants = _constants(model.graph.node, model.graph.initializer)
    nodes = [
        (
            node,
            _draws(node, constants, functions),
            [name for inner in proto_nodes([node]) for name in inner.input],  # subgraphs' too
            _shape_rule(node),
        )
        for node in model.graph.node
    ]
    values: dict[str, dict[str, None]] = {}  # drawn values: their draws
    shapes: dict[str, dict[str, None]] = {}  # drawn shapes: their draws
    changed = True
    while changed:  # (a valid graph is in order: one pass, and one to see nothing changes)
        changed = False
        for node, own, used, rule in nodes:
            value_sources = dict.fromkeys(own)
            shape_sources: dict[str, None] = {}
            for name in used:
                shape_sources.update(shapes.get(name, {}))
            if rule == "shape only":
                value_sources.update(shape_sources)
                shape_sources = {}  # a 1-D tensor of the rank's length, or a scalar
            else:
                for name in used:
                    value_sources.update(values.get(name, {}))
                if rule == "any":
                    shape_sources.update(value_sources)
            for out in node.output:
                for taint, sources in ((values, value_sources), (shapes, shape_sources)):
                    if out and sources and not sources.keys() <= taint.get(out, {}).keys():
                        taint.setdefault(out, {}).update(sources)
                        changed = True
    return {o.name: list(values[o.name]) for o in model.graph.output if o.name in values}


def _shape_rule(node: onnx.NodeProto) -> str:
    """How ``node``'s outputs depend on drawn inputs (:func:`random_outputs`): "shape only"
    (:data:`_SHAPE_ONLY_OPS`: their values are their input's shape), "follows" (their
    shapes follow their inputs' shapes: :data:`_SHAPE_FOLLOWS_OPS`, no subgraph) or "any"
    (values and shapes may both come from drawn values)."""
    if node.domain not in ONNX_DOMAINS:
        return "any"
    if node.op_type in _SHAPE_ONLY_OPS:
        return "shape only"
    return "follows" if node.op_type in _SHAPE_FOLLOWS_OPS and not node_subgraphs(node) else "any"
