"""A lowering change timed against the graphs of an earlier commit, on onnxruntime: for each
grid cell (``bench.grid_shape``; the last axis also exclusive and reverse) and strategy, the
graph this checkout builds against the graph the commit ``--before`` builds, where the two
differ, with a second session of the commit's graph as the control (``again``) and the
native CumProd, in one process, one thread, thread clock, interleaved (``bench.run_graphs``).

The commit's graphs are built by its own code: ``git archive`` of its ``rewriter/`` into a
temporary folder, imported in a child process. Each new graph is checked before timing:
the same non-finite elements as the old one and every element within 2^-16 relative of
it (floats; integers equal).

    .venv/bin/python scripts/bench/bench_against_commit.py --before REV [--dtypes float32]
        [--strategies auto,carry] [--totals 1,4] [--lengths 8,64,512,4096,65536]
        [--positions first,middle,last] [--rounds 11] [--out PREFIX]

First used for the seeded first level of the float64 trees (``rewriter/lowerings/wide.py``,
2026-12-05, ``docs/performance.md``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import bench  # scripts/bench.py, beside this script
import numpy as np
import onnx

TOP = Path(__file__).resolve().parents[2]


def cells(args: argparse.Namespace) -> list[tuple[str, str, tuple[int, ...], int, int, int]]:
    """(label, dtype, shape, axis, exclusive, reverse) of every cell asked for."""
    out = []
    for dtype in args.dtypes.split(","):
        for total in (int(t) << 20 for t in args.totals.split(",")):
            for n in (int(k) for k in args.lengths.split(",")):
                for pos in args.positions.split(","):
                    shape, axis = bench.grid_shape(total, n, pos)
                    for ex, rev in [(0, 0), (1, 1)] if pos == "last" else [(0, 0)]:
                        label = f"{dtype} {total >> 20}M {n} {pos} ex{ex}rev{rev}"
                        out.append((label, dtype, shape, axis, ex, rev))
    return out


_BUILD = """
import json, sys, warnings, onnx, rewriter
model, options, out = sys.argv[1:4]
warnings.simplefilter("ignore")
onnx.save(rewriter.decompose_cumprod(onnx.load(model), **json.loads(options)), out)
"""


def code_at(rev: str, folder: Path) -> Path:
    """``folder`` holding commit ``rev``'s ``rewriter/`` (``git archive``), to import from."""
    folder.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(
        ["git", "-C", str(TOP), "archive", rev, "rewriter"], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return folder


def build(code: Path, model: Path, out: Path, **options: object) -> onnx.ModelProto:
    """``model`` lowered by the ``rewriter`` package found in ``code`` (a child process), with
    ``decompose_cumprod``'s ``options``. Raises CalledProcessError (its stderr kept) where
    that code refuses or fails."""
    subprocess.run(
        [sys.executable, "-c", _BUILD, str(model), json.dumps(options), str(out)],
        check=True,
        capture_output=True,
        text=True,
        cwd=code,
        env={"PYTHONPATH": str(code), "PATH": "/usr/bin:/bin"},
    )
    return onnx.load(out)


def feed(dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    rng = np.random.default_rng(0)
    if dtype.startswith("float"):
        return (1 + rng.normal(0, 1e-3, shape)).astype(dtype)
    return rng.choice(np.array([-1, 1, 3], dtype=dtype), size=shape)


def agrees(new: np.ndarray, old: np.ndarray) -> bool:
    if not np.issubdtype(new.dtype, np.floating):
        return bool(np.array_equal(new, old))
    finite = np.isfinite(old)
    if not np.array_equal(np.isfinite(new), finite):
        return False
    a, b = new[finite].astype(np.float64), old[finite].astype(np.float64)
    return bool(np.all(np.abs(a - b) <= 2.0**-16 * np.abs(b)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", required=True, help="the commit whose graphs are timed")
    parser.add_argument("--dtypes", default="float32")
    parser.add_argument("--strategies", default="auto")
    parser.add_argument("--totals", default="1,4", help="elements, in units of 2^20")
    parser.add_argument("--lengths", default="8,64,512,4096,65536")
    parser.add_argument("--positions", default="first,middle,last")
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--out", help="write OUT.md")
    args = parser.parse_args()
    bench.CLOCK["now"] = time.thread_time
    lines = [
        f"# {args.strategies} against {args.before}",
        "",
        f"{time.strftime('%Y-%m-%dT%H:%M:%S%z')}; onnxruntime, one thread, thread clock, "
        f"median of {args.rounds} interleaved rounds. new / old: this checkout's graph over "
        f"the commit's; again / old: a second session of the commit's graph (the control).",
        "",
        "| strategy | cell | new / old | again / old | old × native | new × native |",
        "|---|---|---|---|---|---|",
    ]
    ratios: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        old_code = code_at(args.before, Path(tmp, "old"))
        for strategy in args.strategies.split(","):
            for label, dtype, shape, axis, ex, rev in cells(args):
                model_path = Path(tmp, "model.onnx")
                native = bench.model_for(bench.DTYPES[dtype], shape, axis, ex, rev)
                onnx.save(native, model_path)
                old = build(old_code, model_path, Path(tmp, "old.onnx"), strategy=strategy)
                new = build(TOP, model_path, Path(tmp, "new.onnx"), strategy=strategy)
                if old.graph.SerializeToString() == new.graph.SerializeToString():
                    continue
                x = feed(dtype, shape)
                outs, us = bench.run_graphs(
                    {"old": old, "new": new, "again": old, "native": native},
                    {"x": x},
                    {"x": x},
                    args.rounds,
                )
                if not agrees(outs["new"], outs["old"]):
                    raise SystemExit(f"{strategy} {label}: the new graph's result differs")
                ratio = us["new"] / us["old"]
                ratios.setdefault(strategy, []).append(ratio)
                line = (
                    f"| {strategy} | {label} | {ratio:.3f} | {us['again'] / us['old']:.3f} "
                    f"| {us['old'] / us['native']:.2f}× | {us['new'] / us['native']:.2f}× |"
                )
                print(line, flush=True)
                lines.append(line)
    lines.append("")
    for strategy, values in ratios.items():
        lines.append(
            f"- {strategy}: {len(values)} cells changed, new / old median "
            f"{statistics.median(values):.3f}, {min(values):.3f}-{max(values):.3f}"
        )
    if args.out:
        Path(f"{args.out}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines[-len(ratios) :]))


if __name__ == "__main__":
    main()
