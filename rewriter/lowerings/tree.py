"""The product tree: ``carry``, ``radix``, ``blocked`` and ``dynamic`` as its parameters.

Formula, on the (o, n, i) view of x, for block sizes r_1, r_2, ... (one per level)::

    n <= r (or no level left): the top scan: a chain (Split, n - 1 Muls, Concat), or with
        ``scan_blocks`` past ``Target.tree_chain_up_to`` positions a Transpose + Scan
    else: pad n to m * r with ones (a run-time n: padded at run time)
        view (o * m, r, i); in-block scan along r: unrolled over the r slices of a Split
            (``scan_blocks``: a Transpose and a Scan over r) -> c_0 .. c_{r-1}, totals t
        P = the EXCLUSIVE scan of t (o, m, i) along m, by the next level
        y = Concat_b(c_b * P) (``carry_each``), or Concat_b(c_b) * P; viewed back, [0, n)
        exclusive: the in-block scan is exclusive;  reverse: every scan runs from the end

- ``carry``: unrolled, ``carry_each``, r from ``Target.carry_radix`` (the narrow runs' r on
  narrow runs, :func:`narrow`); a run-time length padded to ``max_length``, else ``dynamic``.
- ``radix``: unrolled, one Mul after the Concat, r from ``Target.radix_r``: r Muls per
  level against ``carry``'s 2r - 1, fewer nodes for compiling runtimes.
- ``blocked``: ``scan_blocks``, one or two levels of power-of-two blocks (:func:`block_sizes`).
- ``dynamic`` (any length): ``If(n <= S or x empty, scan, blocked with levels L)`` padded at
  run time (S, L: ``Target.dynamic_scan_up_to``, ``Target.dynamic_levels``): one model for
  every length.

Accuracy: each output is its k factors multiplied through a tree of k - 1 multiplications:
integers bit-exact with wraparound; floats within the sequential kernel's k - 1 ulps;
float16 / bfloat16 multiplied in float32 and rounded once. float32 block totals and carries
come from :mod:`.wide` (float64, each block's scan started from its carry) or, without
float64, :mod:`.near_one`: the error does not grow with n. ``dynamic`` to 512 is ``scan``.

Cost: per unrolled level a Split and a Concat, r - 1 (``radix``) or 2r - 1 (``carry``)
Muls over a slice each, a Pad and a Slice where r does not divide the length; each level
after the first on 1 / r of the data. ``carry`` about 3r + 6 nodes per level (125-150 at
n = 65536), ``radix`` 70-80; ``blocked`` B + m Scan steps and two Transposes.
"""

from __future__ import annotations

import math

import onnx_ir as ir

from rewriter.lowerings import chain, near_one, scan
from rewriter.lowerings.builder import Builder
from rewriter.lowerings.scan import scan_front
from rewriter.lowerings.view import Dim, View, padded, shape_of, times
from rewriter.lowerings.wide import block_totals, carry_dtype, wide_view
from rewriter.site import ScanSpec
from rewriter.targets import Target

__all__ = [
    "block_sizes",
    "build_blocked",
    "build_carry",
    "build_dynamic",
    "build_radix",
    "carry_levels",
    "carry_refused",
    "narrow",
    "pads",
]


def _levels(n: int, r: int) -> list[int]:
    """r once per level until the block count is at most r (the top chain's length)."""
    levels, m = [], n
    while m > r:
        levels.append(r)
        m = -(-m // r)
    return levels


def carry_levels(n: int, target: Target, narrow_runs: bool = False) -> list[int]:
    """``carry``'s levels: r from ``target.carry_radix``, its second on narrow runs."""
    wide, narrow_r = target.carry_radix
    return _levels(n, narrow_r if narrow_runs else wide)


def radix_levels(n: int, target: Target, last_axis: bool) -> list[int]:
    """``radix``'s levels: r by ``target.radix_r``."""
    r, up_to, beyond = target.radix_r
    return _levels(n, r if last_axis or n <= up_to else beyond)


def block_sizes(n: int, target: Target) -> list[int]:
    """``blocked``'s power-of-two block sizes: one level up to
    ``target.blocked_one_level_up_to``, two beyond, so that B^levels * m is about n."""
    count = 1 if n <= target.blocked_one_level_up_to else 2
    return [1 << max(1, round(math.log2(n) / (count + 1)))] * count


def pads(n: int, levels: list[int]) -> bool:
    """Whether blocking n by ``levels`` pads some level (n is not r^k * q with q <= r):
    each padded level costs a Pad and a Slice, a pass over memory each."""
    m = n
    for r in levels:
        if m % r:
            return True
        m //= r
    return False


def narrow(dims: tuple[Dim, int, Dim], dtype: ir.DataType | None, target: Target) -> bool:
    """Whether the (o, n, i) view's runs of i elements are narrow: i = 1 (the last axis), or
    the dims static, i times the compute type's size at most the target's ``narrow_runs``
    bytes and o * n * i at least its elements."""
    o, n, i = dims
    if isinstance(i, ir.Value):
        return False
    if i == 1:
        return True
    most_bytes, least_elements = target.narrow_runs
    return (
        isinstance(o, int)
        and dtype is not None
        and i * dtype.itemsize <= most_bytes
        and o * n * i >= least_elements
    )


def carry_refused(spec: ScanSpec, target: Target) -> str | None:
    """Why ``carry`` cannot take ``spec``: a run-time length without a bound is lowered as
    ``dynamic``, which needs If and Scan."""
    missing = sorted({"If", "Scan"} & target.missing_ops)
    if spec.length is None and spec.max_length is None and missing:
        return (
            "strategy 'carry' needs the length of the scanned axis to be static, or a bound "
            f"on it (max_length=, --max-length N), on {target.name}: without a bound it is "
            f"lowered as 'dynamic', which needs {target.lacking(missing)}"
        )
    return None


def scan3(
    b: Builder,
    t: ir.Value,
    dims: tuple[Dim, Dim, Dim],
    v: View,
    *,
    exclusive: bool,
    levels: list[int],
    scan_blocks: bool = False,
    carry_each: bool = False,
    seed: ir.Value | None = None,
    blocks: bool = False,
    wide: ir.DataType | None = None,
) -> ir.Value:
    """Scan ``t`` (o, n, i) along axis 1 by the tree of ``levels`` (module docstring).

    ``seed`` (broadcast to (o, 1, i)): the product before the first position; it starts the
    top chain, so the carries multiply it into every output. ``blocks``: the first level's
    Concat itself where r divides n (:func:`build_carry`). ``wide``: block totals taken
    from ``t`` in that type and the levels above computed in it (:mod:`.wide`)."""
    o, n, i = dims
    if not levels or (isinstance(n, int) and n <= levels[0]):
        # the top scan: a chain, or with scan_blocks past Target.tree_chain_up_to (or over a
        # length known only at run time) a Transpose + Scan
        if isinstance(n, int) and (n <= v.target.tree_chain_up_to or not scan_blocks):
            top = chain.chain(b, b.split(t, 1, n), v, exclusive=exclusive, seed=seed)
            return top[0] if n == 1 else b.op("Concat", *top, axis=1)
        assert seed is None, "a seeded tree is unrolled"
        front = b.op("Transpose", t, perm=[1, 0, 2])
        y, _ = scan_front(b, front, v, exclusive=exclusive, slice_rank=2)
        return b.op("Transpose", y, perm=[1, 0, 2])
    r, rest = levels[0], levels[1:]
    m: Dim
    padded_n: Dim
    if isinstance(n, int):
        m = -(-n // r)
        padded_n = m * r
        if padded_n != n:
            t = v.pad_ones_after(b, t, padded_n - n, n)
    else:  # a length known only at run time, padded at run time
        m = b.op("Div", b.op("Add", n, b.const([r - 1])), b.const([r]))
        padded_n = b.op("Mul", m, b.const([r]))
        amount = b.op("Sub", padded_n, n)
        t = b.op("Pad", t, b.op("Concat", b.const([0] * 4), amount, b.const([0]), axis=0), v.one)
    om = times(b, o, m)
    view = b.reshape(t, shape_of(b, om, r, i))

    def above(totals: ir.Value, tv: View, first: ir.Value | None) -> ir.Value:
        """The exclusive scan of the (o, m, i) block ``totals`` by the levels above."""
        return scan3(
            b,
            totals,
            (o, m, i),
            tv,
            exclusive=True,
            levels=rest,
            seed=first,
            scan_blocks=scan_blocks,
            carry_each=carry_each,
        )

    slices = None if scan_blocks else b.split(view, 1, r)
    if wide is not None:
        # the carries first, from float64 totals of x itself; each block's scan then starts
        # from its carry, so its partial products are x's own prefixes (:mod:`.wide`)
        totals = b.reshape(block_totals(b, view, wide, v.target, slices), shape_of(b, o, m, i))
        carry = above(totals, wide_view(b, v, wide), None if seed is None else b.cast(seed, wide))
        carry = b.cast(carry, ir.DataType.FLOAT)  # wide only for a float32 computation
        if slices is not None:
            start = b.reshape(carry, shape_of(b, om, 1, i))
            pieces = chain.chain(b, slices, v, exclusive=exclusive, seed=start, slice_first=True)
            y = b.op("Concat", *pieces, axis=1)
        else:
            front = b.op("Transpose", view, perm=[1, 0, 2])
            init = b.reshape(carry, shape_of(b, om, i))
            inner, _ = scan_front(b, front, v, exclusive=exclusive, slice_rank=2, init=init)
            y = b.op("Transpose", inner, perm=[1, 0, 2])
    else:
        outs: list[ir.Value | None] = []
        if slices is not None:
            # the slice first: its last use, so onnxruntime may write the product there
            products = chain.chain(b, slices, v, exclusive=False, slice_first=True)
            total = products[0 if v.reverse else -1]
            outs = list(products)
            if exclusive:  # the product before each position (None for the first: the carry)
                outs = [*outs[1:], None] if v.reverse else [None, *outs[:-1]]
        else:
            front = b.op("Transpose", view, perm=[1, 0, 2])
            inner, total = scan_front(b, front, v, exclusive=exclusive, slice_rank=2)
            inner = b.op("Transpose", inner, perm=[1, 0, 2])
        if near_one.wanted(v):
            if slices is None:  # the Scan's totals are (o * m, i)
                total = b.reshape(total, shape_of(b, om, 1, i))
            total = near_one.totals(b, v, total, r, blocks=view, slices=slices)
        carry = above(b.reshape(total, shape_of(b, o, m, i)), v, seed)
        carry = b.reshape(carry, shape_of(b, om, 1, i))
        if carry_each:
            assert slices is not None
            y = b.op(
                "Concat", *(carry if c is None else b.op("Mul", c, carry) for c in outs), axis=1
            )
        else:
            if slices is not None:
                first = 0 if not v.reverse else r - 1  # exclusive: ones at the first position
                outs = [v.ones(b, slices[first]) if c is None else c for c in outs]
                inner = b.op("Concat", *outs, axis=1)
            y = b.op("Mul", inner, carry)
    if blocks and isinstance(n, int) and padded_n == n:
        return y
    y = b.reshape(y, shape_of(b, o, padded_n, i))
    if not isinstance(n, int):
        return b.op("Slice", y, b.const([0]), n, b.const([1]))
    return y if padded_n == n else b.slice_axis(y, 1, 0, n)


def _tree(
    b: Builder, x3: ir.Value, v: View, levels: list[int], scan_blocks: bool = False
) -> ir.Value:
    """:func:`scan3` of the whole view, with its attributes."""
    wide = carry_dtype(v)
    return scan3(
        b, x3, v.dims(), v, exclusive=v.exclusive, levels=levels, scan_blocks=scan_blocks, wide=wide
    )


def build_radix(b: Builder, x3: ir.Value, v: View) -> ir.Value:
    """``radix``: the scan along axis 1 of ``x3`` (in the compute type); n is static."""
    n = v.static_length
    assert n is not None
    return _tree(b, x3, v, radix_levels(max(n, 1), v.target, last_axis=v.inner == 1))


def build_blocked(b: Builder, x3: ir.Value, v: View) -> ir.Value:
    """``blocked``: the scan along axis 1 of ``x3`` (in the compute type); n is static."""
    n = v.static_length
    assert n is not None
    return _tree(b, x3, v, block_sizes(max(n, 1), v.target), scan_blocks=True)


def build_dynamic(b: Builder, x3: ir.Value, v: View) -> ir.Value:
    """``dynamic``: the scan along axis 1 of ``x3`` (in the compute type), any length."""

    def long(sb: Builder) -> ir.Value:
        return _tree(sb, x3, v, list(v.target.dynamic_levels), scan_blocks=True)

    n, most = v.static_length, v.target.dynamic_scan_up_to
    if n is not None:  # the length is static after all: decide now
        return scan.build(b, x3, v) if n <= most else long(b)
    short = b.op("Less", v.tensor(b, v.length), b.const([most + 1]))
    empty = b.op("Equal", b.op("ReduceProd", b.op("Shape", x3), keepdims=1), b.const([0]))
    return b.op(
        "If",
        b.op("Reshape", b.op("Or", short, empty), b.const([])),  # If takes a 0-D bool
        then_branch=b.subgraph(lambda sb: scan.build(sb, x3, v), v.dtype, "cumprod_short"),
        else_branch=b.subgraph(long, v.dtype, "cumprod_long"),
    )


def build_carry(
    b: Builder,
    x3: ir.Value,
    v: View,
    *,
    seed: ir.Value | None = None,
    narrow_runs: bool | None = None,
    blocks: bool = False,
) -> ir.Value:
    """``carry``: the scan along axis 1 of ``x3`` (in the compute type); a run-time length
    padded to ``max_length`` (:func:`.view.padded`), or without one ``dynamic``. For
    ``cached``'s pieces (n static): ``seed``, the product before the first position;
    ``narrow_runs`` judged on the whole tensor (None: :func:`narrow` of ``x3``'s view);
    ``blocks`` (no dim 0), the first level's Concat as the result, (o * n / r, r, i) where r
    divides n (onnxruntime copies a Reshape into a Scan output, not a Concat)."""
    n = v.static_length
    assert seed is None or n, "a seed needs a static, non-zero length"
    o, i = v.outer, v.inner
    assert not blocks or (n and isinstance(o, int) and isinstance(i, int) and o and i)
    if n is None:
        if v.spec.max_length is None:
            return build_dynamic(b, x3, v)
        return padded(b, x3, v, build_carry)
    if narrow_runs is None:
        narrow_runs = narrow((o, n, i), v.dtype, v.target)
    levels = carry_levels(n, v.target, narrow_runs)
    y = scan3(
        b,
        x3,
        (o, n, i),
        v,
        exclusive=v.exclusive,
        levels=levels,
        carry_each=True,
        seed=seed,
        blocks=blocks,
        wide=carry_dtype(v),
    )
    if blocks:
        assert isinstance(o, int) and isinstance(i, int)
        if v.dtype is not None:
            y.type = ir.TensorType(v.dtype)
        r = levels[0] if levels and n % levels[0] == 0 else n  # (o, n, i) where r does not divide n
        y.shape = ir.Shape([o * n // r, r, i])
    return y
