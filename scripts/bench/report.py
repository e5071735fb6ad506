"""Write docs/performance.md and its plots from the results files, and nothing else.

    .venv/bin/python scripts/bench/report.py             # the sources named in SOURCES
    .venv/bin/python scripts/bench/report.py --check     # exit 1 if the page is not current

Needs matplotlib (the ``dev`` extra: ``pip install -e ".[dev]"``). The page's figures are
computed here from the JSON the benchmarks write (``bench.py --floors``, ``bench.py``,
``bench_runtime.py``); after a new run, point SOURCES at its files and run this again. The
plots are PNG files in docs/performance/, beside the page.
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import statistics
import sys
import textwrap
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "scripts" / "results"
PAGE = ROOT / "docs" / "performance.md"
IMAGES = ROOT / "docs" / "performance"

# The newest whole-grid run on onnxruntime and the newest run per runtime.
SOURCES = {
    "grid": "floors-2026-12-05-round29-combined.json",
    "sessions": "bench-2026-12-05-round29.json",
    "runtimes": {
        name: [
            f"bench-runtime-{name}-2026-12-05-round29.json",
            f"bench-runtime-{name}-2026-12-05-round29-middle.json",
        ]
        for name in ("openvino", "tract", "iree", "tinygrad")
    },
    "compile": "compile-2026-12-07-current-picks.md",
    "against_runtimes": "against-runtimes-2026-12-07.md",
    "compile_study": "compile-2026-12-06-summary.md",
    "compile_ort": "compile-onnxruntime-2026-12-06-9reps.md",
    "compile_tinygrad_middle": "compile-tinygrad-2026-12-06-middle256-quiet-summary.md",
    "compile_openvino": "compile-openvino-float32-2026-12-06-quiet-summary.md",
}
POSITIONS = ("first", "middle", "last")
DTYPES = ("float32", "float64", "int32", "int64")
GOAL_MEDIAN, GOAL_WORST = 2.0, 4.0
RUNTIME_TITLES = {"openvino": "OpenVINO", "tract": "tract", "iree": "IREE", "tinygrad": "tinygrad"}


def _load(name: str) -> object:
    return json.loads((RESULTS / name).read_text())


def _x(value: float) -> str:
    return f"{value:.2f}×"


def _median_worst(values: Iterable[float]) -> str:
    values = list(values)
    return f"{_x(statistics.median(values))} / {_x(max(values))}" if values else "–"


def _size(total: int) -> str:
    return f"{total >> 20}M"


def verdict(cell: dict) -> str:
    """bench.py's floor_verdict: meets 4x, or explained by a floor of 4x native or more."""
    if cell["us"]["auto"] / cell["native_us"] <= GOAL_WORST:
        return "meets"
    return "explained" if cell["floor_us"] / cell["native_us"] >= GOAL_WORST else "not explained"


def grid_section(cells: list[dict], sessions: dict) -> list[str]:
    ratio = {id(c): c["us"]["auto"] / c["native_us"] for c in cells}
    floor = {id(c): c["floor_us"] / c["native_us"] for c in cells}
    verdicts = [verdict(c) for c in cells]
    within2 = sum(r <= GOAL_MEDIAN for r in ratio.values())
    floors2 = sum(f < GOAL_MEDIAN for f in floor.values())
    worst = max(cells, key=lambda c: ratio[id(c)])
    lines = [
        "## onnxruntime: `auto` against the native CumProd",
        "",
        f"Source: `scripts/results/{SOURCES['grid']}` (`bench.py --floors`: "
        f"{len(cells)} cells, {', '.join(DTYPES)}; 1M and 4M elements; n = "
        f"{', '.join(str(n) for n in sorted({c['n'] for c in cells}))}; first, middle and "
        "last axis; one intra-op thread, the calling thread's CPU time, medians of "
        "interleaved rounds).",
        "",
        f"- `auto` / native: **{_median_worst(ratio.values())}** (median / worst); "
        f"{within2} cells within 2×, {sum(r <= GOAL_WORST for r in ratio.values())} "
        "within 4×.",
        f"- The goal (2× median, 4× worst): {verdicts.count('meets')} cells meet 4×, "
        f"{verdicts.count('explained')} are explained by a measured floor of 4× or more, "
        f"{verdicts.count('not explained')} are not. The median goal needs "
        f"{(len(cells) + 1) // 2} cells within 2×; {floors2} floors are below 2×.",
        f"- The worst cell: {worst['dtype']} {_size(worst['total'])} {worst['position']} "
        f"n = {worst['n']}, `{worst['picks']['auto']}` at {_x(ratio[id(worst)])} over a "
        f"floor of {_x(floor[id(worst)])}.",
        "",
        "A cell's **floor** is the cheapest route's least cost (the unrolled chain's slices "
        "and multiplying pass, the blocked levels, the Scan's steps and Transposes), each part "
        "timed at the cell's size in the same rounds as native (`scripts/bench/bench.py "
        "--floors`). Native CumProd is one pass over memory; every lowering made of older ops "
        "adds data movement or one Scan step per position.",
        "",
        "`auto` / native, median / worst of 10 cells (floors' range in brackets):",
        "",
        "| type | " + " | ".join(f"{p} axis" for p in POSITIONS) + " |",
        "|---|" + "---|" * len(POSITIONS),
    ]
    for dtype in DTYPES:
        row = []
        for position in POSITIONS:
            group = [c for c in cells if c["dtype"] == dtype and c["position"] == position]
            fl = [floor[id(c)] for c in group]
            row.append(
                f"{_median_worst(ratio[id(c)] for c in group)} ({min(fl):.2f}-{max(fl):.2f}×)"
            )
        lines.append(f"| {dtype} | " + " | ".join(row) + " |")
    lines += [
        "",
        "![auto against native CumProd on onnxruntime](performance/onnxruntime-run-time.png)",
        "",
    ]
    plain = [c for c in sessions["cells"] if not c["exclusive"] and not c["reverse"]]
    create = [c["info"]["auto"]["create_ms"] / c["info"]["native"]["create_ms"] for c in plain]
    nodes = [c["info"]["auto"]["nodes"] for c in plain]
    longest = [c for c in plain if c["n"] == max(p["n"] for p in plain)]
    lines += [
        f"Session creation (`scripts/results/{SOURCES['sessions']}`, the same grid): "
        f"`auto`'s session takes {_median_worst(create)} native's to create; a lowered "
        f"CumProd has {min(nodes)}-{max(nodes)} nodes "
        f"({min(c['info']['auto']['nodes'] for c in longest)}-"
        f"{max(c['info']['auto']['nodes'] for c in longest)} at n = {longest[0]['n']}), "
        f"and its session takes {min(c['info']['auto']['create_ms'] for c in plain):.1f}-"
        f"{max(c['info']['auto']['create_ms'] for c in plain):.1f} ms to create.",
        "",
        "![session creation on onnxruntime](performance/onnxruntime-session.png)",
        "",
    ]
    return lines


def first_result(cell: dict, model: str) -> float:
    """Seconds from the model file to its first result: load / compile, then one run. IREE's
    files record the compile in ``load_s`` and its first run less the compile (negative):
    there the figure is ``load_s`` alone."""
    timing = cell["models"][model]
    return float(timing["load_s"] + max(timing["first_run_s"], 0.0))


def runtime_cells(name: str) -> list[dict]:
    return [cell for file in SOURCES["runtimes"][name] for cell in _load(file)["cells"]]


def runtime_section(runs: dict[str, list[dict]]) -> list[str]:
    lines = [
        "## Other runtimes: `auto` against the runtime's own CumSum",
        "",
        "None of these runs CumProd, so the yardstick is CumSum on the same shape and axis "
        "(`scripts/bench/bench_runtime.py --runtime NAME`: 2^20 elements, n = 8 … 4096, one "
        "thread, wall clock, medians of interleaved rounds; every result checked exact before "
        "it is timed). The first result is the time to load / compile the model and run it once "
        "(tinygrad compiles on the first run; IREE's figure is its compile and load).",
        "",
        "| runtime | version | types | first and last axes | middle axis | worst cell "
        "| first result, `auto` / CumSum |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, cells in runs.items():
        version = re.sub(r"-\d+-\S+", "", _load(SOURCES["runtimes"][name][0])["version"])
        outer = [c["auto_ratio"] for c in cells if c["position"] != "middle"]
        middle = [c["auto_ratio"] for c in cells if c["position"] == "middle"]
        worst = max(cells, key=lambda c: c["auto_ratio"])
        compile_ratio = [first_result(c, c["auto"]) / first_result(c, "cumsum") for c in cells]
        slowest = max(first_result(c, c["auto"]) for c in cells)
        types = ", ".join(t for t in DTYPES if any(c["dtype"] == t for c in cells))
        lines.append(
            f"| {RUNTIME_TITLES[name]} | {version} | {types} | {_median_worst(outer)} "
            f"| {_median_worst(middle)} | {worst['dtype']} {worst['position']} "
            f"n = {worst['n']}, `{worst['auto']}` {_x(worst['auto_ratio'])} "
            f"| {_median_worst(compile_ratio)} (`auto` at most {slowest:.2f} s) |"
        )
    lines += [
        "",
        "Ratios below 1 are the runtime's slow CumSum, not a fast CumProd. One run per "
        "runtime: a cell's ratio moves by tens of percent between runs. TFLite and `portable` "
        "are not timed.",
        "",
        "Against the graphs of b8eeb4e (before `auto` became one table per target), timed side "
        "by side on each runtime at 2^20 elements (`bench_runtime.py --before b8eeb4e`, "
        f"`scripts/results/{SOURCES['against_runtimes']}`): the cells whose graphs changed took "
        "0.985× at the median on OpenVINO (at most 1.165×), 1.038× on tract (1.308×), 1.059× "
        "on IREE (1.339×) and 0.996× on tinygrad (1.089×). The compile-time rows (next "
        "section) apply up to 1 MiB; past it the run-time picks hold.",
        "",
    ]
    for name in runs:
        lines += [
            f"![{RUNTIME_TITLES[name]}: auto against CumSum](performance/{name}.png)",
            "",
        ]
    lines.append(
        "Sources: "
        + ", ".join(
            f"`scripts/results/{f}`" for files in SOURCES["runtimes"].values() for f in files
        )
        + "."
    )
    return lines


def _axes_by_position(figure, rows: int = 1):  # type: ignore[no-untyped-def]
    return figure.subplots(rows, len(POSITIONS), sharex=True, sharey="row", squeeze=False)


def _plain_ticks(axes, plt) -> None:  # type: ignore[no-untyped-def]
    """Log axes labelled 0.5, 1, 2, 4 rather than 4x10^0."""
    ticker = plt.matplotlib.ticker
    for ax in axes:
        ax.yaxis.set_major_locator(ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(ticker.FormatStrFormatter("%g"))
        ax.yaxis.set_minor_formatter(ticker.NullFormatter())


def plot_grid(cells: list[dict], sessions: dict, plt) -> None:  # type: ignore[no-untyped-def]
    figure = plt.figure(figsize=(13, 4))
    axes = _axes_by_position(figure)[0]
    for ax, position in zip(axes, POSITIONS):
        for i, dtype in enumerate(DTYPES):
            for total, style in ((1 << 20, "-"), (1 << 22, "--")):
                group = sorted(
                    (
                        c
                        for c in cells
                        if (c["dtype"], c["position"], c["total"]) == (dtype, position, total)
                    ),
                    key=lambda c: c["n"],
                )
                ax.plot(
                    [c["n"] for c in group],
                    [c["us"]["auto"] / c["native_us"] for c in group],
                    style,
                    marker="o",
                    color=f"C{i}",
                    label=f"{dtype} {_size(total)}",
                )
        for goal in (GOAL_MEDIAN, GOAL_WORST):
            ax.axhline(goal, color="grey", linewidth=0.8, linestyle=":")
        ax.set(xscale="log", yscale="log", title=f"{position} axis", xlabel="n (scanned length)")
    axes[0].set_ylabel("auto time / native CumProd time")
    axes[-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1))
    _plain_ticks(axes, plt)
    figure.suptitle("onnxruntime: auto against native CumProd (dotted: 2x and 4x)")
    figure.tight_layout()
    figure.savefig(IMAGES / "onnxruntime-run-time.png", dpi=80)
    plt.close(figure)

    plain = [c for c in sessions["cells"] if not c["exclusive"] and not c["reverse"]]
    figure = plt.figure(figsize=(13, 4))
    axes = _axes_by_position(figure)[0]
    for ax, position in zip(axes, POSITIONS):
        for i, dtype in enumerate(DTYPES):
            group = sorted(
                (
                    c
                    for c in plain
                    if (c["dtype"], c["position"], c["total"]) == (dtype, position, 1 << 20)
                ),
                key=lambda c: c["n"],
            )
            ax.plot(
                [c["n"] for c in group],
                [c["info"]["auto"]["create_ms"] for c in group],
                "-",
                marker="o",
                color=f"C{i}",
                label=f"auto, {dtype}",
            )
            ax.plot(
                [c["n"] for c in group],
                [c["info"]["native"]["create_ms"] for c in group],
                ":",
                color=f"C{i}",
                label=f"native, {dtype}",
            )
        ax.set(xscale="log", yscale="log", title=f"{position} axis", xlabel="n (scanned length)")
    axes[0].set_ylabel("session creation, ms (1M elements)")
    axes[-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1))
    _plain_ticks(axes, plt)
    figure.suptitle("onnxruntime: session creation, auto against native CumProd")
    figure.tight_layout()
    figure.savefig(IMAGES / "onnxruntime-session.png", dpi=80)
    plt.close(figure)


def plot_runtime(name: str, cells: list[dict], plt) -> None:  # type: ignore[no-untyped-def]
    figure = plt.figure(figsize=(13, 7))
    grid = _axes_by_position(figure, rows=2)
    for column, position in enumerate(POSITIONS):
        run_ax, compile_ax = grid[0][column], grid[1][column]
        for i, dtype in enumerate(DTYPES):
            group = sorted(
                (c for c in cells if (c["dtype"], c["position"]) == (dtype, position)),
                key=lambda c: c["n"],
            )
            if not group:
                continue
            ns = [c["n"] for c in group]
            run_ax.plot(
                ns, [c["auto_ratio"] for c in group], "-", marker="o", color=f"C{i}", label=dtype
            )
            compile_ax.plot(
                ns,
                [first_result(c, c["auto"]) for c in group],
                "-",
                marker="o",
                color=f"C{i}",
                label=f"auto, {dtype}",
            )
            compile_ax.plot(
                ns,
                [first_result(c, "cumsum") for c in group],
                ":",
                color=f"C{i}",
                label=f"CumSum, {dtype}",
            )
        run_ax.axhline(1, color="grey", linewidth=0.8, linestyle=":")
        run_ax.set(xscale="log", yscale="log", title=f"{position} axis")
        compile_ax.set(xscale="log", yscale="log", xlabel="n (scanned length)")
    grid[0][0].set_ylabel("auto time / CumSum time")
    grid[1][0].set_ylabel("load / compile + first run, s")
    grid[0][-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1))
    grid[1][-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1))
    _plain_ticks([*grid[0], *grid[1]], plt)
    figure.suptitle(f"{RUNTIME_TITLES[name]}: auto against the runtime's CumSum (2^20 elements)")
    figure.tight_layout()
    figure.savefig(IMAGES / f"{name}.png", dpi=80)
    plt.close(figure)


def compile_section() -> list[str]:
    """The load / compile + first-run table of auto's picks, as its results file states it."""
    text = (RESULTS / SOURCES["compile"]).read_text().splitlines()
    start = next(k for k, line in enumerate(text) if line.startswith("| runtime | type |"))
    table = list(itertools.takewhile(lambda t: t.startswith("|"), text[start:]))
    return [
        "## Before the first result: load / compile + first run",
        "",
        f"Source: `scripts/results/{SOURCES['compile']}` (`bench_runtime.py --compile 5` or "
        "9: `auto`'s pick in a fresh process next to the CumSum model of the same shape; 65536 "
        "elements, float32 / int32; tinygrad with its kernel cache off; OpenVINO and IREE on a "
        "quiet machine, onnxruntime and tinygrad on a loaded one, so ratios only). Each cell: "
        "compile ratio as wall / CPU time, and the steady run time / CumSum's; ✓ both clocks "
        'within 2×, (one) one clock, "again": the cell run a second time. Why each form '
        f"compiles as it does: `scripts/results/{SOURCES['compile_study']}`.",
        "",
        *table,
        "",
        "onnxruntime, again with 9 repetitions on a nearly idle machine "
        f"(`scripts/results/{SOURCES['compile_ort']}`): `auto`'s session + first run took "
        "1.19-1.61× CumSum's wall time and 1.25-1.66× its CPU time (14-22 ms against 11-13 ms), "
        "and the whole fresh process, Python and imports included, 0.94-1.05×.",
        "",
        "OpenVINO (`scripts/results/"
        f"{SOURCES['compile_openvino']}`, 9-15 repetitions at load 0.8-5.8): its compile time "
        "follows the count of non-Constant nodes (about 1 ms each), and a float32 tree's offset "
        "totals (no float64 there) are about 60 % of them, so the unrolled trees compiled "
        "2.2-4.2× CumSum's time on the first and middle axes. From n = 256 to 1024 under 1 MiB "
        "those axes take `blocked` (46-53 such nodes): 1.41-1.76× wall / 1.45-1.87× CPU there. "
        "**The faster compile costs run time**: `blocked` ran 0.40-1.38× CumSum, 1.4-2.4× the "
        "trees' time (at (1024, 64) 0.53 ms a run against `radix`'s 0.22 ms, 0.26 s sooner to "
        "the first result). **The float32 last axis takes `blocked` from n = 1024 to 8192 under "
        "1 MiB**, for the same reason: in the quiet runs of "
        f"`scripts/results/{SOURCES['compile']}` `doubling` "
        "compiled 1.93-2.51× CumSum's wall time there, at the 2× line, and `blocked` 1.54-1.72×; "
        "`blocked` runs 1.6-2.8× `doubling`'s time (6.1-10.2× CumSum against 3.3-4.0×: "
        "0.8-1.4 ms more a run, 17-60 ms sooner to the first result, behind after about "
        "20-50 runs). `--strategy doubling` keeps the faster run.",
        "",
        "tinygrad's middle axis at n = 256 takes `masked` as one tile (`scripts/results/"
        f"{SOURCES['compile_tinygrad_middle']}`: 1.05 / 1.14 and 1.07 / 1.07 where `carry` took "
        "1.92 / 1.98 and 2.24 / 2.07); from n = 1024 `masked` in blocks (0.92-1.16×, where "
        "`carry` took 4.2× to over 5.5×).",
        "",
    ]


def page(cells: list[dict], sessions: dict, runs: dict[str, list[dict]]) -> str:
    lines = [
        "# Performance",
        "",
        "<!-- Generated by scripts/bench/report.py from the results files it names; "
        "do not edit by hand. -->",
        "",
        "The current figures only, computed from the results files named below. To "
        "regenerate this page and its plots after a new run, point `SOURCES` in "
        "`scripts/bench/report.py` at the new files and run:",
        "",
        "```",
        'pip install -e ".[dev]"   # matplotlib',
        "python scripts/bench/report.py",
        "```",
        "",
        "How to produce the results files: `scripts/bench/bench.py --floors` (the onnxruntime "
        "grid, three runs merged with `--from-json`), `scripts/bench/bench.py` (the plain "
        "table with session creation), `scripts/bench/bench_runtime.py --runtime NAME` (one "
        "runtime; `--positions middle` for the middle axis). Each script's docstring gives "
        "its options. Earlier rounds and their reasoning are in git history "
        "(`git log -- docs/performance.md`).",
        "",
        "The machine: a shared 2-core AMD EPYC (2 MiB of L2 per core, 32 MiB of L3); "
        "figures are ratios measured in the same rounds, and verdicts near a threshold move "
        "with the machine's state.",
        "",
    ]
    lines += grid_section(cells, sessions)
    lines += runtime_section(runs)
    lines += compile_section()
    return "\n".join(_wrap(lines)) + "\n"


def _wrap(lines: list[str], width: int = 92) -> list[str]:
    """Prose and list items wrapped at ``width``; tables, images, code and comments kept."""
    wrapped, in_code = [], False
    for line in lines:
        if line.startswith("```"):
            in_code = not in_code
        if in_code or line.startswith(("|", "!", "#", "<!--", "```")) or len(line) <= width:
            wrapped.append(line)
            continue
        indent = "  " if line.startswith("- ") else ""
        wrapped += textwrap.wrap(
            line, width, subsequent_indent=indent, break_long_words=False, break_on_hyphens=False
        )
    return wrapped


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 if docs/performance.md is not current",
    )
    args = parser.parse_args(argv)
    cells = _load(SOURCES["grid"])
    sessions = _load(SOURCES["sessions"])
    runs = {name: runtime_cells(name) for name in SOURCES["runtimes"]}
    text = page(cells, sessions, runs)  # type: ignore[arg-type]
    if args.check:
        current = PAGE.read_text() == text
        print("docs/performance.md is " + ("current" if current else "not current"))
        return 0 if current else 1
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    IMAGES.mkdir(exist_ok=True)
    plot_grid(cells, sessions, plt)  # type: ignore[arg-type]
    for name, run in runs.items():
        plot_runtime(name, run, plt)
    PAGE.write_text(text)
    print(
        f"wrote {PAGE.relative_to(ROOT)} and {len(runs) + 2} plots in {IMAGES.relative_to(ROOT)}/"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
