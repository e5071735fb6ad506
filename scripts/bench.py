"""Benchmark: each lowering against onnxruntime's native CumProd, in one process.

For every grid cell (element type, total size, scan length n, axis position, attributes) it
builds one opset-26 model with a single CumProd, runs it natively, runs the same model
rewritten by each lowering (and by ``auto``), and numpy.cumprod, on the same data. Sessions use
a fixed intra-op thread count; after a warm-up the runs are interleaved (one run of each
contender per round) and the median of the rounds is taken. The figures that count are the
ratios to native measured in the same run; absolute times on shared machines are noisy.

Also: float32 accuracy (max / median ulp against a float64 reference) on data whose products
stay in range and on data with zeros; session-creation time and node count per lowering; the
pass's own time per CumProd node on a model with 1,000 of them.

Usage: python scripts/bench.py [--quick] [--threads 2] [--rounds 21] [--out bench]
Writes bench.md and bench.json (``--out`` prefix).
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import random
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
from onnx import TensorProto, helper

import rewriter
from rewriter.lowerings import LOWERINGS
from rewriter.verify import ulp_error

DTYPES = {
    "float32": TensorProto.FLOAT,
    "int64": TensorProto.INT64,
    "float64": TensorProto.DOUBLE,
    "float16": TensorProto.FLOAT16,
}


def model_for(
    elem_type: int,
    shape: tuple[int, ...],
    axis: int,
    exclusive: int,
    reverse: int,
    *,
    symbolic: bool = False,
) -> onnx.ModelProto:
    """One CumProd at opset 26; ``symbolic``: every dim declared symbolic (d0, d1, ...)."""
    node = helper.make_node(
        "CumProd", ["x", "axis"], ["y"], name="cumprod", exclusive=exclusive, reverse=reverse
    )
    dims: list[int | str] = [f"d{k}" for k in range(len(shape))] if symbolic else list(shape)
    graph = helper.make_graph(
        [node],
        "bench",
        [helper.make_tensor_value_info("x", elem_type, dims)],
        [helper.make_tensor_value_info("y", elem_type, dims)],
        [helper.make_tensor("axis", TensorProto.INT64, [], [axis])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26)])


def shape_for(total: int, n: int, position: str) -> tuple[tuple[int, ...], int]:
    rest = max(total // n, 1)
    if position == "last":
        return (rest, n), 1
    if position == "first":
        return (n, rest), 0
    a = 1 << (int(np.log2(rest)) // 2)
    return (a, n, rest // a), 1


_POOL: list[int] = []


def session(model: onnx.ModelProto, threads: int) -> tuple[ort.InferenceSession, float]:
    """A session on one intra-op pool shared by all sessions of the process (``threads``
    threads): with a pool per session, the idle pools' spinning threads steal the cores
    from the one running and distort interleaved timings 2-10x."""
    if not _POOL:
        from onnxruntime.capi import _pybind_state

        _pybind_state.set_global_thread_pool_sizes(threads, 1)
        _POOL.append(threads)
    options = ort.SessionOptions()
    options.use_per_session_threads = False
    options.log_severity_level = 3
    start = time.perf_counter()
    sess = ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    return sess, time.perf_counter() - start


def data_for(
    elem_type: int, shape: tuple[int, ...], rng: np.random.Generator, zeros: float = 0.0
) -> np.ndarray:
    if elem_type == TensorProto.INT64:
        x = rng.integers(-3, 4, shape).astype(np.int64)
        return x
    x = np.exp2(rng.uniform(-1, 1, shape)) * rng.choice([-1.0, 1.0], shape)
    if zeros:
        x[rng.random(shape) < zeros] = 0.0
    return x.astype(helper.tensor_dtype_to_np_dtype(elem_type))


def interleaved(
    contenders: dict[str, Callable[[], object]], rounds: int, max_seconds: float = 60.0
) -> dict[str, float]:
    """Median seconds per run of each contender. Each round runs the contenders in a shuffled
    order, each a few times back to back (keeping the median of the later runs: a warm,
    steady state); rounds stop at ``rounds`` or after ``max_seconds`` (at least 7 rounds)."""
    repeat = {}
    for name, fn in contenders.items():
        start = time.perf_counter()
        for _ in range(2):
            fn()
        per_run = (time.perf_counter() - start) / 2
        repeat[name] = 6 if per_run < 0.01 else (4 if per_run < 0.05 else 2)
    times: dict[str, list[float]] = {name: [] for name in contenders}
    order = list(contenders)
    rng = random.Random(0)
    began = time.perf_counter()
    for done in range(rounds):
        rng.shuffle(order)
        for name in order:
            runs = []
            for _ in range(repeat[name]):
                start = time.perf_counter()
                contenders[name]()
                runs.append(time.perf_counter() - start)
            times[name].append(statistics.median(runs[repeat[name] // 2 :]))
        if done >= 6 and time.perf_counter() - began > max_seconds:
            break
    return {name: statistics.median(t) for name, t in times.items()}


def count_nodes(model: onnx.ModelProto) -> int:
    def walk(nodes: list[onnx.NodeProto]) -> int:
        total = 0
        for node in nodes:
            total += 1
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.GRAPH:
                    total += walk(list(attr.g.node))
        return total

    return walk(list(model.graph.node))


def strategies_for(elem_type: int) -> list[str]:
    names = ["auto", *LOWERINGS]
    return [s for s in names if not (s == "logsum" and elem_type == TensorProto.INT64)]


def lowered(model: onnx.ModelProto, strategy: str) -> onnx.ModelProto | None:
    """The model rewritten by ``strategy``, or None where it refuses (chain past 256)."""
    try:
        return rewriter.decompose_cumprod(model, strategy=strategy)  # type: ignore[return-value]
    except rewriter.StrategyError:
        return None


def bench_cell(
    cell: tuple[str, int, int, str, int, int],
    *,
    threads: int,
    rounds: int,
    rng: np.random.Generator,
    symbolic: bool = False,
) -> dict[str, object]:
    """One grid cell: (dtype name, total elements, scan length, axis position, exclusive,
    reverse)."""
    dtype_name, total, n, position, exclusive, reverse = cell
    elem_type = DTYPES[dtype_name]
    shape, axis = shape_for(total, n, position)
    model = model_for(elem_type, shape, axis, exclusive, reverse, symbolic=symbolic)
    x = data_for(elem_type, shape, rng)
    native, native_create = session(model, threads)
    contenders: dict[str, Callable[[], object]] = {"native": lambda: native.run(None, {"x": x})}
    info: dict[str, dict[str, float]] = {"native": {"create_ms": native_create * 1e3, "nodes": 1}}
    for strategy in strategies_for(elem_type):
        rewritten = lowered(model, strategy)
        if rewritten is None or (strategy == "loop" and n >= 4096):
            continue  # refused; loop at 4096+ takes seconds per cell (88x at 65536, field notes)
        sess, created = session(rewritten, threads)
        contenders[strategy] = lambda s=sess: s.run(None, {"x": x})
        info[strategy] = {"create_ms": created * 1e3, "nodes": count_nodes(rewritten)}
    np_x = x

    def run_numpy() -> object:
        xx = np.flip(np_x, axis) if reverse else np_x
        y = np.cumprod(xx, axis=axis, dtype=xx.dtype)
        return y

    contenders["numpy"] = run_numpy
    medians = interleaved(contenders, rounds)
    base = medians["native"]
    return {
        "dtype": onnx.helper.tensor_dtype_to_np_dtype(elem_type).name,
        "total": total,
        "n": n,
        "position": position,
        "shape": list(shape),
        "exclusive": exclusive,
        "reverse": reverse,
        "symbolic": symbolic,
        "native_ms": base * 1e3,
        "ratio": {k: v / base for k, v in medians.items() if k != "native"},
        "info": info,
    }


def accuracy(
    n: int, rows: int, zeros: float, rng: np.random.Generator
) -> dict[str, dict[str, float]]:
    shape = (rows, n)
    model = model_for(TensorProto.FLOAT, shape, 1, 0, 0)
    x = data_for(TensorProto.FLOAT, shape, rng, zeros)
    reference = np.cumprod(x.astype(np.float64), axis=1)
    results = {}
    sessions = {"native": session(model, 2)[0]}
    for strategy in strategies_for(TensorProto.FLOAT):
        rewritten = lowered(model, strategy)
        if rewritten is not None:
            sessions[strategy] = session(rewritten, 2)[0]
    for name, sess in sessions.items():
        y = sess.run(None, {"x": x})[0]
        errors = ulp_error(y, reference, ir.DataType.FLOAT).astype(np.float64)
        results[name] = {"max_ulp": float(errors.max()), "median_ulp": float(np.median(errors))}
    return results


def pass_time(count: int = 1000) -> float:
    nodes, outputs = [], []
    for i in range(count):
        nodes.append(
            helper.make_node("CumProd", ["x", "axis"], [f"y{i}"], name=f"c{i}", exclusive=i % 2)
        )
        outputs.append(helper.make_tensor_value_info(f"y{i}", TensorProto.FLOAT, [4, 16]))
    graph = helper.make_graph(
        nodes,
        "many",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])],
        outputs,
        [helper.make_tensor("axis", TensorProto.INT64, [], [1])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26)])
    start = time.perf_counter()
    rewriter.decompose_cumprod(model)
    return (time.perf_counter() - start) / count


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a small grid, for a smoke run")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--out", default="bench")
    parser.add_argument("--from-json", help="only re-render the markdown of an earlier run")
    parser.add_argument(
        "--symbolic",
        action="store_true",
        help="a small grid whose dims are all declared symbolic (auto then picks 'dynamic')",
    )
    args = parser.parse_args()
    if args.from_json:
        result = json.loads(Path(args.from_json).read_text())
        Path(f"{args.out}.md").write_text(markdown(result))
        print(markdown(result))
        return
    rng = np.random.default_rng(0)
    totals = [1 << 20] if args.quick else [1 << 20, 1 << 22]
    lengths = [8, 512, 65536] if args.quick else [8, 64, 512, 4096, 65536]
    cells = []
    if args.symbolic:
        rows = [
            (dt, 1 << 20, n, pos, 0, 0)
            for dt in ("float32", "int64")
            for n in (8, 512, 65536)
            for pos in ("last", "first")
        ]
        for spec in rows:
            cell = bench_cell(
                spec, threads=args.threads, rounds=args.rounds, rng=rng, symbolic=True
            )
            ratios = {k: round(v, 2) for k, v in cell["ratio"].items()}  # type: ignore[union-attr]
            print(f"{spec}: native {cell['native_ms']:.2f} ms; {ratios}", flush=True)
        return
    grid = [
        (dt, total, n, pos, 0, 0)
        for dt in ("float32", "int64")
        for total in totals
        for n in lengths
        for pos in ("last", "first", "middle")
    ]
    grid += [(dt, 1 << 20, n, "last", 1, 1) for dt in ("float32", "int64") for n in lengths]
    if not args.quick:
        grid += [
            (dt, 1 << 20, n, pos, 0, 0)
            for dt in ("float64", "float16")
            for n in lengths
            for pos in ("last", "first")
        ]
    for spec in grid:
        cell = bench_cell(spec, threads=args.threads, rounds=args.rounds, rng=rng)
        cells.append(cell)
        dt, total, n, pos, ex, rev = spec
        ratios = " ".join(f"{k}={v:.2f}" for k, v in cell["ratio"].items())  # type: ignore[union-attr]
        print(
            f"{dt} N={total} n={n} {pos} ex={ex} rev={rev}: "
            f"native {cell['native_ms']:.2f} ms; {ratios}",
            flush=True,
        )
    acc = {
        "nonzero": accuracy(4096, 64, 0.0, rng),
        "zeros": accuracy(4096, 64, 0.01, rng),
    }
    per_node = pass_time(100 if args.quick else 1000)
    result = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": {
            "cpu": _cpu_name(),
            "cores": __import__("os").cpu_count(),
            "python": platform.python_version(),
        },
        "versions": {
            "onnxruntime": ort.__version__,
            "onnx": onnx.__version__,
            "numpy": np.__version__,
            "onnx_ir": ir.__version__,
        },
        "threads": args.threads,
        "rounds": args.rounds,
        "cells": cells,
        "accuracy": acc,
        "pass_seconds_per_node": per_node,
    }
    Path(f"{args.out}.json").write_text(json.dumps(result, indent=1))
    Path(f"{args.out}.md").write_text(markdown(result))
    print(markdown(result))


def markdown(result: dict) -> str:
    cells = result["cells"]
    names = list(dict.fromkeys(k for c in cells for k in c["ratio"]))
    lines = [
        f"Benchmark {result['date']}, {result['machine']}, {result['versions']}, "
        f"{result['threads']} threads, median of {result['rounds']} interleaved rounds.",
        "",
    ]
    lines.append("| type | N | n | axis | ex,rev | native ms | " + " | ".join(names) + " |")
    lines.append("|" + "---|" * (6 + len(names)))
    for c in cells:
        ratios = " | ".join(f"{c['ratio'][k]:.2f}×" if k in c["ratio"] else "-" for k in names)
        lines.append(
            f"| {c['dtype']} | {c['total'] >> 20}M | {c['n']} | {c['position']} | "
            f"{c['exclusive']},{c['reverse']} | {c['native_ms']:.2f} | {ratios} |"
        )
    auto = [c["ratio"]["auto"] for c in cells if c["dtype"] in ("float32", "int64")]
    lines += [
        "",
        f"auto over the float32/int64 grid: median {statistics.median(auto):.2f}×, "
        f"worst {max(auto):.2f}× of native (goal: 2× median, 4× worst).",
        "",
    ]
    lines.append("| float32 accuracy, n=4096 | " + " | ".join(result["accuracy"]["nonzero"]) + " |")
    lines.append("|---|" + "---|" * len(result["accuracy"]["nonzero"]))
    for kind, acc in result["accuracy"].items():
        lines.append(
            f"| {kind}: max / median ulp | "
            + " | ".join(f"{v['max_ulp']:.3g} / {v['median_ulp']:.3g}" for v in acc.values())
            + " |"
        )
    lines += [
        "",
        f"Pass time: {result['pass_seconds_per_node'] * 1e3:.2f} ms per CumProd node "
        "(model with 1,000 nodes).",
        "",
    ]
    longest = [c for c in cells if c["n"] == max(x["n"] for x in cells) and c["total"] == 1 << 20]
    lines.append("| n=65536, 1M: nodes / session creation ms | " + " | ".join(names) + " |")
    lines.append("|---|" + "---|" * len(names))
    for c in longest:
        info = c["info"]
        row = " | ".join(
            f"{info[k]['nodes']} / {info[k]['create_ms']:.1f}" if k in info else "-" for k in names
        )
        lines.append(
            f"| {c['dtype']} {c['position']} ex,rev={c['exclusive']},{c['reverse']} | {row} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
