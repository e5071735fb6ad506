"""Each CumProd alone: its one-node model (:func:`site_model`), lowered by the caller as the
model was, run on adversarial values at the lengths where a lowering changes branch, against
numpy. This module never lowers anything itself: the checker does not call the code it checks."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx
import onnx_ir as ir
from onnx import TensorProto, helper

from rewriter.verify.compare import PRECISION, Comparison, compare, factor_counts, numpy_cumprod
from rewriter.verify.feeds import (
    _SPECIALS,
    DEFAULT_DIM,
    _in_range_spread,
    _ints,
    _np_type,
    _sprinkle,
    _subnormal,
)
from rewriter.verify.records import OutputCheck, _failed, _one_line, _skipped
from rewriter.verify.run import _ort_session

__all__ = ["SITE_LENGTHS", "LoweredSite", "check_sites", "site_model"]

# Largest standalone CumProd input (elements) the adversarial site check runs.
_SITE_LIMIT = 1 << 22


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


@dataclasses.dataclass(frozen=True)
class LoweredSite:
    """One planned CumProd (a ``Planned`` of the pass: ``.site``, ``.lowering``) and its
    one-node model (:func:`site_model`) as the caller lowered it, with the model's strategy,
    target and target opset; ``lowered`` None with ``refused`` saying why when the lowering
    refused it (a site of unknown type or rank is not lowered: ``refused`` empty)."""

    plan: Any
    lowered: onnx.ModelProto | None
    refused: str = ""


def site_model(site: Any) -> onnx.ModelProto:
    """A one-node opset-26 model of ``site`` (a ``rewriter.site.Site`` of known type and rank):
    input ``x`` at the site's declared shape (symbolic dims by name), its axis an initializer
    or, when it is a run-time value, input ``axis``; bfloat16 fed and read as float32 through
    Casts (onnxruntime's binding has no bfloat16 arrays)."""
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
    sites: Sequence[LoweredSite],
    *,
    dims: Mapping[str, int] | None = None,
    seed: int = 0,
    max_length: int | None = None,
) -> list[OutputCheck]:
    """Each planned CumProd alone: its one-node model (:func:`site_model`) as the caller
    lowered it (``LoweredSite.lowered``), run in onnxruntime at the shapes of
    :func:`_site_shapes` (a symbolic scan length also at the lengths where a run-time
    lowering takes another branch) and, for a run-time axis, at every axis, negative ones
    too, on zeros, -0.0, ±inf, NaN, subnormals, overflowing products (floats) and full-range
    and odd values that wrap (integers), compared with :func:`numpy_cumprod` (float64,
    longdouble for float64) by :func:`compare` within the lowering's stated bound. A site
    that cannot be run (rank or type unknown, too large, its lowering refused) is a check
    with ``skipped`` set."""
    dims = dims or {}
    rng = np.random.default_rng(seed + 1)
    checks = []
    for lowered_site in sites:
        plan = lowered_site.plan
        site = plan.site
        name = f"CumProd '{site.name}' ({site.location}) alone"
        if site.dtype is None or site.shape is None:
            why = "element type" if site.dtype is None else "rank"
            checks.append(_skipped(name, "?", f"{why} unknown"))
            continue
        dtype_name = site.dtype.name.lower()
        shapes = _site_shapes(site, dims, max_length)
        if not shapes:
            checks.append(_skipped(name, dtype_name, "too large or empty"))
            continue
        lowered = lowered_site.lowered
        if lowered is None:  # e.g. a lowering that needs more than the pass was given
            checks.append(_skipped(name, dtype_name, lowered_site.refused or "not lowered"))
            continue
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
