"""``masked``: a blocked scan whose in-block prefixes are one masked ReduceProd each.

Formula, on the (o, n, i) view of x, n static, blocks of B = ``Target.masked_block``
(one tile, as for n <= B, also for n up to ``Target.masked_one_tile_up_to``)::

    n <= B:  T[o, k, j, i] = x[o, j, i] where mask[k, j] else 1      (a (o, n, n, i) tile)
             y[o, k, i]    = ReduceProd_j T
             mask[k, j]: j <= k (inclusive), j < k (exclusive); reverse: j >= k, j > k
    else:    pad n to m * B with ones; view (o * m, B, i); P = the in-block scan above
             t = the block totals (o, m, i): P's last position (reverse: its first), or for
                 an exclusive P a ReduceProd over the block
             C = the EXCLUSIVE scan of t along m (same direction), by this same scheme
             y = P viewed (o, m, B, i) * C viewed (o, m, 1, i), viewed (o, m * B, i), [0, n)

Accuracy: every output is the product of its k factors, in the runtime's ReduceProd order
inside a block, times one carry formed the same way. Integers: bit-exact with wraparound
where the integer ReduceProd wraps like Mul (``Target.reduce_prod_wraps``). float32,
float16 and bfloat16 are multiplied in float64 and rounded once (refused without float64):
about 0.5 ulp plus k * 2^-53 relative, within the sequential kernel's k - 1 ulps. float64
from 1 in each block: a block's own partial products can overflow where the sequential
product does not. Zeros keep their sign where ``Target.where_keeps_negative_zero``.

Cost: per level a tile of B times the elements (a compiler that fuses the Where into the
reduction never materialises it) and B multiplications per element; 31-54 nodes for
n = 256-8192. No control flow and few, small kernels: fast to compile where the unrolled
trees are slow to (compile-tinygrad-masked-2026-12-06.md); slow where the tile is
materialised (compile-2026-12-06-summary.md). Needs n static (padded to ``max_length``
otherwise) and x's element type.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from rewriter.lowerings.builder import Builder
from rewriter.lowerings.view import Dim, View, shape_of, times
from rewriter.lowerings.wide import wide_view
from rewriter.site import FLOAT_TYPES, ScanSpec
from rewriter.targets import Target

__all__ = ["build", "unsupported"]


def unsupported(spec: ScanSpec, target: Target) -> str | None:
    """Integers where the target's integer ReduceProd is not known to wrap; floats where its
    Where is not known to keep -0.0; float32 (and narrower) where it computes no float64."""
    if spec.dtype is None:
        return None  # refused by the record (not type-generic)
    if spec.dtype not in FLOAT_TYPES and not target.reduce_prod_wraps:
        return (
            "strategy 'masked' multiplies integers with ReduceProd, which is not known to "
            f"wrap around like Mul on {target.name} (onnxruntime 1.32's saturates): use "
            "another strategy"
        )
    if spec.dtype in FLOAT_TYPES and not target.where_keeps_negative_zero:
        return (
            "strategy 'masked' selects x's factors with Where, which is not known to keep "
            f"-0.0 on {target.name} (onnxruntime 1.32's returns +0.0): use another strategy"
        )
    if spec.dtype in FLOAT_TYPES - {ir.DataType.DOUBLE} and not target.float64:
        return (
            f"strategy 'masked' multiplies {spec.dtype.name.lower()} in float64, which "
            f"{target.name} does not compute: use another strategy"
        )
    return None


def _tile_scan(
    b: Builder, x3: ir.Value, dims: tuple[Dim, int, Dim], v: View, *, exclusive: bool
) -> ir.Value:
    """The scan of ``x3`` (o, n, i) along n: one ReduceProd over the masked (o, n, n, i)
    tile, (o, n, i)."""
    o, n, i = dims
    k = np.arange(n)
    after = k[None, :] >= k[:, None] if v.reverse else k[None, :] <= k[:, None]
    mask = after & (k[None, :] != k[:, None]) if exclusive else after
    rows = b.reshape(x3, shape_of(b, o, 1, n, i))  # x[o, j, i] at [o, ., j, i]
    tile = b.op("Where", b.const(mask.reshape(1, n, n, 1)), rows, v.one)
    return b.reduce("ReduceProd", tile, 2, keepdims=0)


def _scan(
    b: Builder,
    x3: ir.Value,
    dims: tuple[Dim, int, Dim],
    v: View,
    *,
    exclusive: bool,
    one_tile_up_to: int = 0,
) -> ir.Value:
    """The scan of ``x3`` (o, n, i) along n, n static: one tile up to ``one_tile_up_to`` (x
    itself: ``Target.masked_one_tile_up_to``; the block totals' levels: 0) or
    ``Target.masked_block``, else in blocks of the latter."""
    o, n, i = dims
    block = v.target.masked_block
    if n <= max(block, one_tile_up_to):
        return _tile_scan(b, x3, dims, v, exclusive=exclusive)
    m = -(-n // block)
    padded = m * block
    if padded != n:
        x3 = v.pad_ones_after(b, x3, padded - n, n)
    om = times(b, o, m)
    blocks = b.reshape(x3, shape_of(b, om, block, i))
    prefix = _tile_scan(b, blocks, (om, block, i), v, exclusive=exclusive)
    if exclusive:
        totals = b.reduce("ReduceProd", blocks, 1, keepdims=1)
    else:
        at = 0 if v.reverse else block - 1
        totals = b.slice_axis(prefix, 1, at, at + 1)
    totals = b.reshape(totals, shape_of(b, o, m, i))
    carries = _scan(b, totals, (o, m, i), v, exclusive=True)
    y = b.op(
        "Mul",
        b.reshape(prefix, shape_of(b, o, m, block, i)),
        b.reshape(carries, shape_of(b, o, m, 1, i)),
    )
    y = b.reshape(y, shape_of(b, o, padded, i))
    return y if padded == n else b.slice_axis(y, 1, 0, n)


def build(b: Builder, x3: ir.Value, v: View) -> ir.Value:
    """The scan along axis 1 of ``x3`` (in the compute type); n is static. float32 is
    multiplied in float64 (:func:`unsupported` refuses it on targets without float64)."""
    n = v.static_length
    assert n is not None
    dims, one_tile = (v.outer, n, v.inner), v.target.masked_one_tile_up_to
    if v.dtype == ir.DataType.FLOAT:
        wide = wide_view(b, v, ir.DataType.DOUBLE)
        x64 = b.cast(x3, ir.DataType.DOUBLE)
        y = _scan(b, x64, dims, wide, exclusive=v.exclusive, one_tile_up_to=one_tile)
        return b.cast(y, ir.DataType.FLOAT)
    return _scan(b, x3, dims, v, exclusive=v.exclusive, one_tile_up_to=one_tile)
