"""``radix``: the blocked scan with unrolled blocks of r = 8 or 16, as many levels as needed.

Formula: ``blocked``'s, with every level's in-block scan an unrolled chain (Split into the r
slices, r - 1 Muls, Concat; the block total is the chain's last product) instead of a
Transpose + Scan; levels are added until the block count is at most r, whose scan is a chain
too. No Transpose and no loop at all.

Accuracy: as ``blocked``: integers bit-exact with wraparound; floats k - 1 ulps (a tree of
k - 1 multiplications), not bitwise the sequential kernel's; float32 with float64 block
totals and carries where the target computes float64 (:mod:`.wide`).

Cost: about log_r(n) levels of (Pad, Split, r Muls over a slice each, Concat, Mul); node count
grows with r * log_r(n) (70-80 nodes at n = 65536). The fastest exact lowering measured for
8-byte types (int64, uint64, double), where Transposes are slow in onnxruntime. Needs the
length n static (outer and inner may be known only at run time). No control flow: runs where
Loop and Scan do not (tract, tinygrad, TFLite).
"""

from __future__ import annotations

import onnx_ir as ir

from rewriter.lowerings import blocked, loop
from rewriter.lowerings.builder import Builder
from rewriter.lowerings.view import View

__all__ = ["build", "compute_dtype", "max_ulps", "pads", "radix_levels"]

compute_dtype = loop.compute_dtype
max_ulps = loop.max_ulps


def radix_levels(n: int, last_axis: bool) -> list[int]:
    """r = 8 on the last axis or up to 512, 16 above; levels until the block count is <= r."""
    r = 8 if last_axis or n <= 512 else 16
    levels, m = [], n
    while m > r:
        levels.append(r)
        m = -(-m // r)
    return levels


def pads(n: int, levels: list[int]) -> bool:
    """Whether blocking n by ``levels`` (:func:`radix_levels`, ``carry.carry_levels``) pads
    some level, that is n is not r^k * q with q <= r: each padded level costs a Pad and a
    Slice, a pass over memory each."""
    m = n
    for r in levels:
        if m % r:
            return True
        m //= r
    return False


def build(b: Builder, x3: ir.Value, v: View) -> ir.Value:
    """The scan along axis 1 of ``x3`` (in the compute type); n is static."""
    n = v.static_length
    assert n is not None
    levels = radix_levels(max(n, 1), last_axis=v.inner == 1)
    return blocked.lower_3d(b, x3, v, levels=levels, method="chain")
