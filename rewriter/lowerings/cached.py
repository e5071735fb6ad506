"""``cached``: ``carry`` run on cache-sized pieces of x, one Scan step per piece.

Formula, on the (o, n, i) view of x, all three static, for the target's piece sizes
(``Target.cache_pieces``: at most ``tile`` bytes a tile, ``chunk`` bytes a chunk)::

    o >= 2, T = a divisor of o, at most o / 2:   tiles of independent rows
        Scan over the (o / T, T, n, i) view (no state): y_tile = carry(tile)
    o = 1 (an outermost axis), C = a divisor of n, at most n / 2:   chunks
        Scan over the (n / C, 1, C, i) view, the state P (1, 1, i) = the product of the
        chunks scanned so far (ones at first; in reverse the Scan runs from the end):
        y_chunk = carry(chunk) seeded with P;  P' = y_chunk at the chunk's last position
        in scan order (exclusive: times the chunk's own factor there)
    else (a dim not static, pieces under ``Target.cache_least``'s share): ``carry``

Accuracy: rows are independent scans and each chunk is seeded with the product before it,
as ``carry`` seeds its blocks: the same products, bounds and special values as ``carry``.

Cost: ``carry``'s passes, each over a piece that stays in cache, plus one Scan step per
piece. Needs Scan and ``Target.cache_pieces``.
"""

from __future__ import annotations

import dataclasses

import onnx_ir as ir

from rewriter.lowerings import tree
from rewriter.lowerings.builder import Builder
from rewriter.lowerings.view import Dim, View, one_for
from rewriter.site import ScanSpec
from rewriter.targets import Target

__all__ = ["build", "divisor_piece", "pieces", "unsupported"]


def unsupported(spec: ScanSpec, target: Target) -> str | None:
    if target.cache_pieces is None:
        return (
            f"strategy 'cached' was measured and tested on onnxruntime only, not on "
            f"{target.name} (use 'carry')"
        )
    return tree.carry_refused(spec, target)


def divisor_piece(count: int, unit: int, limit: int, least: int) -> int | None:
    """The largest divisor k of ``count`` up to count / 2 with k * ``unit`` bytes at most
    ``limit`` (one unit may take more); None where there is none or k * unit < ``least``.
    T: of o, a unit a row of n * i elements; C: of n, a unit a position of i elements."""
    if unit == 0:
        return None
    most = min(count // 2, max(1, limit // unit))
    k = max((d for d in range(1, most + 1) if count % d == 0), default=0)
    return None if k == 0 or k * unit < least else k


def pieces(
    dims: tuple[Dim, Dim, Dim], itemsize: int, target: Target
) -> tuple[tuple[int, int, int], int] | None:
    """``carry``'s view of one piece, a tile (T, n, i) or a chunk (1, C, i), and how many
    there are; None where :func:`build` runs ``carry`` on the whole view (a dim not static,
    or no piece)."""
    o, n, i = dims
    if not (isinstance(o, int) and isinstance(n, int) and isinstance(i, int)):
        return None
    if target.cache_pieces is None:
        return None
    (tile, chunk), (tile_share, chunk_share) = target.cache_pieces, target.cache_least
    rows = divisor_piece(o, n * i * itemsize, tile, tile // tile_share)
    if rows is not None:
        return (rows, n, i), o // rows
    length = divisor_piece(n, i * itemsize, chunk, chunk // chunk_share) if o == 1 else None
    return None if length is None else ((1, length, i), n // length)


def build(b: Builder, x3: ir.Value, v: View) -> ir.Value:
    """The scan along axis 1 of ``x3`` (in the compute type)."""
    piece = pieces(v.dims(), int(v.dtype.itemsize), v.target) if v.dtype is not None else None
    if piece is None:
        return tree.build_carry(b, x3, v)
    (rows, length, _), _ = piece
    return _chunks(b, x3, v, length) if v.outer == 1 else _tiles(b, x3, v, rows)


def _tiles(b: Builder, x3: ir.Value, v: View, rows: int) -> ir.Value:
    """carry on each tile of ``rows`` rows, one Scan step per tile (no state)."""
    o, n, i = v.dims()
    assert v.dtype is not None and isinstance(o, int) and isinstance(n, int) and isinstance(i, int)
    tiles = b.reshape(x3, b.const([o // rows, rows, n, i]))
    body = b.child()
    tile = body.value("tile", v.dtype, ir.Shape([rows, n, i]))
    # the body's own 1 (a Constant there), so that it reads nothing from the outer graph
    inside = dataclasses.replace(v, outer=rows, one=one_for(body, tile, v.dtype))
    narrow_runs = tree.narrow((o, n, i), v.dtype, v.target)  # judged on x, not on the tile
    # the blocks of carry's first level, not viewed (rows, n, i): the Scan's output slice
    # is then written by the Concat itself, where a Reshape's result would be copied there
    out = tree.build_carry(body, tile, inside, narrow_runs=narrow_runs, blocks=True)
    graph = body.graph([tile], [out], "cumprod_cached_body")
    y = b.op("Scan", tiles, body=graph, num_scan_inputs=1)
    return b.reshape(y, b.const([o, n, i]))


def _chunks(b: Builder, x3: ir.Value, v: View, length: int) -> ir.Value:
    """carry on each chunk of ``length`` positions of an outermost axis, times the product
    of the chunks before it (after it, in reverse): the Scan's state."""
    _, n, i = v.dims()
    assert v.dtype is not None and isinstance(n, int) and isinstance(i, int)
    chunks = b.reshape(x3, b.const([n // length, 1, length, i]))
    assert v.target.scan_directions  # cache_pieces targets only (unsupported)
    body = b.child()
    state = body.value("before", v.dtype, ir.Shape([1, 1, i]))
    chunk = body.value("chunk", v.dtype, ir.Shape([1, length, i]))
    inside = dataclasses.replace(v, length=length, one=one_for(body, chunk, v.dtype))
    narrow_runs = tree.narrow((1, n, i), v.dtype, v.target)  # judged on x, not on the chunk
    # the blocks of carry's first level, as in _tiles (a Reshape of them is no body output)
    out = tree.build_carry(body, chunk, inside, seed=state, narrow_runs=narrow_runs, blocks=True)
    if out is state:  # an exclusive chunk of one position: a body output of its own
        out = body.op("Identity", state)
        out.type, out.shape = ir.TensorType(v.dtype), ir.Shape([1, 1, i])
    whole = out if out.shape == [1, length, i] else body.reshape(out, body.const([1, length, i]))
    edge = 0 if v.reverse else length - 1  # the chunk's last position in scan order
    after = body.slice_axis(whole, 1, edge, edge + 1)
    if v.exclusive:  # the exclusive product there leaves out the chunk's own last factor
        after = body.op("Mul", after, body.slice_axis(chunk, 1, edge, edge + 1))
    after.type, after.shape = ir.TensorType(v.dtype), ir.Shape([1, 1, i])
    graph = body.graph([state, chunk], [after, out], "cumprod_cached_chunk_body")
    directions = {"scan_input_directions": [1], "scan_output_directions": [1]} if v.reverse else {}
    ones = b.op("Expand", v.one, b.const([1, 1, i]))
    _, y = b.op_multi("Scan", ones, chunks, n_out=2, body=graph, num_scan_inputs=1, **directions)
    return b.reshape(y, b.const([1, n, i]))
