"""The lowerings, their registry, and the one place that decides which one runs.

Each lowering module states its formula, accuracy and cost, and provides
``unsupported(spec, target) -> reason | None``, ``compute_dtype(dtype) -> dtype``,
``max_ulps(dtype, k) -> bound`` and ``build(builder, x3, view) -> y3``: the scan along axis 1
of the (outer, n, inner) view of x (:mod:`.view`). :func:`lower` wraps a lowering with what
all of them share: the Cast into and out of the compute type (the lowering's own float
widening, then the target runtime's integer type) and the view itself.

A lowering may also provide ``build_first_axis(builder, x, spec, dtype=, target=) -> y``: the
scan along axis 0 of x itself, for a site whose axis is statically 0, with no view (``scan``:
a Scan over x's own slices already has x's shape, and the view's Reshape back would be a full
copy into the graph output in onnxruntime). :func:`lower` calls it there instead of
:func:`.view.in_view`; it returns None, having emitted nothing, where the view is kept (a
target where the direct form was not measured faster).
"""

from __future__ import annotations

import dataclasses
import logging
import numbers
from collections.abc import Callable

import numpy as np
import onnx_ir as ir

from rewriter.errors import StrategyError
from rewriter.lowerings import (
    auto,
    blocked,
    cached,
    carry,
    chain,
    doubling,
    dynamic,
    logsum,
    logsum32,
    loop,
    radix,
    scan,
    tiled,
)
from rewriter.lowerings.builder import Builder, NameSource
from rewriter.lowerings.view import View, in_view
from rewriter.site import CumProdSite, ScanSpec
from rewriter.targets import DEFAULT_TARGET, TARGETS, Target

__all__ = [
    "LOWERINGS",
    "STRATEGIES",
    "Builder",
    "Lowering",
    "NameSource",
    "check_strategy",
    "choose",
    "for_site",
    "lower",
    "whole_number",
]

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Lowering:
    """One way to compute CumProd from older ops.

    Attributes:
        name: The strategy name users pass.
        unsupported: Why the lowering cannot compute a scan exactly on a target, or None.
        compute_dtype: The element type the lowering computes in, for an input type.
        build: Emits the nodes: ``build(builder, x3, view) -> y3``.
        max_ulps: The float error bound it guarantees, in ulps of the output type, for an
            output element that multiplies k inputs: ``max_ulps(dtype, k_array)``.
        static_length: Whether ``build`` needs the length static: a length known only at
            run time is then padded to the spec's ``max_length`` (:mod:`.view`).
        bounded: Whether a length known only at run time goes through the bound
            ``max_length``: a Pad to it, or a Reshape whose size is computed from the length
            (``doubling``'s guard); see ``Target.bounded_lengths``.
        build_first_axis: The scan along axis 0 of x itself, without the view, or None:
            ``build_first_axis(builder, x, spec, dtype=compute, target=target) -> y``, y
            None where the lowering keeps the view on that target.
    """

    name: str
    unsupported: Callable[[ScanSpec, Target], str | None]
    compute_dtype: Callable[[ir.DataType | None], ir.DataType | None]
    build: Callable[[Builder, ir.Value, View], ir.Value]
    max_ulps: Callable[[ir.DataType, np.ndarray], np.ndarray]
    static_length: bool
    bounded: bool
    build_first_axis: Callable[..., ir.Value | None] | None = None


LOWERINGS: dict[str, Lowering] = {
    module.__name__.rsplit(".", 1)[1]: Lowering(
        name=module.__name__.rsplit(".", 1)[1],
        unsupported=module.unsupported,
        compute_dtype=module.compute_dtype,
        build=module.build,
        max_ulps=module.max_ulps,
        static_length=module in (chain, blocked, radix, tiled),
        bounded=module in (chain, blocked, radix, tiled, carry, cached, doubling),
        build_first_axis=getattr(module, "build_first_axis", None),
    )
    for module in (
        logsum,
        logsum32,
        loop,
        scan,
        chain,
        blocked,
        radix,
        dynamic,
        doubling,
        tiled,
        carry,
        cached,
    )
}
STRATEGIES: tuple[str, ...] = ("auto", *LOWERINGS)
# Lowerings that compute in the input's own type and need nothing but Mul and data movement:
# they also lower a CumProd whose element type is unknown (CastLike makes their ones).
_TYPE_GENERIC = frozenset({"loop", "scan", "chain", "blocked", "radix", "dynamic", "doubling"})


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
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}")


def for_site(site: CumProdSite, target: Target) -> Target:
    """``target`` as it applies at ``site``: inside a Scan body, where the runtime takes no
    nested Scan (``scan_in_scan``), Scan is one of its missing ops."""
    if not site.in_scan or target.scan_in_scan or "Scan" in target.missing_ops:
        return target
    scan = frozenset({"Scan"})
    return dataclasses.replace(
        target, missing_ops=target.missing_ops | scan, avoided_ops=target.avoided_ops | scan
    )


def choose(site: CumProdSite, strategy: str = "auto", target: Target | None = None) -> Lowering:
    """The lowering for ``site``: the one named, or ``auto``'s choice (:mod:`.auto`) for
    ``target``.

    Raises:
        StrategyError: when the lowering cannot compute the site exactly on the target.
    """
    runtime = for_site(site, target or TARGETS[DEFAULT_TARGET])
    spec = site.spec
    if site.in_scan and not runtime.lowers_in_scan:
        raise StrategyError(
            site.name,
            site.location,
            f"{runtime.name} computed a CumProd lowered inside a Scan body wrong, or failed "
            "to load it: not lowered there",
        )
    if strategy == "auto":
        compute = runtime.compute_type(loop.compute_dtype(spec.dtype))
        wanted = auto.pick(spec, runtime, compute)
    else:
        check_strategy(strategy)
        wanted = strategy
    lowering = LOWERINGS[wanted]
    reason = lowering.unsupported(spec, runtime)
    if reason is not None and strategy == "auto" and reason.startswith(f"strategy '{wanted}' "):
        # the user chose no strategy: "strategy 'doubling' needs a bound" named a lowering
        # auto would not even take once a bound is given (tinygrad's carry)
        unbounded = "needs a bound on the length" in reason
        reason = (
            f"on {runtime.name} auto needs a bound on the length of the scanned axis, which "
            "is only known at run time: pass max_length= (--max-length N)"
            if unbounded
            else f"on {runtime.name} auto's lowering ('{wanted}' here)"
            + reason[len(f"strategy '{wanted}'") :]
        )
    wrong = runtime.wrong_reason(wanted)
    if reason is None and wrong is not None:
        reason = f"strategy '{wanted}' computes wrong values on {runtime.name}: {wrong}"
    unbounded = spec.length is None and spec.max_length is None
    if reason is None and lowering.static_length and unbounded:
        reason = (
            f"strategy '{wanted}' needs the length of the scanned axis to be static, or a "
            "bound on it (max_length=, --max-length N)"
        )
    run_time_length = spec.length is None and not spec.static_dims
    if reason is None and run_time_length and lowering.bounded and not runtime.bounded_lengths:
        reason = (
            f"{runtime.name} cannot load a Pad or Reshape sized from a length known only at "
            f"run time, which strategy '{wanted}' builds for one (auto takes Scan there)"
        )
    padded = runtime.padded_lowerings
    refused_padded = padded is not None and wanted not in padded
    if reason is None and run_time_length and lowering.bounded and refused_padded:
        reason = (
            f"{runtime.name} failed to compile or run strategy '{wanted}' over a length known "
            f"only at run time (padded to the bound): use "
            f"{' or '.join(repr(name) for name in sorted(padded or ()))}"
        )
    if reason is None and spec.axis is None and spec.rank is None and not runtime.runtime_view:
        reason = (
            "the rank of x is not known, so the view's shape would be computed at run time "
            f"from the rank and the axis, and {runtime.name} cannot take a shape computed "
            "at run time (a select over the axes needs the rank)"
        )
    if reason is None and spec.dtype is None and wanted not in _TYPE_GENERIC:
        reason = f"strategy '{wanted}' needs the element type of x, which is not known"
    if reason is not None:
        if runtime is not target:
            reason += f" (inside a Scan body, where {runtime.name} failed to convert a Scan)"
        own = target or TARGETS[DEFAULT_TARGET]
        inside = [op for op in sorted(own.lacked_loops()) if f"> {op} '" in site.location]
        if inside:
            reason += (
                f" (it also sits in the model's own {inside[0]}, which {own.name} lacks: "
                "the model cannot run there as it is)"
            )
        raise StrategyError(site.name, site.location, reason)
    return lowering


def _axis_select(
    b: Builder, axis: ir.Value, spec: ScanSpec, emit: Callable[[Builder, ScanSpec], ir.Value]
) -> ir.Value:
    """``Gather(Concat(y_0, ..., y_{r-1}), a)``: each ``y_k`` the lowering at the static axis
    k (given a new leading axis), one picked at run time, for runtimes that cannot take a
    shape computed from a run-time value (tract, IREE, TFLite) or have no If (portable).
    Gather copies the chosen slab bit for bit (Where would not: onnxruntime's turns -0.0 into
    +0.0). The axis is normalised by ``Gather(range(r), axis)``, which fails outside
    [-r, r - 1] like the native op. No control flow; it computes r lowerings."""
    rank = spec.rank
    assert rank is not None
    table = b.const(list(range(rank)))
    a = b.op("Gather", table, b.op("Reshape", b.cast(axis, ir.DataType.INT64), b.const([])))
    candidates = [
        b.op("Unsqueeze", emit(b, dataclasses.replace(spec, axis=k)), b.const([0]))
        if b.opset >= 13
        else b.op("Unsqueeze", emit(b, dataclasses.replace(spec, axis=k)), axes=[0])
        for k in range(rank)
    ]
    stacked = candidates[0] if rank == 1 else b.op("Concat", *candidates, axis=0)
    return b.op("Gather", stacked, a, axis=0)


def _rank_checked(b: Builder, axis: ir.Value) -> ir.Value:
    """``axis`` as int64, failing at run time unless it has rank 0 or 1 (as the native op,
    which takes a 0-D or a one-element 1-D axis; the view's Reshape of the axis to one
    element would take [[1]] too): ``axis + Gather([0, 0], rank(axis))``, a Gather out of
    bounds for rank >= 2. For an axis whose shape is not declared or inferred."""
    rank = b.op("Size", b.op("Shape", axis))
    return b.op(
        "Add", b.cast(axis, ir.DataType.INT64), b.op("Gather", b.const([0, 0]), rank, axis=0)
    )


def lower(b: Builder, site: CumProdSite, lowering: Lowering, target: Target) -> ir.Value:
    """Emit ``lowering`` for ``site`` into ``b``; return the value that replaces its output."""
    target = for_site(site, target)
    spec = site.spec
    if spec.empty:  # a static 0 in x's dims: y is x whatever the axis (tract failed to
        return b.op("Identity", site.x)  # load the select over the axes of such an x)
    if spec.length == 1 and not spec.exclusive:  # y is x: no Cast pair around an Identity
        return b.op("Identity", site.x)  # (onnxruntime's Cast elimination broke an If reading y)
    compute = target.compute_type(lowering.compute_dtype(spec.dtype))
    x = site.x if compute == spec.dtype or compute is None else b.cast(site.x, compute)
    axis_value = site.axis_value
    if axis_value is not None and spec.axis is None and not site.axis_rank_known:
        axis_value = _rank_checked(b, axis_value)

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
            pad_to_bound=lowering.static_length,
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
