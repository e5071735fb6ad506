"""scripts/bench/bench.py's merge of floor runs: the per-cell median of the runs' ratios."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.helpers import load_script

_PATH = Path(__file__).resolve().parents[1] / "scripts" / "bench" / "bench.py"


@dataclasses.dataclass
class _Ran:
    code: int
    out: str
    err: str


def _main(module, *argv: str) -> _Ran:  # type: ignore[no-untyped-def]
    """``python scripts/bench/bench.py ARGV`` as ``module.main()`` in this process: its exit
    status (0, or argparse's / ``sys.exit``'s), stdout and stderr."""
    out, err = io.StringIO(), io.StringIO()
    saved = sys.argv
    sys.argv = [str(_PATH), *argv]
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                module.main()
                code = 0
            except SystemExit as exited:
                code = exited.code if isinstance(exited.code, int) else int(bool(exited.code))
    finally:
        sys.argv = saved
    return _Ran(code, out.getvalue(), err.getvalue())


@pytest.fixture(scope="module")
def bench():  # type: ignore[no-untyped-def]
    return load_script(_PATH, "bench_under_test")


def _row(native: float, auto: float, scan: float, position: str = "middle") -> dict:
    """A floor row for (int32, 1M, n = 8, position) whose routes are priced by hand: chain
    and blocked cost 1000 µs or more, the scan route ``scan`` + 2 x 10 µs of Transposes."""
    return {
        "dtype": "int32",
        "total": 1 << 20,
        "n": 8,
        "position": position,
        "shape": {"middle": [256, 8, 512], "last": [131072, 8], "first": [8, 131072]}[position],
        "native_us": native,
        "us": {
            "mul": 1000.0,
            "mul x*x": 1000.0,
            "transpose": 10.0,
            "64 launches": 64.0,
            "fine split+concat": 1000.0,
            "scan n steps": scan,
            "auto": auto,
        },
        "picks": {"auto": "chain"},
    }


def test_median_of_ratios_per_cell(bench) -> None:  # type: ignore[no-untyped-def]
    runs = [
        [_row(100.0, 500.0, 300.0)],  # auto 5.0x, scan route (300 + 20) / 100 = 3.2x
        [_row(200.0, 700.0, 580.0)],  # auto 3.5x, scan route 3.0x
        [_row(100.0, 380.0, 480.0)],  # auto 3.8x, scan route 5.0x
    ]
    (row,) = bench.merge_floor_runs(runs)
    assert row["runs"] == 3
    assert row["native_us"] == 100.0  # median of 100, 200, 100
    assert row["us"]["auto"] / row["native_us"] == pytest.approx(3.8)  # median of 5.0, 3.5, 3.8
    # scan n steps: ratios 3.0, 2.9, 4.8 -> 3.0; the route adds two transposes at 0.1x each
    # (ratios 0.1, 0.05, 0.1 -> 0.1)
    assert row["floor_route"] == "scan"
    assert row["floor_us"] / row["native_us"] == pytest.approx(3.2)
    assert bench.floor_verdict(row) == "meets 4×"


def test_cells_are_merged_separately(bench) -> None:  # type: ignore[no-untyped-def]
    runs = [
        [_row(100.0, 500.0, 300.0), _row(100.0, 300.0, 300.0, "last")],
        [_row(100.0, 450.0, 300.0), _row(100.0, 900.0, 300.0, "last")],
    ]
    rows = {r["position"]: r for r in bench.merge_floor_runs(runs)}
    assert rows["middle"]["us"]["auto"] == pytest.approx(475.0)  # median of two: their mean
    assert rows["last"]["us"]["auto"] == pytest.approx(600.0)
    assert bench.floor_verdict(rows["middle"]) == "not explained (floor 3.2×)"


def test_the_band_replaces_its_cells_and_the_summary_counts_them(bench) -> None:  # type: ignore[no-untyped-def]
    grid = bench.merge_floor_runs([[_row(100.0, 500.0, 300.0), _row(100.0, 200.0, 300.0, "last")]])
    band = bench.merge_floor_runs(
        [[_row(100.0, 390.0, 300.0)], [_row(100.0, 410.0, 300.0)], [_row(100.0, 370.0, 300.0)]]
    )
    rows = bench.overlay_floor_rows(grid, band)
    assert [r["position"] for r in rows] == ["middle", "last"]  # the grid's order
    assert rows[0]["runs"] == 3 and rows[0]["us"]["auto"] == pytest.approx(390.0)
    assert rows[1] is grid[1]  # not in the band: the grid's row
    assert [bench.floor_verdict(r) for r in rows] == ["meets 4×", "meets 4×"]
    # auto 3.9x and 2.0x (within 2x: the goal's bound counts): median 2.95x, worst 3.9x;
    # both floors 3.2x
    assert bench.floors_summary(rows) == (
        "auto 2.95× / 3.90× (1 within 2×, 2 within 4×); 0 of 2 floors below 2×"
    )
    markdown = bench.floors_markdown(rows)
    assert "2 meets 4×" in markdown and bench.floors_summary(rows) in markdown


def test_the_band_says_how_native_moved_and_what_the_runs_alone_gave(bench) -> None:  # type: ignore[no-untyped-def]
    # the runs: auto 5x over a 3.2x floor (not explained) and 2x; the band, slower (native
    # 130 and 120 µs against 100 in the runs) puts the first cell's auto at 3.0x
    grid = bench.merge_floor_runs([[_row(100.0, 500.0, 300.0), _row(100.0, 200.0, 300.0, "last")]])
    band = bench.merge_floor_runs([[_row(130.0, 390.0, 300.0)], [_row(120.0, 390.0, 300.0)]])
    note = bench.band_drift(grid, band)
    assert note == (
        "the band's native time over the floors runs' on its 1 cells: median 1.25× "
        "(1.25-1.25×); the floors runs alone: 1 not explained, 1 meets 4×"
    )
    rows = bench.overlay_floor_rows(grid, band)
    markdown = bench.floors_markdown(rows, note)
    assert markdown.rstrip().endswith(note) and "2 meets 4×" in markdown
    assert bench.band_drift(grid, []) == ""  # no band: no line
    assert note not in bench.floors_markdown(rows)


def test_a_routes_level_timed_whole_raises_its_floor(bench) -> None:  # type: ignore[no-untyped-def]
    """chain / blocked take the larger of their parts' sum and their level timed as one graph
    (``chain whole`` / ``blocked whole``), when the cell has it."""
    row = _row(100.0, 500.0, 900.0)
    parts = bench.route_floors(row, "middle")
    # chain: fine split+concat (n = 8 <= r) + mul x*x + 7 launches of 1 µs
    assert parts["chain"] == pytest.approx(1000.0 + 1000.0 + 7.0)
    assert parts["blocked"] == pytest.approx(1000.0 + 2 * 1000.0 + 1000.0)
    row["us"] |= {"chain whole": 2500.0, "blocked whole": 2000.0}
    routes = bench.route_floors(row, "middle")
    assert routes["chain"] == pytest.approx(2500.0)  # the whole level costs more than its parts
    assert routes["blocked"] == pytest.approx(4000.0)  # the parts' sum is the larger
    assert routes["scan"] == pytest.approx(920.0)


def test_the_whole_level_models_run_and_keep_the_shape(bench) -> None:  # type: ignore[no-untyped-def]
    """The level models are timing models, not CumProds: they run, and blocked's leaves
    through a Reshape to x's shape (the copy into the output it stands for)."""
    import numpy as np
    import onnx
    import onnxruntime as ort

    models = bench.floor_models(onnx.TensorProto.INT64, (4, 64, 3), 1)
    x = np.arange(4 * 64 * 3, dtype=np.int64).reshape(4, 64, 3)
    for name in ("chain whole", "blocked whole"):
        session = ort.InferenceSession(
            models[name].SerializeToString(), providers=["CPUExecutionProvider"]
        )
        (y,) = session.run(None, bench.floor_feeds(models[name], x))
        assert y.size == x.size, name
    assert y.shape == x.shape
    assert [n.op_type for n in models["chain whole"].graph.node].count("Mul") == 63


def test_the_level_models_read_two_tensors_per_mul(bench) -> None:  # type: ignore[no-untyped-def]
    """Each Mul of a level model reads two tensors, as the route's Muls read the running
    product and the next slice (a slice multiplied by itself left out a read: 3-15 % of a
    middle-axis chain): each slice by its neighbour, and in ``blocked whole`` each product by
    a carry, a graph input of one slice's shape (r = 16 here; 4 on narrow runs, as carry)."""
    import onnx

    models = bench.floor_models(onnx.TensorProto.INT64, (4, 64, 5), 1)
    for name in ("chain whole", "blocked whole", "blocked level 2"):
        muls = [n for n in models[name].graph.node if n.op_type == "Mul"]
        assert muls, name
        assert all(m.input[0] != m.input[1] for m in muls), name
    blocked = models["blocked whole"]
    carried = [n for n in blocked.graph.node if n.op_type == "Mul" and "carry" in n.input]
    assert len(carried) == 16
    (carry,) = [v for v in blocked.graph.input if v.name == "carry"]
    assert [d.dim_value for d in carry.type.tensor_type.shape.dim] == [4 * 64 // 16, 1, 5]
    narrow = bench.floor_models(onnx.TensorProto.INT64, (4, 1 << 19, 3), 1)["blocked whole"]
    assert len([n for n in narrow.graph.node if n.op_type == "Mul" and "carry" in n.input]) == 4


def test_the_float32_level_models_are_seeded_by_the_carry(bench) -> None:  # type: ignore[no-untyped-def]
    """float32 (float64 totals): the carry multiplies each block's first slice only, as the
    seeded route starts each block's chain from its carry (r Muls, not 2r - 1); the model
    runs and keeps x's shape. int64 keeps a carry per slice."""
    import numpy as np
    import onnx
    import onnxruntime as ort

    shape = (4, 64, 5)  # r = 16
    models = bench.floor_models(onnx.TensorProto.FLOAT, shape, 1)
    wide = [k for k in models if k.startswith("blocked whole (wide")]
    assert wide
    for name in wide:
        muls = [n for n in models[name].graph.node if n.op_type == "Mul"]
        carried = [n for n in muls if "carry" in n.input]
        assert len(carried) == 1 and carried[0].input[0] == "s0", name
        assert len([n for n in muls if n.output[0].startswith(("p", "q"))]) == 16, name
        session = ort.InferenceSession(
            models[name].SerializeToString(), providers=["CPUExecutionProvider"]
        )
        x = np.ones(shape, np.float32)
        assert session.run(None, bench.floor_feeds(models[name], x))[0].shape == shape
    int64 = bench.floor_models(onnx.TensorProto.INT64, shape, 1)["blocked whole"]
    assert len([n for n in int64.graph.node if n.op_type == "Mul" and "carry" in n.input]) == 16


def test_the_blocked_route_adds_its_totals_scan_and_scan_its_way_back(bench) -> None:  # type: ignore[no-untyped-def]
    """``blocked level 2`` and ``blocked levels 3+`` (the block totals' scan) are added to
    the blocked route's level, and the scan route pays ``transpose back`` for its second
    Transpose (twice ``transpose`` in runs without it)."""
    row = _row(100.0, 500.0, 900.0, "last")
    row["us"] |= {"blocked whole": 5000.0, "blocked level 2": 700.0, "transpose back": 60.0}
    routes = bench.route_floors(row, "last")
    assert routes["blocked"] == pytest.approx(5000.0 + 700.0)
    row["us"]["blocked levels 3+"] = 300.0
    assert bench.route_floors(row, "last")["blocked"] == pytest.approx(5000.0 + 700.0 + 300.0)
    assert routes["scan"] == pytest.approx(900.0 + 10.0 + 60.0)
    assert bench.route_floors(row, "first")["scan"] == pytest.approx(900.0)


def test_the_totals_and_way_back_models_time_what_they_stand_for(bench) -> None:  # type: ignore[no-untyped-def]
    """``blocked level 2`` takes 1/r of x (m = n / r totals per row, cut into min(m, r)
    slices; the exclusive scan multiplies all but the first and the last), ``transpose
    back`` moves the Scan's (n, o, i) layout back to (o, n, i)."""
    import numpy as np
    import onnx
    import onnxruntime as ort

    def run(model, x):  # type: ignore[no-untyped-def]
        session = ort.InferenceSession(
            model.SerializeToString(), providers=["CPUExecutionProvider"]
        )
        return session.run(None, bench.floor_feeds(model, x))[0]

    x = np.arange(6 * 64, dtype=np.int32).reshape(6, 64)  # the last axis: r = 4, m = 16
    models = bench.floor_models(onnx.TensorProto.INT32, x.shape, 1)
    level2 = models["blocked level 2"]
    assert [d.dim_value for d in level2.graph.input[0].type.tensor_type.shape.dim] == [6, 16, 1]
    assert [n.op_type for n in level2.graph.node].count("Mul") == 2  # min(16, 4) - 2
    assert run(level2, x).size == 6 * 16
    back = run(models["transpose back"], x)
    np.testing.assert_array_equal(back.reshape(6, 64), x.reshape(64, 6).T)
    # n = 8 on the last axis: m = 2 totals, no Mul at all
    short = bench.floor_models(onnx.TensorProto.INT64, (5, 8), 1)["blocked level 2"]
    assert [n.op_type for n in short.graph.node].count("Mul") == 0
    assert run(short, np.ones((5, 8), np.int64)).shape == (5, 2, 1)
    assert "transpose back" not in bench.floor_models(onnx.TensorProto.INT64, (8, 5), 0)


def test_the_levels_after_the_second_are_each_scanned_once(bench) -> None:  # type: ignore[no-untyped-def]
    """``blocked levels 3+``: the totals of the totals, level after level, down to r or fewer
    (none when the second level's m is r or fewer); each level its own input, cut into
    min(L, r) slices, all but the first and the last multiplied."""
    import numpy as np
    import onnx
    import onnxruntime as ort

    assert bench.upper_level_lengths(16384, 4) == [4096, 1024, 256, 64, 16, 4]
    assert bench.upper_level_lengths(128, 4) == [32, 8, 2]
    assert bench.upper_level_lengths(17, 16) == [2]
    assert bench.upper_level_lengths(4, 4) == []
    assert bench.upper_level_lengths(256, 16) == [16]
    x = np.arange(6 * 1024, dtype=np.int32).reshape(6, 1024)  # last axis: r = 4, m = 256
    models = bench.floor_models(onnx.TensorProto.INT32, x.shape, 1)
    upper = models["blocked levels 3+"]
    dims = [[d.dim_value for d in v.type.tensor_type.shape.dim] for v in upper.graph.input]
    assert dims == [[6, 64, 1], [6, 16, 1], [6, 4, 1]]
    assert [n.op_type for n in upper.graph.node].count("Mul") == 3 * 2
    session = ort.InferenceSession(upper.SerializeToString(), providers=["CPUExecutionProvider"])
    outputs = session.run(None, bench.floor_feeds(upper, x))
    assert [y.size for y in outputs] == [6 * 64, 6 * 16, 6 * 4]
    assert "blocked levels 3+" not in bench.floor_models(onnx.TensorProto.INT32, (6, 16), 1)


def test_the_scan_route_timed_whole_is_the_scan_and_raises_its_floor(bench) -> None:  # type: ignore[no-untyped-def]
    """``scan whole`` and ``scan whole (axes)`` are the Scan route's whole graph: on a middle
    and the last axis they compute the cumulative product itself (none on the first axis,
    where ``scan n steps`` is the route); the route takes the larger of its parts' sum and
    the cheaper of the two."""
    import numpy as np
    import onnx
    import onnxruntime as ort

    rng = np.random.default_rng(0)
    for shape in [(3, 7, 5), (6, 9)]:
        x = rng.integers(-3, 4, shape).astype(np.int64)
        models = bench.floor_models(onnx.TensorProto.INT64, shape, 1)
        for name in ("scan whole", "scan whole (axes)"):
            session = ort.InferenceSession(
                models[name].SerializeToString(), providers=["CPUExecutionProvider"]
            )
            (y,) = session.run(None, bench.floor_feeds(models[name], x))
            np.testing.assert_array_equal(y, np.cumprod(x, axis=1), err_msg=name)
    assert "scan whole" not in bench.floor_models(onnx.TensorProto.INT64, (7, 5), 0)
    row = _row(100.0, 500.0, 900.0)
    assert bench.route_floors(row, "middle")["scan"] == pytest.approx(920.0)
    row["us"] |= {"scan whole": 1500.0, "scan whole (axes)": 1200.0}
    assert bench.route_floors(row, "middle")["scan"] == pytest.approx(1200.0)
    row["us"] |= {"scan whole": 800.0, "scan whole (axes)": 850.0}
    assert bench.route_floors(row, "middle")["scan"] == pytest.approx(920.0)


def test_the_band_takes_the_cells_near_4x_by_auto_or_by_floor(bench, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """auto within 3.4-4.8x, or the floor within 3.4-4.5x; the command prints each picked
    cell's options, which select it alone."""
    rows = bench.merge_floor_runs(
        [
            [
                _row(100.0, 500.0, 300.0, "middle"),  # auto 5.0x, floor 3.2x: neither
                _row(100.0, 470.0, 300.0, "last"),  # auto 4.7x: by auto
                _row(100.0, 200.0, 400.0, "first"),  # auto 2.0x, scan route 4.0x: by floor
            ]
        ]
    )
    floors = {r["position"]: r["floor_us"] / r["native_us"] for r in rows}
    assert floors["middle"] == pytest.approx(3.2) and 3.4 <= floors["first"] <= 4.5
    assert [r["position"] for r in bench.band_cells(rows)] == ["last", "first"]
    grid = tmp_path / "grid.json"
    grid.write_text(bench.json.dumps([dict(r) for r in rows]))
    printed = _main(bench, "--floors", "--from-json", str(grid), "--band-cells")
    assert printed.code == 0, printed.err
    assert printed.out.splitlines() == [
        "--dtypes int32 --totals 1 --lengths 8 --positions last",
        "--dtypes int32 --totals 1 --lengths 8 --positions first",
    ]


def test_a_views_cell_has_its_own_shape_and_is_selected_by_it(bench, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """--views: an (o, n, i) view's cell gets that shape (first axis where o = 1, last
    where i = 1), the grid's cells keep theirs, and the band and the table name the view."""
    cells = [bench.view_cell(v) for v in ((12, 3000, 40), (1, 4096, 1000), (7, 300, 1))]
    assert cells == [(1440000, 3000, "middle"), (4096000, 4096, "first"), (2100, 300, "last")]
    assert [bench.shape_for(*c) for c in cells] == [
        ((12, 3000, 40), 1),
        ((4096, 1000), 0),
        ((7, 300), 1),
    ]
    assert bench.shape_for(1 << 20, 8, "middle") == ((256, 8, 512), 1)
    row = _row(100.0, 500.0, 300.0)
    row.update(total=1440000, n=3000, shape=[12, 3000, 40])
    grid_row = _row(100.0, 500.0, 300.0, "first")
    assert bench.band_arguments(row) == "--dtypes int32 --views 12x3000x40"
    assert (
        bench.band_arguments(grid_row) == "--dtypes int32 --totals 1 --lengths 8 --positions first"
    )
    rows = bench.merge_floor_runs([[row, grid_row]])
    table = bench.floors_markdown(rows)
    assert "| int32 | 1,440,000 | 3000 | middle 12×3000×40 |" in table
    assert "| int32 | 1M | 8 | first |" in table
    refused = _main(bench, "--views", "12x3000x40", "--out", str(tmp_path / "x"))
    assert refused.code != 0 and "--views is for --floors" in refused.err


def test_the_chain_routes_data_movement_is_modelled_up_to_nway_up_to(  # type: ignore[no-untyped-def]
    bench, monkeypatch
) -> None:
    """Past NWAY_UP_TO (--nway-up-to) the n-way Split / Concat is not built, and the chain
    route's floor is its multiplying pass and launches only."""
    assert "n-way split+concat" not in bench.floor_models(6, (4, 5000, 8), 1)
    monkeypatch.setattr(bench, "NWAY_UP_TO", 8192)
    models = bench.floor_models(6, (4, 5000, 8), 1)
    assert "n-way split+concat" in models and "chain whole" in models


def test_a_float32_trees_floor_has_its_float64_totals(bench) -> None:  # type: ignore[no-untyped-def]
    """A float32 tree on onnxruntime takes its block totals from x in float64 and scans them
    in float64 (rewriter/lowerings/wide.py), so its floors do too: the totals inside
    ``blocked whole (wide, F)``, in both forms F, are the blocks' products of x in float64
    (numpy's, below), ``cast x`` is x in float64, the upper levels' models take float64;
    the tree routes then cost the cheaper form, the others do not move. Narrow runs (r = 4)
    get the slices' form only, integers none."""
    import numpy as np
    import onnx
    import onnxruntime as ort

    def run(model: onnx.ModelProto, x: np.ndarray) -> list[np.ndarray]:
        session = ort.InferenceSession(
            model.SerializeToString(), providers=["CPUExecutionProvider"]
        )
        return session.run(None, bench.floor_feeds(model, x))

    shape, r = (4, 64, 16), 16  # float32 rows of 4 KiB
    x = np.random.default_rng(0).uniform(0.5, 1.5, shape).astype(np.float32)
    blocks = x.astype(np.float64).reshape(4 * 64 // r, r, 16).prod(axis=1, keepdims=True)
    models = bench.floor_models(onnx.TensorProto.FLOAT, shape, 1)
    wide = [name for name in models if "wide" in name]
    assert sorted(wide) == sorted(
        f"blocked whole ({where}wide, {form})" for where in ("",) for form in ("reduce", "slices")
    )
    for name in wide:
        y, totals = run(models[name], x)
        assert y.shape == x.shape and totals.dtype == np.float64
        np.testing.assert_allclose(totals.reshape(blocks.shape), blocks, rtol=1e-15)
        ops = {node.op_type for node in models[name].graph.node}
        assert ("ReduceProd" in ops) == name.endswith("reduce)"), name
    (cast,) = run(models["cast x"], x)
    assert cast.dtype == np.float64 and np.array_equal(cast, x)
    level = models["blocked level 2"]  # (no third level: m = 4 <= r)
    assert [v.type.tensor_type.elem_type for v in level.graph.input] == [onnx.TensorProto.DOUBLE]
    assert [f.dtype for f in bench.floor_feeds(level, x).values()] == [np.float64]
    upper = bench.floor_models(onnx.TensorProto.FLOAT, (2, 4096, 16), 1)["blocked levels 3+"]
    assert {v.type.tensor_type.elem_type for v in upper.graph.input} == {onnx.TensorProto.DOUBLE}
    narrow = bench.floor_models(onnx.TensorProto.FLOAT, (64, 4096), 1)  # the last axis: r = 4
    assert sorted(name for name in narrow if "wide" in name) == ["blocked whole (wide, slices)"]
    integers = bench.floor_models(onnx.TensorProto.INT32, shape, 1)
    assert not any("wide" in name or name == "cast x" for name in integers)
    level = integers["blocked level 2"].graph.input[0].type.tensor_type.elem_type
    assert level == onnx.TensorProto.INT32
    row = _row(native=100.0, auto=500.0, scan=5000.0, position="last")
    row["us"] |= {"blocked whole": 3500.0, "blocked whole (pieces)": 300.0}
    before = bench.route_floors(row, "last")
    row["us"] |= {
        "cast x": 700.0,
        "blocked whole (wide, reduce)": 4500.0,
        "blocked whole (wide, slices)": 4200.0,
        "blocked whole (pieces, wide, reduce)": 450.0,
        "blocked whole (pieces, wide, slices)": 480.0,
    }
    after = bench.route_floors(row, "last")
    assert before["blocked"] == pytest.approx(4000.0)  # the parts: 1000 + 2 x 1000 + 1000
    assert after["blocked"] == pytest.approx(4700.0)  # the parts and the cast
    row["us"]["blocked whole (wide, reduce)"] = row["us"]["blocked whole (wide, slices)"] = 5000.0
    assert bench.route_floors(row, "last")["blocked"] == pytest.approx(5000.0)  # the whole
    row["us"]["blocked whole (wide, slices)"] = 4800.0  # the cheaper form
    assert bench.route_floors(row, "last")["blocked"] == pytest.approx(4800.0)
    assert (before["pieces"], after["pieces"]) == (pytest.approx(300.0), pytest.approx(450.0))
    assert (after["chain"], after["scan"]) == (before["chain"], before["scan"])


def test_bench_against_commit_checks_a_new_graph_and_lists_its_cells(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """scripts/bench/bench_against_commit.py: a new graph's result must agree with the old one's
    (integers equal; floats the same non-finite elements, the rest within 2^-16 relative)
    before it is timed; exclusive + reverse cells only on the last axis."""
    monkeypatch.syspath_prepend(str(_PATH.parent))
    module = load_script(_PATH.parent / "bench_against_commit.py", "against_under_test")
    old = np.array([1.0, 3.0, np.inf, np.nan], dtype=np.float32)
    assert module.agrees(old.copy(), old)
    assert module.agrees(old * np.float32(1 + 2.0**-20), old)
    assert not module.agrees(old * np.float32(1 + 2.0**-12), old)  # a wrong product
    assert not module.agrees(np.array([1.0, 3.0, 5.0, np.nan], np.float32), old)  # inf lost
    assert not module.agrees(np.array([1, 2], np.int64), np.array([1, 3], np.int64))
    args = module.argparse.Namespace(
        dtypes="float32,int64", totals="1", lengths="64", positions="first,last"
    )
    labels = [cell[0] for cell in module.cells(args)]
    assert labels == [
        "float32 1M 64 first ex0rev0",
        "float32 1M 64 last ex0rev0",
        "float32 1M 64 last ex1rev1",
        "int64 1M 64 first ex0rev0",
        "int64 1M 64 last ex0rev0",
        "int64 1M 64 last ex1rev1",
    ]
