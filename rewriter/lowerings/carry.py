"""``carry``: ``radix``'s unrolled blocks, with each block's carry-in multiplied into its
slices before they are put back together.

Formula, on the (o, n, i) view of x, n static, r = 16, or 4 on narrow runs (i = 1, or i times
the element size at most 24 bytes in a tensor of 2^21 elements or more: :func:`narrow`)::

    n <= r: the plain chain (Split into the n slices, n - 1 Muls, Concat), as ``chain``
    else: pad n to m * r with ones (Pad; ones change no product, in either direction)
        view (o * m, r, i); s_0 .. s_{r-1} = Split along axis 1    (each (o * m, 1, i))
        c_b = s_0 * ... * s_b  (a chain of r - 1 Muls; exclusive: c_b = s_0 * ... * s_{b-1})
        t   = s_0 * ... * s_{r-1}, the block totals, viewed (o, m, i)
        P   = the EXCLUSIVE scan of t along m, by this same scheme (recursively)
        y   = Concat_b(c_b * P) along axis 1, viewed (o, m * r, i), Slice [0, n)
        (exclusive: the first slice is P itself);  reverse: every chain runs from the end
    a seed S (``cached``'s chunks: the product of the chunks before) starts the chain of the
    last level (n <= r) instead of a slice or the ones, so every P, and every y, has S as a
    factor: y = S * the scan of x, on (o, 1, i) Muls only

Against ``radix``: the same levels, but the block carries P are multiplied into the r
slices (r Muls on same-shaped (o * m, 1, i) tensors) before the Concat, instead of one Mul
of the concatenated (o * m, r, i) blocks by P broadcast over the block axis. onnxruntime
broadcasts over a middle axis one run of i elements at a time: with i = 16 that Mul took
770 µs per 1M float32 where the r same-shape Muls take about 320 µs together
(``docs/performance.md``).

r is smaller when i = 1 (the last axis): the Split of an (o * m, r, 1) view moves single
elements r apart, so each of its r slices reads every cache line of the input, and with
8-byte types and r >= 8 each element of a slice sits in a line of its own. r = 4 took 0.6-0.8x
the time of r = 16 and of ``radix`` (r = 8, one broadcast Mul of the carries) on 8-byte last
axes, n = 512-65536 (``docs/performance.md``); on first and middle axes (runs of i >= 16
elements) r = 4 and 8 were no faster than 16. Runs of a few elements are narrow too: with
runs of 8-24 bytes (i * the compute type's size) r = 4 took 0.56-0.99x r = 16's time on
tensors of 2-4 * 2^20 elements (``scripts/bench_carry_radix.py``: 34 cells, median 0.70x),
but 0.74-1.24x on 2.6 * 10^5 - 1.6 * 10^6 (32 cells, median 0.98x), so r = 4 needs 2^21
elements or more (a static size); with runs of 32 bytes or more 0.85-1.19x (26 cells, median
1.09x), so r stays 16 there (fifteenth round, 2026-12-03, ``docs/performance.md``).

Accuracy: every output is its k factors multiplied through a tree of k - 1 multiplications
(the padding and the exclusive ones multiply by 1 exactly): integers bit-exact with
wraparound; floats within the sequential kernel's k - 1 ulps (not bitwise its order);
float16 / bfloat16 multiplied in float32 and rounded once. A float32 computation on a target
that computes float64 takes the first level's block totals from x in float64 and scans them
in float64 (:mod:`.wide`), and each block's chain starts from its carry: y_b =
Cast(P64, float32) * s_0 * ... * s_b (r Muls a block instead of c_b's r - 1 and the r Muls
by the carry), whose error does not grow with n (float32 carries rounded factors near 1 one
way: 2196 ulps against the native kernel's 542 at n = 20000) and whose partial products are
x's own prefixes (no overflow inside a block where the sequential product has none); on
other targets the block totals come from :mod:`.near_one` (float32, every level) and the
blocks' products from 1 are multiplied by the carries as above. Cost: a Cast of x to float64
and a product per block (r Casts and r - 1 Muls of the slices, or on onnxruntime for r > 4 a
ReduceProd: :func:`.wide.block_totals`), 1.2-2.1x the float32 carries' time on onnxruntime
(``scripts/bench_wide_carries.py``, with the products from 1; seeded, :mod:`.wide`).

Cost: per level, a Split and a Concat at the chunk size i (the passes that cost most: a Split
into r slices of an (o * m, r, i) view moves N / i runs of i elements), 2r - 1 Muls over
one slice each (about two passes; r where the carries are float64, :mod:`.wide`), a Pad
when r does not divide the length; the levels after the first work on 1/r, 1/r^2, ... of
the data. About 3r + 6 nodes per level (125-150 at n = 65536). No control flow. A length
known only at run time is padded to the bound ``max_length`` when there is one (like
``radix``), else lowered as ``dynamic`` (which needs If and Scan).
"""

from __future__ import annotations

import onnx_ir as ir

from rewriter.lowerings import chain, dynamic, loop, near_one
from rewriter.lowerings.builder import Builder
from rewriter.lowerings.view import Dim, View, guarded_length, shape_of, times
from rewriter.lowerings.wide import block_totals, carry_dtype, wide_view
from rewriter.site import ScanSpec
from rewriter.targets import Target

__all__ = [
    "NARROW_FROM_ELEMENTS",
    "NARROW_RADIX",
    "NARROW_RUN_BYTES",
    "RADIX",
    "blocks_shape",
    "build",
    "carry_levels",
    "compute_dtype",
    "max_ulps",
    "narrow",
    "unsupported",
]

RADIX = 16  # r: 8 and 32 measured slower on the first / middle axes (docs/performance.md)
NARROW_RADIX = 4  # r on narrow runs; when i = 1, 2, 3, 6, 8 and 16 measured slower
NARROW_RUN_BYTES = 24  # runs of at most this many bytes are narrow (32: r = 16 was faster)
NARROW_FROM_ELEMENTS = 1 << 21  # ... in tensors this large (below, r = 4 gained nothing)
compute_dtype = loop.compute_dtype
max_ulps = loop.max_ulps


def unsupported(spec: ScanSpec, target: Target) -> str | None:
    missing = sorted({"If", "Scan"} & target.missing_ops)
    if spec.length is None and spec.max_length is None and missing:
        return (
            "strategy 'carry' needs the length of the scanned axis to be static, or a bound "
            f"on it (max_length=, --max-length N), on {target.name}: without a bound it is "
            f"lowered as 'dynamic', which needs {target.lacking(missing)}"
        )
    return None


def narrow(dims: tuple[Dim, int, Dim], dtype: ir.DataType | None) -> bool:
    """Whether the (o, n, i) view's runs of i elements are narrow: i = 1 (the last axis), or
    the dims static, i times the compute type's size at most :data:`NARROW_RUN_BYTES` and
    o * n * i at least :data:`NARROW_FROM_ELEMENTS`."""
    o, n, i = dims
    if isinstance(i, ir.Value):
        return False
    if i == 1:
        return True
    return (
        isinstance(o, int)
        and dtype is not None
        and i * dtype.itemsize <= NARROW_RUN_BYTES
        and o * n * i >= NARROW_FROM_ELEMENTS
    )


def carry_levels(n: int, narrow_runs: bool = False) -> list[int]:
    """One r per level, until the block count is at most r (whose scan is a plain chain);
    ``narrow_runs``: the view's runs are narrow (:func:`narrow`; r = :data:`NARROW_RADIX`)."""
    r = NARROW_RADIX if narrow_runs else RADIX
    levels, m = [], n
    while m > r:
        levels.append(r)
        m = -(-m // r)
    return levels


def _scan(
    b: Builder,
    t: ir.Value,
    dims: tuple[Dim, int, Dim],
    v: View,
    *,
    exclusive: bool,
    reverse: bool,
    levels: list[int],
    seed: ir.Value | None = None,
    blocks: bool = False,
    halves: bool = False,
    wide: ir.DataType | None = None,
) -> ir.Value:
    """Scan ``t`` of shape (o, n, i) along its middle axis; n static and at least 1. A
    ``seed`` (broadcast to (o, 1, i)) is the product before the first position: it starts
    the last level's chain, so the carries multiply it into every output. ``blocks``: the
    first level's Concat itself where r divides n (of shape :func:`blocks_shape`).
    ``halves``: the first level's Split in two steps (:func:`_split_in_halves`)."""
    o, n, i = dims
    if not levels or n <= levels[0]:
        plain, _ = chain.chain(
            b, chain.split(b, t, 1, n), v, exclusive=exclusive, reverse=reverse, seed=seed
        )
        return plain[0] if n == 1 else b.op("Concat", *plain, axis=1)
    r, rest = levels[0], levels[1:]
    m = -(-n // r)
    padded = m * r
    if padded != n:
        t = v.pad_ones_after(b, t, padded - n, n)
    om = times(b, o, m)
    view = b.reshape(t, shape_of(b, om, r, i))
    slices = _split_in_halves(b, view, r) if halves else chain.split(b, view, 1, r)
    if wide is not None:
        # the carries first, from float64 totals of x itself; each block's chain then starts
        # from its carry, so its partial products are x's own prefixes (:mod:`.wide`)
        w = wide_view(b, v, wide)
        totals = b.reshape(block_totals(b, view, wide, v.target, slices), shape_of(b, o, m, i))
        wide_seed = None if seed is None else b.cast(seed, wide)
        carry = _scan(
            b, totals, (o, m, i), w, exclusive=True, reverse=reverse, levels=rest, seed=wide_seed
        )
        carry = b.cast(carry, ir.DataType.FLOAT)  # wide only for a float32 computation
        carry = b.reshape(carry, shape_of(b, om, 1, i))
        pieces, _ = chain.chain(
            b, slices, v, exclusive=exclusive, reverse=reverse, seed=carry, slice_first=True
        )
    else:
        outs: list[ir.Value | None] = [None] * r
        running: ir.Value | None = None
        for k in range(r - 1, -1, -1) if reverse else range(r):
            if exclusive:
                outs[k] = running  # None for the first: the carry alone
            # the slice first: its last use, so onnxruntime may write the product in its place
            running = slices[k] if running is None else b.op("Mul", slices[k], running)
            if not exclusive:
                outs[k] = running
        assert running is not None
        if near_one.wanted(v):
            running = near_one.totals(b, v, running, r, slices=slices)
        totals = b.reshape(running, shape_of(b, o, m, i))
        carry = _scan(
            b, totals, (o, m, i), v, exclusive=True, reverse=reverse, levels=rest, seed=seed
        )
        carry = b.reshape(carry, shape_of(b, om, 1, i))
        pieces = [carry if c is None else b.op("Mul", c, carry) for c in outs]
    y = b.op("Concat", *pieces, axis=1)
    if blocks and padded == n:
        return y
    y = b.reshape(y, shape_of(b, o, padded, i))
    return y if padded == n else b.slice_axis(y, 1, 0, n)


def _split_in_halves(b: Builder, view: ir.Value, r: int) -> list[ir.Value]:
    """The r slices of the (o * m, r, i) ``view`` along axis 1 in two steps: its two halves
    (o * m, r / 2, i) first, runs of r / 2 * i elements, then each cut into its r / 2
    slices. The same slices as one Split; on onnxruntime a Split reads each output's runs
    of i elements from the whole view in turn, so with runs under a cache line (64 bytes)
    each line is read once per slice it holds, from memory where the view outgrows the
    cache; the halves' lines stay in it (:mod:`.cached`)."""
    assert r % 2 == 0, r
    half = r // 2
    first, second = chain.split(b, view, 1, 2, size=half)
    return chain.split(b, first, 1, half) + chain.split(b, second, 1, half)


def blocks_shape(dims: tuple[int, int, int], narrow_runs: bool) -> tuple[int, int, int]:
    """The shape of :func:`build`'s result with ``blocks=True`` on the static (o, n, i) view
    ``dims``: (o * n / r, r, i), the first level's blocks, where n > r and r divides n; else
    (o, n, i)."""
    o, n, i = dims
    levels = carry_levels(n, narrow_runs)
    if levels and n % levels[0] == 0:
        return o * n // levels[0], levels[0], i
    return dims


def _padded(b: Builder, x3: ir.Value, v: View, bound: int) -> ir.Value:
    """The scan of ``x3`` padded with ones to the static length ``bound`` and sliced back to
    the run-time n; an n above the bound fails at run time (the final Reshape's middle dim
    becomes n + 1) instead of being cropped. (view.py's padding, for a lowering that takes
    run-time lengths without a bound too.)"""
    n = v.tensor(b, v.length)
    pads = b.op(
        "Concat", b.const([0, 0, 0, 0]), b.op("Sub", b.const([bound]), n), b.const([0]), axis=0
    )
    padded = b.op("Pad", x3, pads, v.one)
    y = _scan(
        b,
        padded,
        (v.outer, bound, v.inner),
        v,
        exclusive=v.exclusive,
        reverse=v.reverse,
        levels=carry_levels(bound, narrow((v.outer, bound, v.inner), v.dtype)),
        wide=carry_dtype(v),
    )
    y = b.op("Slice", y, b.const([0]), n, b.const([1]))
    middle = guarded_length(b, v, n, bound)
    return b.reshape(y, shape_of(b, v.outer, middle, v.inner))


def build(
    b: Builder,
    x3: ir.Value,
    v: View,
    *,
    seed: ir.Value | None = None,
    narrow_runs: bool | None = None,
    blocks: bool = False,
    halves: bool = False,
) -> ir.Value:
    """The scan along axis 1 of ``x3`` (in the compute type); ``seed``: the product before
    its first position (n static; :func:`_scan`); ``narrow_runs``: whether its runs are
    narrow, when a caller judges that on a larger tensor than ``x3`` (None: :func:`narrow`
    of ``x3``'s view); ``blocks`` (all dims static, none 0): the result in the shape of
    :func:`blocks_shape`, which it carries, the first level's Concat without its Reshape to
    (o, n, i) (for a Scan body's output, where onnxruntime copies a Reshape's result but
    lets a Concat write in place); ``halves`` (n static): the first level's Split in two
    steps (:func:`_split_in_halves`; ``cached``'s tiles of 4-byte types of 2 MiB or more
    with runs of 32-64 bytes)."""
    n = v.static_length
    assert seed is None or n, "a seed needs a static, non-zero length"
    o, i = v.outer, v.inner
    assert not blocks or (n and isinstance(o, int) and isinstance(i, int) and o and i)
    if n is None:
        bound = v.spec.max_length
        if bound is None:
            return dynamic.build(b, x3, v)
        return _padded(b, x3, v, max(bound, 1))
    if any(d == 0 for d in v.dims()):
        return b.op("Identity", x3)  # empty: the result is x itself
    if narrow_runs is None:
        narrow_runs = narrow((o, n, i), v.dtype)
    y = _scan(
        b,
        x3,
        (o, n, i),
        v,
        exclusive=v.exclusive,
        reverse=v.reverse,
        levels=carry_levels(n, narrow_runs),
        seed=seed,
        blocks=blocks,
        halves=halves,
        wide=carry_dtype(v),
    )
    if blocks:
        assert isinstance(o, int) and isinstance(i, int)
        if v.dtype is not None:
            y.type = ir.TensorType(v.dtype)
        y.shape = ir.Shape(blocks_shape((o, n, i), narrow_runs))
    return y
