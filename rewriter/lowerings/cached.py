"""``cached``: ``carry`` run on cache-sized tiles of independent rows, one Scan step per tile.

Formula, on the (o, n, i) view of x, all three static, T = :func:`tile_rows` (a divisor of o)::

    tiles = x viewed (o / T, T, n, i)
    Scan over the o / T tiles (no state): y_tile = carry(tile), the scan along axis 1 of its
        (T, n, i) view, exclusive / reverse as asked
    y = the Scan's output viewed (o, n, i)
    where o / T < 2, or no divisor of o makes a tile of a quarter of TILE_BYTES or more
    (tiles that small cost a Scan step for little work), or a dim is not static: ``carry``

The rows of the view (its o index) are independent scans, so cutting them into tiles
changes no product: each tile is ``carry`` on fewer rows. What changes is where the data
lives: on a tensor larger than the last-level cache, every ``carry`` level's Split, Muls and
Concat stream their (o * m, r, i) slices through memory, while on a tile of about
:data:`TILE_BYTES` (the L2 of the machine measured) they stay in cache between the nodes.
On onnxruntime 1.32 (one thread, 4 * 2^20 elements, last axis) that took int64 n = 512 from
4.2x native to 2.8x and int32 from 1.9x to 1.5x; on tensors of 8 MiB or less, which stay in
the last-level cache anyway, it gained nothing (``docs/performance.md``, sixteenth round).

Accuracy: ``carry``'s, element for element (the same multiplications in the same order):
integers bit-exact with wraparound; floats within the sequential kernel's k - 1 ulps;
float16 / bfloat16 multiplied in float32 and rounded once.

Cost: ``carry``'s passes, in cache; plus o / T Scan steps of about 3r + 6 nodes per level
each (onnxruntime runs a Scan body's nodes one by one, about 1-2 us each), and the Scan's
copy of each tile's result into its output. Needs Scan; onnxruntime targets only (the
other runtimes' Scans were not measured or tested with it).
"""

from __future__ import annotations

import dataclasses

import onnx_ir as ir

from rewriter.lowerings import carry
from rewriter.lowerings.builder import Builder
from rewriter.lowerings.view import Dim, View, one_for
from rewriter.site import ScanSpec
from rewriter.targets import Target

__all__ = ["TILE_BYTES", "build", "compute_dtype", "max_ulps", "tile_rows", "unsupported"]

TILE_BYTES = 1 << 20  # bytes per tile at most: 256 KiB-4 MiB measured, 0.5-1 MiB fastest
compute_dtype = carry.compute_dtype
max_ulps = carry.max_ulps


def unsupported(spec: ScanSpec, target: Target) -> str | None:
    if target.auto != "onnxruntime":
        return (
            f"strategy 'cached' was measured and tested on onnxruntime only, not on "
            f"{target.name} (use 'carry')"
        )
    if "Scan" in target.missing_ops:
        return f"strategy 'cached' needs {target.lacking(['Scan'])} (use 'carry')"
    return carry.unsupported(spec, target)


def tile_rows(dims: tuple[Dim, Dim, Dim], itemsize: int) -> int | None:
    """T, the rows per tile: the largest divisor of o up to o / 2 whose tile of T * n * i
    elements takes at most :data:`TILE_BYTES` (a single row may take more); None where the
    view does not tile: a dim not static, o < 2, or tiles under a quarter of TILE_BYTES."""
    o, n, i = dims
    if not (isinstance(o, int) and isinstance(n, int) and isinstance(i, int)):
        return None
    row = n * i * itemsize
    if row == 0:
        return None
    most = min(o // 2, max(1, TILE_BYTES // row))  # two tiles at least
    rows = max((t for t in range(1, most + 1) if o % t == 0), default=0)
    if rows == 0 or rows * row * 4 < TILE_BYTES:
        return None
    return rows


def build(b: Builder, x3: ir.Value, v: View) -> ir.Value:
    """The scan along axis 1 of ``x3`` (in the compute type)."""
    rows = tile_rows(v.dims(), int(v.dtype.itemsize)) if v.dtype is not None else None
    if rows is None or v.dtype is None:
        return carry.build(b, x3, v)
    o, n, i = v.dims()
    assert isinstance(o, int) and isinstance(n, int) and isinstance(i, int)
    tiles = b.reshape(x3, b.const([o // rows, rows, n, i]))
    body = b.child()
    tile = body.value("tile", v.dtype, ir.Shape([rows, n, i]))
    # the body's own 1 (a Constant there), so that it reads nothing from the outer graph
    inside = dataclasses.replace(v, outer=rows, one=one_for(body, tile, v.dtype))
    out = carry.build(body, tile, inside)
    out.type = ir.TensorType(v.dtype)
    out.shape = ir.Shape([rows, n, i])
    graph = body.graph([tile], [out], "cumprod_cached_body")
    y = b.op("Scan", tiles, body=graph, num_scan_inputs=1)
    return b.reshape(y, b.const([o, n, i]))
