"""``dynamic``: for a scan length known only at run time, pick by the length at run time.

Formula::

    If(n <= 512 or x is empty,
       scan (the sequential Scan lowering),
       blocked scan with run-time padding: blocks of 32, two levels, a Scan over the
       remaining n / 1024 block totals)

The padding, the block counts, the reshapes and the final Slice are computed from Shape(x) at
run time (``blocked.scan3`` with a run-time n), so one model serves every length: short axes
pay no padding, long ones about 64 + n / 1024 Scan steps instead of n.

Accuracy: as ``scan`` below the threshold (bitwise native) and as ``blocked`` above (k - 1
ulps, a tree of k - 1 products); integers bit-exact with wraparound either way.

Cost: one If; then ``scan``'s or ``blocked``'s (plus a Pad and a Slice). Needs a static axis
and a known rank; nothing about the lengths.
"""

from __future__ import annotations

import onnx_ir as ir

from rewriter.lowerings import blocked, loop, scan
from rewriter.lowerings.builder import Builder
from rewriter.site import CumProdSite

__all__ = ["SHORT", "build", "compute_dtype", "max_ulps", "unsupported"]

SHORT = 512  # up to this length the plain Scan is as fast as anything (scripts/bench.py)
_LEVELS = [32, 32]
compute_dtype = loop.compute_dtype
max_ulps = loop.max_ulps


def unsupported(site: CumProdSite) -> str | None:
    return None if site.rank is not None else "strategy 'dynamic' needs the rank of x to be known"


def build(b: Builder, x: ir.Value, axis: int, site: CumProdSite, *, dtype: ir.DataType) -> ir.Value:
    """``x`` is in the compute type ``dtype``; ``axis`` is static and non-negative."""
    assert site.shape is not None
    n = site.shape[axis]
    if isinstance(n, int):  # the length is static after all: decide now
        if n <= SHORT:
            return scan.build(b, x, axis, site, dtype=dtype)
        return blocked.lower_3d(b, x, axis, site, dtype=dtype, levels=_LEVELS, method="scan")
    shape = b.op("Shape", x)
    length = b.op("Gather", shape, b.const([axis]), axis=0)
    short = b.op("Less", length, b.const([SHORT + 1]))
    empty = b.op("Equal", b.op("ReduceProd", shape, keepdims=1), b.const([0]))
    condition = b.op("Reshape", b.op("Or", short, empty), b.const([]))  # If takes a 0-D bool

    def long(sb: Builder) -> ir.Value:
        return blocked.lower_3d(sb, x, axis, site, dtype=dtype, levels=_LEVELS, method="scan")

    return b.op(
        "If",
        condition,
        then_branch=b.subgraph(
            lambda sb: scan.build(sb, x, axis, site, dtype=dtype), dtype, "cumprod_short"
        ),
        else_branch=b.subgraph(long, dtype, "cumprod_long"),
    )
