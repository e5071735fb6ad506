"""The timing half of ``scripts/bench/bench_runtime.py``, run with a runtime's own Python
(``.venv-NAME/bin/python``): it needs numpy and onnx and the runtime, nothing of the project
but ``rewriter/runtimes.py`` (loaded by path, for IREE's compiler flags and tool runner).

Usage: python scripts/bench/bench_runtime_child.py RUNTIME MANIFEST.json OUT.json
       python scripts/bench/bench_runtime_child.py --first RUNTIME MODEL.onnx X.npy

For each cell of the manifest: load (compile) each model once, run it once and check the
result against the cell's reference (integers: equal; floats: within the model's bound in
ulps of the output type, per position along the scanned axis), then time every model that
ran in interleaved rounds (a shuffled order per round, a few back-to-back runs per turn, the
median of the later ones), numpy in and numpy out, one thread. Writes OUT.json after each
cell (so a crash keeps the cells before it).

With ``--first`` (one fresh process per model, started by ``bench_runtime.py --compile``):
imports the runtime, then times one load / compile of MODEL and its first run on X (the same
loaders as the timed rounds; the result copied to numpy), and prints one JSON line:
``{"import_s": ..., "first_s": ..., "first_cpu_s": ...}``. The parent sets the environment
(tinygrad: ``CACHELEVEL=0``, no kernel cache, as on a first build).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx

Run = Callable[[], np.ndarray]
# A model whose warm run takes longer than this is not timed in rounds (its warm run stands).
SLOW_S = 1.0


def _library() -> object:
    path = Path(__file__).resolve().parents[2] / "rewriter" / "runtimes.py"
    spec = importlib.util.spec_from_file_location("cumprod_runtimes", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _input_name(model_path: Path) -> tuple[str, str]:
    graph = onnx.load(str(model_path), load_external_data=False).graph
    initializers = {i.name for i in graph.initializer}
    inputs = [i.name for i in graph.input if i.name not in initializers]
    assert len(inputs) == 1, inputs
    return inputs[0], graph.name


def version(runtime: str) -> str:
    if runtime == "openvino":
        import openvino as ov

        return f"openvino {ov.__version__}"
    if runtime == "onnxruntime":
        import onnxruntime as ort

        return f"onnxruntime {ort.__version__}"
    from importlib.metadata import version as dist_version

    dist = {
        "tract": "tract",
        "tinygrad": "tinygrad",
        "iree": "iree-base-runtime",
        "tvm": "apache-tvm",
        "mnn": "mnn",
    }[runtime]
    extra = ""
    if runtime == "iree":
        extra = f", iree-base-compiler {dist_version('iree-base-compiler')}"
    return f"{dist} {dist_version(dist)}{extra}"


def load_onnxruntime(model_path: Path, x: np.ndarray) -> Run:
    """An InferenceSession with one intra-op thread and its default graph optimisations."""
    import onnxruntime as ort

    name, _ = _input_name(model_path)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(str(model_path), options, providers=["CPUExecutionProvider"])

    def run() -> np.ndarray:
        return session.run(None, {name: x})[0]

    return run


def load_openvino(model_path: Path, x: np.ndarray) -> Run:
    import openvino as ov

    name, _ = _input_name(model_path)
    core = ov.Core()
    compiled = core.compile_model(
        core.read_model(str(model_path)), "CPU", {"INFERENCE_NUM_THREADS": "1"}
    )
    request = compiled.create_infer_request()

    def run() -> np.ndarray:
        return request.infer({name: x})[compiled.outputs[0]]

    return run


def load_tract(model_path: Path, x: np.ndarray) -> Run:
    import tract

    runnable = tract.onnx().load(str(model_path)).into_model().into_runnable()

    def run() -> np.ndarray:
        return runnable.run([x])[0].to_numpy()

    return run


def load_tinygrad(model_path: Path, x: np.ndarray) -> Run:
    """OnnxRunner once, its call captured by TinyJit (kernels compiled on the first calls,
    replayed after). The input tensor is made from numpy on every call."""
    from tinygrad import Tensor, TinyJit
    from tinygrad.nn.onnx import OnnxRunner

    name, _ = _input_name(model_path)
    runner = OnnxRunner(model_path)
    output = onnx.load(str(model_path), load_external_data=False).graph.output[0].name
    jitted = TinyJit(lambda t: runner({name: t})[output].contiguous().realize())

    def run() -> np.ndarray:
        return jitted(Tensor(x).realize()).numpy()

    return run


_IREE_COMPILED: dict[Path, bytes] = {}
_IREE_COMPILE_S: dict[Path, float] = {}


def compile_iree(model_path: Path) -> None:
    lib = _library()
    tools = Path(sys.executable).parent
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        mlir, vmfb = Path(tmp) / "model.mlir", Path(tmp) / "model.vmfb"
        lib._iree_tool([str(tools / "iree-import-onnx"), str(model_path), "-o", str(mlir)], mlir)
        lib._iree_tool(
            [str(tools / "iree-compile"), *lib.IREE_FLAGS, str(mlir), "-o", str(vmfb)], vmfb
        )
        _IREE_COMPILED[model_path] = vmfb.read_bytes()
    _IREE_COMPILE_S[model_path] = time.perf_counter() - start


def load_iree(model_path: Path, x: np.ndarray) -> Run:
    """Compiled with the project's flags (``IREE_FLAGS``), run on ``local-sync`` (the calling
    thread). Timed: the invoke and the copy of the output to the host."""
    import iree.runtime as rt

    _, name = _input_name(model_path)
    if model_path not in _IREE_COMPILED:
        compile_iree(model_path)
    module = rt.load_vm_flatbuffer(_IREE_COMPILED.pop(model_path), driver="local-sync")
    function = module[name]

    def run() -> np.ndarray:
        return np.asarray(function(x).to_host())

    return run


def load_tvm(model_path: Path, x: np.ndarray) -> Run:
    """Relax's ONNX frontend, ``tvm.compile(..., target="llvm")``, a VirtualMachine on the
    CPU, one thread (``TVM_NUM_THREADS``). Timed: the call and the copy of the output."""
    os.environ.setdefault("TVM_NUM_THREADS", "1")
    import tvm
    from tvm import relax
    from tvm.relax.frontend.onnx import from_onnx

    machine = relax.VirtualMachine(
        tvm.compile(from_onnx(onnx.load(str(model_path))), target="llvm"), tvm.cpu()
    )
    main = machine["main"]

    def run() -> np.ndarray:
        return main(tvm.runtime.tensor(x)).numpy()

    return run


def load_mnn(model_path: Path, x: np.ndarray) -> Run:
    """Converted by MNN's converter library in a child process (never its ``mnnconvert``
    script), loaded with ``MNN.nn``, one thread. Timed: the forward and the copy out."""
    import subprocess

    import MNN

    name, _ = _input_name(model_path)
    output = onnx.load(str(model_path), load_external_data=False).graph.output[0].name
    with tempfile.TemporaryDirectory() as tmp:
        mnn = Path(tmp) / "model.mnn"
        convert = (
            "import sys, _tools; _tools.mnnconvert(['mnnconvert', '-f', 'ONNX', '--modelFile', "
            "sys.argv[1], '--MNNModel', sys.argv[2], '--bizCode', 'bench'])"
        )
        subprocess.run(
            [sys.executable, "-c", convert, str(model_path), str(mnn)],
            capture_output=True,
            check=True,
        )
        module = MNN.nn.load_module_from_file(str(mnn), [name], [output])
    dtype = MNN.expr.float if x.dtype.kind == "f" else MNN.expr.int
    data = x.astype(np.float32 if x.dtype.kind == "f" else np.int32)

    def run() -> np.ndarray:
        feed = MNN.expr.const(data, list(data.shape), MNN.expr.NCHW, dtype)
        return np.array(module.forward([feed])[0].read(), copy=True).astype(x.dtype)

    return run


LOADERS: dict[str, Callable[[Path, np.ndarray], Run]] = {
    "onnxruntime": load_onnxruntime,
    "openvino": load_openvino,
    "tract": load_tract,
    "tinygrad": load_tinygrad,
    "iree": load_iree,
    "tvm": load_tvm,
    "mnn": load_mnn,
}


def check(
    y: np.ndarray, ref: np.ndarray, bound: np.ndarray | None, axis: int, tol: np.ndarray | None
) -> dict:
    """Integers (``bound`` and ``tol`` None): equal. Floats: |y - ref| <= bound_k ulps of the
    output type at ref, k the position along ``axis`` (NaN where ref is NaN); or, with
    ``tol``, |y - ref| <= tol."""
    y = np.asarray(y)
    if y.shape != ref.shape:
        return {"ok": False, "detail": f"shape {y.shape}, expected {ref.shape}"}
    if tol is not None:
        error = np.abs(y.astype(np.float64) - ref.astype(np.float64))
        bad = ~(error <= tol)
        worst = float((error / np.maximum(tol, 1e-300)).max())
        return {
            "ok": not bool(bad.any()),
            "worst": worst,
            "detail": f"{int(bad.sum())} elements past the tolerance; worst {worst:.3g}x it",
        }
    if bound is None:
        wrong = int(np.count_nonzero(y != ref))
        return {"ok": wrong == 0, "worst": wrong, "detail": f"{wrong} elements differ"}
    out_type = y.dtype
    exact_ref = ref.astype(np.longdouble)
    ulp = np.abs(np.spacing(ref.astype(out_type))).astype(np.longdouble)
    ulp = np.maximum(ulp, np.finfo(out_type).smallest_subnormal)
    shape = [1] * ref.ndim
    shape[axis] = -1
    allowed = bound.reshape(shape).astype(np.longdouble)
    with np.errstate(invalid="ignore", over="ignore"):
        error = np.abs(y.astype(np.longdouble) - exact_ref) / ulp
    error = np.where(np.isnan(exact_ref) & np.isnan(y), 0, error)
    bad = ~(error <= allowed)
    worst = float(np.nanmax(np.where(np.isfinite(error), error, np.inf)))
    return {
        "ok": not bool(bad.any()),
        "worst": worst,
        "detail": f"{int(bad.sum())} elements past the bound; worst {worst:.3g} ulps",
    }


def interleaved(contenders: dict[str, Run], rounds: int, max_seconds: float) -> dict[str, dict]:
    """Per contender: the median over rounds of the per-turn medians (seconds), and the
    spread of the rounds ((q75 - q25) / median)."""
    repeat = {}
    slow = {}
    for name, fn in contenders.items():
        for _ in range(2):  # tinygrad: the second call is the one TinyJit captures
            start = time.perf_counter()
            fn()
            per_run = time.perf_counter() - start
        if per_run > SLOW_S:  # too slow to time in rounds: its last warm run stands
            slow[name] = per_run
        repeat[name] = 5 if per_run < 0.005 else (3 if per_run < 0.05 else 1)
    contenders = {k: v for k, v in contenders.items() if k not in slow}
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
        if done >= 4 and time.perf_counter() - began > max_seconds:
            break
    out = {name: {"s": t, "spread": None, "rounds": 1, "slow": True} for name, t in slow.items()}
    for name, values in times.items():
        median = statistics.median(values)
        q = statistics.quantiles(values, n=4) if len(values) >= 2 else [median, median, median]
        out[name] = {"s": median, "spread": (q[2] - q[0]) / median, "rounds": len(values)}
    return out


# What ``--first`` imports before its clock starts (the same for every model of a runtime).
IMPORTS = {
    "onnxruntime": "onnxruntime",
    "openvino": "openvino",
    "tract": "tract",
    "tinygrad": "tinygrad.nn.onnx",
    "iree": "iree.runtime",
    "tvm": "tvm.relax.frontend.onnx",
    "mnn": "MNN",
}


def _live_descendants_cpu_s(root: int) -> float:
    """CPU seconds (user + system, their own finished children included) of the processes
    still running below ``root``, from ``/proc/PID/stat`` (0 where there is no ``/proc``).
    tinygrad compiles its kernels in a pool of worker processes that live until exit, so
    ``RUSAGE_CHILDREN``, which counts only children already waited for, misses that work."""
    parent_of: dict[int, int] = {}
    cpu_of: dict[int, float] = {}
    ticks = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    for entry in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = entry.read_text()
        except OSError:  # the process ended meanwhile
            continue
        fields = text[text.rindex(")") + 2 :].split()  # fields from the 3rd (state) on
        pid = int(entry.parent.name)
        parent_of[pid] = int(fields[1])
        cpu_of[pid] = sum(int(v) for v in fields[11:15]) / ticks  # utime stime cutime cstime
    total = 0.0
    for pid, seconds in cpu_of.items():
        ancestor = parent_of.get(pid)
        while ancestor is not None and ancestor != root:
            ancestor = parent_of.get(ancestor)
        if ancestor == root:
            total += seconds
    return total


def _cpu_s() -> float:
    """CPU seconds (user + system) of this process's threads, of its finished children
    (clang, iree-compile) and of its descendants still running (tinygrad's compile pool)."""
    import resource

    own, children = (
        resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
    )
    finished = own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime
    return finished + _live_descendants_cpu_s(os.getpid())


def first_run(runtime: str, model_path: Path, x: np.ndarray) -> dict[str, float]:
    """Seconds to import the runtime, and to load / compile ``model_path`` and run it once
    (output copied to numpy), in this process: wall time (``first_s``) and CPU time of the
    process and its children (``first_cpu_s``: on a loaded machine, near what the wall time
    would be on a quiet one where the work is single-threaded)."""
    import importlib

    start = time.perf_counter()
    importlib.import_module(IMPORTS[runtime])
    imported, cpu = time.perf_counter(), _cpu_s()
    np.asarray(LOADERS[runtime](model_path, x)())
    return {
        "import_s": imported - start,
        "first_s": time.perf_counter() - imported,
        "first_cpu_s": _cpu_s() - cpu,
    }


def main() -> None:
    if sys.argv[1] == "--first":
        runtime, model_path, x_path = sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4])
        print(json.dumps(first_run(runtime, model_path, np.load(x_path))), flush=True)
        return
    runtime, manifest_path, out_path = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    manifest = json.loads(manifest_path.read_text())
    load = LOADERS[runtime]
    result = {"runtime": runtime, "version": version(runtime), "cells": []}
    print(result["version"], flush=True)
    for cell in manifest["cells"]:
        folder = Path(cell["folder"])
        x = np.load(folder / "x.npy")
        refs = {kind: np.load(folder / f"{kind}.ref.npy") for kind in ("cumprod", "cumsum")}
        if runtime == "iree":  # both cores compile; nothing is timed meanwhile
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(2) as pool:
                list(
                    pool.map(
                        lambda m, f=folder: _safe(compile_iree, f / m["file"]),
                        cell["models"],
                    )
                )
        runs: dict[str, Run] = {}
        info: dict[str, dict] = {}
        for m in cell["models"]:
            path = folder / m["file"]
            entry: dict[str, object] = {}
            start = time.perf_counter()
            try:
                fn = load(path, x)
                entry["load_s"] = time.perf_counter() - start + _IREE_COMPILE_S.get(path, 0.0)
                y = fn()
                entry["first_run_s"] = time.perf_counter() - start - entry["load_s"]
                bound = np.load(folder / m["bound"]) if m.get("bound") else None
                tol = np.load(folder / m["tol"]) if m.get("tol") else None
                entry.update(check(y, refs[m["kind"]], bound, cell["axis"], tol))
                runs[m["name"]] = fn
            except Exception as exc:  # noqa: BLE001 - recorded, the others go on
                message = " ".join(str(exc).split("Stack backtrace:")[0].split())[:300]
                entry.update(ok=False, error=f"{type(exc).__name__}: {message}")
            info[m["name"]] = entry
        timing = interleaved(runs, manifest["rounds"], manifest["max_seconds"]) if runs else {}
        for name, t in timing.items():
            info[name].update(t)
        row = {k: cell[k] for k in ("dtype", "n", "position", "shape", "axis")}
        row["models"] = info
        result["cells"].append(row)
        out_path.write_text(json.dumps(result, indent=1))
        base = info.get("cumsum", {}).get("s")
        summary = " ".join(
            f"{k}={v['s'] / base:.2f}{'' if v.get('ok') else '!'}"
            for k, v in info.items()
            if "s" in v and base
        )
        print(f"{row['dtype']} n={row['n']} {row['position']}: cumsum {base} s; {summary}")
        sys.stdout.flush()
        for m in cell["models"]:
            _IREE_COMPILED.pop(folder / m["file"], None)


def _safe(fn: Callable[[Path], None], path: Path) -> None:
    with contextlib.suppress(Exception):  # the loader reports it again, in order
        fn(path)


if __name__ == "__main__":
    main()
