"""``tiled``: one Scan over the positions inside blocks of B, the block prefixes unrolled.

Formula, on the (o, n, i) view of x, n static, B = :func:`block_length` (m = ceil(n / B))::

    pad n to m * B with ones (Pad; ones change no product, in either direction)
    front = Transpose((o * m, B, i) view, (1, 0, 2))          (B, o * m, i)
    Scan over the B positions, the state an (o * m, i) slab:
        -> in-block running products r (B, o * m, i) and block totals t (o * m, i)
    P = the EXCLUSIVE scan of t viewed (o, m, i) along m, by ``radix``'s unrolled chains
        (Split, Muls, Concat per level of 8 or 16; no Transpose, no loop)
    y = Transpose(r * P, (1, 0, 2))  viewed (o, m * B, i), Slice [0, n)
    exclusive: the in-block scan is exclusive;  reverse: both scans run backwards

Against ``blocked``: the same first level, but the block totals (1/B of the data) are scanned
by chains instead of a Transpose, a second Scan and a Transpose back, and B is chosen so that
each Scan step works on a slab of at least a few thousand elements: B Scan steps (each one
Mul and one copy of a slab) plus about 13 nodes per radix level of the totals, instead of
B + m steps. Against ``radix``: the full-size work is one Scan and two Transposes instead of
a Split, a chain and a Concat along a strided axis at every level.

Accuracy: every output is its k factors multiplied through a tree of k - 1 multiplications
(padding and exclusive ones multiply by 1 exactly): integers bit-exact with wraparound, floats
within the sequential kernel's k - 1 ulps (not bitwise its order); float16 / bfloat16
multiplied in float32, rounded once. float32 on a target that computes float64: the block
totals taken from x in float64 and the levels above in float64 (:mod:`.wide`), and the Scan
started from the prefixes instead of ones (no Mul after it; its partial products are x's own
prefixes, so none leaves the range where the sequential product does not); elsewhere the
offset totals (:mod:`.near_one`).

Cost: passes over memory: Pad (when B does not divide n), Transpose, the Scan (a Mul and a
copy per element), one Mul (none where the prefixes are float64: they start the Scan),
Transpose back, Slice (with padding); B + about 13 log_8(m) kernel launches. Needs Scan and
a static length n (outer and inner may be known only at run time); runs n <= B as the plain
``scan``.
"""

from __future__ import annotations

import onnx_ir as ir

from rewriter.lowerings import blocked, loop, near_one, radix, scan
from rewriter.lowerings.builder import Builder
from rewriter.lowerings.scan import scan_front
from rewriter.lowerings.view import Dim, View, shape_of, times
from rewriter.lowerings.wide import block_totals, carry_dtype, wide_view
from rewriter.site import ScanSpec
from rewriter.targets import Target

__all__ = ["block_length", "build", "compute_dtype", "max_ulps", "unsupported"]

compute_dtype = loop.compute_dtype
max_ulps = loop.max_ulps


def unsupported(spec: ScanSpec, target: Target) -> str | None:
    if "Scan" in target.missing_ops:
        return f"strategy 'tiled' needs {target.lacking(['Scan'])} (use 'radix')"
    return None


def block_length(n: int) -> int:
    """B: a power of two near sqrt(n), between 16 and 128 (B Scan steps; the totals, n / B
    per row, go to the unrolled chains)."""
    size = 16
    while size < 128 and size * size < n:
        size *= 2
    return size


def build(b: Builder, x3: ir.Value, v: View) -> ir.Value:
    """The scan along axis 1 of ``x3`` (in the compute type); n is static."""
    n = v.static_length
    assert n is not None
    if any(d == 0 for d in v.dims()):
        return b.op("Identity", x3)  # empty: the result is x itself
    size = block_length(n)
    if n <= size:
        return scan.build(b, x3, v)
    o, i = v.outer, v.inner
    m = -(-n // size)
    padded = m * size
    t = x3
    if padded != n:
        t = b.op("Pad", t, b.const([0, 0, 0, 0, padded - n, 0]), v.one)
    om = times(b, o, m)
    blocks = b.reshape(t, shape_of(b, om, size, i))
    front = b.op("Transpose", blocks, perm=[1, 0, 2])
    levels = radix.radix_levels(m, last_axis=i == 1)
    wide = carry_dtype(v)
    if wide is not None:  # float64 totals and prefixes (:mod:`.wide`), the Scan seeded by them
        totals = b.reshape(block_totals(b, blocks, wide, v.target), shape_of(b, o, m, i))
        prefix = _prefixes(b, totals, (o, m, i), wide_view(b, v, wide), levels)
        init = b.reshape(b.cast(prefix, ir.DataType.FLOAT), shape_of(b, om, i))
        y, _ = scan_front(
            b, front, v, exclusive=v.exclusive, reverse=v.reverse, slice_rank=2, init=init
        )
    else:
        inner, totals = scan_front(
            b, front, v, exclusive=v.exclusive, reverse=v.reverse, slice_rank=2
        )  # (B, o*m, i), (o*m, i)
        if near_one.wanted(v):
            plain = b.reshape(totals, shape_of(b, om, 1, i))
            totals = near_one.totals(b, v, plain, size, blocks=blocks)
        totals = b.reshape(totals, shape_of(b, o, m, i))
        prefix = b.reshape(_prefixes(b, totals, (o, m, i), v, levels), shape_of(b, 1, om, i))
        y = b.op("Mul", inner, prefix)
    y = b.op("Transpose", y, perm=[1, 0, 2])  # (o*m, B, i)
    y = b.reshape(y, shape_of(b, o, padded, i))
    return y if padded == n else b.slice_axis(y, 1, 0, n)


def _prefixes(
    b: Builder, totals: ir.Value, dims: tuple[Dim, int, Dim], v: View, levels: list[int]
) -> ir.Value:
    """The exclusive scan of the (o, m, i) block ``totals`` by ``radix``'s chains."""
    return blocked.scan3(
        b, totals, dims, v, exclusive=True, reverse=v.reverse, levels=levels, method="chain"
    )
