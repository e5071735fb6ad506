"""``radix``: the blocked scan with unrolled blocks of r = 8 or 16, as many levels as needed.

Formula: ``blocked``'s, with every level's in-block scan an unrolled chain (Split into the r
slices, r - 1 Muls, Concat; the block total is the chain's last product) instead of a
Transpose + Scan; levels are added until the block count is at most r, whose scan is a chain
too. No Transpose and no loop at all.

Accuracy: as ``blocked``: integers bit-exact with wraparound; floats k - 1 ulps (a tree of
k - 1 multiplications), not bitwise the sequential kernel's.

Cost: about log_r(n) levels of (Pad, Split, r Muls over a slice each, Concat, Mul); node count
grows with r * log_r(n) (70-80 nodes at n = 65536). The fastest exact lowering measured for
8-byte types (int64, uint64, double), where Transposes are slow in onnxruntime. Needs a static
axis, a known rank and a static length of the scanned axis.
"""

from __future__ import annotations

import onnx_ir as ir

from rewriter.lowerings import blocked, loop
from rewriter.lowerings.builder import Builder
from rewriter.site import CumProdSite

__all__ = ["build", "compute_dtype", "max_ulps", "radix_levels", "unsupported"]

compute_dtype = loop.compute_dtype
max_ulps = loop.max_ulps


def unsupported(site: CumProdSite) -> str | None:
    reason = blocked.unsupported(site)
    return None if reason is None else reason.replace("'blocked'", "'radix'")


def radix_levels(n: int, last_axis: bool) -> list[int]:
    """r = 8 on the last axis or up to 512, 16 above; levels until the block count is <= r."""
    r = 8 if last_axis or n <= 512 else 16
    levels, m = [], n
    while m > r:
        levels.append(r)
        m = -(-m // r)
    return levels


def build(b: Builder, x: ir.Value, axis: int, site: CumProdSite, *, dtype: ir.DataType) -> ir.Value:
    """``x`` is in the compute type ``dtype``; the axis and its length are static."""
    assert site.shape is not None
    n = site.shape[axis]
    assert isinstance(n, int)
    last = all(d == 1 for d in site.shape.dims[axis + 1 :])
    levels = radix_levels(max(n, 1), last_axis=last)
    return blocked.lower_3d(b, x, axis, site, dtype=dtype, levels=levels, method="chain")
