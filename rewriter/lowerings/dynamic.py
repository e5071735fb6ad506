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

Cost: one If; then ``scan``'s or ``blocked``'s (plus a Pad and a Slice). Any rank, run-time
axis and dims.
"""

from __future__ import annotations

import onnx_ir as ir

from rewriter.lowerings import blocked, loop, scan
from rewriter.lowerings.builder import Builder
from rewriter.lowerings.view import View

__all__ = ["SHORT", "build", "compute_dtype", "max_ulps"]

SHORT = 512  # up to this length the plain Scan is as fast as anything (scripts/bench.py)
_LEVELS = [32, 32]
compute_dtype = loop.compute_dtype
max_ulps = loop.max_ulps


def build(b: Builder, x3: ir.Value, v: View) -> ir.Value:
    """The scan along axis 1 of ``x3`` (in the compute type)."""
    n = v.static_length
    if n is not None:  # the length is static after all: decide now
        if n <= SHORT:
            return scan.build(b, x3, v)
        return blocked.lower_3d(b, x3, v, levels=_LEVELS, method="scan")
    length = v.tensor(b, v.length)
    short = b.op("Less", length, b.const([SHORT + 1]))
    size = b.op("ReduceProd", b.op("Shape", x3), keepdims=1)
    empty = b.op("Equal", size, b.const([0]))
    condition = b.op("Reshape", b.op("Or", short, empty), b.const([]))  # If takes a 0-D bool
    return b.op(
        "If",
        condition,
        then_branch=b.subgraph(lambda sb: scan.build(sb, x3, v), v.dtype, "cumprod_short"),
        else_branch=b.subgraph(
            lambda sb: blocked.lower_3d(sb, x3, v, levels=_LEVELS, method="scan"),
            v.dtype,
            "cumprod_long",
        ),
    )
