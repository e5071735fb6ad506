"""scripts/bench/report.py's figures agree with what the benchmarks wrote beside their JSON:
the grid's summary line (bench.py's own floors_summary and verdict counts, in the .md) and
each per-runtime table's auto column (bench_runtime.py's .md)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.helpers import load_script

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def report():  # type: ignore[no-untyped-def]
    return load_script(ROOT / "scripts/bench/report.py", "report")


def test_the_grid_figures_are_benchs_own(report) -> None:  # type: ignore[no-untyped-def]
    cells = report._load(report.SOURCES["grid"])
    sessions = report._load(report.SOURCES["sessions"])
    text = "\n".join(report.grid_section(cells, sessions))
    written = (report.RESULTS / report.SOURCES["grid"].replace(".json", ".md")).read_text()
    median, worst, within2, within4 = re.search(
        r"^auto ([\d.]+)× / ([\d.]+)× \((\d+) within 2×, (\d+) within 4×\)", written, re.M
    ).groups()
    meets, explained = re.search(r"^(\d+) meets 4×, (\d+) explained", written, re.M).groups()
    assert f"**{median}× / {worst}×**" in text
    assert f"{within2} cells within 2×, {within4} within 4×" in text
    assert f"{meets} cells meet 4×, {explained} are explained" in text


@pytest.mark.parametrize("runtime", ["openvino", "tract", "iree", "tinygrad"])
def test_each_runtimes_worst_cell_is_in_its_table(report, runtime) -> None:  # type: ignore[no-untyped-def]
    cells = report.runtime_cells(runtime)
    row = next(
        line
        for line in report.runtime_section({runtime: cells})
        if line.startswith(f"| {report.RUNTIME_TITLES[runtime]} |")
    )
    worst = re.search(r"`(\w+)` ([\d.]+)×", row.split("|")[6]).groups()
    tables = "".join(
        (report.RESULTS / f.replace(".json", ".md")).read_text()
        for f in report.SOURCES["runtimes"][runtime]
    )
    autos = re.findall(r"\| (\w+) ([\d.]+) \| [\d.]+ \|\s*$", tables, re.M)  # the auto column
    assert autos and max(autos, key=lambda a: float(a[1])) == worst
