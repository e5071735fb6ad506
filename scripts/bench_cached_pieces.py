"""``cached``'s pieces: what ``carry`` does inside them, against the alternatives measured in
docs/performance.md (seventeenth round), on onnxruntime.

For each (o, n, i) view scanned along axis 1 (o = 1: a first axis, cut into chunks; else
tiles of rows) and element type, four graphs are timed against the native CumProd by
``bench.interleaved`` (one intra-op thread, the calling thread's CPU time, shuffled
interleaved rounds, medians), each checked against native first (integers bit for bit, on
odd values):

- ``cached``: as shipped (the state of the chunks before seeds ``carry``'s last level;
  ``carry``'s r judged on the narrow runs of the whole x);
- ``piece r``: ``carry``'s r judged on the piece's own size instead (r = 16 where x's runs
  are narrow but the piece has fewer than 2^21 elements);
- ``state after`` (chunks only): the chunk's ``carry`` result multiplied by the state, a
  Mul broadcasting (1, 1, i) over (1, C, i), as before the seventeenth round;
- ``chain`` (middle axes of n <= 1024), and ``carry``, on the whole x.

The default shapes are the round's twelve held-out narrow-run cells (runs of 8-24 bytes,
2^21-2^22 elements); with ``--chains``, its twelve held-out middle axes past n = 512 of
16-24 MiB, where ``auto`` takes ``cached`` instead of ``chain``; with ``--chains-512``, the
eighteenth round's fourteen held-out middle axes of n = 384-512 and 16-20 MiB (``cached``
from n = 512 only).

Usage: python scripts/bench_cached_pieces.py [--cells "float32:256,2048,5;int64:1,1048576,2"]
    [--chains | --chains-512] [--rounds 11] [--out scripts/results/NAME]
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import statistics
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import bench  # scripts/bench.py, beside this script
import numpy as np
from onnx import TensorProto

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
CHAIN_512_CELLS = (
    "float32:40,512,210;int32:100,512,90;int64:48,512,100;float64:12,512,400;"
    "float32:20,512,420;int64:160,512,30;float32:128,448,80;int32:16,480,600;"
    "int64:96,448,56;float64:80,480,60;float32:24,384,480;int32:60,400,200;"
    "int64:20,400,300;float64:36,384,180"
)
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

    def build(b: Any, x3: Any, v: Any, *, seed: Any = None, narrow_runs: Any = None) -> Any:
        if variant == "piece r":
            return shipped(b, x3, v, seed=seed)
        out = shipped(b, x3, v, narrow_runs=narrow_runs)  # "state after"
        return out if seed is None else b.op("Mul", out, seed)

    carry.build = build  # type: ignore[assignment]
    try:
        yield
    finally:
        carry.build = shipped  # type: ignore[assignment]


def _models(elem_type: int, shape: tuple[int, ...], axis: int) -> dict[str, Any]:
    model = bench.model_for(elem_type, shape, axis, 0, 0)
    models = {"native": model, "cached": bench.lowered(model, "cached")}
    for variant in ("piece r", "state after") if axis == 0 else ("piece r",):
        with _carry_build(variant):
            models[variant] = bench.lowered(model, "cached")
    if axis == 1 and shape[1] <= chain.MAX_LENGTH:
        models["chain"] = bench.lowered(model, "chain")
    models["carry"] = bench.lowered(model, "carry")
    return models


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cells", help="type:o,n,i;... (o = 1: a first axis)")
    parser.add_argument("--chains", action="store_true", help="the middle chains past 512")
    parser.add_argument("--chains-512", action="store_true", help="the middle chains of 384-512")
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--out", help="write OUT.md and OUT.json")
    args = parser.parse_args()
    bench.CLOCK["now"] = time.thread_time
    rows: list[dict[str, Any]] = []
    lines: list[str] = []
    default = CHAIN_512_CELLS if args.chains_512 else (CHAIN_CELLS if args.chains else CELLS)
    for cell in (args.cells or default).split(";"):
        name, dims = cell.split(":")
        o, n, i = (int(d) for d in dims.split(","))
        elem_type = TYPES[name]
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
            for k in ("cached", "piece r", "state after", "chain", "carry")
        )
        lines.append(line + f" | {ratio['cached'] / ratio['piece r']:.2f} |")
        print(lines[-1], flush=True)
    summary = "; ".join(
        f"cached / {other}: median {statistics.median(got):.3f}, {min(got):.2f}-{max(got):.2f}"
        for other in ("piece r", "state after", "chain")
        if (got := [r["x"]["cached"] / r["x"][other] for r in rows if other in r["x"]])
    )
    print(summary)
    if args.out:
        head = "| type | (o, n, i) | native µs | cached | piece r | state after | chain | carry |"
        head += " cached / piece r |"
        table = [head, "|" + "---|" * 9, *lines, "", summary, ""]
        when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        intro = f"{when}, onnxruntime, one thread, thread clock, {args.rounds} rounds; × native\n\n"
        Path(args.out + ".md").write_text(intro + "\n".join(table))
        Path(args.out + ".json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
