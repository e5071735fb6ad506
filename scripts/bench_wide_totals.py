"""The float32 trees' float64 block totals on onnxruntime: a ReduceProd of the blocks cast to
float64 (shipped for blocks of more than ``wide.NARROW_SLICES`` positions) against the r slices
cast and multiplied, on wide runs (``rewriter/lowerings/wide.py``).

The twenty-seventh round's third held-out round. A pilot on the grid's eight float32 ``cached``
cells (ad hoc, 7 rounds) gave the slices 0.91-0.94x the ReduceProd's time where the runs
(i, the elements after the axis) are 32 or more, and 0.94-1.29x at i = 4-16 (where the
ReduceProd was measured faster, 0.66x, when ``NARROW_SLICES`` was set). Its rule, declared
before any of its cells was timed: on onnxruntime, a float32 tree takes its float64 block
totals from the slices where i >= 32 if, on the twelve held-out float32 views of
:data:`CELLS` (every one a first or middle axis where ``auto``'s tree builds the ReduceProd;
3.7-11.7 MiB; ``carry`` and ``cached``), the median time slices / ReduceProd is at most 0.95 with
at most two cells above 1.05. ``again`` (a second session of the shipped graph) is the
control. Each graph is checked against the shipped one (within 1 ulp: the float64 products
are taken in another order) and must differ from it (else the cell tests nothing). It did
not hold (median 1.046, five of twelve above 1.05): the ReduceProd stays.

    .venv/bin/python scripts/bench_wide_totals.py [--cells "o,n,i;..."] [--rounds 21]
        [--out PREFIX]
"""

from __future__ import annotations

import argparse
import contextlib
import time
from collections.abc import Iterator
from pathlib import Path

import bench  # scripts/bench.py, beside this script
import numpy as np
from onnx import TensorProto

from rewriter.lowerings import wide

CELLS = (  # (o, n, i): o = 1 a first axis, else a middle one; none of the pilot's or the grid's
    "6,3000,64;10,5000,40;3,8000,128;20,2500,48;12,6000,36;2,4096,300;"
    "1,20000,48;1,12000,100;1,6000,500;1,50000,40;1,2500,600;1,9000,256"
)
RULE = (0.95, 1.05, 2)  # median slices / reduce <= 0.95, at most 2 of the cells above 1.05


@contextlib.contextmanager
def slices_for_every_block() -> Iterator[None]:
    """The float64 block totals from the slices whatever the block's length."""
    shipped = wide.NARROW_SLICES
    wide.NARROW_SLICES = 1 << 30
    try:
        yield
    finally:
        wide.NARROW_SLICES = shipped


def _view(cell: str) -> tuple[tuple[int, ...], int]:
    o, n, i = (int(d) for d in cell.split(","))
    return ((n, i), 0) if o == 1 else ((o, n, i), 1)


def run_round(cells: str, rounds: int) -> tuple[list[str], str]:
    """The table's lines and the rule's verdict."""
    lines, ratios = [], []
    for cell in cells.split(";"):
        shape, axis = _view(cell)
        x = bench.data_for(TensorProto.FLOAT, shape, np.random.default_rng(0))
        model = bench.model_for(TensorProto.FLOAT, shape, axis, 0, 0)
        pick = bench._auto_pick(model)
        assert pick in ("carry", "cached"), (cell, pick)
        shipped = bench.lowered(model, "auto")
        with slices_for_every_block():
            slices = bench.lowered(model, "auto")
        assert shipped is not None and slices is not None, cell
        assert shipped.SerializeToString() != slices.SerializeToString(), cell  # tests something
        graphs = {"native": model, "reduce": shipped, "again": shipped, "slices": slices}
        outputs, times = bench.run_graphs(graphs, {"x": x}, {"x": x}, rounds)
        got, want = outputs["slices"], outputs["reduce"]
        with np.errstate(invalid="ignore"):
            near = np.abs(got.astype(np.float64) - want) <= np.spacing(np.abs(want))
        assert np.all(near | (got == want) | (np.isnan(got) & np.isnan(want))), cell
        x_ = {k: v / times["native"] for k, v in times.items()}
        ratios.append(times["slices"] / times["reduce"])
        lines.append(
            f"| ({cell.replace(',', ', ')}) | {x.nbytes / 2**20:.1f} | {pick} | "
            f"{times['native'] * 1e6:.0f} | {x_['reduce']:.2f}× | {x_['again']:.2f}× | "
            f"{x_['slices']:.2f}× | {times['again'] / times['reduce']:.2f} | {ratios[-1]:.2f} |"
        )
        print(lines[-1], flush=True)
    summary, _ = bench.rule_verdict(ratios, RULE, "slices / reduce")
    return lines, summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cells", default=CELLS, help="o,n,i;... (o = 1: a first axis)")
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--out", help="write OUT.md")
    args = parser.parse_args()
    bench.CLOCK["now"] = time.thread_time
    head = "| float32 (o, n, i) | MiB | auto | native µs | reduce | again | slices |"
    head += " again / reduce | slices / reduce |"
    print(head, flush=True)
    table, verdict = run_round(args.cells, args.rounds)
    print(verdict)
    if args.out:
        when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        intro = f"{when}, onnxruntime, one thread, thread clock, {args.rounds} rounds\n\n"
        text = "\n".join([head, "|" + "---|" * 9, *table, "", verdict, ""])
        Path(args.out + ".md").write_text(intro + text)


if __name__ == "__main__":
    main()
