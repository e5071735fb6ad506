"""Benchmark on a target's own runtime: each lowering valid for the target against that
runtime's CumSum on the same shape and axis (the stand-in for a native kernel: none of these
runtimes has CumProd).

For every grid cell (element type, scan length n, axis position: (N/n, n) scanning the last
axis, (n, N/n) scanning the first) this builds one opset-26 CumProd model, lowers it with
every strategy the target accepts (``decompose_cumprod(model, strategy=S, target=NAME,
max_length=n)``; StrategyError refusals are skipped) and a CumSum model of the same shape and
axis, then times them in the runtime's own environment (``.venv-NAME/bin/python
scripts/bench_runtime_child.py``): each model is loaded / compiled once, run once and checked
against numpy (integers equal; floats within the lowering's stated bound in ulps), then the
models run in interleaved rounds (numpy in, numpy out, one thread) and the median is kept.
The figures that count are the ratios to CumSum measured in the same rounds.

``auto`` is not timed separately: it emits the same graph as the lowering it picks
(:func:`pick_for`), whose ratio is reported as auto's. On the targets where ``doubling`` runs
blocked from some length (``doubling.BLOCKED_FROM``), ``doubling_plain`` is its graph without
the blocks, timed in the same rounds. ``--run-time-length`` declares every dim of the CumProd
models symbolic (lowered with ``max_length=n``); ``doubling_plain`` is then, on float32 cells,
plain doubling without its offset windows (``near_one.windows``). ``--float32-carries`` adds
``carry_f32carries`` and ``radix_f32carries`` on float32 cells: those trees with float32 block
totals and carries, as before ``rewriter/lowerings/wide.py``, timed in the same rounds.

Usage: python scripts/bench_runtime.py --runtime NAME [--dtypes ...] [--lengths ...]
    [--rounds 15] [--max-seconds 10] [--run-time-length]
    [--out scripts/results/bench-runtime-NAME-DATE]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
import onnx.numpy_helper
import onnx_ir as ir
from onnx import TensorProto, helper

import rewriter
from rewriter.errors import StrategyError
from rewriter.lowerings import LOWERINGS, doubling
from rewriter.lowerings import auto as auto_module
from rewriter.site import ScanSpec
from rewriter.targets import TARGETS

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench import (
    DTYPES,
    cpu_name,
    data_for,
    float32_carries,
    int_list,
    model_for,
    shape_for,
    size_label,
)

ROOT = Path(__file__).resolve().parents[1]
RUNTIMES = ("openvino", "tract", "tinygrad", "iree", "tvm", "mnn")
# Element types each runtime computes in their own type (OpenVINO's CPU plugin holds int64 in
# 32 bits and float64 in float32: timing them would time something else).
DEFAULT_DTYPES = {
    "openvino": "float32,int32",
    "tract": "float32,int32,float64,int64",
    "tinygrad": "float32,int32",  # float64 / int64 left out for time (kernel compiles)
    "iree": "float32,int32,float64,int64",
    "tvm": "float32,int32,float64,int64",
    "mnn": "float32",  # MNN computes integers in float32 and float64 as float32
}
DEFAULT_SKIP = {"tinygrad": "doubling:512"}
# Ratio of auto's time to the best exact lowering's from which a cell counts as "clearly not
# the fastest".
CLEARLY = 1.5
PLAIN_DOUBLING = "doubling_plain"  # doubling without its blocked form, where it has one
F32_CARRIES = "_f32carries"  # a tree with float32 block totals and carries (--float32-carries)
F32_CARRIES_OF = ("carry", "radix", "doubling")  # the trees --float32-carries times so too
F32_CARRIES_TREES: list[str] = []  # F32_CARRIES_OF with --float32-carries, else empty


@contextlib.contextmanager
def _plain_doubling() -> Iterator[None]:
    """``doubling`` as before its blocked form and offset windows: no target blocks, for speed
    or accuracy (``ACCURATE_BLOCKED_ABOVE`` also gates the windows)."""
    saved, saved_above = dict(doubling.BLOCKED_FROM), doubling.ACCURATE_BLOCKED_ABOVE
    doubling.BLOCKED_FROM.clear()
    doubling.ACCURATE_BLOCKED_ABOVE = 1 << 62
    try:
        yield
    finally:
        doubling.BLOCKED_FROM.update(saved)
        doubling.ACCURATE_BLOCKED_ABOVE = saved_above


def cumsum_model(elem_type: int, shape: tuple[int, ...], axis: int) -> onnx.ModelProto:
    node = helper.make_node("CumSum", ["x", "axis"], ["y"], name="cumsum")
    graph = helper.make_graph(
        [node],
        "bench",
        [helper.make_tensor_value_info("x", elem_type, list(shape))],
        [helper.make_tensor_value_info("y", elem_type, list(shape))],
        [helper.make_tensor("axis", TensorProto.INT64, [], [axis])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])


def pick_for(
    elem_type: int, shape: tuple[int, ...], axis: int, target: str, *, symbolic: bool = False
) -> str:
    """The lowering ``auto`` picks on ``target`` for a CumProd of static ``shape`` (or of
    ``shape``'s rank with every dim symbolic, its length bounded by the shape's)."""
    spec = ScanSpec(
        dtype=ir.DataType(elem_type),
        exclusive=False,
        reverse=False,
        dims=tuple(f"d{k}" for k in range(len(shape))) if symbolic else shape,
        axis=axis,
        max_length=shape[axis] if symbolic else None,
    )
    runtime = TARGETS[target]
    return auto_module.pick(
        spec, runtime, runtime.compute_type(LOWERINGS["loop"].compute_dtype(spec.dtype))
    )


def lowered(model: onnx.ModelProto, strategy: str, target: str, n: int) -> onnx.ModelProto | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return rewriter.decompose_cumprod(model, strategy=strategy, target=target, max_length=n)  # type: ignore[return-value]
    except StrategyError:
        return None


def prepare_cell(
    folder: Path,
    target: str,
    cell: tuple[str, int, int, str],
    rng: np.random.Generator,
    skip: dict[str, int],
    *,
    run_time: bool = False,
) -> dict:
    """Writes the cell's models, input, references and bounds into ``folder``; ``skip``:
    lowerings left out from a length on; ``run_time``: every dim of the CumProd symbolic."""
    dtype, total, n, position = cell
    folder.mkdir(parents=True)
    elem_type = DTYPES[dtype]
    shape, axis = shape_for(total, n, position)
    x = data_for(elem_type, shape, rng)
    np.save(folder / "x.npy", x)
    is_float = x.dtype.kind == "f"
    wide = np.longdouble if x.dtype == np.float64 else np.float64
    if is_float:
        np.save(folder / "cumprod.ref.npy", np.cumprod(x.astype(wide), axis=axis))
        np.save(folder / "cumsum.ref.npy", np.cumsum(x.astype(wide), axis=axis))
    else:
        np.save(folder / "cumprod.ref.npy", np.cumprod(x, axis=axis, dtype=x.dtype))
        np.save(folder / "cumsum.ref.npy", np.cumsum(x, axis=axis, dtype=x.dtype))
    model = model_for(elem_type, shape, axis, 0, 0, symbolic=run_time)
    k = np.arange(1, n + 1)
    models = []
    skipped = [k for k, length in skip.items() if n >= length]
    plain = target in doubling.BLOCKED_FROM or (run_time and elem_type == TensorProto.FLOAT)
    extra = [PLAIN_DOUBLING] if plain else []
    if elem_type == TensorProto.FLOAT:
        extra += [tree + F32_CARRIES for tree in F32_CARRIES_TREES]
    for strategy in [*LOWERINGS, *extra]:
        if strategy == PLAIN_DOUBLING:
            with _plain_doubling():
                rewritten = None if "doubling" in skipped else lowered(model, "doubling", target, n)
        elif strategy.endswith(F32_CARRIES):
            base = strategy.removesuffix(F32_CARRIES)
            with float32_carries():
                rewritten = None if base in skipped else lowered(model, base, target, n)
        else:
            rewritten = None if strategy in skipped else lowered(model, strategy, target, n)
        if rewritten is None:
            continue
        entry = {
            "name": strategy,
            "kind": "cumprod",
            "file": f"{strategy}.onnx",
            "nodes": len(rewritten.graph.node),
        }
        onnx.save(rewritten, str(folder / entry["file"]))
        if is_float:
            base = strategy.removesuffix(F32_CARRIES)
            kernel = LOWERINGS["doubling" if strategy == PLAIN_DOUBLING else base]
            bound = np.asarray(kernel.max_ulps(ir.DataType(elem_type), k), dtype=np.float64)
            np.save(folder / f"{strategy}.bound.npy", bound)
            entry["bound"] = f"{strategy}.bound.npy"
        models.append(entry)
    onnx.save(cumsum_model(elem_type, shape, axis), str(folder / "cumsum.onnx"))
    cumsum = {"name": "cumsum", "kind": "cumsum", "file": "cumsum.onnx", "nodes": 1}
    if is_float:
        # Sequential summation: k - 1 roundings, each within half an ulp of a partial sum no
        # larger than sum |x|; an absolute tolerance (CumSum is only the time baseline).
        eps = float(np.finfo(x.dtype).eps)
        tol = np.cumsum(np.abs(x.astype(np.float64)), axis=axis) * eps
        tol *= np.cumsum(np.ones_like(tol), axis=axis)
        np.save(folder / "cumsum.tol.npy", tol)
        cumsum["tol"] = "cumsum.tol.npy"
    models.append(cumsum)
    return {
        "folder": str(folder),
        "dtype": dtype,
        "n": n,
        "position": position,
        "shape": list(shape),
        "axis": axis,
        "auto": pick_for(elem_type, shape, axis, target, symbolic=run_time),
        "skipped": skipped,
        "models": models,
    }


def analyse(cells: list[dict]) -> None:
    """Adds ratios to CumSum, auto's ratio, the best exact lowering and auto / best."""
    for cell in cells:
        models = cell["models"]
        base = models.get("cumsum", {}).get("s")
        cell["cumsum_ms"] = base * 1e3 if base else None
        ratios = {}
        for name, m in models.items():
            if name != "cumsum" and "s" in m and base:
                ratios[name] = m["s"] / base
        cell["ratio"] = ratios
        # the float32-carries variants are the trees before a fix, not a choice
        exact = {
            k: v for k, v in ratios.items() if models[k].get("ok") and not k.endswith(F32_CARRIES)
        }
        cell["best"] = min(exact, key=exact.get) if exact else None
        auto_ok = models.get(cell["auto"], {}).get("ok")
        cell["auto_ratio"] = ratios.get(cell["auto"]) if auto_ok else None
        if cell["best"] and cell["auto_ratio"]:
            cell["auto_over_best"] = cell["auto_ratio"] / exact[cell["best"]]
        else:
            cell["auto_over_best"] = None


def _fmt(cell: dict, name: str) -> str:
    m = cell["models"].get(name)
    if m is None:
        return "skip" if name in cell.get("skipped", ()) else "–"
    if "error" in m:
        return "err"
    if name not in cell["ratio"]:
        return "?"
    text = f"{cell['ratio'][name]:.2f}" + ("†" if m.get("slow") else "")
    if not m.get("ok"):
        return f"{text} ✗"
    return f"**{text}**" if name == cell["best"] else text


def markdown(result: dict) -> str:
    cells = result["cells"]
    variants = [tree + F32_CARRIES for tree in F32_CARRIES_OF]
    known = (*LOWERINGS, PLAIN_DOUBLING, *variants)
    names = [k for k in known if any(k in c["models"] for c in cells)]
    lines = [
        f"# Per-runtime benchmark: {result['runtime']} ({result['version']})",
        "",
        f"{result['date']}; {result['machine']['cpu']}, {result['machine']['cores']} cores "
        f"(shared; load average {result['load_before']} before, {result['load_after']} after); "
        f"N = {size_label(result['total'])} elements, one thread (tinygrad: its CPU device), "
        f"wall clock, median of up to "
        f"{result['rounds']} interleaved rounds (at most {result['max_seconds']:.0f} s per cell); "
        f"numpy in, numpy out. {result['how']}"
        + (
            " Every dim of the CumProd models symbolic, lowered with max_length = n "
            "(`--run-time-length`; CumSum's dims static); doubling_plain: without the offset "
            "windows."
            if result.get("run_time_length")
            else ""
        ),
        "",
        "Each lowering's time / the runtime's CumSum time on the same shape and axis "
        "(**bold**: the fastest exact lowering of the cell; ✗: result outside the lowering's "
        "bound or not equal; err: did not load or run; –: refused for this target; skip: "
        f"not built at this length ({result['skip'] or 'none'}); †: one warm run took over "
        "1 s, that run is the figure). "
        "auto is the lowering `auto` emits for this target (same graph, not timed twice)."
        + (f" **{result['note']}.**" if result.get("note") else ""),
        "",
    ]
    head = ["type", "n", "axis", "shape", "CumSum ms", *names, "auto", "auto / best"]
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "---|" * len(head))
    for c in cells:
        ratios = " | ".join(_fmt(c, k) for k in names)
        auto_text = (
            f"{c['auto']} {c['auto_ratio']:.2f}"
            if c["auto_ratio"] is not None
            else f"{c['auto']} –"
        )
        over = f"{c['auto_over_best']:.2f}" if c["auto_over_best"] is not None else "–"
        base = f"{c['cumsum_ms']:.2f}" if c["cumsum_ms"] else "–"
        shape = "×".join(str(d) for d in c["shape"])
        lines.append(
            f"| {c['dtype']} | {c['n']} | {c['position']} | {shape} | {base} | {ratios} | "
            f"{auto_text} | {over} |"
        )
    lines += ["", "Median / worst ratio to CumSum per axis (cells where it was exact):", ""]
    groups: dict[str, list[dict]] = {"all": cells}
    for c in cells:
        groups.setdefault(c["position"], []).append(c)
    cols = ["auto", *names]
    lines.append("| cells | count | " + " | ".join(cols) + " |")
    lines.append("|---|---|" + "---|" * len(cols))
    for label, group in groups.items():
        row = []
        for k in cols:
            if k == "auto":
                values = [c["auto_ratio"] for c in group if c["auto_ratio"] is not None]
            else:
                values = [c["ratio"][k] for c in group if c["models"].get(k, {}).get("ok")]
                values = [v for v in values if v is not None]
            row.append(f"{statistics.median(values):.2f} / {max(values):.2f}" if values else "–")
        lines.append(f"| {label} | {len(group)} | " + " | ".join(row) + " |")
    dtypes = list(dict.fromkeys(c["dtype"] for c in cells))
    lines += [
        "",
        "Fastest exact lowering per cell: its ratio, and auto's pick and ratio:",
        "",
        "| axis | n | " + " | ".join(dtypes) + " |",
        "|---|---|" + "---|" * len(dtypes),
    ]
    by_key = {(c["position"], c["n"], c["dtype"]): c for c in cells}
    for position in dict.fromkeys(c["position"] for c in cells):
        for n in dict.fromkeys(c["n"] for c in cells):
            row = []
            for dt in dtypes:
                c = by_key.get((position, n, dt))
                if c is None or not c["best"]:
                    row.append("–")
                    continue
                auto_text = f"{c['auto_ratio']:.2f}" if c["auto_ratio"] is not None else "–"
                row.append(f"{c['best']} {c['ratio'][c['best']]:.2f}; {c['auto']} {auto_text}")
            lines.append(f"| {position} | {n} | " + " | ".join(row) + " |")
    lines += ["", f"Cells where auto is at least {CLEARLY}× the fastest exact lowering:", ""]
    worse = [c for c in cells if c["auto_over_best"] and c["auto_over_best"] >= CLEARLY]
    for c in worse:
        lines.append(
            f"- {c['dtype']} n={c['n']} {c['position']}: auto ({c['auto']}) "
            f"{c['auto_ratio']:.2f}, {c['best']} {c['ratio'][c['best']]:.2f} "
            f"({c['auto_over_best']:.2f}×)"
        )
    if not worse:
        lines.append("- none")
    failed = [
        f"{c['dtype']} n={c['n']} {c['position']} {k}: {m.get('error') or m.get('detail')}"
        for c in cells
        for k, m in c["models"].items()
        if not m.get("ok")
    ]
    lines += ["", "Not exact or not run:", ""]
    lines += [f"- {f}" for f in failed] or ["- none"]
    spreads = [
        m["spread"] for c in cells for m in c["models"].values() if m.get("spread") is not None
    ]
    if spreads:
        lines += [
            "",
            "Noise: spread of the rounds ((q75 - q25) / median) per timed model: median "
            f"{statistics.median(spreads):.1%}, 90th percentile "
            f"{np.percentile(spreads, 90):.1%}, max {max(spreads):.1%}.",
        ]
    loads = [m["load_s"] for c in cells for m in c["models"].values() if "load_s" in m]
    if loads:
        lines.append(
            f"Load / compile time per model: median {statistics.median(loads):.2f} s, "
            f"max {max(loads):.2f} s."
        )
    return "\n".join(lines) + "\n"


HOW = {
    "openvino": "CPU plugin, INFERENCE_NUM_THREADS=1; compile_model once, infer_request.infer.",
    "tract": "tract.onnx().load().into_model().into_runnable() once (as rewriter/runtimes.py); "
    "run.",
    "tinygrad": "OnnxRunner once, its call under TinyJit (CPU device, clang); Tensor from numpy "
    "and .numpy() each call.",
    "iree": "iree-import-onnx + iree-compile once per model (rewriter/runtimes.py IREE_FLAGS: "
    "llvm-cpu, generic CPU, float64 kept); local-sync driver; timed: the invoke and to_host.",
    "tvm": "Relax from_onnx + tvm.compile(target='llvm') once, VirtualMachine on the CPU, "
    "TVM_NUM_THREADS=1; timed: the call and .numpy().",
    "mnn": "converter library (_tools.mnnconvert) in a child process once, MNN.nn module, one "
    "thread; timed: forward and read.",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runtime", required=True, choices=RUNTIMES)
    parser.add_argument("--dtypes", help="default: the types the runtime computes exactly")
    parser.add_argument("--lengths", default="8,64,512,4096")
    parser.add_argument("--positions", default="last,first")
    parser.add_argument("--total", type=int, default=1, help="elements, in units of 2^20")
    parser.add_argument(
        "--elements",
        type=int,
        help="elements, exactly (overrides --total): e.g. 1000000 gives row counts that are "
        "not powers of two (tract's kernels have shape-dependent fast paths)",
    )
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--max-seconds", type=float, default=8.0, help="timing per cell")
    parser.add_argument("--out", help="prefix of the .md / .json written")
    parser.add_argument(
        "--skip",
        help="NAME:N,... lowerings not built from length N on (default: tinygrad doubling:512, "
        "whose kernels took minutes to compile at n=4096)",
    )
    parser.add_argument(
        "--float32-carries",
        action="store_true",
        help="also time carry and radix with float32 carries (before wide.py) on float32 cells",
    )
    parser.add_argument(
        "--run-time-length",
        action="store_true",
        help="every dim of the CumProd models symbolic, lowered with max_length = n (the "
        "CumSum baseline keeps static dims)",
    )
    parser.add_argument("--from-json", help="only re-render the markdown of an earlier run")
    parser.add_argument(
        "--repick",
        action="store_true",
        help="with --from-json: auto's column from the current tables (the timings stay the "
        "run's own; auto is the same graph as the lowering it picks)",
    )
    args = parser.parse_args()
    date = datetime.date.today().isoformat()
    out = Path(args.out or ROOT / "scripts" / "results" / f"bench-runtime-{args.runtime}-{date}")
    if args.from_json:
        result = json.loads(Path(args.from_json).read_text())
        if args.repick:
            for cell in result["cells"]:
                cell["auto"] = pick_for(
                    DTYPES[cell["dtype"]], tuple(cell["shape"]), cell["axis"], result["runtime"]
                )
            analyse(result["cells"])
            result["note"] = (
                f"auto re-picked on {datetime.date.today().isoformat()} with the current tables "
                "(--repick); timings from the run above"
            )
            Path(f"{out}.json").write_text(json.dumps(result, indent=1))
        Path(f"{out}.md").write_text(markdown(result))
        print(markdown(result))
        return
    if args.float32_carries:
        F32_CARRIES_TREES.extend(F32_CARRIES_OF)
    python = ROOT / f".venv-{args.runtime}" / "bin" / "python"
    if not python.exists():
        parser.error(f"{python} is missing: run scripts/runtimes/{args.runtime}.sh")
    dtypes = (args.dtypes or DEFAULT_DTYPES[args.runtime]).split(",")
    total = args.elements or args.total << 20
    skip_text = args.skip if args.skip is not None else DEFAULT_SKIP.get(args.runtime, "")
    skip = {k: int(v) for k, v in (item.split(":") for item in skip_text.split(",") if item)}
    rng = np.random.default_rng(0)
    load_before = [round(v, 2) for v in os.getloadavg()]
    began = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-runtime-") as tmp:
        cells = [
            prepare_cell(
                Path(tmp) / f"c{i}", args.runtime, cell, rng, skip, run_time=args.run_time_length
            )
            for i, cell in enumerate(
                (dt, total, n, pos)
                for dt in dtypes
                for n in int_list(args.lengths)
                for pos in args.positions.split(",")
            )
        ]
        manifest = {"rounds": args.rounds, "max_seconds": args.max_seconds, "cells": cells}
        (Path(tmp) / "manifest.json").write_text(json.dumps(manifest))
        child_out = Path(tmp) / "child.json"
        child = subprocess.run(
            [
                str(python),
                str(ROOT / "scripts" / "bench_runtime_child.py"),
                args.runtime,
                str(Path(tmp) / "manifest.json"),
                str(child_out),
            ],
            check=False,
        )
        timed = json.loads(child_out.read_text()) if child_out.exists() else {"cells": []}
    if child.returncode != 0:
        print(f"child exited {child.returncode}: {len(timed['cells'])} cells kept", flush=True)
    for cell, row in zip(cells, timed["cells"], strict=False):
        for entry in cell["models"]:
            row["models"][entry["name"]]["nodes"] = entry["nodes"]
        row["auto"] = cell["auto"]
        row["skipped"] = cell["skipped"]
    analyse(timed["cells"])
    result = {
        "runtime": args.runtime,
        "version": timed.get("version", "?"),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": {
            "cpu": cpu_name(),
            "cores": os.cpu_count(),
            "python": platform.python_version(),
        },
        "load_before": load_before,
        "load_after": [round(v, 2) for v in os.getloadavg()],
        "seconds": round(time.perf_counter() - began, 1),
        "total": total,
        "rounds": args.rounds,
        "max_seconds": args.max_seconds,
        "how": HOW[args.runtime],
        "skip": skip_text,
        "run_time_length": args.run_time_length,
        "complete": child.returncode == 0 and len(timed["cells"]) == len(cells),
        "cells": timed["cells"],
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    Path(f"{out}.json").write_text(json.dumps(result, indent=1))
    Path(f"{out}.md").write_text(markdown(result))
    print(markdown(result))


if __name__ == "__main__":
    main()
