"""The lowerings as data, the one refusal function, and the one place that picks.

A lowering is a :class:`Lowering` record: how it builds the scan along axis 1 of the
(outer, n, inner) view of x (:mod:`.view`), its compute type and error bound, and what it
needs of a target, as data. :func:`refusal` answers "why not this lowering here" for every
lowering, target and site; :func:`choose` picks (``auto``: the target's table in
:mod:`.auto`, first row the target accepts); :func:`lower` emits it with what all lowerings
share: the Cast into and out of the compute type and the view (or, for a site whose axis is
statically 0 and a lowering with ``build_first_axis``, the scan over x itself).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import numbers
from collections.abc import Callable

import numpy as np
import onnx_ir as ir

from rewriter.errors import StrategyError
from rewriter.lowerings import auto, cached, chain, doubling, logsum, loop, masked, scan, tree
from rewriter.lowerings.builder import Builder, NameSource
from rewriter.lowerings.view import View, in_view, takes_flat_view
from rewriter.site import CumProdSite, ScanSpec
from rewriter.targets import DEFAULT_TARGET, TARGETS, Target

__all__ = [
    "LOWERINGS",
    "REMOVED",
    "STRATEGIES",
    "Builder",
    "Lowering",
    "NameSource",
    "check_strategy",
    "choose",
    "lower",
    "refusal",
    "specialised",
    "whole_number",
]

logger = logging.getLogger(__name__)

_Build = Callable[[Builder, ir.Value, View], ir.Value]
_Check = Callable[[ScanSpec, Target], "str | None"]


@dataclasses.dataclass(frozen=True)
class Lowering:
    """One way to compute CumProd from older ops, with what it needs as data.

    Attributes:
        name: The strategy name users pass.
        build: Emits the nodes: ``build(builder, x3, view) -> y3``.
        compute_dtype: The element type it computes in, for an input type (before the
            target's own integer rule, ``Target.compute_type``).
        max_ulps: The float error bound it guarantees, in ulps of the output type, for an
            output element that multiplies k inputs: ``max_ulps(dtype, k_array)``.
        needs: The control-flow ops it emits (Loop, Scan, If).
        length: How it takes a length known only at run time: ``"any"``; ``"bounded"``
            (through ``max_length``: a Pad to it, or a Reshape sized from it); ``"static"``
            (it needs the length static: padded to ``max_length``, refused without one).
        type_generic: Whether it works when x's element type is not known (it computes in
            x's own type and needs only Mul and data movement; CastLike makes its ones).
        flat_view: Where a target re-lays out rank-3 tensors (``symbolic_rank3`` false),
            whether it runs on the 2-D view: ``"always"``, ``"static length"`` (a Split into
            n column blocks) or ``"never"``.
        check: What the data above cannot say (a length cap, a type, a target quirk).
        build_first_axis: The scan along axis 0 of x itself, without the view, or None:
            ``build_first_axis(builder, x, spec, dtype=compute, target=target) -> y``, y
            None where the lowering keeps the view on that target.
    """

    name: str
    build: _Build
    compute_dtype: Callable[[ir.DataType | None], ir.DataType | None] = loop.compute_dtype
    max_ulps: Callable[[ir.DataType, np.ndarray], np.ndarray] = loop.max_ulps
    needs: frozenset[str] = frozenset()
    length: str = "any"
    type_generic: bool = True
    flat_view: str = "never"
    check: _Check = lambda spec, target: None
    build_first_axis: Callable[..., ir.Value | None] | None = None


_SCAN = frozenset({"Scan"})
LOWERINGS: dict[str, Lowering] = {
    lowering.name: lowering
    for lowering in (
        Lowering(
            "logsum",
            logsum.build,
            lambda dtype: ir.DataType.DOUBLE,
            logsum.max_ulps,
            type_generic=False,
            check=logsum.unsupported,
        ),
        Lowering("loop", loop.build, needs=frozenset({"Loop"})),
        Lowering("scan", scan.build, needs=_SCAN, build_first_axis=scan.build_first_axis),
        Lowering(
            "chain",
            chain.build,
            length="static",
            flat_view="static length",
            check=chain.unsupported,
        ),
        Lowering("blocked", tree.build_blocked, needs=_SCAN, length="static"),
        Lowering("radix", tree.build_radix, length="static"),
        Lowering("dynamic", tree.build_dynamic, needs=frozenset({"If", "Scan"})),
        Lowering(
            "doubling",
            doubling.build,
            length="bounded",
            flat_view="always",
            check=doubling.unsupported,
        ),
        Lowering("carry", tree.build_carry, length="bounded", check=tree.carry_refused),
        Lowering("cached", cached.build, needs=_SCAN, length="bounded", check=cached.unsupported),
        Lowering(
            "masked", masked.build, length="static", type_generic=False, check=masked.unsupported
        ),
    )
}
# logsum on a target without float64: the same formula in float32, with its own bound
_LOGSUM32 = dataclasses.replace(
    LOWERINGS["logsum"],
    build=logsum.build32,
    compute_dtype=lambda dtype: ir.DataType.FLOAT,
    max_ulps=logsum.max_ulps32,
)
STRATEGIES: tuple[str, ...] = ("auto", *LOWERINGS)
# Strategy names no longer offered, and the lowering that took their place.
REMOVED = {"tiled": "carry", "logsum32": "logsum"}


def whole_number(name: str, value: object, minimum: int) -> int | None:
    """``value`` (None, or an integer >= ``minimum``) as an int, for an option ``name``.

    Raises:
        TypeError: for a value that is not an integer (a str, a float, a bool).
        ValueError: for one below ``minimum``.
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be a whole number, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be a whole number >= {minimum}, got {value!r}")
    return int(value)


def check_strategy(strategy: str) -> None:
    """Raises ValueError (naming the strategies there are) for an unknown strategy name."""
    if strategy in REMOVED:
        raise ValueError(
            f"strategy {strategy!r} was removed: use {REMOVED[strategy]!r} (or 'auto'), which "
            "computes the same products"
        )
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}")


def _refused(lowering: Lowering, spec: ScanSpec, target: Target, opset: int | None) -> str | None:
    """Why ``lowering`` cannot compute ``spec`` exactly on ``target`` when built at ai.onnx
    ``opset`` (None: not checked; the pass always gives it) (None: it can)."""
    name = lowering.name
    missing = sorted(lowering.needs & target.missing_ops)
    if missing:
        return f"strategy '{name}' needs {target.lacking(missing)}"
    reason = lowering.check(spec, target)
    if reason is not None:
        return reason
    wrong = target.wrong_reason(name)
    if wrong is not None:
        return f"strategy '{name}' {wrong}"
    if lowering.length == "static" and spec.length is None and spec.max_length is None:
        return (
            f"strategy '{name}' needs the length of the scanned axis to be static, or a "
            "bound on it (max_length=, --max-length N)"
        )
    padding = spec.length is None and not spec.static_dims and lowering.length != "any"
    if padding and not target.bounded_lengths:
        return (
            f"{target.name} cannot load a Pad or Reshape sized from a length known only at "
            f"run time, which strategy '{name}' builds for one (auto takes Scan there)"
        )
    padded = target.padded_lowerings
    if padding and padded is not None and name not in padded:
        return (
            f"{target.name} failed to compile or run strategy '{name}' over a length known "
            f"only at run time (padded to the bound): use "
            f"{' or '.join(repr(p) for p in sorted(padded))}"
        )
    if spec.dtype is None and not lowering.type_generic:
        return f"strategy '{name}' needs the element type of x, which is not known"
    return None if opset is None else _refused_at(lowering, spec, target, opset)


def _refused_at(lowering: Lowering, spec: ScanSpec, target: Target, opset: int) -> str | None:
    """What only the build opset decides."""
    name = lowering.name
    if (
        name == "loop"
        and spec.exclusive
        and spec.length is None
        and opset < target.loop_exclusive_min_opset
    ):
        return (
            f"strategy 'loop' gives wrong values on {target.name} for an exclusive scan over "
            f"a length known only at run time below opset {target.loop_exclusive_min_opset} "
            f"(target opset {opset}): use another strategy or a higher --target-opset"
        )
    needs_view = spec.length != 1 and not spec.empty  # (length 1: x or ones, no view)
    if opset < 14 and not spec.static_dims and needs_view and "If" in target.missing_ops:
        return (
            "below opset 14 a Reshape reads a 0 as 'copy this dim', so x, whose dims are not "
            f"all known, is lowered inside an If (empty or not), and that needs "
            f"{target.lacking(['If'])}: "
            f"use --target-opset 14 or later (target opset {opset})"
        )
    if target.element_types is not None and spec.dtype not in target.element_types:
        types = ", ".join(sorted(t.name.lower() for t in target.element_types))
        got = "an element type not known statically" if spec.dtype is None else spec.dtype.name
        return f"{target.name} computes only {types}, not {got.lower()}"
    if not target.axis_input and spec.axis is None:
        return (
            f"{target.name} cannot take a run-time axis (the select over the axes needs "
            "integer Gather and Cast there): make the axis a constant"
        )
    if not target.shape_arithmetic and not spec.static_dims and not _plain_view(spec, name):
        return (
            f"{target.name}'s importer cannot compute with symbolic dims (a Mul, Less or Sub "
            "of values read from Shape(x) fails: 'cannot handle ShapeExpr inputs'); there only "
            "'chain' over a static length with at most one symbolic dim on each side of the "
            f"axis takes them, not '{name}' here: make the input shapes static first"
        )
    flat = takes_flat_view(spec, target, lowering.flat_view, opset)
    if not target.symbolic_rank3 and not spec.static_dims and not flat:
        return (
            f"{target.name}'s converter re-lays out rank-3 tensors with symbolic dims: with a "
            "dim not known statically only 'doubling' (and 'chain' over a static length, from "
            f"opset 18 or with the dims after the axis static) take its 2-D view, not '{name}' "
            f"(target opset {opset})"
        )
    if spec.dtype is None and opset < 15:
        return (
            "the element type of x is not known, and a type-generic lowering needs CastLike "
            "(opset 15)"
        )
    return None


def _plain_view(spec: ScanSpec, lowering: str) -> bool:
    """Whether ``lowering`` builds nothing from x's symbolic dims but a Reshape to them: no
    view (length 1, empty x), or a ``chain`` over a static length with at most one symbolic
    dim and no static factor on each side of the axis (sliced from Shape(x), not multiplied)."""
    if spec.length == 1 or spec.empty:
        return True
    if lowering != "chain" or spec.length is None or spec.dims is None or spec.axis is None:
        return False
    for side in (spec.dims[: spec.axis], spec.dims[spec.axis + 1 :]):
        symbolic = [d for d in side if not isinstance(d, int)]
        static = math.prod(d for d in side if isinstance(d, int))
        if len(symbolic) > 1 or (symbolic and static != 1):
            return False
    return True


def specialised(lowering: Lowering, target: Target) -> Lowering:
    """``lowering`` as it runs on ``target``: logsum computes in float32 without float64."""
    return _LOGSUM32 if lowering.name == "logsum" and not target.float64 else lowering


def refusal(
    site: CumProdSite, strategy: str, target: Target | None = None, opset: int | None = None
) -> str | None:
    """Why ``strategy`` (a lowering name, or ``auto``) cannot lower ``site`` on ``target`` at
    ai.onnx ``opset``: the one answer to "why not X here" (None: it can). ``auto`` is
    refused only where every row of its table that matches is."""
    try:
        choose(site, strategy, target, opset)
    except StrategyError as error:
        return error.problem
    return None


def choose(
    site: CumProdSite,
    strategy: str = "auto",
    target: Target | None = None,
    opset: int | None = None,
) -> Lowering:
    """The lowering for ``site``: the one named, or ``auto``'s row for ``target``
    (:mod:`.auto`), built at ai.onnx ``opset`` (None: the build opset is not checked).

    Raises:
        StrategyError: when the lowering cannot compute the site exactly on the target.
    """
    check_strategy(strategy)
    own = target or TARGETS[DEFAULT_TARGET]
    runtime = own.in_scan_body() if site.in_scan else own
    wanted, reason = _wanted(site, strategy, runtime, opset)
    if reason is None:
        return specialised(LOWERINGS[wanted], runtime)
    if runtime is not own:
        reason += f" (inside a Scan body, where {runtime.name} failed to convert a Scan)"
    inside = [op for op in sorted(own.lacked_loops()) if f"> {op} '" in site.location]
    if inside:
        reason += (
            f" (it also sits in the model's own {inside[0]}, which {own.name} lacks: "
            "the model cannot run there as it is)"
        )
    raise StrategyError(site.name, site.location, reason)


def _wanted(
    site: CumProdSite, strategy: str, runtime: Target, opset: int | None
) -> tuple[str, str | None]:
    """``(lowering, None)``, or ``(lowering or "", why it cannot serve)``."""
    spec = site.spec
    if site.in_scan and not runtime.lowers_in_scan:  # no lowering at all can serve the site
        return "", (
            f"{runtime.name} computed a CumProd lowered inside a Scan body wrong, or failed "
            "to load it: not lowered there"
        )
    if spec.axis is None and spec.rank is None and not runtime.runtime_view:
        return "", (
            "the rank of x is not known, so the view's shape would be computed at run time "
            f"from the rank and the axis, and {runtime.name} cannot take a shape computed "
            "at run time (a select over the axes needs the rank)"
        )
    if strategy != "auto":
        return strategy, _refused(LOWERINGS[strategy], spec, runtime, opset)
    compute = runtime.compute_type(loop.compute_dtype(spec.dtype))
    wanted, refused = auto.pick(
        spec, runtime, compute, lambda name: _refused(LOWERINGS[name], spec, runtime, opset)
    )
    return wanted, _auto_refusal(refused, spec, runtime, opset) if not wanted else None


def _auto_refusal(
    refused: list[tuple[str, str]], spec: ScanSpec, runtime: Target, opset: int | None
) -> str:
    """Why auto has no lowering here: the first refusal that an option would lift (a bound
    on the length, a later target opset), else the last candidate's."""
    bounded = dataclasses.replace(spec, max_length=spec.max_length or 1 << 30)
    for name, reason in refused:
        lowering = LOWERINGS[name]
        lifted = _refused(lowering, bounded, runtime, opset) is None
        if lifted or (opset is not None and _refused(lowering, spec, runtime, None) is None):
            return _as_auto(reason, name, runtime)
    name, reason = refused[-1]
    return _as_auto(reason, name, runtime)


def _as_auto(reason: str, wanted: str, runtime: Target) -> str:
    """A refusal of one of auto's candidates, worded for a user who chose no strategy."""
    prefix = f"strategy '{wanted}'"
    if not reason.startswith(prefix):
        return reason
    if "bound on" in reason and "length" in reason:
        return (
            f"on {runtime.name} auto needs a bound on the length of the scanned axis, which "
            "is only known at run time: pass max_length= (--max-length N)"
        )
    return f"on {runtime.name} auto's lowering ('{wanted}' here)" + reason[len(prefix) :]


def _axis_select(
    b: Builder, axis: ir.Value, spec: ScanSpec, emit: Callable[[Builder, ScanSpec], ir.Value]
) -> ir.Value:
    """``Gather(Concat(y_0, ..., y_{r-1}), Gather(range(r), axis))``, ``y_k`` the lowering
    at axis k with a new leading axis, where ``Target.runtime_view`` is false: no control
    flow, r lowerings; Gather copies bit for bit (Where turns -0.0 into +0.0) and fails
    outside [-r, r - 1] like the native op."""
    rank = spec.rank
    assert rank is not None
    table = b.const(list(range(rank)))
    a = b.op("Gather", table, b.op("Reshape", b.cast(axis, ir.DataType.INT64), b.const([])))
    candidates = [b.unsqueeze(emit(b, dataclasses.replace(spec, axis=k)), 0) for k in range(rank)]
    stacked = candidates[0] if rank == 1 else b.op("Concat", *candidates, axis=0)
    return b.op("Gather", stacked, a, axis=0)


def lower(b: Builder, site: CumProdSite, lowering: Lowering, target: Target) -> ir.Value:
    """Emit ``lowering`` for ``site`` into ``b``; return the value that replaces its output."""
    target = target.in_scan_body() if site.in_scan else target
    spec = site.spec
    if spec.empty:  # a static 0 in x's dims: y is x whatever the axis (tract failed to
        return b.op("Identity", site.x)  # load the select over the axes of such an x)
    if spec.length == 1 and not spec.exclusive:  # y is x: no Cast pair around an Identity
        return b.op("Identity", site.x)  # (onnxruntime's Cast elimination broke an If reading y)
    compute = target.compute_type(lowering.compute_dtype(spec.dtype))
    x = site.x if compute == spec.dtype or compute is None else b.cast(site.x, compute)
    axis_value = site.axis_value
    if axis_value is not None and spec.axis is None and not site.axis_rank_known:
        # axis + Gather([0, 0], rank(axis)), out of bounds for rank >= 2: an axis of unknown
        # shape fails unless it has rank 0 or 1, like the native op
        rank = b.op("Size", b.op("Shape", axis_value))
        axis64 = b.cast(axis_value, ir.DataType.INT64)
        axis_value = b.op("Add", axis64, b.op("Gather", b.const([0, 0]), rank, axis=0))

    def emit(eb: Builder, scan: ScanSpec) -> ir.Value:
        if scan.axis == 0 and lowering.build_first_axis is not None:
            # The axis is statically the first: the lowering may scan x itself (no view and
            # no Reshape back, which onnxruntime would copy into a graph output).
            direct = lowering.build_first_axis(eb, x, scan, dtype=compute, target=target)
            if direct is not None:
                return direct
        return in_view(
            eb,
            x,
            axis_value,
            scan,
            dtype=compute,
            target=target,
            build=lowering.build,
            pad_to_bound=lowering.length == "static",
            flat=takes_flat_view(scan, target, lowering.flat_view, eb.opset),
        )

    if spec.axis is None and not target.runtime_view and axis_value is not None:
        y = _axis_select(b, axis_value, spec, emit)
    else:
        y = emit(b, spec)
    if compute == spec.dtype or spec.dtype is None:
        return y if y is not site.x else b.op("Identity", y)
    if spec.dtype == ir.DataType.UINT32 and compute == ir.DataType.INT64:
        y = b.op("Mod", y, b.const(1 << 32))  # the low 32 bits, so the cast is in range
    return b.cast(y, spec.dtype)
