"""``auto``'s tables (rewriter/lowerings/auto.csv): every row well-formed and reachable, and
both sides of every threshold written out here, independently of the tables, per target.

The expectations below are the measured rules restated by hand: a row changed in the table
without its expectation changed here fails, and so does a row that can never be picked."""

from __future__ import annotations

import itertools
from pathlib import Path

import onnx
import onnx_ir as ir
import pytest
from onnx import TensorProto

import rewriter
from rewriter.decompose import plan_cumprods
from rewriter.lowerings import LOWERINGS, auto
from rewriter.targets import TARGETS
from tests.helpers import F32, I32, I64, TYPE_NAMES, U32, cumprod_model, refuses_broadly

RESULTS = Path(__file__).resolve().parents[2] / "scripts" / "results"
ROWS = [(table, k, row) for table, rows in auto.TABLES.items() for k, row in enumerate(rows)]


def _row_id(case: tuple[str, int, auto.Row]) -> str:
    table, k, row = case
    return f"{table}-{k}-{row.lowering}"


@pytest.mark.parametrize("case", ROWS, ids=_row_id)
def test_every_row_is_well_formed(case: tuple[str, int, auto.Row]) -> None:
    """A known lowering, a reason, evidence that exists, positions that exist."""
    table, _, row = case
    assert row.lowering in LOWERINGS, row
    assert row.reason.strip(), row
    assert row.at <= set(auto.POSITIONS), row
    if row.evidence:
        assert (RESULTS / row.evidence).is_file(), f"{table}: {row.evidence} is not in git"
    lo, hi = row.n
    assert hi is None or lo <= hi, row


def _facts_for(row: auto.Row) -> list[auto.Facts]:
    """Facts that meet ``row``'s own conditions, at the edges of each."""
    lo, hi = row.n
    lengths = sorted({lo, lo + 1, *((lo + 600, lo + 70000) if hi is None else (hi,))})
    computes = [ir.DataType.FLOAT, ir.DataType.INT32, ir.DataType.INT64, ir.DataType.DOUBLE]
    if row.dtype is not None:
        computes = [row.dtype]
    elif row.itemsize is not None:
        computes = [c for c in computes if c.itemsize == row.itemsize]
    out = []
    for position, n, compute, reverse, pads, static in itertools.product(
        sorted(row.at),
        lengths,
        computes,
        (False, True) if row.direction is None else (row.direction == "reverse",),
        (False, True) if row.pads is None else (row.pads,),
        (False, True) if row.static_dims is None else (row.static_dims,),
    ):
        run_time = position == auto.RUN_TIME_LENGTH
        if run_time and row.n != (0, None):
            continue
        sizes = {row.under_bytes} if row.under_bytes else {0, 1 << 10}  # 0: not static
        if row.over_bytes:
            sizes = {row.over_bytes + 1, max(row.over_bytes + 1, 1 << 26)}
        for (slab, rows), nbytes in itertools.product(
            ((row.slab, row.rows), (row.slab + 5000, row.rows + 100)), sorted(sizes)
        ):
            out.append(
                auto.Facts(
                    position=position,
                    n=None if run_time else n,
                    compute=compute,
                    slab=slab,
                    nbytes=nbytes,
                    reverse=reverse,
                    rows=max(rows, 1),
                    static_dims=static,
                    carry_pads=pads,
                    piece_bytes=row.piece_up_to,
                )
            )
    return out


def _refusable(lowering: str, facts: auto.Facts) -> bool:
    """Whether a target, a missing bound or a build opset can refuse ``lowering`` for
    ``facts`` (then the rows after it are its fall-backs): one that needs an op a target may
    lack, one that needs a bound on a run-time length, a chain past its cap."""
    record = LOWERINGS[lowering]
    run_time = facts.position == auto.RUN_TIME_LENGTH
    cap = min(target.chain_max_length for target in TARGETS.values())
    too_long = lowering == "chain" and (facts.n or 0) > cap
    return (
        bool(record.needs)
        or (record.length != "any" and run_time)
        or too_long
        or (not facts.static_dims and record.flat_view != "always")
    )


@pytest.mark.parametrize("case", ROWS, ids=_row_id)
def test_every_row_can_be_picked(case: tuple[str, int, auto.Row]) -> None:
    """Some case meeting the row's conditions reaches it: every row above that matches it
    names another lowering, one that a target or a missing bound can refuse. A row that no
    case reaches is a rule the code claims and never applies."""
    table, k, row = case
    assert any(_reached(table, k, f) for f in _facts_for(row)), (
        f"{table} row {k} ({row.lowering}: {row.reason}) is never reached"
    )


def _reached(table: str, k: int, facts: auto.Facts) -> bool:
    """Whether row ``k`` of ``table`` matches ``facts`` and every row above that matches them
    names another lowering, one that can be refused."""
    rows = auto.TABLES[table]
    if not rows[k].matches(facts):
        return False
    above = [r for r in rows[:k] if r.matches(facts)]
    return all(r.lowering != rows[k].lowering and _refusable(r.lowering, facts) for r in above)


@pytest.mark.parametrize("case", ROWS, ids=_row_id)
def test_every_row_decides_something(case: tuple[str, int, auto.Row]) -> None:
    """Some case that reaches the row would take another lowering without it: with the rows
    above it refused (and any refusable lowering below), the first row below that matches
    names another lowering, or none is left. A row whose
    every case the rows below give the same lowering is a rule that decides nothing."""
    table, k, row = case
    rows = auto.TABLES[table]

    def decides(facts: auto.Facts) -> bool:
        above = {r.lowering for r in rows[:k] if r.matches(facts)}  # each refused: k reached
        others = {r.lowering for r in rows[k + 1 :] if r.matches(facts)} - above - {row.lowering}
        for extra in itertools.chain.from_iterable(
            itertools.combinations(sorted(others), m) for m in range(len(others) + 1)
        ):
            if not all(_refusable(name, facts) for name in extra):
                continue
            refused = above | set(extra)
            after = next(
                (r for r in rows[k + 1 :] if r.matches(facts) and r.lowering not in refused), None
            )
            if after is None or after.lowering != row.lowering:
                return True
        return False

    assert any(decides(f) for f in _facts_for(row) if _reached(table, k, f)), (
        f"{table} row {k} ({row.lowering}: {row.reason}) decides nothing: the rows below it "
        "give the same lowering wherever it matches"
    )


def test_when_reads_every_condition() -> None:
    """auto.csv's condition words, read into the row fields written here by hand, and the
    words it refuses: unknown, numpy type names that are not the exact types, zero bounds, a
    field set twice."""
    fields = auto.parse_when(
        "first|middle n=17..512 4-byte slab>=1000 bytes>=4M forward no-pads rows>=2 "
        "run-time-dims pieces<=16M"
    )
    assert fields == {
        "at": frozenset({"first", "middle"}),
        "n": (17, 512),
        "itemsize": 4,
        "slab": 1000,
        "over_bytes": (4 << 20) - 1,
        "direction": "forward",
        "pads": False,
        "rows": 2,
        "static_dims": False,
        "piece_up_to": 16 << 20,
    }
    assert auto.parse_when("static|run-time-axis n<=16 float32 bytes<=1M") == {
        "at": frozenset({"first", "last", "middle", "unknown", "run-time axis"}),
        "n": (0, 16),
        "dtype": ir.DataType.FLOAT,
        "under_bytes": 1 << 20,
    }
    assert auto.parse_when("n=256 bytes>4M 8-byte pads static-dims") == {
        "n": (256, 256),
        "over_bytes": 4 << 20,
        "itemsize": 8,
        "pads": True,
        "static_dims": True,
    }
    assert auto.parse_when("run-time-length n>=2 reverse int32") == {
        "at": frozenset({"run-time length"}),
        "n": (2, None),
        "direction": "reverse",
        "dtype": ir.DataType.INT32,
    }
    assert auto.parse_when("last|unknown") == {"at": frozenset({"last", "unknown"})}
    assert auto.parse_when("") == {}
    bad_words = ("n>2", "slab<=4", "bytes>=4G", "middel", "n>=2..4", "n=8..4", "n>=0")
    # numpy reads these as types: float is float64, b int8, bytes a string
    for bad in (*bad_words, "bytes>0", "float", "int", "b", "f", "bytes", "S"):
        with pytest.raises(ValueError, match="cannot read"):
            auto.parse_when(bad)
    for twice in ("n>=2 n<=16", "first last", "forward reverse", "4-byte float32 8-byte"):
        with pytest.raises(ValueError, match="two conditions"):
            auto.parse_when(twice)


@pytest.mark.parametrize("table", list(auto.TABLES))
def test_every_table_matches_every_case(table: str) -> None:
    """Every position, length and type finds a row (the last rows match everything)."""
    for position, n, compute in itertools.product(
        auto.POSITIONS, (None, 1, 2, 17, 65, 513, 70000), (ir.DataType.FLOAT, ir.DataType.INT64)
    ):
        if (n is None) != (position == auto.RUN_TIME_LENGTH):
            continue
        facts = auto.Facts(position, n, compute, 0, 0, False, 1, True, False)
        assert any(row.matches(facts) for row in auto.TABLES[table]), (position, n, compute)


def test_every_target_names_a_table() -> None:
    assert {t.auto for t in TARGETS.values()} <= set(auto.TABLES)


_4, _8 = F32, I64  # a 4-byte and an 8-byte compute type (on every target)

# (elem_type, dims, axis, onnxruntime table's choice, static table's choice): both sides of
# every threshold in rewriter/lowerings/auto.csv, written out here.
AUTO_ROWS = [
    (_4, (3, 1), 1, "chain", "chain"),  # n <= 1
    (_4, (512, 4), 0, "scan", "radix"),  # first axis: n <= 512
    (_4, (513, 4), 0, "carry", "radix"),
    (_8, (512, 4), 0, "scan", "radix"),
    # past 512, scan on slabs of 1000 elements (4-byte) / 400 (8-byte) in more than 4 MiB;
    # carry below, on chunks (cached) from 4 MiB
    (_4, (2048, 999), 0, "cached", "radix"),
    (_4, (2048, 1000), 0, "scan", "radix"),
    (_4, (1048, 1000), 0, "carry", "radix"),  # 4,192,000 bytes
    (_4, (1024, 1024), 0, "cached", "radix"),  # 4 MiB exactly: carry on 2 chunks
    (_4, (1049, 1000), 0, "scan", "radix"),  # 4,196,000 bytes
    (_4, (65536, 1000), 0, "scan", "radix"),  # no bound on n
    (_8, (2048, 399), 0, "cached", "radix"),
    (_8, (2048, 400), 0, "scan", "radix"),
    (_8, (1310, 400), 0, "carry", "radix"),  # 4,192,000 bytes
    (_8, (1311, 400), 0, "scan", "radix"),  # 4,195,200 bytes
    (_4, (2, 16), 1, "scan", "chain"),  # last axis, 4-byte: n < 64
    (_4, (2, 48), 1, "scan", "radix"),  # carry would not pad: scan all the same
    (_4, (2, 63), 1, "scan", "radix"),
    (I32, (2, 64), 1, "carry", "radix"),  # 64: carry pads nothing (r = 4)
    (I32, (32768, 64), 1, "cached", "radix"),  # 8 MiB: carry in tiles
    (_4, (16384, 64), 1, "scan", "radix"),  # float32, 4 MiB: scan
    (_4, (65536, 64), 1, "scan", "radix"),  # float32, 16 MiB: scan all the same
    (I32, (2, 65), 1, "scan", "radix"),  # to 128, scan where carry (r = 4) would pad
    (I32, (2, 80), 1, "scan", "radix"),  # 4 * 4 * 5 pads with r = 4 (16 * 5 would not)
    (I32, (2, 128), 1, "carry", "radix"),  # carry pads nothing
    (I32, (2, 129), 1, "carry", "radix"),  # past 128, carry even padded
    # float32 (float64 carries): scan to 256
    (_4, (2, 64), 1, "scan", "radix"),
    (_4, (2, 128), 1, "scan", "radix"),
    (_4, (2, 256), 1, "scan", "radix"),
    (_4, (2, 257), 1, "carry", "radix"),
    (TensorProto.FLOAT16, (2, 256), 1, "scan", "radix"),  # computed in float32 too
    (_8, (2, 7), 1, "scan", "chain"),  # 8-byte: n < 8
    (_8, (2, 8), 1, "carry", "chain"),
    (_8, (2, 17), 1, "scan", "radix"),  # to 128, scan where carry would pad
    (_8, (2, 64), 1, "carry", "radix"),
    (_8, (2, 100), 1, "scan", "radix"),
    (_8, (2, 80), 1, "scan", "radix"),  # r = 4 pads, r = 16 would not
    (_8, (2, 128), 1, "carry", "radix"),
    (_8, (2, 129), 1, "carry", "radix"),
    (_4, (2, 512, 2), 1, "radix", "radix"),  # middle: n <= 512
    (_4, (2, 513, 2), 1, "carry", "radix"),
    (_8, (2, 512, 2), 1, "chain", "radix"),
    (_8, (2, 513, 2), 1, "carry", "radix"),
    (_4, (2, 512, 4096), 1, "chain", "radix"),  # to 512 the slab's size does not matter
    (_4, (2, 1024, 1024), 1, "chain", "radix"),  # to 1024 on slabs (o * i) of 2048 or more
    (_8, (2, 600, 1024), 1, "chain", "radix"),
    (_4, (3, 1024, 682), 1, "cached", "radix"),  # 2046: carry, in tiles (8 MiB, middle)
    (_4, (2, 1025, 1024), 1, "cached", "radix"),  # past 1024: carry, in rows of 4 MiB
    (_4, ("B", 1000, 4096), 1, "carry", "radix"),  # a slab not known statically
    (_4, ("N", 4), 0, "dynamic", None),  # a length known only at run time
    (_4, ("B", 4), 1, "scan", "chain"),  # a symbolic outer dim does not matter
]
# What the static table takes for a length known only at run time, per target.
RUN_TIME_LENGTH = {"portable": "doubling", "tvm": "doubling"}

# The measured per-runtime tables (openvino, tract, iree, tflite, tinygrad, mnn): both sides
# of each of their thresholds, and what they leave to the static rule (a run-time length).
# mnn: chain to 16, then doubling at every static length.
TARGET_COLUMNS = ("openvino", "tract", "iree", "tflite", "tinygrad", "mnn")
TARGET_ROWS: list[tuple[int, tuple[int | str, ...], int, tuple[str, ...]]] = [
    (_4, (3, 1), 1, ("chain", "chain", "chain", "chain", "chain", "chain")),  # n <= 1
    (_4, (2, 2), 1, ("doubling", "scan", "doubling", "chain", "chain", "chain")),
    (_4, (2, 16), 1, ("doubling", "scan", "doubling", "chain", "chain", "chain")),
    (_4, (2, 17), 1, ("doubling", "scan", "doubling", "doubling", "carry", "doubling")),
    (_4, (2, 64), 1, ("doubling", "scan", "doubling", "doubling", "carry", "doubling")),
    (
        _4,
        (2, 65),
        1,
        ("doubling", "scan", "doubling", "doubling", "carry", "doubling"),
    ),  # radix would pad
    # tract, float32 (float64 carries): the int32 rule to 8192
    (_4, (2, 512), 1, ("doubling", "scan", "doubling", "doubling", "carry", "doubling")),
    (_4, (2, 1024), 1, ("blocked", "carry", "doubling", "doubling", "masked", "doubling")),
    (_4, (2, 8192), 1, ("blocked", "carry", "doubling", "doubling", "masked", "doubling")),
    (
        _4,
        (2, 8193),
        1,
        ("doubling", "radix", "doubling", "doubling", "carry", "doubling"),
    ),  # padded or not
    (I32, (2, 17), 1, ("doubling", "scan", "doubling", "doubling", "carry", "doubling")),
    (I32, (2, 64), 1, ("doubling", "scan", "doubling", "doubling", "carry", "doubling")),
    (I32, (2, 65), 1, ("doubling", "scan", "doubling", "doubling", "carry", "doubling")),
    (I32, (2, 512), 1, ("doubling", "scan", "doubling", "doubling", "carry", "doubling")),
    (
        I32,
        (2, 1000),
        1,
        ("doubling", "scan", "doubling", "doubling", "carry", "doubling"),
    ),  # carry pads
    (
        I32,
        (2, 1024),
        1,
        ("doubling", "carry", "doubling", "doubling", "masked", "doubling"),
    ),  # from 1024
    (I32, (2, 3000), 1, ("doubling", "scan", "doubling", "doubling", "masked", "doubling")),
    (I32, (2, 8192), 1, ("doubling", "carry", "doubling", "doubling", "masked", "doubling")),
    (I32, (2, 8193), 1, ("doubling", "carry", "doubling", "doubling", "carry", "doubling")),
    (_8, (2, 16), 1, ("doubling", "scan", "chain", "chain", "chain", "chain")),
    (_8, (2, 64), 1, ("doubling", "scan", "radix", "doubling", "carry", "doubling")),
    (_8, (2, 65), 1, ("doubling", "scan", "radix", "doubling", "carry", "doubling")),
    # iree: a single row (outer 1, or not known) of 8-byte chain only to 32
    (_8, (1, 32), 1, ("doubling", "scan", "chain", "doubling", "carry", "doubling")),
    (_8, (1, 33), 1, ("doubling", "scan", "radix", "doubling", "carry", "doubling")),
    (_8, (64,), 0, ("doubling", "scan", "radix", "doubling", "carry", "doubling")),
    (_8, ("B", 64), 1, ("doubling", "scan", "radix", "doubling", "carry", "doubling")),
    (
        _8,
        (2, 512),
        1,
        ("doubling", "scan", "radix", "doubling", "carry", "doubling"),
    ),  # tract: Scan below 1024 on the last axis
    (
        _8,
        (2, 1000),
        1,
        ("doubling", "scan", "radix", "doubling", "carry", "doubling"),
    ),  # carry would pad
    (_8, (2, 8192), 1, ("doubling", "carry", "radix", "doubling", "carry", "doubling")),
    (_8, (2, 8193), 1, ("doubling", "carry", "radix", "doubling", "carry", "doubling")),
    (_4, ("B", 65), 1, ("doubling", "scan", "doubling", "doubling", "carry", "doubling")),
    (_4, ("B", 512), 1, ("doubling", "scan", "doubling", "doubling", "carry", "doubling")),
    (_4, (2, 4), 0, ("chain", "scan", "chain", "chain", "chain", "chain")),
    (_4, (17, 4), 0, ("chain", "scan", "chain", "doubling", "carry", "doubling")),
    (_8, (64, 4), 0, ("chain", "scan", "chain", "doubling", "carry", "doubling")),
    (_8, (65, 4), 0, ("chain", "scan", "chain", "doubling", "carry", "doubling")),
    (
        _8,
        (256, 4),
        0,
        ("chain", "scan", "chain", "doubling", "carry", "doubling"),
    ),  # iree: chain to 256
    (_8, (257, 4), 0, ("chain", "scan", "radix", "doubling", "carry", "doubling")),  # then radix
    (
        _4,
        (512, 4),
        0,
        ("blocked", "scan", "doubling", "doubling", "carry", "doubling"),
    ),  # ov: blocked from 256 (float32), chain below
    # tract, float32: carry past 512, but Scan to 1024 where carry's levels pad
    (_4, (513, 4), 0, ("blocked", "scan", "doubling", "doubling", "carry", "doubling")),
    (
        _4,
        (768, 4),
        0,
        ("blocked", "carry", "doubling", "doubling", "carry", "doubling"),
    ),  # 16 * 48: no pad
    (_4, (1000, 4), 0, ("blocked", "scan", "doubling", "doubling", "carry", "doubling")),
    (_4, (1024, 4), 0, ("blocked", "carry", "doubling", "doubling", "masked", "doubling")),
    (_4, (1025, 4), 0, ("radix", "carry", "doubling", "doubling", "masked", "doubling")),
    (_4, (2, 600, 2), 1, ("blocked", "scan", "doubling", "doubling", "carry", "doubling")),
    (_4, (2, 1024, 2), 1, ("blocked", "carry", "doubling", "doubling", "masked", "doubling")),
    # tract: the other types scan to 1024
    (_8, (1024, 4), 0, ("radix", "scan", "radix", "doubling", "carry", "doubling")),
    (_8, (1025, 4), 0, ("radix", "radix", "radix", "doubling", "carry", "doubling")),
    (I32, (1025, 4), 0, ("carry", "radix", "doubling", "doubling", "masked", "doubling")),
    # tract, first axis: Scan at any n on slabs of 1500 elements (float32) / 900 (others)
    (_4, (2000, 1499), 0, ("radix", "carry", "carry", "doubling", "carry", "doubling")),
    (_4, (2000, 1500), 0, ("radix", "scan", "carry", "doubling", "carry", "doubling")),
    (_8, (2000, 899), 0, ("radix", "radix", "radix", "doubling", "carry", "doubling")),
    (_8, (2000, 900), 0, ("radix", "scan", "radix", "doubling", "carry", "doubling")),
    (I32, (9000, 900), 0, ("radix", "scan", "carry", "doubling", "carry", "doubling")),
    (
        _8,
        (2, 2000, 900),
        1,
        ("radix", "radix", "radix", "doubling", "carry", "doubling"),
    ),  # not middle
    (_4, (2, 16, 2), 1, ("chain", "scan", "chain", "chain", "chain", "chain")),  # middle
    (_4, (2, 17, 2), 1, ("chain", "scan", "chain", "doubling", "carry", "doubling")),
    (_8, (2, 64, 2), 1, ("chain", "scan", "chain", "doubling", "carry", "doubling")),
    (_8, (2, 65, 2), 1, ("chain", "scan", "chain", "doubling", "carry", "doubling")),
    (_4, (2, 256, 2), 1, ("blocked", "scan", "doubling", "doubling", "masked", "doubling")),
    (_4, (2, 257, 2), 1, ("blocked", "scan", "doubling", "doubling", "carry", "doubling")),
    (_4, (2, 512, 2), 1, ("blocked", "scan", "doubling", "doubling", "carry", "doubling")),
    (_4, (2, 513, 2), 1, ("blocked", "scan", "doubling", "doubling", "carry", "doubling")),
    (_8, (2, 1025, 2), 1, ("radix", "radix", "radix", "doubling", "carry", "doubling")),
    # a length known only at run time (max_length 64): tinygrad pads carry to the bound
    (_4, ("N", 4), 0, ("scan", "scan", "doubling", "doubling", "carry", "doubling")),
    (_8, (2, "N"), 1, ("scan", "scan", "doubling", "doubling", "carry", "doubling")),
]


def _planned(model: onnx.ModelProto, target: str, **options: object) -> str:
    (plan,) = plan_cumprods(
        ir.serde.deserialize_model(model), "auto", target=TARGETS[target], **options
    )
    return plan.lowering.name


@pytest.mark.parametrize("target", [t for t in TARGETS if not refuses_broadly(t)])
def test_auto_picks_each_row_of_its_table(target: str) -> None:
    """Both sides of every threshold (tvm's and ncnn's refusals of whole classes of models:
    tests/test_runtimes_new.py; their table is portable's)."""
    table = TARGETS[target].auto
    rows = [
        (e, d, a, ort, by_static or RUN_TIME_LENGTH.get(target))
        for e, d, a, ort, by_static in AUTO_ROWS
    ]
    if table in TARGET_COLUMNS:
        column = TARGET_COLUMNS.index(target)
        rows = [(e, d, a, None, want[column]) for e, d, a, want in TARGET_ROWS]
    for elem, dims, axis, by_ort, by_other in rows:
        want = by_ort if table == "onnxruntime" else by_other
        model = cumprod_model(elem, dims, axis)
        if want is not None and TARGETS[target].wrong_reason(want) is not None:  # ncnn
            with pytest.raises(rewriter.StrategyError, match="fails to load on ncnn"):
                _planned(model, target, max_length=64)
            continue
        got = _planned(model, target, max_length=64)
        assert got == want, (target, TYPE_NAMES[elem], dims, axis)


@pytest.mark.parametrize(
    ("dims", "axis", "want"),
    [((3, 1), 1, "chain"), ((3, 16), 1, "chain"), ((3, 17), 1, "chain"), ((2, 1024), 1, "chain"),
     ((1024, 3), 0, "chain"), ((2, 1025), 1, None), ((1025, 2), 0, None)],
)  # fmt: skip
def test_ncnn_takes_chain_to_its_limit(dims: tuple[int, ...], axis: int, want: str | None) -> None:
    """ncnn's table: chain at every static length to chain's 1024 (ncnn-lowerings-2026-12-06:
    the one lowering right on every shape); past it every lowering is refused, by name."""
    model = cumprod_model(F32, dims, axis)
    if want is None:
        with pytest.raises(rewriter.StrategyError, match="ncnn"):
            _planned(model, "ncnn")
    else:
        assert _planned(model, "ncnn") == want


def test_every_target_has_its_rows() -> None:
    """A new target, or a new table, needs its expectations written out above."""
    tables = {t.auto for t in TARGETS.values()}
    assert tables == set(auto.TABLES)
    static = {name for name, t in TARGETS.items() if t.auto == "static"}
    assert set(RUN_TIME_LENGTH) == static
    assert set(TARGET_COLUMNS) == tables - {"onnxruntime", "static", "ncnn"}  # ncnn: below
    assert all(len(want) == len(TARGET_COLUMNS) for *_, want in TARGET_ROWS)


@pytest.mark.parametrize(
    ("elem", "slab", "want"),
    [(_4, 1999, "cached"), (_4, 2000, "scan"), (_8, 799, "cached"), (_8, 800, "scan")],
)
def test_auto_first_axis_in_reverse_scans_on_twice_the_slab(
    elem: int, slab: int, want: str
) -> None:
    """onnxruntime's Scan steps cost more in reverse: twice the slab before it beats carry
    (here on chunks, ``cached``: a first axis of 4 MiB or more)."""
    model = cumprod_model(elem, (2048, slab), 0, reverse=1)
    assert _planned(model, "onnxruntime") == want
    assert _planned(cumprod_model(elem, (2048, slab), 0), "onnxruntime") == "scan"  # forward


def test_auto_uint32_is_8_byte_on_onnxruntime_and_4_byte_on_spec() -> None:
    """uint32 is multiplied as int64 on onnxruntime: the 8-byte column."""
    model = cumprod_model(U32, (2, 48), 1)
    assert _planned(model, "onnxruntime") == "carry"
    assert _planned(model, "spec") == "scan"


def test_auto_without_a_bound_where_only_doubling_fits_is_refused() -> None:
    model = cumprod_model(F32, ("N", 4), 0)
    with pytest.raises(rewriter.StrategyError, match="max_length"):
        rewriter.decompose_cumprod(model, target="portable")


@pytest.mark.parametrize(
    ("target", "elem", "dims", "axis", "want"),
    [
        # onnxruntime: a middle axis under 1 MiB (4-byte) takes radix from n = 17: a chain's
        # session costs more than its run there
        ("onnxruntime", F32, (2, 16, 2), 1, "chain"),
        ("onnxruntime", F32, (2, 17, 2), 1, "radix"),
        ("onnxruntime", F32, (64, 256, 16), 1, "radix"),  # 1 MiB exactly
        ("onnxruntime", F32, (65, 256, 16), 1, "chain"),  # past 1 MiB
        ("onnxruntime", I64, (16, 256, 16), 1, "chain"),  # 8-byte: compile not measured
        # IREE, 4-byte: chain to 32 (middle) / 64 (first), then doubling; 8-byte as before
        ("iree", F32, (2, 32, 2), 1, "chain"),
        ("iree", F32, (2, 33, 2), 1, "doubling"),
        ("iree", I32, (64, 4), 0, "chain"),
        ("iree", I32, (65, 4), 0, "doubling"),
        ("iree", I64, (2, 256, 2), 1, "chain"),
        ("iree", I64, (2, 257, 2), 1, "radix"),
        # OpenVINO, int32 first and middle axes from n = 256: carry (chain / radix compiled
        # 2.0-4.6x CumSum's time)
        ("openvino", I32, (255, 4), 0, "chain"),
        ("openvino", I32, (256, 4), 0, "carry"),
        ("openvino", I32, (2, 256, 2), 1, "carry"),
        # OpenVINO, float32 first and middle axes, n = 256-1024, up to 1 MiB: blocked (the
        # trees compiled 2.2-4.2x CumSum's time)
        ("openvino", F32, (255, 4), 0, "chain"),
        ("openvino", F32, (256, 4), 0, "blocked"),
        ("openvino", F32, (2, 1024, 2), 1, "blocked"),
        ("openvino", F32, (1025, 4), 0, "radix"),
        ("openvino", F32, (1024, 256), 0, "blocked"),  # 1 MiB exactly
        ("openvino", F32, (1024, 257), 0, "radix"),  # past 1 MiB
        # IREE, 4-byte first and middle axes past 1 MiB: run time first (chain to 256, carry)
        ("iree", F32, (1024, 256), 0, "doubling"),  # 1 MiB exactly
        ("iree", F32, (1024, 257), 0, "carry"),
        ("iree", I32, (2, 1024, 128), 1, "doubling"),
        ("iree", I32, (2, 1024, 129), 1, "carry"),
        ("iree", F32, (256, 1025), 0, "chain"),
        ("iree", F32, (2, 256, 513), 1, "chain"),
        # OpenVINO, int32 first and middle axes past 1 MiB: chain to 512, then radix
        ("openvino", I32, (256, 1024), 0, "carry"),  # 1 MiB exactly
        ("openvino", I32, (256, 1025), 0, "chain"),
        ("openvino", I32, (1024, 257), 0, "radix"),
        # OpenVINO, float32 last axis, n = 1024-8192, up to 1 MiB: blocked (doubling
        # compiled 1.93-2.51x CumSum's time, blocked 1.56-1.72x)
        ("openvino", F32, (2, 1023), 1, "doubling"),
        ("openvino", F32, (2, 1024), 1, "blocked"),
        ("openvino", F32, (8, 8192), 1, "blocked"),
        ("openvino", F32, (2, 8193), 1, "doubling"),
        ("openvino", F32, (256, 1024), 1, "blocked"),  # 1 MiB exactly
        ("openvino", F32, (257, 1024), 1, "doubling"),  # past 1 MiB
        ("openvino", I32, (2, 1024), 1, "doubling"),
        ("openvino", F32, (2, 1024, 1), 1, "blocked"),  # a trailing 1: the last axis
        # tinygrad: masked on every static axis, n = 1024-8192 (tests/lowerings/test_masked.py)
        # tinygrad, middle axis n = 256: masked as one tile (carry compiled 1.9-2.2x)
        ("tinygrad", F32, (2, 255, 2), 1, "carry"),
        ("tinygrad", F32, (2, 256, 2), 1, "masked"),
        ("tinygrad", I32, (2, 256, 2), 1, "masked"),
        ("tinygrad", F32, (2, 257, 2), 1, "carry"),
        ("tinygrad", F32, (256, 4), 0, "carry"),  # first axis: not measured
        ("tinygrad", F32, (2, 1023), 1, "carry"),
        ("tinygrad", F32, (2, 1024), 1, "masked"),
        ("tinygrad", I32, (8192, 4), 0, "masked"),
        ("tinygrad", F32, (2, 8193), 1, "carry"),
        ("tinygrad", F32, (2, 1023, 2), 1, "carry"),  # middle axis: masked from 1024
        ("tinygrad", F32, (2, 1024, 2), 1, "masked"),
        ("tinygrad", I32, (2, 8193, 2), 1, "carry"),
    ],
)
def test_auto_weighs_compile_time_where_it_was_measured(
    target: str, elem: int, dims: tuple[int, ...], axis: int, want: str
) -> None:
    """scripts/results/compile-2026-12-06-summary.md, compile-tinygrad-masked-2026-12-06.md,
    compile-tinygrad-2026-12-06-middle.md, compile-tinygrad-2026-12-06-middle256-quiet-summary.md,
    compile-openvino-float32-2026-12-06-quiet-summary.md, compile-2026-12-07-current-picks.md:
    load / compile + first run against the CumSum model of the same shape."""
    assert _planned(cumprod_model(elem, dims, axis), target) == want


def test_refusal_answers_why_not_for_a_lowering_and_for_auto() -> None:
    """``rewriter.lowerings.refusal``: None where the lowering serves the node, else the
    reason; auto is refused only where every matching row is."""
    from rewriter.lowerings import refusal

    (plan,) = plan_cumprods(ir.serde.deserialize_model(cumprod_model(F32, ("N", 4), 0)))
    site = plan.site
    assert refusal(site, "scan", TARGETS["onnxruntime"]) is None
    assert "needs Loop, which tract lacks" in (refusal(site, "loop", TARGETS["tract"]) or "")
    assert "max_length" in (refusal(site, "auto", TARGETS["portable"]) or "")
    assert refusal(site, "auto", TARGETS["tract"]) is None  # scan takes a run-time length


@pytest.mark.parametrize(
    ("dims", "axis", "want"),
    [
        ((65537, 64), 1, "carry"),  # 16 MiB, 65537 rows (a prime): no tile of rows divides them
        ((3, 65537, 64), 1, "carry"),
        ((65537, 3, 64), 0, "carry"),
        ((65536, 64), 1, "cached"),  # the same size in tiles of rows: cached
    ],
)
def test_cached_rows_need_x_cut_into_pieces(dims: tuple[int, ...], axis: int, want: str) -> None:
    """onnxruntime's cached rows match only where x cuts into pieces (of at most 16 MiB):
    where no tile of rows or chunk divides x, the next row picks (int32: float32 short last
    axes scan before any cached row)."""
    assert _planned(cumprod_model(I32, dims, axis), "onnxruntime") == want
