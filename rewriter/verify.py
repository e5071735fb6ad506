"""Comparison rules for CumProd results, shared by ``--verify`` and the tests.

- Integers: bit-exact (wraparound included).
- Floats: NaN where the reference is NaN, the same infinity where it is infinite, the same
  sign where it is zero; elsewhere within a bound in ulps of the output type, measured
  against a reference computed in higher precision.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import logging
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnx_ir as ir

from rewriter import runtimes
from rewriter.graphs import ONNX_DOMAINS

__all__ = [
    "PRECISION",
    "Comparison",
    "OutputCheck",
    "VerifyResult",
    "check_sites",
    "compare",
    "factor_counts",
    "index_inputs",
    "numpy_cumprod",
    "random_inputs",
    "random_outputs",
    "symbolic_sizes",
    "ulp_error",
    "verify_model",
]

logger = logging.getLogger(__name__)

# Significand bits (with the implicit one) and smallest normal exponent, per float type.
PRECISION: dict[ir.DataType, tuple[int, int]] = {
    ir.DataType.BFLOAT16: (8, -126),
    ir.DataType.FLOAT16: (11, -14),
    ir.DataType.FLOAT: (24, -126),
    ir.DataType.DOUBLE: (53, -1022),
}


def _ulp(reference: np.ndarray, dtype: ir.DataType) -> np.ndarray:
    """The ulp of ``dtype`` at each (finite) reference value, in longdouble."""
    bits, emin = PRECISION[dtype]
    ref = np.abs(reference.astype(np.longdouble))
    with np.errstate(divide="ignore"):
        exponent = np.floor(np.log2(np.where(ref > 0, ref, 1)))
    exponent = np.maximum(exponent, emin)
    return np.asarray(np.ldexp(np.longdouble(1), (exponent - (bits - 1)).astype(np.int64)))


def ulp_error(actual: np.ndarray, reference: np.ndarray, dtype: ir.DataType) -> np.ndarray:
    """|actual - reference| in ulps of ``dtype`` at the reference (finite positions only)."""
    act = actual.astype(np.longdouble)
    ref = reference.astype(np.longdouble)
    finite = np.isfinite(ref) & np.isfinite(act)
    error = np.zeros(ref.shape, dtype=np.longdouble)
    with np.errstate(invalid="ignore"):
        diff = np.abs(np.where(finite, act - ref, 0))
    error[finite] = (diff / _ulp(np.where(finite, ref, 1), dtype))[finite]
    return error


@dataclasses.dataclass(frozen=True)
class Comparison:
    """The outcome of comparing one output.

    Attributes:
        ok: Whether every element meets the rule.
        worst: The largest error (ulps for floats, count of differing elements for integers).
        detail: One line saying what differs, empty when ok.
    """

    ok: bool
    worst: float
    detail: str = ""


def compare(
    actual: np.ndarray,
    reference: np.ndarray,
    dtype: ir.DataType,
    max_ulps: float | np.ndarray = 0.0,
) -> Comparison:
    """Compare ``actual`` (in ``dtype``) with ``reference``.

    For integers ``reference`` must be in ``dtype`` and equality is exact. For floats,
    ``reference`` may be wider (float64 / longdouble); it is rounded to ``dtype`` to decide
    where results are infinite or zero (a zero met by a nonzero of the same sign counts in
    ulps of the subnormal spacing), and ``max_ulps`` (scalar or per element) bounds the
    error elsewhere.
    """
    if actual.shape != reference.shape:
        return Comparison(False, float("inf"), f"shape {actual.shape} != {reference.shape}")
    if dtype not in PRECISION:
        differ = int(np.count_nonzero(actual != reference))
        where = np.argwhere(actual != reference)[:1].tolist()
        detail = f"{differ} element(s) differ, first at {where}" if differ else ""
        return Comparison(differ == 0, float(differ), detail)

    act = actual.astype(np.float64) if dtype != ir.DataType.DOUBLE else actual
    ref_wide = reference.astype(np.longdouble)
    with np.errstate(over="ignore", invalid="ignore"):  # overflow to inf is the rounding
        ref_t = reference.astype(np.float64).astype(dtype.numpy()).astype(act.dtype)
    bad_nan = np.isnan(ref_wide) != np.isnan(act)
    # a zero the reference rounds to, met by a subnormal of the same sign: an error in
    # ulps like any other (a product at the bottom of the range, rounded the other way)
    near_zero = (ref_t == 0) & np.isfinite(act) & (act != 0)
    near_zero &= np.signbit(act) == np.signbit(ref_t)
    special = np.isinf(ref_t) | ((ref_t == 0) & ~near_zero)
    bad_special = (
        special & ~np.isnan(act) & ((act != ref_t) | (np.signbit(act) != np.signbit(ref_t)))
    )
    regular = ~special & ~np.isnan(ref_wide)
    errors = np.where(regular, ulp_error(act, ref_wide, dtype), 0)
    bound = np.broadcast_to(np.asarray(max_ulps, dtype=np.longdouble), errors.shape)
    bad_error = regular & (errors > bound)
    worst = float(errors.max()) if errors.size else 0.0
    for mask, what in (
        (bad_nan, "NaN where the reference is not (or the reverse)"),
        (bad_special, "infinity/zero/sign differs from the reference"),
        (bad_error, "error above the bound"),
    ):
        if mask.any():
            first = tuple(np.argwhere(mask)[0].tolist())
            return Comparison(
                False,
                worst,
                f"{what}, first at {first}: got {float(act[first]):.17g}, reference "
                f"{float(ref_wide[first]):.17g} (error there {float(errors[first]):.3g} ulp, "
                f"bound {float(bound[first]):.3g})",
            )
    return Comparison(True, worst)


def factor_counts(shape: tuple[int, ...], axis: int, exclusive: bool, reverse: bool) -> np.ndarray:
    """How many factors each output element of a CumProd multiplies (for error bounds)."""
    n = shape[axis]
    counts = np.arange(n) if exclusive else np.arange(1, n + 1)
    if reverse:
        counts = counts[::-1]
    view = [1] * len(shape)
    view[axis] = n
    return np.broadcast_to(counts.reshape(view), shape)


# -- checking a rewritten model against its original ----------------------------------------

DEFAULT_DIM = 3
# Unnamed dims of the graph inputs are fed the sizes after the named ones' largest, by turns
# over this many (so that two of them differ, and a bound can know the largest).
UNNAMED_SIZES = 4

# Largest standalone CumProd input (elements) the adversarial site check runs.
_SITE_LIMIT = 1 << 22
FEED_LIMIT = 1 << 27  # elements of one whole-model input (512 MiB of float32)


@dataclasses.dataclass(frozen=True)
class OutputCheck:
    """How one graph output (or one CumProd run standalone) compared over all runs (worst
    case). ``detail`` is one line saying what differs, empty when ok; ``skipped``: the check
    could not run (``detail`` says why), which is not a mismatch."""

    name: str
    dtype: str
    ok: bool
    worst: float
    bound: float
    detail: str = ""
    skipped: bool = False


def _skipped(name: str, dtype: str, why: str) -> OutputCheck:
    return OutputCheck(name, dtype, True, 0.0, 0.0, f"not checked: {why}", skipped=True)


@dataclasses.dataclass(frozen=True)
class VerifyResult:
    """The outcome of :func:`verify_model`.

    Attributes:
        ok: Every check passed.
        runs: How many random input sets were run (two adversarial sets come on top).
        reference: What ran the original: ``onnxruntime`` or ``onnx.reference``.
        outputs: Per graph output, the worst error seen; structural differences (an output
            missing, renamed, retyped or reshaped, a run that fails) are failed checks too.
        sites: Per CumProd, its lowering run standalone on adversarial values against numpy.
        runtime: What ran the rewritten model: the target's own runtime when it is installed
            here (:mod:`rewriter.runtimes`), else ``onnxruntime``.
        sizes: The size each symbolic dim of the graph inputs was fed at.
        richer_feeds: Whether each symbolic dim had a size of its own and Loop trip counts
            were 3 (else every dim not given was 3 and the counts took the safe values of
            :data:`INDEX_POSITIONS`: the original failed on the richer feeds).
        unmatched_dims: The names given in ``dims`` that no symbolic dim of the graph inputs
            or of a CumProd's input has (a misspelt ``--dim``: nothing was fed at that size).
    """

    ok: bool
    runs: int
    reference: str
    outputs: tuple[OutputCheck, ...]
    sites: tuple[OutputCheck, ...] = ()
    runtime: str = "onnxruntime"
    sizes: Mapping[str, int] = dataclasses.field(default_factory=dict)
    richer_feeds: bool = False
    unmatched_dims: tuple[str, ...] = ()

    def mismatches(self) -> list[OutputCheck]:
        return [c for c in (*self.outputs, *self.sites) if not c.ok]


def _one_line(exc: BaseException, limit: int = 240) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


# -- what graph inputs are used for ----------------------------------------------------------

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


def _subgraphs(node: onnx.NodeProto) -> list[onnx.GraphProto]:
    """The graphs ``node``'s attributes hold (not theirs)."""
    return [
        sub
        for attr in node.attribute
        for sub in ((attr.g,) if attr.type == onnx.AttributeProto.GRAPH else attr.graphs)
    ]


def _all_nodes(graph: onnx.GraphProto) -> list[onnx.NodeProto]:
    nodes = []
    for node in graph.node:
        nodes.append(node)
        nodes.extend(_nested(node))
    return nodes


def _subgraph_inputs(node: onnx.NodeProto) -> list[str]:
    return [i.name for sub in _subgraphs(node) for i in sub.input]


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
                body = [n for g in function.node for n in (g, *_nested(g))]
                found = _index_use(body, inner, others, positions)
                if found is not None:
                    safe = max(safe or 0, found)
            for name in (*node.output, *_subgraph_inputs(node)):
                if name and name not in tainted:
                    tainted.add(name)
                    changed = True
    return safe


def _nested(node: onnx.NodeProto) -> list[onnx.NodeProto]:
    """Every node of ``node``'s subgraphs, at any depth."""
    return [n for sub in _subgraphs(node) for n in _all_nodes(sub)]


def cumprod_axis_inputs(model: onnx.ModelProto) -> set[str]:
    """Graph inputs used (directly or through other ops) as a CumProd's axis and at no other
    index, axis, count, shape or divisor position: -1 is as safe for them as 0 (any rank),
    and feeding it too runs another axis, and a negative one, through the whole model."""
    functions = {(f.domain, f.name): f for f in model.functions}
    nodes = _all_nodes(model.graph)
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
    nodes = _all_nodes(model.graph)
    initializers = {t.name for t in model.graph.initializer}
    found = {}
    for value in model.graph.input:
        if value.name in initializers:
            continue
        safe = _index_use(nodes, {value.name}, functions, positions)
        if safe is not None:
            found[value.name] = safe
    return found


# -- outputs no two runs agree on ------------------------------------------------------------

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
    for sub in _subgraphs(node):
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
            [*node.input, *(name for inner in _nested(node) for name in inner.input)],
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
    return "follows" if node.op_type in _SHAPE_FOLLOWS_OPS and not _subgraphs(node) else "any"


def _listed(items: Sequence[str], limit: int = 3) -> str:
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


# -- inputs -------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Spec:
    name: str
    dtype: ir.DataType
    shape: tuple[int | str | None, ...] | None
    sequence: bool


def _type_spec(name: str, type_proto: onnx.TypeProto) -> _Spec:
    which = type_proto.WhichOneof("value")
    sequence = False
    if which == "sequence_type":
        type_proto = type_proto.sequence_type.elem_type
        which = type_proto.WhichOneof("value")
        sequence = True
    if which != "tensor_type":
        raise ValueError(f"graph input '{name}' has a type --verify cannot feed ({which})")
    tensor = type_proto.tensor_type
    if not tensor.elem_type:
        raise ValueError(f"graph input '{name}' has no element type")
    shape = None
    if tensor.HasField("shape"):
        shape = tuple(
            d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
            for d in tensor.shape.dim
        )
    return _Spec(name, ir.DataType(tensor.elem_type), shape, sequence)


def _input_specs(model: onnx.ModelProto) -> list[_Spec]:
    initializers = {t.name for t in model.graph.initializer}
    return [_type_spec(v.name, v.type) for v in model.graph.input if v.name not in initializers]


def _input_dim_names(model: onnx.ModelProto | ir.Model) -> list[str]:
    if isinstance(model, ir.Model):
        initializers = set(model.graph.initializers)
        shapes = [v.shape for v in model.graph.inputs if v.name not in initializers]
        dims = [getattr(d, "value", None) for shape in shapes if shape is not None for d in shape]
    else:
        dims = [d for spec in _input_specs(model) for d in spec.shape or ()]
    return [d for d in dims if isinstance(d, str) and d]


def symbolic_sizes(
    model: onnx.ModelProto | ir.Model, dims: Mapping[str, int] | None = None
) -> dict[str, int]:
    """A size for every named symbolic dim of the graph inputs: ``dims[name]`` when given,
    else :data:`DEFAULT_DIM`, :data:`DEFAULT_DIM` + 1, ... in order of appearance, so that
    two dims of one size cannot hide a rewrite that swaps them."""
    sizes = dict(dims or {})
    following = DEFAULT_DIM
    for d in _input_dim_names(model):
        if d not in sizes:
            while following in sizes.values():
                following += 1
            sizes[d] = following
    return sizes


def _concrete(
    shape: tuple[int | str | None, ...] | None,
    dims: Mapping[str, int],
    unnamed: Iterator[int] | None = None,
) -> tuple[int, ...]:
    """The sizes fed for ``shape``: a named dim ``dims[name]`` (else :data:`DEFAULT_DIM`),
    an unnamed one the next of ``unnamed`` (a size of its own, so that ``[?, ?]`` is not
    square), else :data:`DEFAULT_DIM`."""
    if shape is None:
        return (DEFAULT_DIM,)
    return tuple(
        d
        if isinstance(d, int)
        else dims.get(d, DEFAULT_DIM)
        if d
        else next(unnamed)
        if unnamed is not None
        else DEFAULT_DIM
        for d in shape
    )


def _np_type(dtype: ir.DataType) -> np.dtype:
    return np.dtype(dtype.numpy())


def _sprinkle(
    data: np.ndarray,
    once: np.ndarray,
    pool: np.ndarray,
    rng: np.random.Generator,
    rate: float,
) -> np.ndarray:
    """Put each value of ``once`` exactly once (when there is room) at random places of
    ``data``, and values of ``pool`` at about ``rate`` of the other places."""
    flat = data.reshape(-1).copy()
    order = rng.permutation(flat.size)
    first = order[: len(once)]
    flat[first] = once[: len(first)]
    rest = order[len(once) :]
    chosen = rest[rng.random(rest.size) < rate]
    flat[chosen] = rng.choice(pool, chosen.size)
    return np.asarray(flat.reshape(data.shape))


# Special float values whose products with ±1 and each other are exact (or a special):
# 0, -0.0, ±inf, NaN, ±2, 0.5. Subnormals are placed apart (see _subnormal), since the
# product of two underflows to 0 in the type, which a lowering in the log domain need not
# reproduce when an infinity follows.
_SPECIALS = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 2.0, 0.5, -2.0])


def _subnormal(dtype: ir.DataType) -> float:
    _, emin = PRECISION[dtype]
    return float(2.0 ** (emin - 3))


def _special_floats(
    dtype: ir.DataType, rng: np.random.Generator, shape: tuple[int, ...]
) -> np.ndarray:
    """±1 with each special value (0, -0.0, ±inf, NaN, ±2, 0.5) at least once where there
    is room (NaN first, the others in a random order: a small input gets NaN and a few
    others; ``finite special`` and ``overflow`` bring the zeros and infinities), one
    subnormal, and about a third of the places special."""
    sub = _subnormal(dtype)
    others = [v for v in _SPECIALS if not np.isnan(v)]
    once = np.array([np.nan, *rng.permutation([*others, rng.choice([-sub, sub])])])
    return _sprinkle(rng.choice([-1.0, 1.0], shape), once, _SPECIALS, rng, 0.3)


def _finite_special_floats(
    dtype: ir.DataType, rng: np.random.Generator, shape: tuple[int, ...]
) -> np.ndarray:
    """±1 with 0, -0.0, ±2 and subnormals and no inf or NaN (which, in the ``special``
    feed, turn most results NaN and hide a lost sign of zero or a flushed subnormal).
    Magnitudes never fall after a subnormal, so every product is exact in any order."""
    sub = _subnormal(dtype)
    once = rng.permutation(np.array([0.0, -0.0, sub, -sub, -2.0]))
    pool = np.array([0.0, -0.0, 2.0, -2.0])
    return _sprinkle(rng.choice([-1.0, 1.0], shape), once, pool, rng, 0.25)


def _range_floats(
    dtype: ir.DataType, rng: np.random.Generator, shape: tuple[int, ...], kind: str
) -> np.ndarray:
    """Powers of two of either sign whose products leave the type's range within three
    factors: ``overflow`` magnitudes 2^(emax/3 + 1) .. 2^(emax/2 + 2), ``underflow`` their
    inverses (signed zeros). All on one side of 1, so the running product only grows (or
    shrinks) and every order of multiplication gives the same exact product, or inf, or
    zero."""
    _, emin = PRECISION[dtype]
    emax = 1 - emin  # for these types
    exponents = rng.integers(emax // 3 + 1, emax // 2 + 2, shape, endpoint=True)
    sign = rng.choice([-1.0, 1.0], shape)
    return np.asarray(sign * np.exp2(exponents if kind == "overflow" else -exponents))


def _extreme_floats(
    dtype: ir.DataType, rng: np.random.Generator, shape: tuple[int, ...]
) -> np.ndarray:
    """Magnitudes 2^4 to 2^12 (products pass 1000 at once and overflow for good)."""
    return np.asarray(np.exp2(rng.uniform(4, 12, shape)) * rng.choice([-1.0, 1.0], shape))


def _ints(
    dtype: ir.DataType, rng: np.random.Generator, shape: tuple[int, ...], kind: str
) -> np.ndarray:
    np_type = _np_type(dtype)
    info = np.iinfo(np_type)
    if kind in ("extreme", "odd"):  # the whole range: products wrap around
        whole = rng.integers(info.min, info.max, shape, dtype=np_type, endpoint=True)
        # odd: a product never 0 modulo 2^k, so a long axis's late positions are seen too
        return np.asarray(whole | np.array(1, np_type) if kind == "odd" else whole)
    if kind in ("special", "finite special"):
        values = [np.array([0, 1, 2], np_type), np.array([info.max, info.min], np_type)]
        if info.min < 0:
            values.append(np.array([-1], np_type))
        pool = np.concatenate(values)
        return _sprinkle(rng.integers(0, 4, shape).astype(np_type), pool, pool, rng, 0.3)
    return rng.integers(0, 4, shape).astype(np_type)


def _in_range_spread(emin: int, n: int) -> float:
    """s such that the product of n factors of magnitude 2^U(-s, s) stays in a range of
    smallest normal exponent ``emin``: 1, or less so that s * sqrt(n) stays under a quarter
    of |emin| (the log2 of the running product is a random walk of n steps in [-s, s])."""
    return float(min(1.0, -emin / (4 * np.sqrt(max(n, 1)) + 1)))


def _random_spread(dtype: ir.DataType, shape: tuple[int, ...]) -> float:
    """s of the random floats sign * 2^U(-s, s): 1, less along a long dim, so that a running
    product along it stays in the normal range of the type the lowerings multiply in (float32
    for float16 / bfloat16; :func:`_in_range_spread` of the longest dim). Where it leaves
    the range for a while, a product tree and the sequential kernel give inf and a finite
    value at the same position, as the README allows at the range's edge, and --verify
    would refuse a right rewrite (float32 along 65536 positions with s = 1 did)."""
    _, emin = PRECISION[dtype]
    emin = min(emin, PRECISION[ir.DataType.FLOAT][1])  # float16 is multiplied in float32
    return _in_range_spread(emin, max(shape, default=1))


def _tensor(
    dtype: ir.DataType,
    shape: tuple[int, ...],
    rng: np.random.Generator,
    kind: str,
    safe: int | None,
) -> np.ndarray:
    np_type = _np_type(dtype)
    if safe is not None:
        return np.full(shape, safe).astype(np_type)
    if dtype == ir.DataType.BOOL:
        return np.asarray(rng.random(shape) < 0.5)  # a 0-D comparison gives a numpy scalar
    if dtype in PRECISION:
        if kind == "special":
            data = _special_floats(dtype, rng, shape)
        elif kind == "finite special":
            data = _finite_special_floats(dtype, rng, shape)
        elif kind == "extreme":
            data = _extreme_floats(dtype, rng, shape)
        elif kind in ("overflow", "underflow"):
            data = _range_floats(dtype, rng, shape, kind)
        else:
            spread = _random_spread(dtype, shape)
            data = np.exp2(rng.uniform(-spread, spread, shape)) * rng.choice([-1.0, 1.0], shape)
        with np.errstate(over="ignore"):
            return np.asarray(data).astype(np_type)
    if np.issubdtype(np_type, np.integer):
        return _ints(dtype, rng, shape, kind)
    raise ValueError(f"--verify cannot make {dtype.name.lower()} inputs")


def random_inputs(
    model: onnx.ModelProto,
    rng: np.random.Generator,
    dims: Mapping[str, int] | None = None,
    kind: str = "random",
    richer: bool = False,
    *,
    last_axis: bool = False,
) -> dict[str, Any]:
    """Feeds for every graph input that is not an initializer.

    ``kind``: ``random`` (floats sign * 2^U(-1, 1), less along dims past about 1000
    positions: :func:`_random_spread`; integers 0..3), ``special`` (floats
    ±1 mixed with 0, -0.0, ±inf, NaN, subnormals, ±2, 0.5; integers 0, ±1, 2, the type's
    extremes), ``finite special`` (the same floats without inf and NaN), ``extreme``
    (floats of magnitude 2^4..2^12, integers over the whole range), ``odd`` (integers over
    the whole range, odd: products wrap but never reach 0; floats as ``random``), ``overflow`` /
    ``underflow`` (floats: powers of two whose products leave the range within a few
    factors; integers as ``random``). An input used as an index, axis, count, shape or
    divisor (see :func:`index_inputs`) always gets its safe value (``richer``: a Loop trip
    count 3); one used only as a CumProd's axis gets -1 with ``last_axis``
    (:func:`cumprod_axis_inputs`). Booleans: random. A sequence input gets two tensors.
    Symbolic dims take ``dims[name]``, else :data:`DEFAULT_DIM`; with ``richer``, each
    unnamed dim a size of its own after those of ``dims``.
    """
    dims = dims or {}
    safe = index_inputs(model, richer)
    if last_axis:
        safe.update(dict.fromkeys(cumprod_axis_inputs(model), -1))
    unnamed = None
    if richer:
        top = max([DEFAULT_DIM, *dims.values()])
        unnamed = itertools.cycle(range(top + 1, top + 1 + UNNAMED_SIZES))
    feeds: dict[str, Any] = {}
    for spec in _input_specs(model):
        shape = _concrete(spec.shape, dims, unnamed)
        size = int(np.prod(shape, dtype=object))
        if size > FEED_LIMIT:
            raise ValueError(
                f"--verify: graph input '{spec.name}' would have shape {shape} ({size} "
                f"elements, at most {FEED_LIMIT}): give smaller --dim sizes"
            )
        value = safe.get(spec.name)
        if spec.sequence:
            feeds[spec.name] = [_tensor(spec.dtype, shape, rng, kind, value) for _ in range(2)]
        else:
            feeds[spec.name] = _tensor(spec.dtype, shape, rng, kind, value)
    return feeds


# -- running and comparing ------------------------------------------------------------------


@contextlib.contextmanager
def _quiet_rewriter() -> Iterator[None]:
    """The rewriter's warnings held back while a CumProd is lowered again alone (they named
    a graph 'site' the user's model does not have, after the same warnings for the model)."""
    quiet = logging.getLogger("rewriter")
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        yield
    finally:
        quiet.setLevel(level)


def _ort_session(model: str | bytes) -> Any:
    import onnxruntime as ort

    ort.set_default_logger_severity(3)
    options = ort.SessionOptions()
    # fatal only: a run that fails (the first feeds' sizes may not fit the model) raises, and
    # is reported in one line; its error log leaked onto the terminal, red, even with -q
    options.log_severity_level = 4
    return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])


def _run_original(session: Any, path: str, feeds: dict[str, Any]) -> list[Any]:
    """The original model on ``feeds``: in onnxruntime, or the spec's reference when
    onnxruntime cannot load it (``session`` None)."""
    if session is not None:
        return _session_run(session, feeds)
    return _run_reference(path, feeds)


_BFLOAT16 = "tensor(bfloat16)"


def _session_run(session: Any, feeds: dict[str, Any]) -> list[Any]:
    """``session.run``, through OrtValues when a feed or an output is bfloat16:
    onnxruntime's Python binding converts neither way for it ("Numpy_type 256 can't be
    converted to MLDataType", "No corresponding Numpy type"), so ``--verify`` found every
    model with bfloat16 inputs or outputs a mismatch. The 16-bit patterns are passed in
    and read out as they are (``ml_dtypes.bfloat16`` arrays, as numpy and onnx.reference
    hold them)."""
    import ml_dtypes

    wide = any(getattr(v, "dtype", None) == ml_dtypes.bfloat16 for v in feeds.values())
    if not wide and all(o.type != _BFLOAT16 for o in session.get_outputs()):
        return list(session.run(None, feeds))
    import ctypes

    import onnxruntime as ort

    values = {}
    for name, value in feeds.items():
        array = np.ascontiguousarray(value)
        if array.dtype == ml_dtypes.bfloat16:
            values[name] = ort.OrtValue.ortvalue_from_numpy_with_onnx_type(
                array.view(np.uint16), onnx.TensorProto.BFLOAT16
            )
        else:
            values[name] = ort.OrtValue.ortvalue_from_numpy(array)
    results = []
    for out in session.run_with_ort_values(None, values):
        if out.data_type() != _BFLOAT16:
            results.append(out.numpy())
            continue
        shape = tuple(out.shape())
        count = int(np.prod(shape))
        bits = np.empty(0, np.uint16)
        if count:
            bits = np.ctypeslib.as_array((ctypes.c_uint16 * count).from_address(out.data_ptr()))
        results.append(bits.copy().view(ml_dtypes.bfloat16).reshape(shape))
    return results


def _run_reference(path: str, feeds: dict[str, Any]) -> list[Any]:
    """The model in ``onnx.reference``, its CumProd as onnxruntime's native kernel computes
    it (:func:`_reference_cumprod`)."""
    from onnx.reference import ReferenceEvaluator

    with np.errstate(all="ignore"):  # the special inputs' inf * 0 and the like
        evaluator = ReferenceEvaluator(path, new_ops=[_reference_cumprod()])
        return list(evaluator.run(None, feeds))


def _reference_cumprod() -> type:
    """onnx.reference's CumProd multiplies float16 and bfloat16 in their own type, rounding
    at every step; onnxruntime's native kernel (float16) and every lowering here multiply in
    float32 and round once. A bfloat16 original, which onnxruntime cannot run, was checked
    against the former, and a 1-ulp difference a later Cast to an integer kept was reported
    a mismatch. This CumProd multiplies as onnxruntime does (:func:`numpy_cumprod`)."""
    import ml_dtypes
    from onnx.reference.op_run import OpRun

    class CumProd(OpRun):  # type: ignore[misc]
        op_domain = ""

        def _run(self, x, axis, exclusive=None, reverse=None):  # type: ignore[no-untyped-def]
            axis = np.asarray(axis)
            if axis.ndim != 0:
                raise ValueError(f"Axis must be a rank-0 tensor, got `{axis.ndim}`.")
            k = int(axis) + (x.ndim if int(axis) < 0 else 0)
            wide = x.dtype in (np.float16, ml_dtypes.bfloat16)
            out = numpy_cumprod(
                x, k, bool(exclusive), bool(reverse), np.float32 if wide else x.dtype
            )
            return (out.astype(x.dtype),)

    return CumProd


def _type_text(type_proto: onnx.TypeProto) -> str:
    which = type_proto.WhichOneof("value")
    if which == "tensor_type":
        tensor = type_proto.tensor_type
        name = onnx.TensorProto.DataType.Name(tensor.elem_type).lower() if tensor.elem_type else "?"
        if not tensor.HasField("shape"):
            return name
        dims = [
            str(d.dim_value) if d.HasField("dim_value") else (d.dim_param or "?")
            for d in tensor.shape.dim
        ]
        return f"{name}[{', '.join(dims)}]"
    if which == "sequence_type":
        return f"seq({_type_text(type_proto.sequence_type.elem_type)})"
    return which or "?"


def _failed(name: str, dtype: str, detail: str) -> OutputCheck:
    return OutputCheck(name, dtype, False, float("inf"), 0.0, detail)


def _signature_checks(original: onnx.ModelProto, rewritten: onnx.ModelProto) -> list[OutputCheck]:
    """Outputs (count, names, order, declared element types and shapes) and inputs must match."""
    problems = []
    old = {o.name: o for o in original.graph.output}
    new = {o.name: o for o in rewritten.graph.output}
    if len(original.graph.output) != len(rewritten.graph.output):
        problems.append(
            _failed(
                "(outputs)",
                "",
                f"the rewritten model has {len(rewritten.graph.output)} output(s), the "
                f"original {len(original.graph.output)}",
            )
        )
    for name, value in old.items():
        if name not in new:
            problems.append(
                _failed(name, _type_text(value.type), "output missing from the rewritten model")
            )
    for name, value in new.items():
        if name not in old:
            problems.append(
                _failed(name, _type_text(value.type), "output not in the original model")
            )
    if [o.name for o in original.graph.output if o.name in new] != [
        o.name for o in rewritten.graph.output if o.name in old
    ]:
        problems.append(_failed("(outputs)", "", "outputs are in a different order"))
    for name, value in old.items():
        if name in new and new[name].type != value.type:
            problems.append(
                _failed(
                    name,
                    _type_text(value.type),
                    f"declared type {_type_text(new[name].type)}, the original "
                    f"{_type_text(value.type)}",
                )
            )
    init_old = {t.name for t in original.graph.initializer}
    init_new = {t.name for t in rewritten.graph.initializer}
    inputs_old = [(i.name, i.type) for i in original.graph.input if i.name not in init_old]
    inputs_new = [(i.name, i.type) for i in rewritten.graph.input if i.name not in init_new]
    if inputs_old != inputs_new:
        problems.append(_failed("(inputs)", "", "graph inputs differ from the original's"))
    return problems


def _declared_dims(value: onnx.ValueInfoProto) -> list[int | None] | None:
    tensor = value.type.tensor_type
    if value.type.WhichOneof("value") != "tensor_type" or not tensor.HasField("shape"):
        return None
    return [d.dim_value if d.HasField("dim_value") else None for d in tensor.shape.dim]


def _compare_value(
    actual: Any,
    expected: Any,
    bound: float,
    declared: list[int | None] | None,
    narrowest: int | None = None,
    *,
    values: bool = True,
) -> tuple[Comparison, str]:
    """Compare one output value (a tensor or a sequence of tensors); also its element type
    against the original's and its shape against the declared one. Without ``values``,
    only the element types and shapes (of an output no two runs agree on)."""
    if isinstance(expected, list) or isinstance(actual, list):
        if not (isinstance(expected, list) and isinstance(actual, list)):
            return Comparison(False, float("inf"), "a sequence on one side only"), "?"
        if len(actual) != len(expected):
            return (
                Comparison(False, float("inf"), f"{len(actual)} tensors, original {len(expected)}"),
                "?",
            )
        worst, name = Comparison(True, 0.0), "seq"
        for i, (a, e) in enumerate(zip(actual, expected)):
            result, name = _compare_value(a, e, bound, None, narrowest, values=values)
            if not result.ok:
                return Comparison(False, result.worst, f"tensor {i}: {result.detail}"), name
            if result.worst > worst.worst:
                worst = result
        return worst, f"seq({name})"
    act, exp = np.asarray(actual), np.asarray(expected)
    dtype_name = exp.dtype.name
    if act.dtype != exp.dtype:
        return (
            Comparison(False, float("inf"), f"element type {act.dtype}, the original {exp.dtype}"),
            dtype_name,
        )
    if declared is not None and (
        len(declared) != act.ndim
        or any(d is not None and d != n for d, n in zip(declared, act.shape))
    ):
        shown = ["?" if d is None else d for d in declared]
        return (
            Comparison(False, float("inf"), f"shape {act.shape} does not match declared {shown}"),
            dtype_name,
        )
    if not values:
        with contextlib.suppress(KeyError, TypeError, ValueError):
            dtype_name = ir.DataType(onnx.helper.np_dtype_to_tensor_dtype(exp.dtype)).name.lower()
        if act.shape != exp.shape:
            return Comparison(
                False, float("inf"), f"shape {act.shape}, the original {exp.shape}"
            ), dtype_name
        return Comparison(True, 0.0), dtype_name
    try:
        dtype = ir.DataType(onnx.helper.np_dtype_to_tensor_dtype(exp.dtype))
    except (KeyError, TypeError, ValueError):
        equal = act.shape == exp.shape and bool(np.all(act == exp))
        return Comparison(
            equal, 0.0 if equal else float("inf"), "" if equal else "differs"
        ), dtype_name
    if dtype not in PRECISION:
        return compare(act, exp, dtype, 0.0), dtype.name.lower()
    return compare(act, exp, dtype, _scaled(bound, dtype, narrowest)), dtype.name.lower()


def _scaled(bound: float, dtype: ir.DataType, narrowest: int | None) -> float:
    """A bound in ulps of the narrowest CumProd float type, in ulps of ``dtype`` (a float32
    output computed by a bfloat16 CumProd carries bfloat16's error)."""
    bits, _ = PRECISION[dtype]
    if narrowest is None or narrowest >= bits:
        return bound
    return bound * 2.0 ** (bits - narrowest)


def plan_bound(plan: Any, dims: Mapping[str, int]) -> float:
    """One CumProd's float bound in ulps: its lowering's stated bound plus the sequential
    reference's own (k - 1 ulps), for its scan length at the sizes fed (``dims``); 0 for a
    site of no known element type."""
    site = plan.site
    if site.dtype is None:
        return 0.0
    largest = max([DEFAULT_DIM, *dims.values()]) + UNNAMED_SIZES  # an unnamed dim's at most

    def size(dim: object) -> int:
        if isinstance(dim, int):
            return dim
        name = getattr(dim, "value", dim)
        return dims.get(str(name), DEFAULT_DIM) if name else largest

    k: int
    if site.shape is not None and site.axis is not None:
        k = size(site.shape[site.axis])
    elif site.shape is not None:
        k = max([size(d) for d in site.shape], default=DEFAULT_DIM)
    else:
        k = largest
    ks = np.array([max(k, 1)])
    return float(plan.lowering.max_ulps(site.dtype, ks)[0]) + max(k - 1, 0)


def _plans_of_outputs(model: onnx.ModelProto, plans: Sequence[Any]) -> dict[str, list[Any] | None]:
    """Per graph output, the CumProds it is computed from: those of the main graph on its
    way, matched by output name; None (all of them, as for the whole model) when the way
    passes a node with a subgraph or a call of a model-local function, whose CumProds
    cannot be told apart here."""
    local = {(f.domain, f.name) for f in model.functions}
    producer = {out: node for node in model.graph.node for out in node.output if out}
    main = {
        p.site.node.outputs[0].name: p
        for p in plans
        if p.site.node is not None
        and " > " not in p.site.location
        and p.site.location.startswith("graph '")
    }
    found: dict[str, list[Any] | None] = {}
    for output in model.graph.output:
        seen: set[int] = set()
        todo, opaque = [output.name], False
        reached: list[Any] = []
        while todo:
            name = todo.pop()
            node = producer.get(name)
            if node is None or id(node) in seen:
                continue
            seen.add(id(node))
            subgraphs = any(
                a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
                for a in node.attribute
            )
            opaque = opaque or subgraphs or (node.domain, node.op_type) in local
            reached.extend(main[out] for out in node.output if out in main)
            todo.extend(i for i in node.input if i)
        found[output.name] = None if opaque else reached
    return found


def verify_model(
    original: str | os.PathLike[str],
    rewritten: str | os.PathLike[str],
    *,
    bound_ulps: float,
    runs: int = 3,
    dims: Mapping[str, int] | None = None,
    seed: int = 0,
    plans: Sequence[Any] = (),
    strategy: str = "auto",
    target: str | None = None,
    target_opset: int | None = None,
    max_length: int | None = None,
) -> VerifyResult:
    """Check ``rewritten`` against ``original``.

    1. Outputs: the same count, names, order, declared element types and shapes; the same
       graph inputs.
    2. Both run on ``runs`` random input sets plus a ``special`` and an ``extreme`` one (see
       :func:`random_inputs`), each symbolic dim of the inputs at its own size
       (:func:`symbolic_sizes`) and Loop trip counts given as inputs at 3; if the original
       fails on that, every dim not in ``dims`` at 3 and the trip counts at 1. The original
       runs in onnxruntime when it can load it, else in ``onnx.reference``; the rewritten
       model on the target's own runtime when it is installed here
       (:func:`rewriter.runtimes.runner_for`), else in onnxruntime. Each output must have
       the original's element type and its declared shape; integers must be equal; floats
       equal in NaN / inf / signed-zero positions and within ``bound_ulps`` elsewhere. A run
       the rewritten model fails and the original does not is a mismatch; an adversarial
       run the original itself fails is skipped. An output computed from random draws
       (:func:`random_outputs`: no two runs agree, seeded or not) has only its element type
       and shape compared: its check is ``skipped``, naming the nodes, and a warning is
       logged.
    3. Each of ``plans`` (the pass's ``.plans``): the CumProd run standalone at its type,
       shape and attributes, lowered with ``strategy`` / ``target`` / ``target_opset``, on
       adversarial values against numpy (:func:`check_sites`).
    """
    original, rewritten = str(original), str(rewritten)
    original_proto = onnx.load(original, load_external_data=False)
    rewritten_proto = onnx.load(rewritten, load_external_data=False)
    problems = _signature_checks(original_proto, rewritten_proto)
    rng = np.random.default_rng(seed)
    try:
        reference_session = _ort_session(original)
        reference = "onnxruntime"
    except Exception:  # noqa: BLE001 - an ORT without CumProd: use the spec
        reference_session = None
        reference = "onnx.reference"
    runner = runtimes.runner_for(target) if target else None
    if runner is not None:
        runtime = str(target)

        def run_rewritten(feeds: dict[str, Any]) -> list[Any]:
            assert runner is not None
            return runner(Path(rewritten), feeds)
    else:
        missing = target in runtimes.RUNNERS and target is not None
        runtime = "onnxruntime" + (f" ({target} is not installed here)" if missing else "")
        try:
            session = _ort_session(rewritten)
        except Exception as exc:
            if reference_session is not None:
                raise
            # onnxruntime loads neither model (a bfloat16 Mul after the CumProd, say):
            # both run in onnx.reference
            runtime = f"onnx.reference (onnxruntime cannot load it either: {_one_line(exc, 90)})"
            session = None

        def run_rewritten(feeds: dict[str, Any]) -> list[Any]:
            if session is None:
                return _run_reference(rewritten, feeds)
            return _session_run(session, feeds)

    old_names = [o.name for o in original_proto.graph.output]
    new_names = [o.name for o in rewritten_proto.graph.output]
    declared = {o.name: _declared_dims(o) for o in original_proto.graph.output}

    def narrowest_of(chosen: Sequence[Any]) -> int | None:
        bits = [PRECISION[p.site.dtype][0] for p in chosen if p.site.dtype in PRECISION]
        return min(bits) if bits else None

    narrowest = narrowest_of(plans)
    # each output's bound from the CumProds it is computed from, where they can be told
    # apart (a short scan's output beside a long one's, a float32 output beside a bfloat16
    # CumProd); else the whole model's
    per_output = _plans_of_outputs(original_proto, plans) if plans else {}

    def bound_of(name: str) -> tuple[float, int | None]:
        chosen = per_output.get(name)
        if not chosen:
            return bound_ulps, narrowest
        return min(bound_ulps, max(plan_bound(p, sizes) for p in chosen)), narrowest_of(chosen)

    # outputs computed from random draws: only their types and shapes can be compared
    drawn = random_outputs(original_proto)
    if drawn:
        names = list(drawn)
        logger.warning(
            "--verify cannot compare the values of %s %s with the original's: they depend on "
            "%s, whose random values differ from run to run (and, seeded, between "
            "runtimes); only their types and shapes are compared",
            "output" if len(names) == 1 else "outputs",
            _listed([f"'{name}'" for name in names]),
            _listed(list(dict.fromkeys(d for ds in drawn.values() for d in ds))),
        )
    worst: dict[str, OutputCheck] = {}
    kinds = ["random"] * runs + ["special", "finite special", "extreme", "overflow", "underflow"]
    # odd integers: in every other feed an integer product is 0 from about 64 positions on
    # (a factor 0, or 64 factors of 2), so a wrong rewrite there went unseen (found by a
    # review from outside)
    kinds.append("odd")
    # First the richer feeds (each symbolic dim its own size, Loop trip counts 3); if the
    # original fails on them, the plain ones (every other dim 3, safe counts). A run-time
    # CumProd axis is fed 0 and -1 by turns.
    sizes, richer = symbolic_sizes(original_proto, dims), True
    for index, kind in enumerate(kinds):
        last = index % 2 == 1
        feeds = random_inputs(original_proto, rng, sizes, kind, richer, last_axis=last)
        try:
            expected = _run_original(reference_session, original, feeds)
        except Exception as exc:
            if kind == "random" and richer:
                sizes, richer = dict(dims or {}), False
                feeds = random_inputs(original_proto, rng, sizes, kind, richer, last_axis=last)
                try:
                    expected = _run_original(reference_session, original, feeds)
                except Exception as plain_exc:
                    raise RuntimeError(
                        f"the original model fails on random inputs: {_one_line(plain_exc)}"
                    ) from plain_exc
            elif kind == "random":
                raise RuntimeError(
                    f"the original model fails on random inputs: {_one_line(exc)}"
                ) from exc
            else:
                continue
        try:
            actual = run_rewritten(feeds)
        except Exception as exc:  # noqa: BLE001 - reported as a mismatch
            problems.append(
                _failed(
                    "(run)",
                    "",
                    f"the rewritten model fails on {kind} inputs where the original runs: "
                    f"{_one_line(exc)}",
                )
            )
            continue
        got = dict(zip(new_names, actual))
        for name, exp in zip(old_names, expected):
            if name not in got:
                continue
            if name in drawn:
                _compare_drawn(
                    worst,
                    name,
                    got[name],
                    exp,
                    declared=declared[name],
                    kind=kind,
                    draws=drawn[name],
                )
                continue
            bound_here, narrowest_here = bound_of(name)
            result, dtype_name = _compare_value(
                got[name], exp, bound_here, declared[name], narrowest_here
            )
            detail = f"{kind} inputs: {result.detail}" if result.detail else ""
            previous = worst.get(name)
            if previous is None or (
                previous.ok and (not result.ok or result.worst > previous.worst)
            ):
                bound = 0.0
                if dtype_name.startswith(("float", "double", "bfloat")):
                    bound = bound_here
                    with contextlib.suppress(KeyError):
                        dtype = ir.DataType[dtype_name.upper()]
                        bound = _scaled(bound_here, dtype, narrowest_here)
                worst[name] = OutputCheck(name, dtype_name, result.ok, result.worst, bound, detail)
    outputs = tuple(problems) + tuple(worst[n] for n in old_names if n in worst)
    sites = tuple(
        check_sites(
            plans,
            strategy=strategy,
            target=target,
            target_opset=target_opset,
            dims=dims,
            seed=seed,
            max_length=max_length,
        )
    )
    ok = all(o.ok for o in outputs) and all(s.ok for s in sites)
    shown = {name: sizes.get(name, DEFAULT_DIM) for name in symbolic_sizes(original_proto)}
    known = set(_input_dim_names(original_proto))
    known.update(d for p in plans for d in p.site.spec.dims or () if isinstance(d, str))
    unmatched = tuple(name for name in dims or {} if name not in known)
    return VerifyResult(ok, runs, reference, outputs, sites, runtime, shown, richer, unmatched)


def _compare_drawn(
    worst: dict[str, OutputCheck],
    name: str,
    actual: Any,
    expected: Any,
    *,
    declared: list[int | None] | None,
    kind: str,
    draws: Sequence[str],
) -> None:
    """Record in ``worst`` how an output computed from random ``draws`` compared: a
    different element type or shape is a mismatch, else the check is skipped, saying why."""
    result, dtype_name = _compare_value(actual, expected, 0.0, declared, values=False)
    previous = worst.get(name)
    if not result.ok:
        if previous is None or previous.ok:
            detail = f"{kind} inputs: {result.detail}"
            worst[name] = OutputCheck(name, dtype_name, False, result.worst, 0.0, detail)
    elif previous is None:
        why = (
            f"values not compared: they depend on {_listed(list(draws))}, random from run to "
            "run (and, seeded, between runtimes); type and shape compared"
        )
        worst[name] = OutputCheck(name, dtype_name, True, 0.0, 0.0, why, skipped=True)


# -- each CumProd standalone on adversarial values ------------------------------------------


def numpy_cumprod(
    x: np.ndarray, axis: int, exclusive: bool, reverse: bool, dtype: Any
) -> np.ndarray:
    """CumProd by numpy in ``dtype`` (exclusive: a shifted input with 1 first; reverse:
    flipped). Integers wrap around as the spec's do."""
    with np.errstate(all="ignore"):
        a = x.astype(dtype)
        if reverse:
            a = np.flip(a, axis)
        n = a.shape[axis]
        if exclusive and n:
            first = np.ones_like(np.take(a, [0], axis=axis))
            a = np.concatenate([first, np.take(a, np.arange(n - 1), axis=axis)], axis=axis)
        out = np.cumprod(a, axis=axis, dtype=dtype)
        if reverse:
            out = np.flip(out, axis)
    return np.ascontiguousarray(out)


def _site_values(
    dtype: ir.DataType, shape: tuple[int, ...], axis: int, rng: np.random.Generator
) -> list[tuple[str, np.ndarray]]:
    """Adversarial inputs for one CumProd, each with a name."""
    if dtype not in PRECISION:
        kinds = [
            (kind, _ints(dtype, rng, shape, kind)) for kind in ("extreme", "special", "random")
        ]
        # odd factors: a product that is never 0 modulo 2^k, so every position of a long axis
        # still tells a wrong carry from a right one
        odd = _ints(dtype, rng, shape, "extreme") | np.array(1, _np_type(dtype))
        return [*kinds, ("odd", odd)]
    _, emin = PRECISION[dtype]
    n = max(shape[axis], 1)
    big = 2.0 ** (-emin // 2 + 4)  # big * big is past the largest finite value
    # regular values whose products stay in range over the whole axis
    spread = _in_range_spread(emin, n)
    regular = np.exp2(rng.uniform(-spread, spread, shape)) * rng.choice([-1.0, 1.0], shape)
    # specials: ±1 with a few exact specials per line (so no transient overflow)
    specials = _sprinkle(rng.choice([-1.0, 1.0], shape), _SPECIALS, _SPECIALS, rng, 2.0 / n)
    # one ± subnormal per line (at most one, so no product of two underflows), ±1 elsewhere
    sub = _subnormal(dtype)
    subnormals = np.moveaxis(rng.choice([-1.0, 1.0], shape), axis, -1).copy()
    lines = subnormals.reshape(-1, shape[axis])
    lines[np.arange(len(lines)), rng.integers(0, shape[axis], len(lines))] = rng.choice(
        [-sub, sub], len(lines)
    )
    subnormals = np.moveaxis(lines.reshape(subnormals.shape), -1, axis)
    overflow = rng.choice([-big, big, 2 * big, -4.0], shape)
    np_type = _np_type(dtype)
    with np.errstate(over="ignore"):
        return [
            (name, np.asarray(v).astype(np_type))
            for name, v in (
                ("zeros, -0.0, inf, NaN", specials),
                ("subnormals", subnormals),
                ("overflow", overflow),
                ("regular", regular),
            )
        ]


# Lengths a symbolic scan axis is also checked at: one and two positions, a block of 32 and
# one more, past the 512 where ``dynamic`` switches to its blocked form, past 1024 (its second
# level) and not a multiple of a block.
SITE_LENGTHS = (1, 2, 33, 513, 2085)


def _site_shapes(
    site: Any, dims: Mapping[str, int], max_length: int | None
) -> list[tuple[int, ...]]:
    """The shapes the standalone CumProd runs at: symbolic dims from ``dims`` (else
    :data:`DEFAULT_DIM`), and the same with each symbolic dim that may be the scan axis (the
    axis's, or every one when the axis is a run-time input) at each of
    :data:`SITE_LENGTHS` and ``max_length`` (none above it), within the size limit."""
    base: list[int] = []
    symbolic: list[int] = []
    for i, d in enumerate(site.shape):
        if isinstance(d, int):
            base.append(d)
            continue
        name = getattr(d, "value", None)
        base.append(dims.get(name, DEFAULT_DIM) if name else DEFAULT_DIM)
        if site.axis is None or i == site.axis % len(site.shape):
            symbolic.append(i)
    lengths = sorted({*SITE_LENGTHS, *((max_length,) if max_length else ())})
    if max_length:
        lengths = [k for k in lengths if k <= max_length]
    shapes = [tuple(base)]
    for i in symbolic:
        for k in lengths:
            shape = tuple(k if j == i else d for j, d in enumerate(base))
            if shape not in shapes:
                shapes.append(shape)
    return [s for s in shapes if 0 < int(np.prod(s)) <= _SITE_LIMIT]


def _site_model(site: Any) -> onnx.ModelProto:
    from onnx import TensorProto, helper

    declared: list[int | str] = []
    for i, d in enumerate(site.shape):
        if isinstance(d, int):
            declared.append(d)
        else:
            declared.append(getattr(d, "value", None) or f"unknown_{i}")
    elem = int(site.dtype)
    io_elem = TensorProto.FLOAT if site.dtype == ir.DataType.BFLOAT16 else elem
    nodes, inputs, initializers = [], [helper.make_tensor_value_info("x", io_elem, declared)], []
    if site.axis is None:
        inputs.append(helper.make_tensor_value_info("axis", TensorProto.INT64, []))
    else:
        initializers.append(helper.make_tensor("axis", TensorProto.INT64, [], [site.axis]))
    x, y = "x", "y"
    if io_elem != elem:
        nodes.append(helper.make_node("Cast", ["x"], ["x_t"], to=elem))
        x, y = "x_t", "y_t"
    node = helper.make_node("CumProd", [x, "axis"], [y], name=site.name or "cumprod")
    for key, on in (("exclusive", site.exclusive), ("reverse", site.reverse)):
        if on:
            node.attribute.append(helper.make_attribute(key, 1))
    nodes.append(node)
    if io_elem != elem:
        nodes.append(helper.make_node("Cast", [y], ["y"], to=TensorProto.FLOAT))
    graph = helper.make_graph(
        nodes, "site", inputs, [helper.make_tensor_value_info("y", io_elem, declared)], initializers
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26)], ir_version=10)


def check_sites(
    plans: Sequence[Any],
    *,
    strategy: str = "auto",
    target: str | None = None,
    target_opset: int | None = None,
    dims: Mapping[str, int] | None = None,
    seed: int = 0,
    max_length: int | None = None,
) -> list[OutputCheck]:
    """Each planned CumProd alone: a one-node model at the site's type, shape, axis and
    attributes, lowered as the model was (``rewriter.decompose_cumprod`` with the same
    strategy, target and target opset), run in onnxruntime at the shapes of
    :func:`_site_shapes` (a symbolic scan length also at the lengths where a run-time
    lowering takes another branch) and, for a run-time axis, at every axis, negative ones
    too, on zeros, -0.0, ±inf, NaN, subnormals, overflowing products (floats) and full-range
    and odd values that wrap (integers), compared with :func:`numpy_cumprod` (float64,
    longdouble for float64) by :func:`compare` within the lowering's stated bound. A site
    that cannot be run (rank or type unknown, too large) is a check with ``skipped`` set."""
    from rewriter.decompose import decompose_cumprod
    from rewriter.targets import DEFAULT_TARGET

    dims = dims or {}
    rng = np.random.default_rng(seed + 1)
    checks = []
    for plan in plans:
        site = plan.site
        name = f"CumProd '{site.name}' ({site.location}) alone"
        if site.dtype is None or site.shape is None:
            why = "element type" if site.dtype is None else "rank"
            checks.append(_skipped(name, "?", f"{why} unknown"))
            continue
        dtype_name = site.dtype.name.lower()
        model = _site_model(site)
        shapes = _site_shapes(site, dims, max_length)
        if not shapes:
            checks.append(_skipped(name, dtype_name, "too large or empty"))
            continue
        try:
            with _quiet_rewriter():  # its warnings were given for the model: not twice
                lowered = decompose_cumprod(
                    model,
                    strategy=strategy,
                    target=target or DEFAULT_TARGET,
                    target_opset=target_opset,
                    max_length=max_length,
                )
        except ValueError as exc:  # e.g. a lowering that needs more than the pass was given
            checks.append(_skipped(name, dtype_name, _one_line(exc)))
            continue
        assert isinstance(lowered, onnx.ModelProto)
        try:
            session = _ort_session(lowered.SerializeToString())
        except Exception as exc:  # noqa: BLE001 - the lowering does not load: a mismatch
            checks.append(_failed(name, dtype_name, f"does not load: {_one_line(exc)}"))
            continue
        rank = len(site.shape)
        axes = [site.axis % rank] if site.axis is not None else list(range(-rank, rank))
        runs = [(shape, axis) for shape in shapes for axis in axes]
        worst = OutputCheck(name, dtype_name, True, 0.0, 0.0)
        for shape, fed_axis in runs:
            axis = fed_axis % rank
            counts = factor_counts(shape, axis, site.exclusive, site.reverse)
            bound: float | np.ndarray = 0.0
            if site.dtype in PRECISION:
                bits, _ = PRECISION[site.dtype]
                wide_bits = 64 if site.dtype == ir.DataType.DOUBLE else 53
                bound = plan.lowering.max_ulps(site.dtype, counts) + counts * 2.0 ** (
                    bits - wide_bits
                )
            for what, x in _site_values(site.dtype, shape, axis, rng):
                feed = x.astype(np.float32) if site.dtype == ir.DataType.BFLOAT16 else x
                feeds = {"x": feed}
                if site.axis is None:
                    feeds["axis"] = np.array(fed_axis, np.int64)
                wide = (
                    np.longdouble
                    if site.dtype == ir.DataType.DOUBLE
                    else np.float64
                    if site.dtype in PRECISION
                    else x.dtype
                )
                expected = numpy_cumprod(x, axis, site.exclusive, site.reverse, wide)
                try:
                    actual = np.asarray(session.run(None, feeds)[0])
                except Exception as exc:  # noqa: BLE001 - a failure to run is a mismatch
                    result = Comparison(False, float("inf"), f"fails to run: {_one_line(exc)}")
                else:
                    result = compare(actual, expected, site.dtype, bound)
                if not result.ok or (worst.ok and result.worst > worst.worst):
                    where = f"shape {list(shape)}, axis {fed_axis}, {what}"
                    detail = f"{where}: {result.detail}" if result.detail else ""
                    shown = float(np.max(bound)) if np.size(bound) else 0.0
                    worst = OutputCheck(name, dtype_name, result.ok, result.worst, shown, detail)
                if not worst.ok:
                    break
            if not worst.ok:
                break
        checks.append(worst)
    return checks
