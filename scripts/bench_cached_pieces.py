"""``cached``'s pieces: what ``carry`` does inside them, against the alternatives measured in
docs/performance.md (seventeenth round), on onnxruntime.

For each (o, n, i) view scanned along axis 1 (o = 1: a first axis, cut into chunks; else
tiles of rows) and element type, these graphs are timed against the native CumProd by
``bench.interleaved`` (one intra-op thread, the calling thread's CPU time, shuffled
interleaved rounds, medians), each checked against native first (integers bit for bit, on
odd values):

- ``cached``: as shipped (the state of the chunks before seeds ``carry``'s last level;
  ``carry``'s r judged on the narrow runs of the whole x);
- ``piece r``: ``carry``'s r judged on the piece's own size instead (r = 16 where x's runs
  are narrow but the piece has fewer than 2^21 elements);
- ``reshaped``: the Scan body's output viewed as the piece, (T, n, i) or (1, C, i), by a
  Reshape of ``carry``'s first-level Concat, as before the nineteenth round (onnxruntime
  copies a Reshape's result into the Scan's output; the Concat writes there in place);
- ``one split``: ``carry``'s first level cut by one Split where ``cached`` cuts it in halves
  (``cached.halves``: 4-byte types, tiles of 2 MiB or more, runs of 32-64 bytes), as
  before the nineteenth round (the same graph as ``cached`` elsewhere);
- ``state after`` (chunks only): the chunk's ``carry`` result multiplied by the state, a
  Mul broadcasting (1, 1, i) over (1, C, i), as before the seventeenth round;
- ``chain`` (middle axes of n <= 1024), and ``carry``, on the whole x.

The default shapes are the round's twelve held-out narrow-run cells (runs of 8-24 bytes,
2^21-2^22 elements); with ``--chains``, its twelve held-out middle axes past n = 512 of
16-24 MiB, where ``auto`` takes ``cached`` instead of ``chain``; with ``--chains-512``, the
eighteenth round's fourteen held-out middle axes of n = 384-512 and 16-20 MiB (``cached``
from n = 512 only); with ``--halves``, the nineteenth round's nineteen held-out middle axes
of 15-40 MiB with runs of 32-64 bytes (``one split``); with ``--grid``, the (o, n, i) views
of the benchmark grid's cells where ``auto`` takes ``cached`` (``scripts/bench.py``'s
shapes; a last axis as (o, n, 1)).

With ``--copy``, only :func:`copy_probe`: what a Reshape as the Scan body's output costs.

With ``--halves-2mib``, the twenty-sixth round's second held-out round
(:data:`HALVES_2MIB_CELLS`): twelve 4-byte middle axes of 6-14 MiB whose tiles, since that
round, take exactly 2 MiB with runs of 32-64 bytes, so that ``cached`` cuts their first Split
in halves (before it, tiles of 1 MiB: one Split). Its rule, declared before any of its cells
was timed: halves only in tiles of more than 2 MiB if the median time one split / cached is
at most 0.95 with at most one cell above 1.05. With ``--halves-2mib-float32``, its third
(:data:`HALVES_2MIB_FLOAT32_CELLS`), after the second's six float32 cells had all taken longer
with the halves: eight new float32 middle axes of 4-16 MiB in 2 MiB tiles; the same rule,
declared before any of its cells was timed, for float32 only.

With ``--reshaped-12mib``, the twenty-sixth round's fourth held-out round
(:data:`RESHAPED_CELLS`): sixteen tiled views of 12-18 MiB, per type two middle axes and two
last axes, after ``reshaped`` had taken 0.86-0.93x ``cached``'s time on seven 4-byte middle
axes of 12-16 MiB in the second and third. Its rule, declared before any of its cells was
timed: in tensors of 12 MiB or more, the tiles' body output reshaped to the tile (as before
the nineteenth round) if the median time reshaped / cached is at most 0.95 with at most two
cells above 1.05.

With ``--tiles MIB``, only :func:`tiles_round`: ``cached`` as shipped against ``cached`` built
with tiles of at most MIB MiB (``cached.TILE_BYTES``; the halves follow the tile, as built),
and against a second session of the shipped graph (``again``: what two timings of one graph
differ by), on the twenty-sixth round's twenty held-out cells (:data:`TILES_CELLS`) or
``--cells``. Its rule, declared before any of its cells was timed, when 1 MiB was shipped:
adopt tiles of 2 MiB if the median time tiles / cached is at most 0.95 with at most two cells
above 1.05 (it held, and 2 MiB is shipped since; ``--tiles 1`` times the graph before).

With ``--rows``, only :func:`cached_round` on :data:`ROWS_CELLS`, the twenty-seventh round's
held-out round: ``auto`` took ``carry``, not ``cached``, where ``cached``'s pieces are single
rows of more than 4 MiB (``auto._CACHED_PIECE_UP_TO``); off the grid, on middle axes of few
long rows, ``cached`` took 0.77-0.88x carry's time (four cells of 5.9-12.2 MiB rows, seen
before the rule). Its rule,
declared before any of its cells was timed: where ``auto`` gives ``carry``, ``cached`` on pieces
of up to 8 MiB if, on ten held-out views whose pieces are rows of 4-8 MiB (every type, middle
and last axes), the median time cached / carry is at most 0.95 with at most two cells above
1.05; and up to 16 MiB if, in addition, the same holds on eight views with rows of 8-16 MiB
(timed only if the first band holds). ``again`` (a second session of ``carry``'s graph) is
the control. Both rules held, so ``auto`` takes ``cached`` on these cells since: the script
times ``carry`` by name.

With ``--last``, only :func:`cached_round` on :data:`LAST_CELLS`, the twenty-seventh round's
second held-out round: ``auto`` takes ``cached`` on a last axis only from 16 MiB
(middle and first axes from 4 MiB); the sixteenth round's 1M / 2M run timed middle and first
axes only (five last axes of 4-8 MiB ad hoc, in tiles of 1 MiB: 0.85-1.08x carry's time); the
floors of the grid's 8 MiB last axes (8-byte types, 1M) put ``cached``'s pieces at 0.7-0.8x
``carry``'s time. Its rule, declared before any
of its cells was timed: where ``auto`` gives ``carry`` on a last axis, ``cached`` from 8 MiB if,
on ten held-out last axes of 8-16 MiB (every type), the median time cached / carry is at most
0.95 with at most two cells above 1.05; and from 4 MiB if, in addition, the same holds on eight
of 4-8 MiB (timed only if the first band holds). It held too.

With ``--tiled``, only :func:`cached_round` on :data:`TILED_CELLS`, the twenty-seventh round's
fourth held-out round: ``auto`` gives ``tiled`` to an int32 last axis of n = 64 (the one row
of its table ``tiled`` keeps), which ``cached`` never replaced; ad hoc on the grid's int32 4M
last n = 64 cell (16 MiB) ``cached`` took 0.63x ``tiled``'s time (9 rounds), on a 4 MiB one
1.00x. Its rule, declared before any of its cells was timed: where ``auto`` gives ``tiled``,
``cached`` from 16 MiB if, on eight held-out int32 last axes of n = 64 and 17-64 MiB, the
median time cached / tiled is at most 0.95 with at most two cells above 1.05; from 8 MiB if,
in addition, the same holds on eight of 8-16 MiB (timed only if the first band holds).

Usage: python scripts/bench_cached_pieces.py [--cells "float32:256,2048,5;int64:1,1048576,2"]
    [--chains | --chains-512 | --halves | --halves-2mib | --halves-2mib-float32 |
    --reshaped-12mib | --grid | --copy | --tiles MIB | --rows | --last | --tiled]
    [--rounds 11]
    [--out scripts/results/NAME]
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import math
import statistics
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import bench  # scripts/bench.py, beside this script
import numpy as np
import onnx_ir as ir
from onnx import TensorProto, helper

from rewriter.lowerings import cached, carry, chain

CELLS = (
    "float32:256,2048,5;float32:128,8192,2;int32:512,1024,6;int64:1024,1024,3;"
    "float64:64,16384,2;float32:2048,256,6;int32:16,131072,2;float64:4096,256,3;"
    "float32:1,524288,4;int64:1,1048576,2;int32:1,786432,3;float64:1,1048576,3"
)
CHAIN_CELLS = (
    "float32:24,640,300;int32:12,700,512;int64:32,600,128;float64:8,900,320;"
    "float32:64,896,96;int32:20,1024,256;int64:6,1024,400;float64:42,640,80;"
    "float32:10,800,640;int64:16,960,200;int32:48,680,150;float64:6,1000,400"
)
HALVES_CELLS = (  # the nineteenth round's held-out cells: the first rule's, the second's
    "float32:4,131072,8;float32:16,32768,16;float32:6,65536,12;int32:10,98304,8;"
    "int32:8,65536,16;int64:8,65536,6;int64:12,32768,8;float64:6,65536,5;float64:8,65536,6;"
    "float32:12,65536,10;int64:4,131072,4;"
    "float32:6,98304,8;int32:16,49152,12;float32:20,32768,16;int32:6,81920,10;"
    "float32:10,65536,14;int32:14,65536,8;float32:8,73728,9;int32:9,40960,16"
)
CHAIN_512_CELLS = (
    "float32:40,512,210;int32:100,512,90;int64:48,512,100;float64:12,512,400;"
    "float32:20,512,420;int64:160,512,30;float32:128,448,80;int32:16,480,600;"
    "int64:96,448,56;float64:80,480,60;float32:24,384,480;int32:60,400,200;"
    "int64:20,400,300;float64:36,384,180"
)
TILES_CELLS = (  # the twenty-sixth round's held-out cells: per type three middle axes, two last
    "float32:12,3000,40;float32:12,16384,8;float32:40,6000,24;float32:3000,1500,1;"
    "float32:1200,4000,1;int32:10,5000,30;int32:24,12000,12;int32:24,8192,16;"
    "int32:5000,1000,1;int32:1500,3000,1;float64:12,6000,10;float64:20,2000,40;"
    "float64:36,3000,30;float64:600,5000,1;float64:3000,1200,1;int64:8,9000,12;"
    "int64:48,1500,16;int64:24,5000,24;int64:2400,1400,1;int64:12000,300,1"
)
HALVES_2MIB_CELLS = (  # the twenty-sixth round's second held-out round: 2 MiB tiles, halves
    "float32:24,4096,16;float32:40,8192,8;float32:6,32768,8;float32:12,8192,16;"
    "float32:48,4096,8;float32:10,16384,16;int32:20,16384,8;int32:8,32768,8;"
    "int32:28,8192,16;int32:56,4096,16;int32:6,16384,16;int32:40,8192,8"
)
HALVES_2MIB_FLOAT32_CELLS = (  # the twenty-sixth round's third held-out round: float32 only
    "float32:32,4096,8;float32:4,16384,16;float32:16,8192,16;float32:12,16384,16;"
    "float32:48,4096,16;float32:28,8192,16;float32:14,16384,16;float32:16,16384,16"
)
RESHAPED_CELLS = (  # the twenty-sixth round's fourth held-out round: 12-18 MiB, every type
    "float32:20,12000,16;float32:10,20000,20;float32:2400,2000,1;float32:720,6000,1;"
    "int32:30,9000,12;int32:18,16384,12;int32:4500,1000,1;int32:1100,4000,1;"
    "float64:12,10000,16;float64:40,3000,14;float64:2200,1000,1;float64:480,4500,1;"
    "int64:16,6000,20;int64:48,2500,14;int64:7200,300,1;int64:280,8000,1"
)
ROWS_CELLS = {  # the twenty-seventh round's held-out cells: carry's views cut in rows of ...
    (4, 8): (  # ... 4-8 MiB
        "float32:3,6000,250;float32:5,20000,64;float32:4,1200000,1;int32:4,5000,300;"
        "int32:6,12000,100;float64:3,5000,150;float64:2,24000,32;int64:4,6000,120;"
        "int64:2,20000,40;int64:3,700000,1"
    ),
    (8, 16): (  # ... 8-16 MiB
        "float32:3,40000,80;float32:2,10000,300;int32:2,50000,60;int32:2,30000,110;"
        "float64:2,12000,120;float64:3,4000,400;int64:3,16000,100;float64:2,1500000,1"
    ),
}
LAST_CELLS = {  # the twenty-seventh round's second held-out round: carry's last axes of ...
    (8, 16): (  # ... 8-16 MiB
        "float32:3000,1000,1;float32:700,4000,1;int32:2500,1200,1;int32:400,6000,1;"
        "float64:1500,800,1;float64:200,7000,1;float64:20000,64,1;int64:1200,1000,1;"
        "int64:24000,48,1;int64:100,12000,1"
    ),
    (4, 8): (  # ... 4-8 MiB
        "float32:1500,1000,1;float32:250,6000,1;int32:1600,900,1;int32:300,5000,1;"
        "float64:800,900,1;float64:12000,48,1;int64:600,1200,1;int64:40,15000,1"
    ),
}
TILED_CELLS = {  # the twenty-seventh round's fourth held-out round: tiled's int32 last axes ...
    (16, 64): (  # ... (n = 64) of 16-64 MiB
        "int32:150000,64,1;int32:100000,64,1;int32:80000,64,1;int32:200000,64,1;"
        "int32:70000,64,1;int32:120000,64,1;int32:260000,64,1;int32:90000,64,1"
    ),
    (8, 16): (  # ... of 8-16 MiB
        "int32:40000,64,1;int32:50000,64,1;int32:34000,64,1;int32:60000,64,1;"
        "int32:45000,64,1;int32:36000,64,1;int32:55000,64,1;int32:62000,64,1"
    ),
}
ROWS_RULE = (0.95, 1.05, 2)  # per band: median cached / old <= 0.95, at most 2 above 1.05
CELL_SETS = {  # flag: (the cells, its help)
    "chains": (CHAIN_CELLS, "the middle chains past 512"),
    "chains-512": (CHAIN_512_CELLS, "the middle chains of 384-512"),
    "halves": (HALVES_CELLS, "the halves' held-out cells"),
    "halves-2mib": (HALVES_2MIB_CELLS, "the halves in 2 MiB tiles: held-out cells"),
    "halves-2mib-float32": (HALVES_2MIB_FLOAT32_CELLS, "... and new float32 cells"),
    "reshaped-12mib": (RESHAPED_CELLS, "the body's output reshaped: held-out cells"),
}
TILES_RULE = (0.95, 1.05, 2)  # adopt if median tiles / cached <= 0.95, at most 2 above 1.05
TYPES = {
    "float32": TensorProto.FLOAT,
    "float64": TensorProto.DOUBLE,
    "int32": TensorProto.INT32,
    "int64": TensorProto.INT64,
}


@contextlib.contextmanager
def _carry_build(variant: str) -> Iterator[None]:
    """``carry.build`` as ``cached`` calls it, changed for ``variant`` while a graph is built."""
    shipped = carry.build

    def build(
        b: Any, x3: Any, v: Any, *, seed: Any = None, narrow_runs: Any = None, **kw: Any
    ) -> Any:
        if variant == "piece r":
            return shipped(b, x3, v, seed=seed, **kw)
        if variant == "reshaped":  # the result viewed as the piece, as a Scan body's output
            out = shipped(
                b, x3, v, seed=seed, narrow_runs=narrow_runs, halves=kw.get("halves", False)
            )
            out.type, out.shape = ir.TensorType(v.dtype), ir.Shape(list(v.dims()))
            return out
        out = shipped(b, x3, v, narrow_runs=narrow_runs, **kw)  # "state after"
        if seed is None:
            return out
        after = b.op("Mul", out, seed)
        after.type, after.shape = out.type, out.shape
        return after

    carry.build = build  # type: ignore[assignment]
    try:
        yield
    finally:
        carry.build = shipped  # type: ignore[assignment]


@contextlib.contextmanager
def _one_split() -> Iterator[None]:
    """``cached`` with carry's first level cut by one Split wherever it takes halves."""
    shipped = cached.halves
    cached.halves = lambda tile, itemsize: False  # type: ignore[assignment]
    try:
        yield
    finally:
        cached.halves = shipped  # type: ignore[assignment]


def _models(elem_type: int, shape: tuple[int, ...], axis: int) -> dict[str, Any]:
    model = bench.model_for(elem_type, shape, axis, 0, 0)
    models = {"native": model, "cached": bench.lowered(model, "cached")}
    for variant in ("piece r", "reshaped", "state after") if axis == 0 else ("piece r", "reshaped"):
        with _carry_build(variant):
            models[variant] = bench.lowered(model, "cached")
    with _one_split():
        models["one split"] = bench.lowered(model, "cached")
    if axis == 1 and shape[1] <= chain.MAX_LENGTH:
        models["chain"] = bench.lowered(model, "chain")
    models["carry"] = bench.lowered(model, "carry")
    return models


def grid_cells() -> str:
    """The grid's cells (``scripts/bench.py``: 1M and 4M elements, n = 8 ... 65536, first,
    middle and last axis, the four types) where ``auto`` takes ``cached``, as type:o,n,i."""
    cells = []
    for name in bench.GRID_DTYPES.split(","):
        for total in bench.int_list(bench.GRID_TOTALS):
            for n in bench.int_list(bench.GRID_LENGTHS):
                for position in bench.GRID_POSITIONS.split(","):
                    shape, axis = bench.shape_for(total << 20, n, position)
                    model = bench.model_for(bench.DTYPES[name], shape, axis, 0, 0)
                    if bench._auto_pick(model) == "cached":
                        o, m, i = bench._view(shape, axis)
                        cells.append(f"{name}:{o},{m},{i}")
    return ";".join(cells)


def _cell(cell: str) -> tuple[str, int, int, int, int]:
    """ "type:o,n,i" as (type, o, n, i, its ONNX element type)."""
    name, dims = cell.split(":")
    o, n, i = (int(d) for d in dims.split(","))
    return name, o, n, i, TYPES[name]


def _timed_exact(
    models: dict[str, Any], old: str, *, x: np.ndarray, odd: np.ndarray, rounds: int, cell: str
) -> dict[str, float]:
    """Median seconds per run of each of ``models`` (``native``, ``old`` and graphs that must
    give its products bit for bit), after checking that they do: integers on ``odd`` values
    (x's zeros would leave every later product 0), and against native too."""
    ints = np.issubdtype(x.dtype, np.integer)
    outputs, times = bench.run_graphs(models, {"x": odd if ints else x}, {"x": x}, rounds)
    for label in models.keys() - {"native", old}:
        assert np.array_equal(outputs[label], outputs[old], equal_nan=True), (cell, label)
    if ints:
        assert np.array_equal(outputs[old], outputs["native"]), cell
    return times


def tiles_round(cells: str, mib: float, rounds: int) -> tuple[list[str], str]:
    """``cached`` as shipped, ``again`` (a second session of its graph) and ``tiles`` (tiles
    of at most ``mib`` MiB), each checked bit for bit against the shipped graph (a tile
    holds whole rows, so the size changes no product) and integers against native; the
    table's lines and the verdict of :data:`TILES_RULE`."""
    lines, ratios = [], []
    size = int(mib * (1 << 20))
    for cell in cells.split(";"):
        name, o, n, i, elem_type = _cell(cell)
        shape, axis = ((o, n), 1) if i == 1 else ((o, n, i), 1)
        rng = np.random.default_rng(0)
        x = bench.data_for(elem_type, shape, rng)
        odd = (2 * rng.integers(-2, 2, shape) + 1).astype(x.dtype)
        model = bench.model_for(elem_type, shape, axis, 0, 0)
        assert bench._auto_pick(model) == "cached", cell
        with bench.tile_bytes(size):
            wide = bench.lowered(model, "cached")
            wide_piece = cached.pieces((o, n, i), x.dtype.itemsize)
        piece = cached.pieces((o, n, i), x.dtype.itemsize)
        assert piece is not None and wide_piece is not None and piece != wide_piece, cell
        models = {
            "native": model,
            "cached": bench.lowered(model, "cached"),
            "again": bench.lowered(model, "cached"),
            "tiles": wide,
        }
        times = _timed_exact(models, "cached", x=x, odd=odd, rounds=rounds, cell=cell)
        x_ = {k: v / times["native"] for k, v in times.items()}
        ratios.append(times["tiles"] / times["cached"])
        lines.append(
            f"| {name} | ({o}, {n}, {i}) | {x.nbytes / 2**20:.1f} | {piece[1]} | "
            f"{wide_piece[1]} | {'yes' if cached.halves(wide_piece[0], x.dtype.itemsize) else ''}"
            f" | {times['native'] * 1e6:.0f} | {x_['cached']:.2f}× | {x_['again']:.2f}× | "
            f"{x_['tiles']:.2f}× | {times['again'] / times['cached']:.2f} | {ratios[-1]:.2f} |"
        )
        print(lines[-1], flush=True)
    summary, _ = bench.rule_verdict(ratios, TILES_RULE, f"tiles {mib:g} MiB / cached")
    return lines, summary


def cached_round(
    cells: str, band: tuple[int, int], rounds: int, label: str, *, rows: bool, old: str = "carry"
) -> tuple[list[str], str, bool]:
    """``old`` (``auto``'s pick on these views before the twenty-seventh round: ``carry``, or
    ``tiled``), ``again`` (a second session of that graph) and ``cached``, on views of
    ``old``'s row of the table whose size is in ``band`` (bytes, low exclusive): with ``rows``,
    that of ``cached``'s pieces, which must be single rows; else the whole tensor's. Each checked
    against the shipped graph bit for bit (a tile's products do not depend on the other
    tiles) and integers against native too. The table's lines, the verdict of
    :data:`ROWS_RULE` and whether it holds."""
    lines, ratios = [], []
    for cell in cells.split(";"):
        name, o, n, i, elem_type = _cell(cell)
        shape, axis = ((o, n), 1) if i == 1 else ((o, n, i), 1)
        rng = np.random.default_rng(0)
        x = bench.data_for(elem_type, shape, rng)
        odd = (2 * rng.integers(-2, 2, shape) + 1).astype(x.dtype)
        model = bench.model_for(elem_type, shape, axis, 0, 0)
        assert bench._auto_pick(model) in (old, "cached"), cell  # old's row, either way
        piece = cached.pieces((o, n, i), x.dtype.itemsize)
        assert piece is not None, cell
        assert piece[0][0] == 1 or not rows, cell
        size = n * i * x.dtype.itemsize if rows else x.nbytes
        assert band[0] < size <= band[1], cell
        models = {
            "native": model,
            old: bench.lowered(model, old),
            "again": bench.lowered(model, old),
            "cached": bench.lowered(model, "cached"),
        }
        times = _timed_exact(models, old, x=x, odd=odd, rounds=rounds, cell=cell)
        x_ = {k: v / times["native"] for k, v in times.items()}
        ratios.append(times["cached"] / times[old])
        lines.append(
            f"| {name} | ({o}, {n}, {i}) | {x.nbytes / 2**20:.1f} | "
            f"{math.prod(piece[0]) * x.dtype.itemsize / 2**20:.2f} | {times['native'] * 1e6:.0f} | "
            f"{x_[old]:.2f}× | {x_['again']:.2f}× | {x_['cached']:.2f}× | "
            f"{times['again'] / times[old]:.2f} | {ratios[-1]:.2f} |"
        )
        print(lines[-1], flush=True)
    summary, holds = bench.rule_verdict(ratios, ROWS_RULE, f"{label}, cached / {old}")
    return lines, summary, holds


def copy_probe(rounds: int) -> str:
    """A Scan over the eight 2 MiB rows of a float32 (8, 65536, 8) tensor whose body is one
    Neg, its result the body's output three ways: the Neg's own (``direct``), viewed back
    as the row by a Reshape (``reshaped``: onnxruntime copies it into the Scan's output), or
    the Neg of the row viewed as carry's blocks (4096, 16, 8), the outer Reshape viewing
    them as x (``blocks``, as ``cached``'s body). x's scan is followed by a Neg, so that the
    outer Reshape's result is no graph output (onnxruntime copies a graph output's)."""
    f32 = TensorProto.FLOAT
    row, blocks = [1, 65536, 8], [4096, 16, 8]
    forms = {
        "direct": ([helper.make_node("Neg", ["t"], ["u"])], row),
        "reshaped": (
            [
                helper.make_node("Reshape", ["t", "blocks"], ["tb"]),
                helper.make_node("Neg", ["tb"], ["nb"]),
                helper.make_node("Reshape", ["nb", "row"], ["u"]),
            ],
            row,
        ),
        "blocks": (
            [
                helper.make_node("Reshape", ["t", "blocks"], ["tb"]),
                helper.make_node("Neg", ["tb"], ["u"]),
            ],
            blocks,
        ),
    }
    shapes = [
        helper.make_tensor("blocks", TensorProto.INT64, [3], blocks),
        helper.make_tensor("row", TensorProto.INT64, [3], row),
    ]
    x = np.random.default_rng(0).standard_normal((8, 65536, 8)).astype(np.float32)
    runs: dict[str, Callable[[], object]] = {}
    for name, (nodes, shape) in forms.items():
        body = helper.make_graph(
            nodes,
            "body",
            [helper.make_tensor_value_info("t", f32, row)],
            [helper.make_tensor_value_info("u", f32, shape)],
            shapes if name != "direct" else [],
        )
        graph = helper.make_graph(
            [
                helper.make_node("Reshape", ["x", "rows"], ["xr"]),
                helper.make_node("Scan", ["xr"], ["yr"], body=body, num_scan_inputs=1),
                helper.make_node("Reshape", ["yr", "whole"], ["y"]),
                helper.make_node("Neg", ["y"], ["z"]),
            ],
            name,
            [helper.make_tensor_value_info("x", f32, list(x.shape))],
            [helper.make_tensor_value_info("z", f32, list(x.shape))],
            [
                helper.make_tensor("rows", TensorProto.INT64, [4], [8, *row]),
                helper.make_tensor("whole", TensorProto.INT64, [3], list(x.shape)),
            ],
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
        session, _ = bench.session(model, 1)
        assert np.array_equal(session.run(None, {"x": x})[0], x)
        runs[name] = functools.partial(session.run, None, {"x": x})
    times = bench.interleaved(runs, rounds)
    return " | ".join(f"{name} {seconds * 1e6:.0f} µs" for name, seconds in times.items())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cells", help="type:o,n,i;... (o = 1: a first axis)")
    for flag, (_, help_text) in CELL_SETS.items():
        parser.add_argument(f"--{flag}", action="store_true", help=help_text)
    parser.add_argument("--grid", action="store_true", help="the grid's cells where auto caches")
    parser.add_argument("--copy", action="store_true", help="only the Scan output's copy")
    parser.add_argument("--tiles", type=float, help="only cached's tiles of this many MiB")
    parser.add_argument(
        "--rows", action="store_true", help="only cached on rows past 4 MiB (ROWS_CELLS)"
    )
    parser.add_argument(
        "--last", action="store_true", help="only cached on last axes under 16 MiB (LAST_CELLS)"
    )
    parser.add_argument(
        "--tiled", action="store_true", help="only cached in tiled's place (TILED_CELLS)"
    )
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument(
        "--out", help="write OUT.md (and OUT.json, but with --tiles, --rows, --last or --tiled)"
    )
    args = parser.parse_args()
    bench.CLOCK["now"] = time.thread_time
    if args.copy:
        print(copy_probe(args.rounds))
        return
    if args.rows or args.last or args.tiled:
        old = "tiled" if args.tiled else "carry"
        head = f"| type | (o, n, i) | MiB | piece MiB | native µs | {old} | again | cached |"
        head += f" again / {old} | cached / {old} |"
        print(head, flush=True)
        text = [head, "|" + "---|" * 10]
        sets = ROWS_CELLS if args.rows else TILED_CELLS if args.tiled else LAST_CELLS
        bands = {next(iter(sets)): args.cells} if args.cells else sets  # --cells: the first
        what = "rows" if args.rows else "last axes"
        for (low, high), cells in bands.items():
            label = f"{what} of {low}-{high} MiB"
            band = (low << 20, high << 20)
            table, verdict, holds = cached_round(
                cells, band, args.rounds, label, rows=args.rows, old=old
            )
            print(verdict, flush=True)
            text += [*table, "", verdict, ""]
            if not holds:
                break  # the second band is judged only where the first band's rule held
        if args.out:
            when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
            intro = f"{when}, onnxruntime, one thread, thread clock, {args.rounds} rounds\n\n"
            Path(args.out + ".md").write_text(intro + "\n".join(text))
        return
    if args.tiles:
        head = "| type | (o, n, i) | MiB | pieces | pieces (tiles) | halves (tiles) | native µs"
        head += " | cached | again | tiles | again / cached | tiles / cached |"
        print(head, flush=True)
        table, verdict = tiles_round(args.cells or TILES_CELLS, args.tiles, args.rounds)
        print(verdict)
        if args.out:
            when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
            intro = f"{when}, onnxruntime, one thread, thread clock, {args.rounds} rounds\n\n"
            text = "\n".join([head, "|" + "---|" * 12, *table, "", verdict, ""])
            Path(args.out + ".md").write_text(intro + text)
        return
    rows: list[dict[str, Any]] = []
    lines: list[str] = []
    chosen = [c for f, (c, _) in CELL_SETS.items() if getattr(args, f.replace("-", "_"))]
    default = grid_cells() if args.grid else (chosen[-1] if chosen else CELLS)
    for cell in (args.cells or default).split(";"):
        name, o, n, i, elem_type = _cell(cell)
        shape, axis = ((n, i), 0) if o == 1 else ((o, n, i), 1)
        rng = np.random.default_rng(0)
        x = bench.data_for(elem_type, shape, rng)
        assert cached.pieces((o, n, i), x.dtype.itemsize), cell  # these types compute as x
        # checked on odd integers (the timing data's zeros would leave every later product 0,
        # hiding a wrong state or carry); floats on the timing data itself
        odd = (2 * rng.integers(-2, 2, shape) + 1).astype(x.dtype)
        check = odd if name.startswith("int") else x
        runs: dict[str, Callable[[], object]] = {}
        reference = None
        for label, model in _models(elem_type, shape, axis).items():
            session, _ = bench.session(model, 1)
            y = session.run(None, {"x": check})[0]
            if reference is None:
                reference = y
            elif name.startswith("int"):
                assert np.array_equal(y, reference), (cell, label)
            else:
                assert np.allclose(y, reference, rtol=1e-3, equal_nan=True), (cell, label)
            runs[label] = functools.partial(session.run, None, {"x": x})
        times = bench.interleaved(runs, args.rounds)
        ratio = {k: v / times["native"] for k, v in times.items() if k != "native"}
        rows.append(
            {"dtype": name, "dims": [o, n, i], "native_us": times["native"] * 1e6, "x": ratio}
        )
        line = f"| {name} | ({o}, {n}, {i}) | {times['native'] * 1e6:.0f} | " + " | ".join(
            f"{ratio[k]:.2f}×" if k in ratio else "-"
            for k in ("cached", "piece r", "reshaped", "one split", "state after", "chain", "carry")
        )
        lines.append(
            line
            + "".join(
                f" | {ratio['cached'] / ratio[other]:.2f}"
                for other in ("piece r", "reshaped", "one split")
            )
            + " |"
        )
        print(lines[-1], flush=True)
    summary = "; ".join(
        f"cached / {other}: median {statistics.median(got):.3f}, {min(got):.2f}-{max(got):.2f}"
        for other in ("piece r", "reshaped", "one split", "state after", "chain")
        if (got := [r["x"]["cached"] / r["x"][other] for r in rows if other in r["x"]])
    )
    print(summary)
    if args.out:
        head = "| type | (o, n, i) | native µs | cached | piece r | reshaped | one split |"
        head += " state after | chain | carry | cached / piece r | cached / reshaped |"
        head += " cached / one split |"
        table = [head, "|" + "---|" * 13, *lines, "", summary, ""]
        when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        intro = f"{when}, onnxruntime, one thread, thread clock, {args.rounds} rounds; × native\n\n"
        Path(args.out + ".md").write_text(intro + "\n".join(table))
        Path(args.out + ".json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
