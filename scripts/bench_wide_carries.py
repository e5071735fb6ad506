"""float32 product trees with float64 block totals and carries (``rewriter/lowerings/wide.py``)
against the float32 carries they replaced, and against onnxruntime's native CumProd.

For each float32 grid cell (``scripts/bench.py``'s shapes) where ``auto`` takes a tree
(``carry``, ``cached``, ``tiled``, ``dynamic``) it times, interleaved in one process (one
intra-op thread, the calling thread's CPU time, medians): the native kernel, ``auto``'s graph
as built now, the same graph with float32 carries (``wide.carry_dtype`` forced to None, the
lowering before 2026-12-04), with ``--offset`` the graph with float32 carries and
``near_one.py``'s offset totals (as on targets without float64), ``scan`` (the sequential
product, bitwise native) and the lowerings named by ``--also`` (``chain``, ``tiled``, ...).
``--elements`` replaces the totals by exact element counts (off the grid).

    .venv/bin/python scripts/bench_wide_carries.py [--totals 1,4] [--positions last,first,middle]
        [--lengths 64,512,4096,65536] [--rounds 9] [--also chain,tiled] [--elements N,...]
        [--offset] [--out PREFIX]
"""

from __future__ import annotations

import argparse
import datetime
import time
from pathlib import Path

import bench  # scripts/bench.py, beside this script
import numpy as np
import onnx
import onnxruntime as ort

import rewriter

TREES = ("carry", "cached", "tiled", "dynamic", "blocked", "radix")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--totals", default="1,4", help="units of 2^20 elements")
    parser.add_argument("--positions", default="last,first,middle")
    parser.add_argument("--lengths", default="64,512,4096,65536")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--also", default="", help="more lowerings to time, comma-separated")
    parser.add_argument("--elements", default="", help="exact element counts, comma-separated")
    parser.add_argument("--offset", action="store_true", help="time the offset totals too")
    parser.add_argument("--out", default=None, help="write PREFIX.md")
    args = parser.parse_args()
    bench.CLOCK["now"] = time.thread_time
    also = [name for name in args.also.split(",") if name]
    totals = (
        [int(t) for t in args.elements.split(",")]
        if args.elements
        else [int(t) << 20 for t in args.totals.split(",")]
    )
    rng = np.random.default_rng(0)
    lines = [
        f"# scripts/bench_wide_carries.py, {datetime.date.today()} (onnxruntime "
        f"{ort.__version__}, one thread, thread clock, {args.rounds} rounds, medians)",
        "",
        "| size | axis | n | auto's pick | float32 carries | float64 carries | ratio | scan |"
        + (" offset totals | offset / float64 |" if args.offset else "")
        + "".join(f" {name} |" for name in also),
        "|---|---|---|---|---|---|---|---|" + "---|---|" * args.offset + "---|" * len(also),
    ]
    print("\n".join(lines), flush=True)
    for total in totals:
        for position in args.positions.split(","):
            for n in (int(v) for v in args.lengths.split(",")):
                shape, axis = bench.shape_for(total, n, position)
                model = bench.model_for(onnx.TensorProto.FLOAT, shape, axis, 0, 0)
                pick = bench._auto_pick(model)
                if pick not in TREES:
                    continue
                now = rewriter.decompose_cumprod(model)
                with bench.float32_carries():
                    before = rewriter.decompose_cumprod(model)
                sequential = rewriter.decompose_cumprod(model, strategy="scan")
                x = bench.data_for(onnx.TensorProto.FLOAT, shape, rng)
                graphs = {"native": model, "before": before, "now": now, "scan": sequential}
                if args.offset:
                    with bench.offset_totals():
                        graphs["offset"] = rewriter.decompose_cumprod(model)
                graphs |= {name: rewriter.decompose_cumprod(model, strategy=name) for name in also}
                sessions = {k: bench.session(g, 1)[0] for k, g in graphs.items()}
                feed = {"x": x}
                runs = {k: (lambda s=s, f=feed: s.run(None, f)) for k, s in sessions.items()}
                t = bench.interleaved(runs, args.rounds, 30)
                native = t["native"]
                line = (
                    f"| {bench.size_label(total)} | {position} | {n} | {pick} | "
                    f"{t['before'] / native:.2f}x | {t['now'] / native:.2f}x | "
                    f"{t['now'] / t['before']:.2f} | {t['scan'] / native:.2f}x |"
                    + (
                        f" {t['offset'] / native:.2f}x | {t['offset'] / t['now']:.2f} |"
                        if args.offset
                        else ""
                    )
                    + "".join(f" {t[name] / native:.2f}x |" for name in also)
                )
                lines.append(line)
                print(line, flush=True)
    lines += ["", "Times are ratios to the native kernel's; ratio = float64 / float32 carries."]
    if args.out:
        Path(f"{args.out}.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
