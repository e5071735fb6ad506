"""Does each row of a runtime's ``auto`` table earn its place? Read from a finished run.

For every row of ``auto.TABLES[RUNTIME]`` (its shared last rows excepted) and every cell of
the ``bench_runtime.py`` results files given, this picks the lowering with the table as it is
and with that row left out (:func:`bench_runtime.pick_for`, so refusals count), and where the
two differ, divides the time of the pick without the row by the pick with it, both timed in
the same rounds of that run. A row earns its place where the median of those ratios is 1.25
or more (docs/design.md); a row no cell of the run reaches is listed as such (its evidence is
another run), and a row kept for compile time is judged by its compile file, not here.
Nothing is timed here: the figures are the results files'.

    PYTHONPATH=$PWD .venv/bin/python scripts/bench/ablate_rows.py --runtime tract \\
        scripts/results/bench-runtime-tract-2026-12-05-round29*.json
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_runtime

from rewriter.lowerings import auto

EARNS = 1.25


def pick(cell: dict, runtime: str, rows: tuple[auto.Row, ...]) -> str:
    """``auto``'s pick for ``cell`` with ``rows`` as the runtime's table."""
    table = auto.TABLES[runtime]
    auto.TABLES[runtime] = rows
    try:
        return bench_runtime.pick_for(
            bench_runtime.DTYPES[cell["dtype"]], tuple(cell["shape"]), cell["axis"], runtime
        )
    finally:
        auto.TABLES[runtime] = table


def ablate(runtime: str, cells: list[dict]) -> list[tuple[int, auto.Row, list[tuple[float, str]]]]:
    """Per row: ``(index, row, [(time without / time with, cell), ...])`` over the cells
    where leaving the row out changes the pick (nan where either pick was not timed)."""
    table = auto.TABLES[runtime]
    static = auto.TABLES["static"]
    own = len(table) - (len(static) if table[-len(static) :] == static else 0)
    out = []
    for k in range(own):
        ratios = []
        for cell in cells:
            with_, without = (
                pick(cell, runtime, table),
                pick(cell, runtime, table[:k] + table[k + 1 :]),
            )
            if with_ == without:
                continue
            times = {name: model.get("s") for name, model in cell["models"].items()}
            ratio = (
                times[without] / times[with_]
                if times.get(with_) and times.get(without)
                else float("nan")
            )
            ratios.append((ratio, f"{cell['dtype']} {cell['position']} n = {cell['n']}: {without}"))
        out.append((k, table[k], sorted(ratios)))
    return out


def report(runtime: str, results: list[tuple[int, auto.Row, list[tuple[float, str]]]]) -> str:
    lines = [f"| {runtime} row | lowering | reason | cells | median without / with | earns |"]
    lines.append("|---|---|---|---|---|---|")
    for k, row, ratios in results:
        timed = [r for r, _ in ratios if not math.isnan(r)]
        if not timed:
            lines.append(f"| {k} | {row.lowering} | {row.reason} | 0 | – | not reached here |")
            continue
        median = statistics.median(timed)
        spread = f"{median:.2f} ({timed[0]:.2f}-{timed[-1]:.2f})"
        verdict = "yes" if median >= EARNS else "**no**"
        if row.evidence.startswith("compile"):
            verdict = f"a compile row: {row.evidence}"
        lines.append(
            f"| {k} | {row.lowering} | {row.reason} | {len(ratios)} | {spread} | {verdict} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runtime", required=True, choices=sorted(auto.TABLES))
    parser.add_argument("results", nargs="+", type=Path, help="bench_runtime.py .json files")
    args = parser.parse_args()
    cells = [cell for path in args.results for cell in json.loads(path.read_text())["cells"]]
    print(report(args.runtime, ablate(args.runtime, cells)))


if __name__ == "__main__":
    main()
