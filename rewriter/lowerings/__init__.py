"""The lowerings, their registry, and the one place that decides which one runs.

Each lowering module states its formula, accuracy and cost, and provides:
``unsupported(site) -> reason | None``, ``compute_dtype(dtype) -> dtype``,
``max_ulps(dtype, k) -> bound`` and ``build(builder, x, axis, site, *, dtype) -> value``.
:func:`lower` wraps a lowering with the parts all of them share: the Cast into and out of the
compute type (the lowering's own float widening, then the target runtime's integer type), and
the If over the possible axes when the axis is only known at run time and the lowering needs
it static.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable

import numpy as np
import onnx_ir as ir

from rewriter.errors import StrategyError
from rewriter.lowerings import auto, blocked, chain, dynamic, logsum, loop, radix, scan
from rewriter.lowerings.builder import Builder, NameSource
from rewriter.site import CumProdSite
from rewriter.targets import DEFAULT_TARGET, TARGETS, Target

__all__ = [
    "LOWERINGS",
    "STRATEGIES",
    "Builder",
    "Lowering",
    "NameSource",
    "check_strategy",
    "choose",
    "lower",
]

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Lowering:
    """One way to compute CumProd from older ops.

    Attributes:
        name: The strategy name users pass.
        unsupported: Why the lowering cannot compute a site exactly, or None.
        compute_dtype: The element type the lowering computes in, for an input type.
        build: Emits the nodes; gets ``x`` in the compute type ``dtype`` and the axis (an
            int when ``static_axis``, else an int or a 0-D value).
        static_axis: Whether ``build`` needs the axis as a Python int.
        max_ulps: The float error bound it guarantees, in ulps of the output type, for an
            output element that multiplies k inputs: ``max_ulps(dtype, k_array)``.
    """

    name: str
    unsupported: Callable[[CumProdSite], str | None]
    compute_dtype: Callable[[ir.DataType], ir.DataType]
    build: Callable[..., ir.Value]
    static_axis: bool
    max_ulps: Callable[[ir.DataType, np.ndarray], np.ndarray]


LOWERINGS: dict[str, Lowering] = {
    module.__name__.rsplit(".", 1)[1]: Lowering(
        name=module.__name__.rsplit(".", 1)[1],
        unsupported=module.unsupported,
        compute_dtype=module.compute_dtype,
        build=module.build,
        static_axis=static_axis,
        max_ulps=module.max_ulps,
    )
    for module, static_axis in (
        (logsum, False),
        (loop, True),
        (scan, True),
        (chain, True),
        (blocked, True),
        (radix, True),
        (dynamic, True),
    )
}
STRATEGIES: tuple[str, ...] = ("auto", *LOWERINGS)


def check_strategy(strategy: str) -> None:
    """Raises ValueError (naming the strategies there are) for an unknown strategy name."""
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}")


def choose(site: CumProdSite, strategy: str = "auto", target: Target | None = None) -> Lowering:
    """The lowering for ``site``: the one named, or ``auto``'s choice (:mod:`.auto`, from the
    benchmark, for the compute type ``target`` implies).

    Raises:
        StrategyError: when the named lowering cannot compute the site exactly.
    """
    if strategy == "auto":
        runtime = target or TARGETS[DEFAULT_TARGET]
        compute = runtime.compute_type(loop.compute_dtype(site.dtype))
        wanted = auto.pick(site, int(compute.itemsize))
    else:
        check_strategy(strategy)
        wanted = strategy
    lowering = LOWERINGS[wanted]
    reason = lowering.unsupported(site)
    if reason is not None:
        raise StrategyError(site.name, site.location, reason)
    return lowering


def _axis_switch(
    b: Builder,
    lowering: Lowering,
    x: ir.Value,
    axis: ir.Value,
    site: CumProdSite,
    *,
    dtype: ir.DataType,
    first: int,
) -> ir.Value:
    """``lowering`` at axis ``first`` if ``axis == first``, else the switch over later axes."""
    rank = site.rank
    assert rank is not None
    if first == rank - 1:
        return lowering.build(b, x, first, site, dtype=dtype)
    then_graph = b.subgraph(
        lambda sb: lowering.build(sb, x, first, site, dtype=dtype), dtype, "cumprod_branch"
    )
    else_graph = b.subgraph(
        lambda sb: _axis_switch(sb, lowering, x, axis, site, dtype=dtype, first=first + 1),
        dtype,
        "cumprod_branch",
    )
    is_first = b.op("Equal", axis, b.const(first))
    return b.op("If", is_first, then_branch=then_graph, else_branch=else_graph)


def lower(b: Builder, site: CumProdSite, lowering: Lowering, target: Target) -> ir.Value:
    """Emit ``lowering`` for ``site`` into ``b``; return the value that replaces its output.

    A run-time axis given to a lowering that needs it static becomes
    ``If(axis == 0, lowering at 0, If(axis == 1, ..., lowering at rank - 1))`` with the axis
    first normalized to [0, rank) by ``Mod(Cast(axis, int64), rank)``.
    """
    compute = target.compute_type(lowering.compute_dtype(site.dtype))
    x = site.x if compute == site.dtype else b.cast(site.x, compute)
    if site.axis is not None:
        y = lowering.build(b, x, site.axis, site, dtype=compute)
    elif site.axis_value is None:
        raise ValueError(f"{site.location}: a site needs a static axis or an axis value")
    elif not lowering.static_axis:
        y = lowering.build(b, x, site.axis_value, site, dtype=compute)
    else:
        assert site.rank is not None
        axis = b.op("Mod", b.cast(site.axis_value, ir.DataType.INT64), b.const(site.rank))
        y = _axis_switch(b, lowering, x, axis, site, dtype=compute, first=0)
    if compute == site.dtype:
        return y
    if site.dtype == ir.DataType.UINT32 and compute == ir.DataType.INT64:
        y = b.op("Mod", y, b.const(1 << 32))  # the low 32 bits, so the cast is in range
    return b.cast(y, site.dtype)
