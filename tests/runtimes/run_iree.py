"""Runs every case of a folder on IREE (protocol: tests/runtimes/__init__.py).

Each case is imported with ``iree-import-onnx``'s own code (symbolic dims stay dynamic), in
this process: the console script would start a Python per case, about 1.4 s of CPU each. It is
compiled with the ``iree-compile`` binary the console script of that name starts (the script,
another Python per case, is skipped), for the CPU (llvm-cpu;
``--iree-input-demote-f64-to-f32=false`` keeps float64 as float64), and run with iree.runtime's
``local-task`` driver (``CUMPROD_IREE_DRIVER``: ``local-sync``). The compile has a timeout
(``CUMPROD_IREE_TIMEOUT``, seconds, default 900); an import that crashes this process fails
that case only (the harness restarts the runner on the cases left).

Compiled modules are kept in ``CUMPROD_IREE_CACHE`` (default ``~/.cache/cumprod-rewriter/iree``;
``0`` turns it off) under the sha256 of the compiler's version, its flags and the imported
MLIR: a graph compiled by an earlier run with the same compiler is loaded from there, the
module ``iree-compile`` wrote for it then (iree-compile is deterministic: two compiles of one
MLIR file give the same bytes; only the temporary file's name differs, in debug locations).
The suite compiles about 60 models, minutes of CPU; a run after a change to the lowerings
compiles only the graphs that changed. A failed compile is never kept; entries unused for 14
days are removed when a runner starts.

``CUMPROD_IREE_REPEAT=N`` runs each compiled case N times and fails it when a run's
outputs differ from the first run's (shape or bits). IREE's integers are signless: uint32 /
uint64 outputs come back as int32 / int64 arrays, whose bits are read back as the declared
output type."""

from __future__ import annotations

import contextlib
import hashlib
import os
import subprocess
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path

import numpy as np
import onnx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: not the tests package
import iree.runtime as rt
from iree.compiler.tools import binaries
from iree.compiler.tools.import_onnx import __main__ as onnx_import
from runtimes import one_line, run_folder

IREE_COMPILE = binaries.find_tool("iree-compile")
COMPILE_FLAGS = [
    "--iree-hal-target-device=local",
    "--iree-hal-local-target-device-backends=llvm-cpu",
    "--iree-llvmcpu-target-cpu=generic",  # silences the "generic CPU" warning; same code
    "--iree-input-demote-f64-to-f32=false",
]
# test_runtime_tables' float64 model (3,130 nodes) compiles in 48 s alone (64 s CPU) but
# timed out at 300 s beside the other IREE tests' compiles (load average 3-5, 2 cores)
TIMEOUT = float(os.environ.get("CUMPROD_IREE_TIMEOUT", "900"))
DRIVER = os.environ.get("CUMPROD_IREE_DRIVER", "local-task")
REPEAT = int(os.environ.get("CUMPROD_IREE_REPEAT", "1"))
_CACHE = os.environ.get("CUMPROD_IREE_CACHE", str(Path.home() / ".cache/cumprod-rewriter/iree"))
CACHE = None if _CACHE in ("", "0") else Path(_CACHE)
CACHE_DAYS = 14


class CompileError(Exception):
    """iree-import-onnx failed (its exception) or iree-compile did (its first error line)."""


def _tool(args: list[str]) -> None:
    try:
        result = subprocess.run(args, capture_output=True, text=True, timeout=TIMEOUT, check=False)
    except subprocess.TimeoutExpired as exc:
        raise CompileError(f"{Path(args[0]).name} timed out after {TIMEOUT:.0f} s") from exc
    if result.returncode != 0:
        lines = [line.strip() for line in result.stderr.splitlines() if line.strip()]
        errors = [line for line in lines if "error" in line.lower()] or lines or ["no output"]
        raise CompileError(f"{Path(args[0]).name}: {errors[0]}")


def _cached(mlir: bytes) -> Path | None:
    """Where the module compiled from ``mlir`` is kept (None: no cache)."""
    if CACHE is None:
        return None
    key = hashlib.sha256(version("iree-base-compiler").encode())
    key.update("\0".join(COMPILE_FLAGS).encode() + b"\0" + mlir)
    return CACHE / f"{key.hexdigest()}.vmfb"


def _prune_cache() -> None:
    """Removes the modules no run has loaded for :data:`CACHE_DAYS` days."""
    if CACHE is None or not CACHE.is_dir():
        return
    cutoff = time.time() - CACHE_DAYS * 86400
    for entry in CACHE.glob("*.vmfb"):
        with contextlib.suppress(OSError):  # another runner removed or replaced it
            if entry.stat().st_mtime < cutoff:
                entry.unlink()


def compile_model(model_path: Path) -> bytes:
    with tempfile.TemporaryDirectory() as tmp:
        mlir, vmfb = Path(tmp) / "model.mlir", Path(tmp) / "model.vmfb"
        try:
            onnx_import.main(onnx_import.parse_arguments([str(model_path), "-o", str(mlir)]))
        except Exception as exc:  # any failure: the case's one-line error
            raise CompileError(f"iree-import-onnx: {one_line(exc)}") from exc
        kept = _cached(mlir.read_bytes())
        if kept is not None and kept.is_file():
            with contextlib.suppress(OSError):  # a cache it cannot write: kept all the same
                kept.touch()  # used: not pruned
            with contextlib.suppress(OSError):  # a cache it cannot read: compiled again
                return kept.read_bytes()
        _tool([IREE_COMPILE, *COMPILE_FLAGS, str(mlir), "-o", str(vmfb)])
        module = vmfb.read_bytes()
        with contextlib.suppress(OSError):  # a cache it cannot write: the module all the same
            if kept is not None:  # written whole, then renamed: a reader never sees a part
                kept.parent.mkdir(parents=True, exist_ok=True)
                partial = kept.with_name(f"{kept.name}.{os.getpid()}.part")
                partial.write_bytes(module)
                os.replace(partial, kept)
        return module


def _as_declared(out: np.ndarray, value: onnx.ValueInfoProto) -> np.ndarray:
    elem_type = value.type.tensor_type.elem_type
    if elem_type not in (onnx.TensorProto.UINT32, onnx.TensorProto.UINT64):
        return out
    declared = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem_type))
    if out.dtype.kind == "i" and out.dtype.itemsize == declared.itemsize:
        return out.view(declared)
    return out


def run_case(
    model_path: Path, inputs: list[str], outputs: list[str], feeds: dict[str, np.ndarray]
) -> list[np.ndarray]:
    graph = onnx.load(str(model_path), load_external_data=False).graph
    module = rt.load_vm_flatbuffer(compile_model(model_path), driver=DRIVER)
    args = [np.asarray(feeds[name]) for name in inputs]

    def run() -> list[np.ndarray]:
        result = module[graph.name](*args)
        results = list(result) if isinstance(result, (tuple, list)) else [result]
        return [np.array(r.to_host() if hasattr(r, "to_host") else r) for r in results]

    first = run()
    for attempt in range(2, REPEAT + 1):
        for k, (a, b) in enumerate(zip(first, run())):
            if a.shape != b.shape or a.tobytes() != b.tobytes():
                raise RuntimeError(
                    f"run {attempt} of {REPEAT}: output {k} has shape {b.shape} "
                    f"(run 1: {a.shape}) or other values"
                )
    return [_as_declared(a, v) for a, v in zip(first, graph.output)]


if __name__ == "__main__":
    _prune_cache()
    run_folder(
        Path(sys.argv[1]),
        f"iree-base-compiler {version('iree-base-compiler')}, "
        f"iree-base-runtime {version('iree-base-runtime')} ({DRIVER}), onnx {onnx.__version__}",
        run_case,
    )
