"""``blocked``: a two- or three-level scan for long axes (block size B, m = ceil(n / B) blocks).

Formula, with x viewed as (o, n, i) around the scanned axis (a Reshape, no copy)::

    pad n to m * B with ones (Pad; ones change no product, in either direction)
    view (o * m, B, i); in-block scan along B:  Transpose B to the front, Scan over B
        -> in-block running products r (B, o * m, i) and block totals t (o * m, i)
    block prefixes P = the EXCLUSIVE scan of t viewed (o, m, i) along m (recursively blocked,
        or a Scan / chain when m is small)
    y = r * P (broadcast over B), Transpose back, view (o, m * B, i), Slice [0, n)
    exclusive: the in-block scan is exclusive;  reverse: every scan runs backwards

Accuracy: every output is its k factors multiplied through a tree of k - 1 multiplications
(the padding and the exclusive ones multiply by 1 exactly), so integers are bit-exact with
wraparound and floats keep the sequential kernel's bound, k - 1 ulps (the order differs, so
not bitwise equal to it); float16 / bfloat16 multiplied in float32, rounded once.

Cost: B + m Scan iterations instead of n (about 2 sqrt(n) with one level), each over a
slab of o * m * i (or o * i) elements; passes over memory: Pad (when n is not a multiple of B),
two Transposes, the Scan, one Mul, a Slice (with padding). Needs a static axis, a known rank
and a static length.
"""

from __future__ import annotations

import math

import numpy as np
import onnx_ir as ir

from rewriter.lowerings import chain, loop
from rewriter.lowerings.builder import Builder
from rewriter.lowerings.scan import scan_front
from rewriter.site import CumProdSite

__all__ = ["block_sizes", "build", "compute_dtype", "max_ulps", "unsupported"]

compute_dtype = loop.compute_dtype
max_ulps = loop.max_ulps
_CHAIN_BELOW = 16  # a level this short is unrolled (chain) instead of scanned


def unsupported(site: CumProdSite) -> str | None:
    if site.rank is None:
        return "strategy 'blocked' needs the rank of x to be known"
    if site.shape is None or any(not isinstance(d, int) for d in site.shape.dims):
        return "strategy 'blocked' needs a static shape"
    return None


def block_sizes(n: int) -> list[int]:
    """Power-of-two block sizes, one per level: one level up to 8192, two above, so that
    B^levels * m is about n with B ~ m."""
    levels = 1 if n <= 8192 else 2
    size = 1 << max(1, round(math.log2(n) / (levels + 1)))
    return [size] * levels


def _scan3(
    b: Builder,
    t: ir.Value,
    dims: tuple[int, int, int],
    *,
    dtype: ir.DataType,
    exclusive: bool,
    reverse: bool,
    levels: list[int],
) -> ir.Value:
    """Scan ``t`` of static shape (o, n, i) along its middle axis."""
    o, n, i = dims
    if not levels or n <= levels[0]:
        if n <= _CHAIN_BELOW:
            slices = chain.split(b, t, 1, n)
            outs, _ = chain.chain(b, slices, 1, dtype=dtype, exclusive=exclusive, reverse=reverse)
            return outs[0] if n == 1 else b.op("Concat", *outs, axis=1)
        front = b.op("Transpose", t, perm=[1, 0, 2])
        y, _ = scan_front(b, front, dtype=dtype, exclusive=exclusive, reverse=reverse)
        return b.op("Transpose", y, perm=[1, 0, 2])
    size, rest = levels[0], levels[1:]
    m = -(-n // size)
    if m * size != n:
        one = b.const(np.array(1), dtype=dtype)
        t = b.op("Pad", t, b.const([0, 0, 0, 0, m * size - n, 0]), one)
    blocks = b.op("Reshape", t, b.const([o * m, size, i]))
    front = b.op("Transpose", blocks, perm=[1, 0, 2])  # (B, o*m, i)
    inner, totals = scan_front(b, front, dtype=dtype, exclusive=exclusive, reverse=reverse)
    totals = b.op("Reshape", totals, b.const([o, m, i]))
    prefix = _scan3(b, totals, (o, m, i), dtype=dtype, exclusive=True, reverse=reverse, levels=rest)
    prefix = b.op("Reshape", prefix, b.const([o * m, i]))
    y = b.op("Transpose", b.op("Mul", inner, prefix), perm=[1, 0, 2])  # (o*m, B, i)
    y = b.op("Reshape", y, b.const([o, m * size, i]))
    if m * size != n:
        y = b.slice_axis(y, 1, 0, n)
    return y


def build(b: Builder, x: ir.Value, axis: int, site: CumProdSite, *, dtype: ir.DataType) -> ir.Value:
    """``x`` is in the compute type ``dtype``; the axis and the whole shape are static."""
    assert site.shape is not None
    dims = [d for d in site.shape.dims if isinstance(d, int)]
    n = dims[axis]
    if n == 0:
        return b.op("Identity", x)
    o = int(np.prod(dims[:axis], dtype=np.int64))
    i = int(np.prod(dims[axis + 1 :], dtype=np.int64))
    t = b.op("Reshape", x, b.const([o, n, i]))
    y = _scan3(
        b,
        t,
        (o, n, i),
        dtype=dtype,
        exclusive=site.exclusive,
        reverse=site.reverse,
        levels=block_sizes(n),
    )
    return b.op("Reshape", y, b.const(dims))
