"""``cached``: carry on tiles of rows or chunks of an outermost axis inside a Scan
(rewriter/lowerings/cached.py).

Its branches: the tile and chunk sizes (``divisor_piece``: a divisor, two
pieces at least, tiles not under an eighth of their byte size, chunks not under a quarter),
the fall-back to plain ``carry`` where the view does not cut, the Scan over tiles (middle and
last axes) and over chunks with the product so far as its state (first axes), for every
type, exclusive / reverse, the refusal on runtimes it was not measured on, and ``auto``'s
pick of it on onnxruntime (tensors of 16 MiB or more, 4 MiB on a middle axis, pieces of at
most 4 MiB). References: numpy (integers, with wraparound, in their own type) and
onnxruntime's native CumProd; the fixture below makes pieces of 256 bytes.
"""

from __future__ import annotations

import dataclasses
import itertools
import zlib

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from onnx import TensorProto

import rewriter
from rewriter.decompose import plan_cumprods
from rewriter.lowerings import cached
from rewriter.targets import TARGETS
from tests.helpers import (
    ALL_TYPES,
    I32,
    I64,
    TYPE_NAMES,
    check_result,
    cumprod_model,
    feed,
    random_data,
    refuses_broadly,
    run_ort,
    set_pieces,
)


@pytest.fixture(autouse=True)
def small_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tiles and chunks of 256 bytes, so that the small models here are cut into pieces
    (a test that needs the shipped sizes sets them itself)."""
    set_pieces(monkeypatch, 256, 256)


def _scans(model: onnx.ModelProto) -> list[onnx.NodeProto]:
    return [node for node in model.graph.node if node.op_type == "Scan"]


@pytest.mark.parametrize(
    ("dims", "itemsize", "tile_bytes", "rows"),
    [
        ((8192, 512, 1), 8, 1 << 20, 256),  # 4 KiB rows: 256 of them make 1 MiB
        ((8192, 512, 1), 4, 1 << 20, 512),
        ((8, 65536, 8), 4, 1 << 20, 1),  # a 2 MiB row: one per tile
        ((6, 7, 3), 4, 256, 3),  # 84-byte rows: 3 (252 bytes) divides 6
        ((26, 2, 1), 4, 256, 13),  # at most half of o (26 rows would be a single tile)
        ((7, 2, 1), 4, 128, None),  # 7 is prime and 7 rows one tile: 1 row is 8 bytes < 16
        ((7, 2, 1), 4, 64, 1),  # ... but 8 bytes are an eighth of 64
        ((202, 2, 1), 4, 256, None),  # 202 = 2 * 101: 2 rows (16 bytes) < an eighth of 256
        ((1, 512, 1), 8, 1 << 20, None),  # one row: nothing to tile
        ((0, 512, 1), 8, 1 << 20, None),
        ((4, 0, 1), 8, 1 << 20, None),
    ],
)
def test_tile_rows(
    dims: tuple[int, int, int],
    itemsize: int,
    tile_bytes: int,
    rows: int | None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    o, n, i = dims
    assert cached.divisor_piece(o, n * i * itemsize, tile_bytes, tile_bytes // 8) == rows


def test_every_view_tiled_in_1_mib_is_tiled_in_2_mib_in_tiles_as_large(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Tiles of 2 MiB (``Target.cache_pieces``) replaced 1 MiB ones on views both tile: the
    least tile (an eighth of the tile size) keeps every view the 1 MiB tiles cut (tiles of a
    quarter of 1 MiB or more, written out here) cut, in tiles at least as large."""

    def rows_in_1_mib(o: int, row: int) -> int | None:
        most = min(o // 2, max(1, (1 << 20) // row))
        k = max((d for d in range(1, most + 1) if o % d == 0), default=0)
        return None if k == 0 or k * row * 4 < 1 << 20 else k

    rng = np.random.default_rng(26)
    checked = 0
    for _ in range(3000):
        o, n, i = (int(v) for v in rng.integers(1, [400, 70000, 64]))
        itemsize = int(rng.choice([4, 8]))
        before = rows_in_1_mib(o, n * i * itemsize)
        if before is not None:
            checked += 1
            now = cached.divisor_piece(o, n * i * itemsize, 2 << 20, (2 << 20) // 8)  # as shipped
            assert now is not None and now >= before, (o, n, i, itemsize)
    assert checked > 300


def test_pieces_need_static_dims() -> None:
    """Views that are cut into pieces when static are run whole with a dim not static."""
    target = TARGETS["onnxruntime"]  # 256-byte pieces (the fixture)
    static = [(4, 8, 2), (1, 64, 8), (1, 64, 8)]
    for k, dims in enumerate(static):  # o, n, i in turn symbolic
        assert cached.pieces(dims, 4, target) is not None, dims
        symbolic = tuple(ir.Value(name="d") if j == k else d for j, d in enumerate(dims))
        assert cached.pieces(symbolic, 4, target) is None, symbolic


@pytest.mark.parametrize(
    ("dims", "itemsize", "chunk_bytes", "length"),
    [
        ((1, 65536, 64), 8, 4 << 20, 8192),  # 512-byte positions: 8192 make 4 MiB
        ((1, 65536, 16), 4, 4 << 20, 32768),  # at most half of n
        ((1, 33, 6), 8, 256, 3),  # 48-byte positions: 5 would fit, 3 divides 33
        ((1, 7, 5), 8, 256, None),  # 7 is prime: one position (40 bytes) < a quarter of 256
        ((2, 64, 8), 8, 256, None),  # o = 2: rows to tile, not an outermost axis
        ((1, 1, 8), 8, 256, None),
        ((1, 64, 0), 8, 256, None),
    ],
)
def test_chunk_length(
    dims: tuple[int, int, int],
    itemsize: int,
    chunk_bytes: int,
    length: int | None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    o, n, i = dims
    got = cached.divisor_piece(n, i * itemsize, chunk_bytes, chunk_bytes // 4) if o == 1 else None
    assert got == length


CELLS = [
    # (shape, axis, cut into 256-byte pieces): tiles of rows on middle and last axes
    ((12, 33), 1, True),
    ((12, 33), -1, True),
    ((6, 7, 3), 1, True),
    ((4, 3, 17, 2), 2, True),  # o = 12
    ((40, 5), 1, True),  # r = 4 levels over 5 (padded) in each tile
    # chunks of a first axis: 11 chunks of 3 positions, 8 of 5 (carry pads each to 8)
    ((33, 6), 0, True),
    ((40, 2, 3), 0, True),
    ((1, 48, 4), 1, True),  # o = 1 on the middle axis: chunks too
    ((7, 5), 0, False),  # 7 is prime: chunks of one position, too small: carry itself
    # pieces of a single position or row (carry's n = 1 and o = 1 edges): 64 elements of 4 or
    # 8 bytes fill a 256-byte piece alone
    ((2, 64), 0, True),
    ((2, 64), 1, True),
]


@pytest.mark.parametrize("elem_type", ALL_TYPES, ids=lambda t: TYPE_NAMES[t])
@pytest.mark.parametrize(("shape", "axis", "tiled"), CELLS, ids=str)
def test_cached_is_exact_on_every_type_and_attribute(
    elem_type: int, shape: tuple[int, ...], axis: int, tiled: bool
) -> None:
    for exclusive, reverse in itertools.product((0, 1), (0, 1)):
        model = cumprod_model(elem_type, shape, axis, exclusive=exclusive, reverse=reverse)
        lowered = rewriter.decompose_cumprod(model, strategy="cached")
        assert isinstance(lowered, onnx.ModelProto)
        assert bool(_scans(lowered)) == tiled
        seed = zlib.crc32(f"{elem_type}{shape}{axis}{exclusive}{reverse}".encode())
        x = random_data(elem_type, shape, np.random.default_rng(seed))
        (y,) = run_ort(lowered, {"x": feed(elem_type, x)})
        y = y.astype(x.dtype) if elem_type == TensorProto.BFLOAT16 else y
        problem = check_result(
            elem_type, "cached", y, x, axis, exclusive=exclusive, reverse=reverse
        )
        assert problem is None, (shape, axis, exclusive, reverse, problem)


def test_each_tile_is_scanned_on_its_own_rows() -> None:
    """Rows of ones but one row of twos per tile: a tile that read its neighbour's rows, or
    a Scan that carried a product from one tile to the next, would change the ones."""
    x = np.ones((8, 16), np.int64)
    x[::2] = 2  # rows 0, 2, 4, 6: with 256-byte tiles (two 128-byte rows), one per tile
    model = cumprod_model(I64, x.shape, 1)
    lowered = rewriter.decompose_cumprod(model, strategy="cached")
    assert isinstance(lowered, onnx.ModelProto) and _scans(lowered)
    (y,) = run_ort(lowered, {"x": x})
    np.testing.assert_array_equal(y, np.cumprod(x, axis=1))


def test_real_tiles_on_a_32_mib_tensor_match_native(monkeypatch: pytest.MonkeyPatch) -> None:
    """auto's pick at the benchmark's int64 4M last-axis size, in tiles of 1 MiB (half the
    2 MiB onnxruntime ships, ``Target.cache_pieces``: 32 Scan steps, not 16): bit-exact
    against onnxruntime's native CumProd and numpy (wraparound included)."""
    set_pieces(monkeypatch, 1 << 20, None)
    shape = (8192, 512)
    model = cumprod_model(I64, shape, 1, reverse=1)
    (plan,) = plan_cumprods(ir.serde.deserialize_model(model), "auto")
    assert plan.lowering.name == "cached"
    lowered = rewriter.decompose_cumprod(model)
    assert isinstance(lowered, onnx.ModelProto)
    (scan,) = _scans(lowered)
    body = next(a.g for a in scan.attribute if a.name == "body")
    tile = [d.dim_value for d in body.input[0].type.tensor_type.shape.dim]
    assert tile == [256, 512, 1]  # 1 MiB tiles: 32 Scan steps
    x = random_data(I64, shape, np.random.default_rng(3))
    (y,) = run_ort(lowered, {"x": x})
    (native,) = run_ort(model, {"x": x})
    np.testing.assert_array_equal(y, native)
    np.testing.assert_array_equal(y, np.flip(np.cumprod(np.flip(x, 1), axis=1), 1))


@pytest.mark.parametrize(
    ("elem_type", "shape", "axis", "made_by", "piece"),
    [
        (I64, (8, 64), 1, "Concat", [16, 4, 1]),  # one 512-byte row a tile: 16 blocks of r = 4
        (I64, (12, 33), 1, "Slice", [1, 33, 1]),  # 33 padded to 36: cut back to the row
        (TensorProto.INT32, (64, 2), 0, "Concat", [2, 16, 2]),  # chunks of 32: two blocks of 16
        (I64, (64, 4), 0, "Concat", [1, 8, 4]),  # chunks of 8: carry's plain chain
    ],
)
def test_the_scan_writes_carrys_blocks_in_place(
    elem_type: int, shape: tuple[int, int], axis: int, made_by: str, piece: list[int]
) -> None:
    """The Scan body's result is carry's first-level Concat in its (o * m, r, i) blocks, not
    a Reshape of it to the piece: onnxruntime copies a Reshape's result into the Scan's
    output (a copy of x, 0.7-1.0 ms on 16 MiB measured), where
    the Concat writes there itself; the outer Reshape views the blocks as x. Where r does
    not divide the length the padded result is cut back by a Slice (a copy either way)."""
    for exclusive, reverse in itertools.product((0, 1), (0, 1)):
        model = cumprod_model(elem_type, shape, axis, exclusive=exclusive, reverse=reverse)
        lowered = rewriter.decompose_cumprod(model, strategy="cached")
        assert isinstance(lowered, onnx.ModelProto)
        (scan,) = _scans(lowered)
        body = next(a.g for a in scan.attribute if a.name == "body")
        result = body.output[-1]  # the chunks' body passes its state on first
        producer = {out: node for node in body.node for out in node.output}[result.name]
        assert producer.op_type == made_by, (exclusive, reverse)
        assert [d.dim_value for d in result.type.tensor_type.shape.dim] == piece
        x = random_data(elem_type, shape, np.random.default_rng(exclusive * 2 + reverse))
        (y,) = run_ort(lowered, {"x": x})
        problem = check_result(
            elem_type, "cached", y, x, axis, exclusive=exclusive, reverse=reverse
        )
        assert problem is None, (exclusive, reverse, problem)


def test_pieces_follow_the_targets_least_share() -> None:
    """``Target.cache_least`` decides which pieces are too small to cut (pieces of at most
    256 bytes): 2 rows of 8 bytes, under an eighth of 256, are not cut, under a sixteenth
    they are; a chunk of one 40-byte position, under a quarter of 256, is not, under an
    eighth it is."""
    base = dataclasses.replace(TARGETS["onnxruntime"], cache_pieces=(256, 256))
    assert base.cache_least == (8, 4)
    assert cached.pieces((202, 2, 1), 4, base) is None
    finer = dataclasses.replace(base, cache_least=(16, 4))
    assert cached.pieces((202, 2, 1), 4, finer) == ((2, 2, 1), 101)
    assert cached.pieces((1, 7, 5), 8, base) is None
    finer = dataclasses.replace(base, cache_least=(8, 8))
    assert cached.pieces((1, 7, 5), 8, finer) == ((1, 1, 5), 7)


def test_the_real_size_matches_native(monkeypatch: pytest.MonkeyPatch) -> None:
    """The grid's int32 4M middle n = 65536 cell with 1 MiB tiles (one-row tiles, 32-byte
    runs): bit-exact against onnxruntime's native CumProd and numpy on odd values (with
    wraparound)."""
    set_pieces(monkeypatch, 1 << 20, None)
    shape = (8, 65536, 8)
    model = cumprod_model(TensorProto.INT32, shape, 1)
    lowered = rewriter.decompose_cumprod(model)
    assert isinstance(lowered, onnx.ModelProto)
    assert len(_scans(lowered)) == 1
    x = (2 * np.random.default_rng(5).integers(-2, 2, shape) + 1).astype(np.int32)
    (y,) = run_ort(lowered, {"x": x})
    (native,) = run_ort(model, {"x": x})
    np.testing.assert_array_equal(y, native)
    np.testing.assert_array_equal(y, np.cumprod(x, axis=1, dtype=np.int32))


def _first_split_outputs(lowered: onnx.ModelProto) -> int:
    """How many slices the first Split of the (single) Scan's body cuts: carry's first r."""
    (scan,) = _scans(lowered)
    body = next(a.g for a in scan.attribute if a.name == "body")
    return len(next(node for node in body.node if node.op_type == "Split").output)


@pytest.mark.parametrize(
    ("elem_type", "shape", "axis", "r"),
    [
        # runs of 16 bytes in x of 2^21 elements: narrow (r = 4), though each piece is smaller
        (TensorProto.INT32, (64, 8192, 4), 1, 4),  # 1 MiB tiles of 8 rows
        (TensorProto.INT32, (524288, 4), 0, 4),  # two 4 MiB chunks of a first axis
        (TensorProto.INT32, (1, 524288, 4), 1, 4),  # o = 1 on a middle axis: chunks too
        # the same runs in x of 2^20 elements: not narrow (r = 16)
        (TensorProto.INT32, (32, 8192, 4), 1, 16),
        (TensorProto.INT32, (262144, 4), 0, 16),
        # runs of 32 bytes: not narrow at any size (r = 16)
        (TensorProto.INT64, (64, 8192, 4), 1, 16),
    ],
)
def test_pieces_take_the_radix_of_the_whole_tensor(
    elem_type: int,
    shape: tuple[int, ...],
    axis: int,
    r: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """carry's r in each piece is the one carry takes on the whole x (narrow runs of at most
    24 bytes in 2^21 elements or more: r = 4; ``Target.narrow_runs``),
    not the piece's own size; and the pieces are exact there, exclusive and reverse,
    against numpy with wraparound and onnxruntime's native kernel."""
    set_pieces(monkeypatch, 1 << 20, 4 << 20)
    for exclusive, reverse in ((0, 0), (1, 1)):
        model = cumprod_model(elem_type, shape, axis, exclusive=exclusive, reverse=reverse)
        lowered = rewriter.decompose_cumprod(model, strategy="cached")
        assert isinstance(lowered, onnx.ModelProto)
        assert _first_split_outputs(lowered) == r
        x = random_data(elem_type, shape, np.random.default_rng(7))
        (y,) = run_ort(lowered, {"x": x})
        (native,) = run_ort(model, {"x": x})
        np.testing.assert_array_equal(y, native)
        problem = check_result(
            elem_type, "cached", y, x, axis, exclusive=exclusive, reverse=reverse
        )
        assert problem is None, (shape, axis, exclusive, reverse, problem)


@pytest.mark.parametrize(("exclusive", "reverse"), [(0, 0), (1, 1)])
def test_the_chunks_state_enters_at_carrys_last_level(exclusive: int, reverse: int) -> None:
    """The product of the chunks before is one factor of carry's last level (a Mul with one
    slice of its Split), not a Mul of the whole chunk by it: onnxruntime broadcasts that one
    run of i elements at a time (1.0-2.3x the chunks' time, docs/performance.md seventeenth
    round). Its values are checked by the exactness tests above."""
    model = cumprod_model(I64, (33, 6), 0, exclusive=exclusive, reverse=reverse)
    lowered = rewriter.decompose_cumprod(model, strategy="cached")
    assert isinstance(lowered, onnx.ModelProto)
    (scan,) = _scans(lowered)
    body = next(a.g for a in scan.attribute if a.name == "body")
    state = body.input[0].name
    made_by = {out: node for node in body.node for out in node.output}
    uses = [node for node in body.node if state in node.input]
    # exclusive: the first position's output is the state itself (a Concat's input)
    assert sorted(node.op_type for node in uses) == (["Concat", "Mul"] if exclusive else ["Mul"])
    (use,) = [node for node in uses if node.op_type == "Mul"]
    (other,) = [name for name in use.input if name != state]
    assert made_by[other].op_type == "Split"


@pytest.mark.parametrize(
    ("elem_type", "shape", "axis", "pick"),
    [
        (I64, (4096, 512), 1, "cached"),  # 16 MiB exactly
        (I64, (4095, 512), 1, "cached"),  # a last axis from 4 MiB (cache_pieces)
        (I64, (2048, 512), 1, "cached"),  # 8 MiB
        (I64, (512, 1024), 1, "cached"),  # 4 MiB exactly
        (I64, (511, 1024), 1, "carry"),  # just under
        (TensorProto.FLOAT, (8192, 512), 1, "cached"),
        (TensorProto.FLOAT, (8, 65536, 8), 1, "cached"),  # rows of 2 MiB, one per tile
        (I64, (2, 65536, 64), 1, "carry"),  # rows of 32 MiB: past 16
        # in place of carry, tiles of one row of up to 16 MiB (against-2026-12-06-without-cached)
        (I64, (2, 131072, 8), 1, "cached"),  # rows of 8 MiB
        (I64, (2, 16384, 128), 1, "cached"),  # rows of 16 MiB exactly
        (I64, (2, 16385, 128), 1, "carry"),  # just over
        (TensorProto.FLOAT, (3, 6000, 250), 1, "cached"),  # rows of 5.7 MiB
        (I32, (4, 1200000), 1, "cached"),  # a last axis: rows of 4.6 MiB in 18.3 MiB
        (I32, (2, 1100000), 1, "cached"),  # ... and in 8.4 MiB (a last axis from 4 MiB)
        (I64, (8191, 512), 1, "carry"),  # 8191 is prime: tiles of one 4 KiB row
        # chain's row from n = 512: the chain stays (cached took 0.83-0.97x its time, under
        # the 1.25x a rule must buy)
        (I32, (64, 512, 128), 1, "chain"),  # 16 MiB
        (I32, (63, 512, 128), 1, "chain"),  # 15.75 MiB
        (TensorProto.FLOAT, (64, 512, 128), 1, "chain"),  # float32: the chain stays
        (I64, (64, 511, 128), 1, "chain"),  # 32 MiB, n under 512
        (I64, (48, 448, 100), 1, "chain"),  # n = 448 (held-out: no gain)
        (I32, (10, 800, 640), 1, "chain"),  # 19.5 MiB
        (I32, (8, 800, 640), 1, "chain"),  # 15.6 MiB
        (TensorProto.FLOAT, (10, 800, 640), 1, "chain"),
        (I32, (8, 1024, 512), 1, "chain"),  # 16 MiB
        (I32, (2, 1024, 2048), 1, "chain"),  # rows of 8 MiB: no piece fits
        # float32 last axis to n = 256: scan at every size (cached from 16 MiB ran 0.87-0.95x
        # scan's time: auto-rows-2026-12-06.md), not carry
        (TensorProto.FLOAT, (32768, 128), 1, "scan"),
        (TensorProto.FLOAT, (16384, 256), 1, "scan"),
        (TensorProto.FLOAT, (16384, 257), 1, "cached"),  # past 256: carry's rows, in tiles
        (I32, (8192, 256), 1, "cached"),  # 8 MiB: a last axis from 4 MiB
        (I32, (4096, 255), 1, "carry"),  # just under 4 MiB
        # int32, n = 64: carry, so cached from 4 MiB
        (I32, (32768, 64), 1, "cached"),
        (I32, (16384, 64), 1, "cached"),  # 4 MiB exactly
        (I32, (16383, 64), 1, "carry"),  # just under
        (TensorProto.FLOAT, (16, 4096, 16), 1, "cached"),  # a middle axis from 4 MiB
        (TensorProto.FLOAT, (16, 4095, 16), 1, "carry"),  # just under
        (TensorProto.FLOAT, (1024, 1024), 1, "cached"),  # 4 MiB on a last axis
        (TensorProto.FLOAT, (16384, 128), 1, "scan"),  # float32 to n = 256: 16 MiB needed
        (I64, (65536, 64), 0, "cached"),  # a first axis: chunks of 8192 positions (4 MiB)
        (TensorProto.FLOAT, (65536, 16), 0, "cached"),  # a first axis from 4 MiB: 2 chunks
        (TensorProto.FLOAT, (65535, 16), 0, "carry"),  # just under (3 chunks would fit)
        (I64, (16384, 32), 0, "cached"),  # 8-byte: 4 MiB too
        (TensorProto.FLOAT, (1 << 20,), 0, "carry"),  # one row: chunks, from 16 MiB
        (TensorProto.FLOAT, (1 << 22,), 0, "cached"),
        (I64, (4, 1 << 20), 0, "scan"),  # scan's row: large slabs
        (TensorProto.FLOAT, (8192, 32), 1, "scan"),  # scan's row
        # an int32 first axis's scan on slabs of 1000 or more stays a scan (cached took
        # 0.82-1.06x its time, under the 1.25x a rule must buy)
        (I32, (4096, 1024), 0, "scan"),
        (I32, (4096, 1499), 0, "scan"),
        (I32, (16384, 999), 0, "cached"),  # under scan's slab: carry, so cached from 4 MiB
        (I32, (512, 8192), 0, "scan"),  # n <= 512: scan on any slab
        (I32, (131072, 32), 1, "scan"),  # a last axis's scan (16 MiB) is no first axis's
        (TensorProto.FLOAT, (4096, 1024), 0, "scan"),  # float32: float64 carries
        (TensorProto.UINT32, (4096, 1024), 0, "scan"),  # uint32 computes as int64
        (I64, (4096, 1024), 0, "scan"),
    ],
)
def test_auto_takes_cached_for_carry_on_large_tensors(
    elem_type: int,
    shape: tuple[int, ...],
    axis: int,
    pick: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the shipped piece sizes (the fixture above makes them 256 bytes)
    set_pieces(monkeypatch, 2 << 20, 4 << 20)
    (plan,) = plan_cumprods(ir.serde.deserialize_model(cumprod_model(elem_type, shape, axis)))
    assert plan.lowering.name == pick


@pytest.mark.parametrize(
    "target",
    [t for t in TARGETS if TARGETS[t].auto != "onnxruntime" and not refuses_broadly(t)],
)
def test_cached_refuses_runtimes_it_was_not_measured_on(target: str) -> None:
    model = cumprod_model(I64, (12, 33), 1)
    with pytest.raises(rewriter.StrategyError, match=r"onnxruntime only|needs Scan, which"):
        rewriter.decompose_cumprod(model, strategy="cached", target=target)
    (plan,) = plan_cumprods(
        ir.serde.deserialize_model(cumprod_model(I64, (8192, 512), 1)),
        "auto",
        target=TARGETS[target],
    )
    assert plan.lowering.name != "cached"
