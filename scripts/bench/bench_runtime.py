"""Benchmark on a target's own runtime: each lowering valid for the target against that
runtime's CumSum on the same shape and axis (the stand-in for a native kernel: none of these
runtimes has CumProd; onnxruntime's CumSum is the baseline there too, for the same reason:
the other runtimes' users compare against it).

For every grid cell (element type, scan length n, axis position: (N/n, n) scanning the last
axis, (n, N/n) scanning the first) this builds one opset-26 CumProd model, lowers it with
every strategy the target accepts (``decompose_cumprod(model, strategy=S, target=NAME,
max_length=n)``; StrategyError refusals are skipped) and a CumSum model of the same shape and
axis, then times them in the runtime's own environment (``.venv-NAME/bin/python
scripts/bench/bench_runtime_child.py``): each model is loaded / compiled once, run once and checked
against numpy (integers equal; floats within the lowering's stated bound in ulps), then the
models run in interleaved rounds (numpy in, numpy out, one thread) and the median is kept.
The figures that count are the ratios to CumSum measured in the same rounds.

``auto`` is not timed separately: it emits the same graph as the lowering it picks
(:func:`pick_for`), whose ratio is reported as auto's. On the targets where ``doubling`` runs
blocked from some length (``Target.doubling_blocked_from``), ``doubling_plain`` is its graph without
the blocks, timed in the same rounds. ``--run-time-length`` declares every dim of the CumProd
models symbolic (lowered with ``max_length=n``); ``doubling_plain`` is then, on float32 cells,
plain doubling without its offset windows (``near_one.windows``). ``--float32-carries`` adds
``carry_f32carries`` and ``radix_f32carries`` on float32 cells: those trees with float32 block
totals and carries, as before ``rewriter/lowerings/wide.py``, timed in the same rounds.

``--compile REPS`` also measures what the rewrite costs before the first result: each model
(every lowering and the CumSum model) is loaded / compiled and run once in a FRESH process of
the runtime's environment (``bench_runtime_child.py --first``), REPS times, timed from after
the runtime's import to the first output in numpy (onnxruntime: session + run; OpenVINO:
read_model + compile_model + infer; tract: load + into_runnable + run; tinygrad with its
kernel cache off, ``CACHELEVEL=0``, as on a first build: OnnxRunner + the first call, which
compiles every kernel; IREE: iree-import-onnx + iree-compile + load + the first call; TVM:
from_onnx + tvm.compile + the first call; MNN: its converter library in a child process +
load + the first call). Each
lowering's process runs next to one of the CumSum model (alternately before and after it),
in a shuffled order per repetition, and its compile ratio is the median over repetitions of
its time / that CumSum process's time: load on the shared machine moves both alike. A
process past ``--compile-timeout`` counts as that long and is marked; such a model is not
timed at run time. The tables then give, per cell and lowering, the compile ratio, the node
count of the rewritten model and the steady run-time ratio, and which lowerings stay within
``--compile-limit`` (2x) of CumSum's compile, the fastest of them at run time marked.

``--before REV`` times a change on the runtime against an earlier commit's graphs (as
``bench_against_commit.py`` does on onnxruntime): per cell, ``auto`` as REV's code builds it
(``git archive`` of its ``rewriter/``, run in a child process), twice (the second is the
control), beside this checkout's ``auto``, in the same rounds; cells whose two graphs are
the same are listed, not timed. No other lowering is built unless ``--only`` names some.

Usage: python scripts/bench/bench_runtime.py --runtime NAME [--dtypes ...] [--lengths ...]
    [--positions last,first] [--cells POS:N,...] [--elements N] [--rounds 15]
    [--max-seconds 10] [--run-time-length] [--only NAME,...] [--variants NAME,...]
    [--compile REPS] [--compile-timeout 60] [--compile-clock wall|cpu] [--before REV]
    [--out scripts/results/bench-runtime-NAME-DATE]

Issue 52's compile-cost grid (four shapes of 65536 elements; one command per runtime, NAME
one of onnxruntime, openvino, iree, tinygrad, tract)::

    python scripts/bench/bench_runtime.py --runtime NAME --dtypes float32,int32 --elements 65536 \
        --cells last:1024,first:1024,middle:256,last:8192 --compile 3 \
        --out scripts/results/compile-NAME-DATE

(``--only`` and ``--skip`` narrow the lowerings for time; ``--variants`` adds experiments,
e.g. ``carry_r16``; the masked-blocks experiment of that run is in git at 3e6982a,
``scripts/proto_masked_blocks.py``; results of 2026-12-06 and the picks they
support: ``scripts/results/compile-2026-12-06-summary.md``.)
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import importlib
import json
import os
import platform
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import onnx
import onnx.numpy_helper
import onnx_ir as ir
from onnx import TensorProto, helper

import rewriter
from rewriter import lowerings
from rewriter.errors import StrategyError
from rewriter.lowerings import LOWERINGS, doubling
from rewriter.site import CumProdSite, ScanSpec
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
from bench_against_commit import build as build_at
from bench_against_commit import code_at

ROOT = Path(__file__).resolve().parents[2]
RUNTIMES = ("onnxruntime", "openvino", "tract", "tinygrad", "iree", "tvm", "mnn")
# The Python each runtime runs in (ROOT / VENV[runtime] / bin / python).
VENV = {name: f".venv-{name}" for name in RUNTIMES} | {"onnxruntime": ".venv"}
# Element types each runtime computes in their own type (OpenVINO's CPU plugin holds int64 in
# 32 bits and float64 in float32: timing them would time something else).
DEFAULT_DTYPES = {
    "onnxruntime": "float32,int32,float64,int64",
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
# The environment of the runtime's processes, beyond the parent's (tinygrad: its CPU device;
# the fresh --compile processes also get COMPILE_ENV).
RUNTIME_ENV = {"tinygrad": {"DEV": "CPU"}}
COMPILE_ENV = {"tinygrad": {"CACHELEVEL": "0"}}  # no kernel cache: a first build
PLAIN_DOUBLING = "doubling_plain"  # doubling without its blocked form, where it has one
F32_CARRIES = "_f32carries"  # a tree with float32 block totals and carries (--float32-carries)
F32_CARRIES_OF = ("carry", "radix", "doubling")  # the trees --float32-carries times so too
F32_CARRIES_TREES: list[str] = []  # F32_CARRIES_OF with --float32-carries, else empty


# --variants: experiments beside the lowerings, on static inclusive forward cells. A variant is
# a lowering built with target facts changed (name -> (strategy, fields): Target fields, or
# "MODULE.NAME" for a constant of rewriter.lowerings.MODULE), or a model builder (name ->
# (elem_type, shape, axis) -> model) with loop's k - 1 ulps bound.
VARIANTS: dict[str, tuple[str, dict[str, object]] | Callable[..., onnx.ModelProto]] = {
    **{f"carry_r{r}": ("carry", {"carry_radix": (r, r)}) for r in (8, 16, 32, 64)},
    # radix with r = R on every level and axis
    **{f"radix_r{r}": ("radix", {"radix_r": (r, 1 << 62, r)}) for r in (4, 8, 16, 32, 64)},
    # doubling's blocked form with blocks of B positions (doubling.BLOCK)
    **{f"doubling_b{b}": ("doubling", {"doubling.BLOCK": b}) for b in (8, 16, 64, 128)},
    # masked with tiles of side B (Target.masked_block)
    **{f"masked_b{b}": ("masked", {"masked_block": b}) for b in (16, 32, 128, 256)},
    # blocked with two levels of blocks at every length
    "blocked_2lv": ("blocked", {"blocked_one_level_up_to": 1}),
}


@contextlib.contextmanager
def _facts(**fields: object) -> Iterator[None]:
    """Every target's ``fields`` set to these values for the block; a field "MODULE.NAME"
    sets that constant of ``rewriter.lowerings.MODULE`` instead."""
    constants = {key: value for key, value in fields.items() if "." in key}
    saved_constants = {}
    for key, value in constants.items():
        module_name, name = key.split(".")
        module = importlib.import_module(f"rewriter.lowerings.{module_name}")
        saved_constants[key] = (module, name, getattr(module, name))
        setattr(module, name, value)
    facts = {key: value for key, value in fields.items() if key not in constants}
    saved = dict(TARGETS)
    for name, target in saved.items():
        TARGETS[name] = dataclasses.replace(target, **facts)  # type: ignore[arg-type]
    try:
        yield
    finally:
        TARGETS.update(saved)
        for module, name, value in saved_constants.values():
            setattr(module, name, value)


@contextlib.contextmanager
def _plain_doubling() -> Iterator[None]:
    """``doubling`` as before its blocked form and offset windows: no target blocks, for speed
    or accuracy (``ACCURATE_BLOCKED_ABOVE`` also gates the windows)."""
    saved, saved_above = dict(TARGETS), doubling.ACCURATE_BLOCKED_ABOVE
    for name, target in saved.items():
        TARGETS[name] = dataclasses.replace(target, doubling_blocked_from=None)
    doubling.ACCURATE_BLOCKED_ABOVE = 1 << 62
    try:
        yield
    finally:
        TARGETS.update(saved)
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
    x = ir.Value(name="x", type=ir.TensorType(spec.dtype), shape=ir.Shape(spec.dims))
    site = CumProdSite(x, None, spec, "cumprod", "bench", 26)
    return lowerings.choose(site, "auto", TARGETS[target], 26).name


def lowered(model: onnx.ModelProto, strategy: str, target: str, n: int) -> onnx.ModelProto | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return rewriter.decompose_cumprod(model, strategy=strategy, target=target, max_length=n)  # type: ignore[return-value]
    except StrategyError:
        return None


def against_models(
    folder: Path,
    model: onnx.ModelProto,
    new: onnx.ModelProto | None,
    target: str,
    n: int,
    *,
    before: Path,
    elem_type: int,
) -> list[dict] | str:
    """``new``, ``model`` as this checkout's ``auto`` lowers it (``auto_new``; None: refused),
    and ``model`` as the code in ``before`` lowers it (``auto_before``, and again as
    ``auto_again``, the control), for ``--before``, checked within k - 1 ulps (auto's
    contract); or why the cell is not timed: the same graph, or a refusal by either code."""
    if new is None:
        return "this checkout refuses it"
    onnx.save(model, str(folder / "native.onnx"))
    try:
        old = build_at(
            before, folder / "native.onnx", folder / "auto_before.onnx", target=target, max_length=n
        )
    except subprocess.CalledProcessError as error:
        return f"the commit's code failed: {(error.stderr.strip().splitlines() or ['?'])[-1]}"
    if new.graph.SerializeToString() == old.graph.SerializeToString():
        return "the same graph"
    onnx.save(new, str(folder / "auto_new.onnx"))
    onnx.save(old, str(folder / "auto_again.onnx"))
    bound = LOWERINGS["loop"].max_ulps(ir.DataType(elem_type), np.arange(1, n + 1))
    np.save(folder / "auto.bound.npy", np.asarray(bound, dtype=np.float64))
    return [
        {"name": name, "kind": "cumprod", "file": f"{name}.onnx", "nodes": len(m.graph.node)}
        | ({"bound": "auto.bound.npy"} if ir.DataType(elem_type).is_floating_point() else {})
        for name, m in (("auto_new", new), ("auto_before", old), ("auto_again", old))
    ]


def prepare_cell(
    folder: Path,
    target: str,
    cell: tuple[str, int, int, str],
    rng: np.random.Generator,
    skip: dict[str, int],
    *,
    run_time: bool = False,
    only: set[str] | None = None,
    variants: tuple[str, ...] = (),
    before: Path | None = None,
) -> dict:
    """Writes the cell's models, input, references and bounds into ``folder``; ``skip``:
    lowerings left out from a length on; ``run_time``: every dim of the CumProd symbolic;
    ``only``: the lowerings built (None: all); ``variants``: names of :data:`VARIANTS`;
    ``before``: the code of ``--before``'s commit (:func:`against_models`)."""
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
    blocked = TARGETS[target].doubling_blocked_from is not None
    plain = blocked or (run_time and elem_type == TensorProto.FLOAT)
    extra = [PLAIN_DOUBLING] if plain else []
    if elem_type == TensorProto.FLOAT:
        extra += [tree + F32_CARRIES for tree in F32_CARRIES_TREES]
    strategies = [k for k in [*LOWERINGS, *extra] if only is None or k in only]
    for strategy in [*strategies, *variants]:
        variant = VARIANTS.get(strategy)
        if isinstance(variant, tuple):
            base, fields = variant
            with _facts(**fields):
                rewritten = lowered(model, base, target, n)
        elif variant is not None:
            rewritten = None if run_time else variant(elem_type, shape, axis)
        elif strategy == PLAIN_DOUBLING:
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
            if strategy in VARIANTS:
                base = variant[0] if isinstance(variant, tuple) else "loop"
            kernel = LOWERINGS["doubling" if strategy == PLAIN_DOUBLING else base]
            bound = np.asarray(kernel.max_ulps(ir.DataType(elem_type), k), dtype=np.float64)
            np.save(folder / f"{strategy}.bound.npy", bound)
            entry["bound"] = f"{strategy}.bound.npy"
        models.append(entry)
    auto_model = lowered(model, "auto", target, n)
    against = (
        []
        if before is None
        else against_models(
            folder, model, auto_model, target, n, before=before, elem_type=elem_type
        )
    )
    models += [] if isinstance(against, str) else against
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
        "auto_nodes": len(auto_model.graph.node) if auto_model is not None else None,
        "skipped": skipped,
        "models": models,
        "not_against": against if isinstance(against, str) else None,
    }


CHILD = ROOT / "scripts" / "bench" / "bench_runtime_child.py"
# The compile summary's ratio that --compile-clock judges by.
COMPILE_KEY = {"wall": "ratio", "cpu": "cpu_ratio"}


def fresh_first(
    python: Path, runtime: str, model: Path, x_path: Path, timeout: float
) -> dict[str, object]:
    """One fresh process of the runtime's Python that loads / compiles ``model`` and runs it
    once (``bench_runtime_child.py --first``): its ``first_s`` (from after the runtime's
    import to the first output), ``import_s``, and ``process_s`` (the whole process, seen
    from here). Past ``timeout`` seconds its process group is killed (IREE's compiler runs
    in a child of it) and ``first_s`` is ``timeout`` with ``timeout: True``."""
    env = os.environ | RUNTIME_ENV.get(runtime, {}) | COMPILE_ENV.get(runtime, {})
    args = [str(python), str(CHILD), "--first", runtime, str(model), str(x_path)]
    start = time.perf_counter()
    proc = subprocess.Popen(
        args,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return {"first_s": timeout, "process_s": timeout, "timeout": True}
    process_s = time.perf_counter() - start
    if proc.returncode != 0 or not out.strip():
        lines = [line for line in err.splitlines() if line.strip()] or ["no output"]
        return {"error": f"exit {proc.returncode}: {lines[-1][:300]}", "process_s": process_s}
    result: dict[str, object] = json.loads(out.strip().splitlines()[-1])
    result["process_s"] = process_s
    return result


def compile_runs(
    cells: list[dict], runtime: str, python: Path, reps: int, timeout: float, *, seed: int = 0
) -> None:
    """``reps`` fresh-process load / compile + first runs of every model of every cell
    (:func:`fresh_first`), each lowering's process next to one of the CumSum model's,
    alternately after and before it, in a shuffled order per repetition. Adds to each cell
    ``compile_runs``: {lowering: [{"s", "cumsum_s", ...}, ...]}. A lowering that timed out or
    failed is not run again."""
    rng = random.Random(seed)
    for cell in cells:
        cell["compile_runs"] = {m["name"]: [] for m in cell["models"] if m["name"] != "cumsum"}
    for rep in range(reps):
        for cell in cells:
            folder = Path(cell["folder"])
            names = [
                k
                for k, runs in cell["compile_runs"].items()
                if not any(r.get("timeout") or r.get("error") for r in runs)
            ]
            rng.shuffle(names)
            for k, name in enumerate(names):
                order = [name, "cumsum"] if (k + rep) % 2 == 0 else ["cumsum", name]
                got = {
                    who: fresh_first(
                        python, runtime, folder / f"{who}.onnx", folder / "x.npy", timeout
                    )
                    for who in order
                }
                run = {"s": got[name].get("first_s"), "cumsum_s": got["cumsum"].get("first_s")}
                run |= {
                    key: got[name][key]
                    for key in ("timeout", "error", "import_s", "process_s", "first_cpu_s")
                    if key in got[name]
                }
                run["cumsum_cpu_s"] = got["cumsum"].get("first_cpu_s")
                run["cumsum_process_s"] = got["cumsum"].get("process_s")
                if "error" in got["cumsum"]:
                    run["cumsum_error"] = got["cumsum"]["error"]
                cell["compile_runs"][name].append(run)
                ratio = (
                    f"{run['s'] / run['cumsum_s']:.2f}x"
                    if run["s"] and run["cumsum_s"]
                    else run.get("error", "?")
                )
                print(
                    f"compile {rep + 1}/{reps} {cell['dtype']} {cell['position']} "
                    f"n={cell['n']} {name}: {run['s'] or 0:.2f} s against "
                    f"{run['cumsum_s'] or 0:.2f} s ({ratio}"
                    f"{', timeout' if run.get('timeout') else ''})",
                    flush=True,
                )


def compile_summary(runs: list[dict]) -> dict[str, object]:
    """Median seconds, median CumSum seconds and the median of the per-repetition ratios
    s / cumsum_s of one lowering's fresh-process runs (:func:`compile_runs`), and the median
    ratio of the whole processes (Python start and imports included) and of the CPU time
    (the process, its children and its live descendants), over the runs that finished (None
    if none did). ``timeout``: some run hit the limit (its time, the limit, stands in: the
    ratio is a lower bound); ``error``: the first error seen (no figures)."""
    errors = [r["error"] for r in runs if r.get("error")]
    paired = [r for r in runs if r.get("s") is not None and r.get("cumsum_s")]
    if errors or not paired:
        return {"error": errors[0] if errors else "no run", "reps": len(runs)}
    return {
        "s": statistics.median(r["s"] for r in paired),
        "cumsum_s": statistics.median(r["cumsum_s"] for r in paired),
        "ratio": statistics.median(r["s"] / r["cumsum_s"] for r in paired),
        "cpu_ratio": statistics.median(
            r["first_cpu_s"] / r["cumsum_cpu_s"] for r in paired if r.get("first_cpu_s")
        )
        if any(r.get("first_cpu_s") for r in paired)
        else None,
        "process_ratio": statistics.median(
            r["process_s"] / r["cumsum_process_s"] for r in paired if r.get("cumsum_process_s")
        ),
        "reps": len(paired),
        "timeout": any(r.get("timeout") for r in paired),
    }


def compile_pick(
    compile_ratio: dict[str, float], run_ratio: dict[str, float], limit: float
) -> str | None:
    """Of the lowerings whose compile ratio is at most ``limit``, the fastest at run time
    (the lowerings without a run ratio left out); None when there is none."""
    within = [k for k, v in compile_ratio.items() if v <= limit and k in run_ratio]
    return min(within, key=run_ratio.__getitem__) if within else None


def analyse(cells: list[dict], compile_limit: float = 2.0, clock: str = "wall") -> None:
    """Adds ratios to CumSum, auto's ratio, the best exact lowering and auto / best; with
    compile runs, each lowering's compile summary, the lowerings within ``compile_limit``
    (by the wall-time ratio, or with ``clock="cpu"`` the CPU-time one) and the fastest of
    them at run time."""
    for cell in cells:
        models = cell["models"]
        base = models.get("cumsum", {}).get("s")
        cell["cumsum_ms"] = base * 1e3 if base else None
        ratios = {}
        for name, m in models.items():
            if name != "cumsum" and "s" in m and base:
                ratios[name] = m["s"] / base
        cell["ratio"] = ratios
        # the float32-carries variants are the trees before a fix, and auto_* (--before) the
        # picks, not choices
        exact = {
            k: v
            for k, v in ratios.items()
            if models[k].get("ok") and not k.endswith(F32_CARRIES) and not k.startswith("auto_")
        }
        cell["best"] = min(exact, key=exact.get) if exact else None
        auto_ok = models.get(cell["auto"], {}).get("ok")
        cell["auto_ratio"] = ratios.get(cell["auto"]) if auto_ok else None
        if cell["best"] and cell["auto_ratio"]:
            cell["auto_over_best"] = cell["auto_ratio"] / exact[cell["best"]]
        else:
            cell["auto_over_best"] = None
        if "compile_runs" not in cell:
            continue
        cell["compile"] = {k: compile_summary(v) for k, v in cell["compile_runs"].items()}
        cumsum_s = [c["cumsum_s"] for c in cell["compile"].values() if "cumsum_s" in c]
        cell["cumsum_compile_s"] = statistics.median(cumsum_s) if cumsum_s else None
        key = COMPILE_KEY[clock]
        measured = {
            k: c[key]
            for k, c in cell["compile"].items()
            if c.get(key) is not None and not c["timeout"] and models.get(k, {}).get("ok")
        }
        cell["compile_limit"] = compile_limit
        cell["compile_clock"] = clock
        cell["compile_best"] = compile_pick(measured, exact, compile_limit)
        auto = cell["compile"].get(cell["auto"], {})
        cell["auto_compile_ratio"] = auto.get("ratio")
        cell["auto_compile_cpu_ratio"] = auto.get("cpu_ratio")


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
    known = (*LOWERINGS, PLAIN_DOUBLING, *variants, *VARIANTS)
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
    lines += compile_markdown(result) + against_markdown(result)
    return "\n".join(lines) + "\n"


def against_markdown(result: dict) -> list[str]:
    """The --before table: per cell whose auto graph changed, this checkout's auto over the
    commit's, the control (the commit's graph again) and both against CumSum."""
    if not result.get("before"):
        return []
    lines = [
        "",
        f"## auto against {result['before']}",
        "",
        f"auto_new: this checkout's auto; auto_before / auto_again: {result['before']}'s, "
        "twice (again / before is the control); timed in the same rounds. Cells not timed: "
        f"{'; '.join(result['not_against']) or 'none'}.",
        "",
        "| type | n | axis | shape | new / before | again / before | before × CumSum "
        "| new × CumSum | nodes before → new |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    ratios = []
    for c in result["cells"]:
        m = c["models"]
        new, old, again = (m.get(k, {}) for k in ("auto_new", "auto_before", "auto_again"))
        if not all(x.get("ok") and x.get("s") for x in (new, old, again)):
            lines.append(f"| {c['dtype']} | {c['n']} | {c['position']} | – | not timed |||||")
            continue
        ratios.append(new["s"] / old["s"])
        r = c["ratio"]
        lines.append(
            f"| {c['dtype']} | {c['n']} | {c['position']} | {'×'.join(map(str, c['shape']))} "
            f"| {ratios[-1]:.3f} | {again['s'] / old['s']:.3f} | {_times(r.get('auto_before'))} "
            f"| {_times(r.get('auto_new'))} | {old.get('nodes')} → {new.get('nodes')} |"
        )
    if ratios:
        lines += [
            "",
            f"{len(ratios)} cells changed: new / before median {statistics.median(ratios):.3f}, "
            f"{min(ratios):.3f}-{max(ratios):.3f}.",
        ]
    return lines


def _times(value: float | None, digits: str = ".2f") -> str:
    return "–" if value is None else format(value, digits)


def compile_markdown(result: dict) -> list[str]:
    """The --compile tables: per cell and lowering, compile ratio, nodes and run ratio; per
    cell, auto's figures and the fastest lowering within the compile limit."""
    cells = [c for c in result["cells"] if "compile" in c]
    if not cells:
        return []
    limit = cells[0]["compile_limit"]
    clock = cells[0].get("compile_clock", "wall")
    key = COMPILE_KEY[clock]
    lines = [
        "",
        f"## Load / compile + first run, fresh process ({result['compile_reps']} repetitions)",
        "",
        f"{result['compile_how']} Compile ratio: the median over repetitions of the "
        "lowering's time / the time of the CumSum process run next to it; CPU: the same in CPU "
        "time of the process, its finished children (clang, iree-compile) and its descendants "
        "still running (tinygrad's compile pool); process: the same "
        "for the whole processes (Python start and imports included); seconds: medians. "
        "Run ratio: the steady run time / CumSum's, from the tables above. "
        f"✓: compile within {limit:g}× of CumSum's ({clock} time); **bold**: the fastest of "
        "those at run "
        f"time; (auto): auto's pick; >: hit the {result['compile_timeout']:g} s limit (a lower "
        "bound; not timed at run time); ✗: not exact.",
        "",
        "| type | shape | axis | lowering | nodes | s | CumSum s | compile × | CPU × | "
        "process × | run × | ≤ 2× |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in cells:
        shape = "×".join(str(d) for d in c["shape"])
        rows = sorted(c["compile"].items(), key=lambda kv: kv[1].get("ratio") or float("inf"))
        for name, comp in rows:
            model = c["models"].get(name, {})
            label = name + (" (auto)" if name == c["auto"] else "")
            if name == c.get("compile_best"):
                label = f"**{label}**"
            if "error" in comp:
                lines.append(
                    f"| {c['dtype']} | {shape} | {c['position']} | {label} | "
                    f"{model.get('nodes', '?')} | err | – | – | – | – | – | {comp['error'][:80]} |"
                )
                continue
            ratio = f"{'>' if comp['timeout'] else ''}{comp['ratio']:.2f}"
            run = c["ratio"].get(name)
            run_text = "–" if run is None else f"{run:.2f}" + ("" if model.get("ok") else " ✗")
            judged = comp.get(key)
            within = "✓" if judged is not None and judged <= limit and not comp["timeout"] else ""
            lines.append(
                f"| {c['dtype']} | {shape} | {c['position']} | {label} | "
                f"{model.get('nodes', '?')} | {comp['s']:.3g} | {comp['cumsum_s']:.3g} | "
                f"{ratio} | {_times(comp['cpu_ratio'])} | {comp['process_ratio']:.2f} | "
                f"{run_text} | {within} |"
            )
    lines += [
        "",
        f"Per cell: auto's pick, and the fastest lowering at run time within {limit:g}× "
        f"of CumSum's compile ({clock} time); compile ratios as wall / CPU:",
        "",
        "| type | shape | axis | CumSum compile s | auto | auto compile × | auto run × | "
        f"best within {limit:g}× | its compile × | its run × |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in cells:
        shape = "×".join(str(d) for d in c["shape"])
        best = c.get("compile_best")
        best_comp = c["compile"].get(best, {}) if best else {}
        lines.append(
            f"| {c['dtype']} | {shape} | {c['position']} | "
            f"{_times(c['cumsum_compile_s'], '.3g')} | "
            f"{c['auto']} | {_times(c['auto_compile_ratio'])} / "
            f"{_times(c.get('auto_compile_cpu_ratio'))} | {_times(c['auto_ratio'])} | "
            f"{best or 'none'} | {_times(best_comp.get('ratio'))} / "
            f"{_times(best_comp.get('cpu_ratio'))} | "
            f"{_times(c['ratio'].get(best)) if best else '–'} |"
        )
    return lines


HOW = {
    "onnxruntime": "InferenceSession, one intra-op thread, default graph optimisations; "
    "session.run.",
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

COMPILE_HOW = {
    "onnxruntime": "InferenceSession (one thread) + the first run.",
    "openvino": "read_model + compile_model (CPU, one inference thread) + the first infer.",
    "tract": "load + into_model + into_runnable + the first run.",
    "tinygrad": "CACHELEVEL=0 (no kernel cache: a first build), CPU device: OnnxRunner + the "
    "first call (compiles every kernel with clang).",
    "iree": "iree-import-onnx + iree-compile (IREE_FLAGS) + load_vm_flatbuffer + the first "
    "call (local-sync).",
    "tvm": "Relax from_onnx + tvm.compile(target='llvm') + VirtualMachine + the first call.",
    "mnn": "MNN's converter library in a child process + load_module_from_file + the first "
    "forward.",
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
    parser.add_argument(
        "--cells",
        help="POS:N,... cells (axis position and length) in place of --lengths x --positions",
    )
    parser.add_argument(
        "--compile",
        type=int,
        default=0,
        metavar="REPS",
        help="also load / compile + run every model once in a fresh process, REPS times",
    )
    parser.add_argument(
        "--compile-timeout",
        type=float,
        default=60.0,
        help="seconds before a fresh process is killed (its time counts as this)",
    )
    parser.add_argument(
        "--compile-limit",
        type=float,
        default=2.0,
        help="compile ratio to CumSum up to which a lowering counts as fast to compile",
    )
    parser.add_argument(
        "--compile-clock",
        choices=tuple(COMPILE_KEY),
        default="wall",
        help="which compile ratio the limit judges: wall time, or CPU time of the process and "
        "its descendants (steadier on a loaded machine)",
    )
    parser.add_argument("--only", help="NAME,...: build only these lowerings")
    parser.add_argument(
        "--variants",
        default="",
        help=f"NAME,...: also these experiments ({', '.join(VARIANTS)}): carry_rR / radix_rR "
        "are carry / radix with r = R on every level, doubling_bB doubling's blocked form in "
        "blocks of B, masked_bB masked with tiles of side B, blocked_2lv blocked with two levels",
    )
    parser.add_argument(
        "--before",
        metavar="REV",
        help="also time auto's graph as commit REV builds it (twice: the second is the "
        "control) beside this checkout's, on the cells where the two differ; builds no other "
        "lowering unless --only names some",
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
        if any("compile_runs" in cell for cell in result["cells"]):
            analyse(result["cells"], args.compile_limit, args.compile_clock)
        if args.repick:
            for cell in result["cells"]:
                cell["auto"] = pick_for(
                    DTYPES[cell["dtype"]], tuple(cell["shape"]), cell["axis"], result["runtime"]
                )
            analyse(result["cells"], args.compile_limit, args.compile_clock)
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
    python = ROOT / VENV[args.runtime] / "bin" / "python"
    if not python.exists():
        parser.error(f"{python} is missing: run scripts/runtimes/{args.runtime}.sh")
    dtypes = (args.dtypes or DEFAULT_DTYPES[args.runtime]).split(",")
    total = args.elements or args.total << 20
    skip_text = args.skip if args.skip is not None else DEFAULT_SKIP.get(args.runtime, "")
    skip = {k: int(v) for k, v in (item.split(":") for item in skip_text.split(",") if item)}
    rng = np.random.default_rng(0)
    if args.cells:
        grid = [tuple(item.split(":")) for item in args.cells.split(",") if item]
        cell_keys = [(dt, total, int(n), pos) for dt in dtypes for pos, n in grid]
    else:
        cell_keys = [
            (dt, total, n, pos)
            for dt in dtypes
            for n in int_list(args.lengths)
            for pos in args.positions.split(",")
        ]
    load_before = [round(v, 2) for v in os.getloadavg()]
    began = time.perf_counter()
    only = set(args.only.split(",")) if args.only else set() if args.before else None
    with tempfile.TemporaryDirectory(prefix="bench-runtime-") as tmp:
        before = code_at(args.before, Path(tmp) / "before") if args.before else None
        cells = [
            prepare_cell(
                Path(tmp) / f"c{i}",
                args.runtime,
                cell,
                rng,
                skip,
                run_time=args.run_time_length,
                only=only,
                variants=tuple(v for v in args.variants.split(",") if v),
                before=before,
            )
            for i, cell in enumerate(cell_keys)
        ]
        untimed = [c for c in cells if c["not_against"]]
        cells = [c for c in cells if not c["not_against"]]
        if args.compile:
            compile_runs(cells, args.runtime, python, args.compile, args.compile_timeout)
        # a model whose compile timed out or failed is not timed at run time
        stopped = [
            {
                k
                for k, runs in c.get("compile_runs", {}).items()
                if any(r.get("timeout") or r.get("error") for r in runs)
            }
            for c in cells
        ]
        manifest = {
            "rounds": args.rounds,
            "max_seconds": args.max_seconds,
            "cells": [
                c | {"models": [m for m in c["models"] if m["name"] not in skip_now]}
                for c, skip_now in zip(cells, stopped, strict=True)
            ],
        }
        (Path(tmp) / "manifest.json").write_text(json.dumps(manifest))
        child_out = Path(tmp) / "child.json"
        child = subprocess.run(
            [
                str(python),
                str(ROOT / "scripts" / "bench" / "bench_runtime_child.py"),
                args.runtime,
                str(Path(tmp) / "manifest.json"),
                str(child_out),
            ],
            check=False,
            env=os.environ | RUNTIME_ENV.get(args.runtime, {}),
        )
        timed = json.loads(child_out.read_text()) if child_out.exists() else {"cells": []}
    if child.returncode != 0:
        print(f"child exited {child.returncode}: {len(timed['cells'])} cells kept", flush=True)
    for cell, row in zip(cells, timed["cells"], strict=False):
        for entry in cell["models"]:
            model = row["models"].setdefault(
                entry["name"], {"ok": False, "error": "not timed: its compile timed out or failed"}
            )
            model["nodes"] = entry["nodes"]
        for key in ("auto", "auto_nodes", "skipped", "compile_runs"):
            if key in cell:
                row[key] = cell[key]
    analyse(timed["cells"], args.compile_limit, args.compile_clock)
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
        "compile_reps": args.compile,
        "compile_timeout": args.compile_timeout,
        "compile_how": COMPILE_HOW[args.runtime],
        "complete": child.returncode == 0 and len(timed["cells"]) == len(cells),
        "before": args.before,
        "not_against": [
            f"{c['dtype']} {c['position']} n = {c['n']}: {c['not_against']}" for c in untimed
        ],
        "cells": timed["cells"],
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    Path(f"{out}.json").write_text(json.dumps(result, indent=1))
    Path(f"{out}.md").write_text(markdown(result))
    print(markdown(result))


if __name__ == "__main__":
    main()
