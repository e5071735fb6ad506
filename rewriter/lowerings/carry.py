"""``carry``: the product tree of unrolled blocks, each block's carry multiplied into its slices.

Formula, on the (o, n, i) view of x, n static, r = :data:`RADIX`, or :data:`NARROW_RADIX` on
narrow runs (:func:`narrow`: i = 1, or a few bytes per run in a large tensor)::

    n <= r: the plain chain (Split into the n slices, n - 1 Muls, Concat), as ``chain``
    else: pad n to m * r with ones (Pad; ones change no product, in either direction)
        view (o * m, r, i); s_0 .. s_{r-1} = Split along axis 1
        c_b = s_0 * ... * s_b            (exclusive: s_0 * ... * s_{b-1})
        t   = the block totals, viewed (o, m, i)
        P   = the EXCLUSIVE scan of t along m, by this same scheme (recursively)
        y   = Concat_b(c_b * P), viewed (o, m * r, i), Slice [0, n)
        reverse: every chain runs from the end

A length known only at run time is padded to the bound ``max_length`` when there is one,
else lowered as ``dynamic`` (which needs If and Scan).

Accuracy: every output is its k factors multiplied through a tree of k - 1 multiplications:
integers bit-exact with wraparound; floats within the sequential kernel's k - 1 ulps;
float16 / bfloat16 multiplied in float32, rounded once. A float32 computation on a target
that computes float64 takes its block totals and carries in float64 and starts each block's
chain from its carry (:mod:`.wide`: no partial product leaves the range where the
sequential one does not); elsewhere its totals come from :mod:`.near_one`.

Cost: per level a Split and a Concat (the passes that cost most), 2r - 1 Muls over one slice
each, a Pad where r does not divide the length; the levels after the first work on 1/r,
1/r^2, ... of the data. About 3r + 6 nodes per level (125-150 at n = 65536). No control flow.
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

# r: 8 and 32 measured slower on first / middle axes (b8eeb4e: results/bench-2026-11-30-carry)
RADIX = 16
NARROW_RADIX = 4  # r on narrow runs; when i = 1, 2, 3, 6, 8 and 16 measured slower
# runs of at most this many bytes are narrow (b8eeb4e: results/carry-radix-2026-12-03)
NARROW_RUN_BYTES = 24
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
    cache; the halves' lines stay in it (``cached``'s tiles)."""
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
