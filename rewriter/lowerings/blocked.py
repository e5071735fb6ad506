"""``blocked``: a two- or three-level scan for long axes (block size B, m = ceil(n / B) blocks).

Formula, on the (o, n, i) view of x::

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
not bitwise equal to it); float16 / bfloat16 multiplied in float32, rounded once. A float32
computation on a target that computes float64 takes the block totals from x in float64 and
computes the levels above in float64 (:mod:`.wide`), and then scans each block from its
prefix (the Scan's initial state; ``radix``: the chain's seed) in place of the final Mul, so
that no partial product leaves the range where the sequential one does not; on other
targets it takes the offset totals (:mod:`.near_one`): either way the error does not grow
with n.

Cost: B + m Scan iterations instead of n (about 2 sqrt(n) with one level), each over a
slab of o * m * i (or o * i) elements; passes over memory: Pad (when n is not a multiple of B),
two Transposes, the Scan, one Mul, a Slice (with padding). Needs the length n static (the
other dims may be known only at run time); ``dynamic`` uses the same scan with n padded at
run time.
"""

from __future__ import annotations

import math

import onnx_ir as ir

from rewriter.lowerings import chain, loop, near_one
from rewriter.lowerings.builder import Builder
from rewriter.lowerings.scan import scan_front
from rewriter.lowerings.view import Dim, View, shape_of, times
from rewriter.lowerings.wide import block_totals, carry_dtype, wide_view

__all__ = ["block_sizes", "build", "compute_dtype", "max_ulps", "scan3"]

compute_dtype = loop.compute_dtype
max_ulps = loop.max_ulps
_CHAIN_BELOW = 16  # a level this short is unrolled (chain) instead of scanned


def block_sizes(n: int) -> list[int]:
    """Power-of-two block sizes, one per level: one level up to 8192, two above, so that
    B^levels * m is about n with B ~ m."""
    levels = 1 if n <= 8192 else 2
    size = 1 << max(1, round(math.log2(n) / (levels + 1)))
    return [size] * levels


def _in_block(
    b: Builder,
    blocks: ir.Value,
    size: int,
    v: View,
    *,
    exclusive: bool,
    reverse: bool,
    method: str,
) -> tuple[ir.Value, ir.Value, list[ir.Value] | None]:
    """Scan ``blocks`` (o*m, B, i) along B: (the running products, the block totals (o*m, i),
    the B slices where ``chain`` cut them).

    ``scan``: Transpose B to the front and Scan over it (B steps, each over all blocks);
    ``chain``: Split into the B slices and unroll (no Transpose; best for 8-byte types).
    """
    if method == "chain":
        slices = chain.split(b, blocks, 1, size)
        outs, total = chain.chain(
            b, slices, v, exclusive=exclusive, reverse=reverse, want_total=True
        )
        assert total is not None
        inner = outs[0] if size == 1 else b.op("Concat", *outs, axis=1)
        return inner, total, slices  # total (o*m, 1, i): the caller reshapes it
    front = b.op("Transpose", blocks, perm=[1, 0, 2])  # (B, o*m, i)
    inner, totals = scan_front(b, front, v, exclusive=exclusive, reverse=reverse, slice_rank=2)
    return b.op("Transpose", inner, perm=[1, 0, 2]), totals, None


def scan3(
    b: Builder,
    t: ir.Value,
    dims: tuple[Dim, Dim, Dim],
    v: View,
    *,
    exclusive: bool,
    reverse: bool,
    levels: list[int],
    method: str = "scan",
    wide: ir.DataType | None = None,
) -> ir.Value:
    """Scan ``t`` of shape (o, n, i) along its middle axis, blocked by ``levels``. A length n
    known only at run time is padded at run time (and its last level is a Scan). ``wide``:
    the block totals taken from ``t`` in that type and the levels above computed in it
    (:mod:`.wide`)."""
    o, n, i = dims
    if not levels or (isinstance(n, int) and n <= levels[0]):
        if isinstance(n, int) and (n <= _CHAIN_BELOW or method == "chain"):
            slices = chain.split(b, t, 1, n)
            outs, _ = chain.chain(b, slices, v, exclusive=exclusive, reverse=reverse)
            return outs[0] if n == 1 else b.op("Concat", *outs, axis=1)
        front = b.op("Transpose", t, perm=[1, 0, 2])
        y, _ = scan_front(b, front, v, exclusive=exclusive, reverse=reverse, slice_rank=2)
        return b.op("Transpose", y, perm=[1, 0, 2])
    size, rest = levels[0], levels[1:]
    one = v.one
    m: Dim
    padded: Dim
    if isinstance(n, int):
        m = -(-n // size)
        padded = m * size
        if padded != n:
            t = v.pad_ones_after(b, t, padded - n, n)
    else:
        m = b.op("Div", b.op("Add", n, b.const([size - 1])), b.const([size]))
        padded = b.op("Mul", m, b.const([size]))
        pads = b.op("Concat", b.const([0, 0, 0, 0]), b.op("Sub", padded, n), b.const([0]), axis=0)
        t = b.op("Pad", t, pads, one)
    om = times(b, o, m)
    blocks = b.reshape(t, shape_of(b, om, size, i))
    if wide is not None:
        y = _from_wide_prefixes(
            b,
            blocks,
            size,
            (o, m, i),
            v,
            exclusive=exclusive,
            reverse=reverse,
            levels=rest,
            method=method,
            wide=wide,
        )
        y = b.reshape(y, shape_of(b, o, padded, i))
    else:
        inner, totals, cut = _in_block(
            b, blocks, size, v, exclusive=exclusive, reverse=reverse, method=method
        )
        if near_one.wanted(v):
            plain = b.reshape(totals, shape_of(b, om, 1, i))  # the Scan's totals are (o*m, i)
            totals = near_one.totals(b, v, plain, size, blocks=blocks, slices=cut)
        totals = b.reshape(totals, shape_of(b, o, m, i))
        prefix = scan3(
            b, totals, (o, m, i), v, exclusive=True, reverse=reverse, levels=rest, method=method
        )
        prefix = b.reshape(prefix, shape_of(b, om, 1, i))
        y = b.reshape(b.op("Mul", inner, prefix), shape_of(b, o, padded, i))
    if isinstance(n, int):
        return y if padded == n else b.slice_axis(y, 1, 0, n)
    return b.op("Slice", y, b.const([0]), n, b.const([1]))


def _from_wide_prefixes(
    b: Builder,
    blocks: ir.Value,
    size: int,
    dims: tuple[Dim, Dim, Dim],
    v: View,
    *,
    exclusive: bool,
    reverse: bool,
    levels: list[int],
    method: str,
    wide: ir.DataType,
) -> ir.Value:
    """The scan of the (o * m, B, i) ``blocks`` (B = ``size``, m blocks per row of ``dims``)
    in float32, the levels above in ``wide`` (:mod:`.wide`): the block totals taken from the
    blocks in ``wide``, their exclusive scan (``levels``), then each block's own scan started
    from its prefix (a chain's seed, or the Scan's initial state), so that its partial
    products are x's own prefixes and no Mul by the prefixes follows."""
    o, m, i = dims
    om = times(b, o, m)
    cut = chain.split(b, blocks, 1, size) if method == "chain" else None
    totals = b.reshape(block_totals(b, blocks, wide, v.target, cut), shape_of(b, o, m, i))
    prefix = scan3(
        b,
        totals,
        dims,
        wide_view(b, v, wide),
        exclusive=True,
        reverse=reverse,
        levels=levels,
        method=method,
    )
    prefix = b.cast(prefix, ir.DataType.FLOAT)  # wide only for a float32 computation
    if cut is not None:
        seed = b.reshape(prefix, shape_of(b, om, 1, i))
        outs, _ = chain.chain(b, cut, v, exclusive=exclusive, reverse=reverse, seed=seed)
        return outs[0] if size == 1 else b.op("Concat", *outs, axis=1)
    front = b.op("Transpose", blocks, perm=[1, 0, 2])
    init = b.reshape(prefix, shape_of(b, om, i))
    inner, _ = scan_front(
        b, front, v, exclusive=exclusive, reverse=reverse, slice_rank=2, init=init
    )
    return b.op("Transpose", inner, perm=[1, 0, 2])


def lower_3d(b: Builder, x3: ir.Value, v: View, *, levels: list[int], method: str) -> ir.Value:
    """:func:`scan3` on the view, with the view's attributes."""
    if any(d == 0 for d in v.dims()):
        return b.op("Identity", x3)  # empty: the result is x itself
    return scan3(
        b,
        x3,
        v.dims(),
        v,
        exclusive=v.exclusive,
        reverse=v.reverse,
        levels=levels,
        method=method,
        wide=carry_dtype(v),
    )


def build(b: Builder, x3: ir.Value, v: View) -> ir.Value:
    """The scan along axis 1 of ``x3`` (in the compute type); n is static."""
    n = v.static_length
    assert n is not None
    return lower_3d(b, x3, v, levels=block_sizes(max(n, 1)), method="scan")
