"""``carry``'s radix on narrow runs: r = 4 against r = 16 on the same (o, n, i) views, on
onnxruntime (what ``carry.narrow`` rests on; docs/performance.md, fifteenth round).

For each shape (o, n, i), scanned along axis 1, and element type, ``carry`` is built twice,
with r = 4 and with r = 16 at every level (``carry.RADIX`` and ``carry.NARROW_RADIX`` both
set for the build, so its own choice of r plays no part), and timed against the native
CumProd by ``bench.interleaved`` (one intra-op thread, the calling thread's CPU time,
shuffled interleaved rounds, medians); both results are checked against
native first (integers bit for bit). The run's width is i times the element size: the
default shapes give 8-48-byte runs on 2.6 * 10^5 - 4.2 * 10^6 elements.

Usage: python scripts/bench_carry_radix.py [--shapes "4,262144,4;2,65536,8"]
    [--dtypes float32,int64] [--rounds 11] [--out scripts/results/NAME]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import bench  # scripts/bench.py, beside this script
import numpy as np

import rewriter
from rewriter.lowerings import carry

SHAPES = (
    "4,65536,4;2,262144,2;3,100000,3;16,16384,4;4,262144,4;64,4096,4;8,32768,6;2,65536,8;"
    "1,262144,4;1,131072,2;1,65536,6;32,32768,4;1,1048576,4;4,174762,6;16,65536,4;"
    "8,131072,2;2,524288,3;1,524288,2;16,21845,3;4,524288,2;2,699050,3;1,2097152,2;8,174762,3"
)


def _carry(model: object, radix: int) -> object:
    """``carry`` with r = ``radix`` at every level, whatever the runs' width."""
    saved = carry.RADIX, carry.NARROW_RADIX
    carry.RADIX = carry.NARROW_RADIX = radix
    try:
        return rewriter.decompose_cumprod(model, strategy="carry")  # type: ignore[arg-type]
    finally:
        carry.RADIX, carry.NARROW_RADIX = saved


def cell(shape: tuple[int, int, int], dtype: str, rounds: int) -> dict[str, object]:
    elem_type = bench.DTYPES[dtype]
    x = bench.data_for(elem_type, shape, np.random.default_rng(1))
    model = bench.model_for(elem_type, shape, 1, 0, 0)
    sessions = {"native": bench.session(model, 1)[0]}
    for radix in (4, 16):
        sessions[f"r={radix}"] = bench.session(_carry(model, radix), 1)[0]  # type: ignore[arg-type]
    native = sessions["native"].run(None, {"x": x})[0]
    for name in ("r=4", "r=16"):
        y = sessions[name].run(None, {"x": x})[0]
        if dtype.startswith("int"):
            np.testing.assert_array_equal(y, native)
        else:
            np.testing.assert_allclose(y, native, rtol=1e-3)
    contenders = {
        name: (lambda s=session: s.run(None, {"x": x})) for name, session in sessions.items()
    }
    seconds = bench.interleaved(contenders, rounds)
    ratios = {name: t / seconds["native"] for name, t in seconds.items() if name != "native"}
    return {
        "shape": list(shape),
        "dtype": dtype,
        "run_bytes": shape[2] * x.dtype.itemsize,
        "elements": int(np.prod(shape)),
        "native_us": seconds["native"] * 1e6,
        "ratio": ratios,
        "r4_over_r16": ratios["r=4"] / ratios["r=16"],
    }


def markdown(rows: list[dict[str, object]]) -> str:
    lines = [
        "| type | shape (o, n, i) | run bytes | native µs | r = 4 | r = 16 | r4 / r16 |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        ratio: dict[str, float] = row["ratio"]  # type: ignore[assignment]
        lines.append(
            f"| {row['dtype']} | {tuple(row['shape'])} | {row['run_bytes']} | "  # type: ignore[arg-type]
            f"{row['native_us']:.0f} | {ratio['r=4']:.2f}× | {ratio['r=16']:.2f}× | "
            f"{row['r4_over_r16']:.2f} |"
        )
    for label, keep in (
        (
            "runs <= 24 bytes, >= 2M elements",
            lambda r: r["run_bytes"] <= 24 and r["elements"] >= 2e6,
        ),
        ("runs <= 24 bytes, < 2M elements", lambda r: r["run_bytes"] <= 24 and r["elements"] < 2e6),
        ("runs >= 32 bytes", lambda r: r["run_bytes"] >= 32),
    ):
        picked = [float(r["r4_over_r16"]) for r in rows if keep(r)]  # type: ignore[arg-type]
        if picked:
            lines.append(
                f"\n{label}: {len(picked)} cells, r4 / r16 {min(picked):.2f}-{max(picked):.2f}, "
                f"median {statistics.median(picked):.2f}"
            )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default=SHAPES, help="o,n,i;o,n,i;...")
    parser.add_argument("--dtypes", default="float32,int32,float64,int64")
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--out", help="write OUT.json and OUT.md")
    args = parser.parse_args()
    bench.CLOCK["now"] = time.thread_time
    rows = []
    for text in args.shapes.split(";"):
        o, n, i = (int(v) for v in text.split(","))
        for dtype in args.dtypes.split(","):
            row = cell((o, n, i), dtype, args.rounds)
            rows.append(row)
            print(
                f"{dtype} {(o, n, i)}: r4 / r16 {row['r4_over_r16']:.2f} "
                f"({row['ratio']['r=4']:.2f}x, {row['ratio']['r=16']:.2f}x native)",  # type: ignore[index]
                flush=True,
            )
    print(markdown(rows))
    if args.out:
        Path(f"{args.out}.json").write_text(json.dumps(rows, indent=1))
        Path(f"{args.out}.md").write_text(markdown(rows))


if __name__ == "__main__":
    main()
