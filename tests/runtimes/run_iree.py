"""Runs in .venv-iree (scripts/runtimes/iree.sh): for every CASE.onnx in FOLDER with a
CASE.in.npz (arrays keyed by graph input name), imports the model with iree-import-onnx,
compiles it for the CPU (llvm-cpu, float64 kept as float64), runs it with iree.runtime's
local-task driver and writes CASE.out.npz (out0, out1, ... in graph-output order; IREE gives
uint32/uint64 outputs as int32/int64 arrays, whose bits are read back as the declared type)
or CASE.err.txt (one line: exception type and message). Symbolic dims stay dynamic. Nothing is
cached across runs: each case is imported and compiled afresh in a temporary folder.

    python tests/runtimes/run_iree.py FOLDER [--timeout SECONDS] [--driver local-sync]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path

import numpy as np
import onnx

BIN = Path(sys.executable).parent
COMPILE_FLAGS = [
    "--iree-hal-target-device=local",
    "--iree-hal-local-target-device-backends=llvm-cpu",
    "--iree-llvmcpu-target-cpu=generic",  # silences the "generic CPU" warning; same code
    "--iree-input-demote-f64-to-f32=false",
]


class CompileError(Exception):
    """iree-import-onnx or iree-compile failed: the first error line of its output."""


def _tool(args: list[str], timeout: float) -> None:
    try:
        result = subprocess.run(args, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as exc:
        raise CompileError(f"{Path(args[0]).name} timed out after {timeout:.0f} s") from exc
    if result.returncode != 0:
        lines = [line.strip() for line in result.stderr.splitlines() if line.strip()]
        errors = [line for line in lines if "error" in line.lower()] or lines or ["no output"]
        raise CompileError(f"{Path(args[0]).name}: {errors[0]}")


def compile_model(model_path: Path, work: Path, timeout: float) -> tuple[bytes, str]:
    """The compiled module and the name of its entry function (the graph's name)."""
    mlir, vmfb = work / "model.mlir", work / "model.vmfb"
    _tool([str(BIN / "iree-import-onnx"), str(model_path), "-o", str(mlir)], timeout)
    _tool([str(BIN / "iree-compile"), *COMPILE_FLAGS, str(mlir), "-o", str(vmfb)], timeout)
    graph = onnx.load(str(model_path), load_external_data=False).graph
    return vmfb.read_bytes(), graph.name


def run_case(model_path: Path, driver: str, timeout: float) -> list[np.ndarray]:
    import iree.runtime as rt

    model = onnx.load(str(model_path), load_external_data=False)
    initializers = {t.name for t in model.graph.initializer}
    names = [i.name for i in model.graph.input if i.name not in initializers]
    with np.load(model_path.with_suffix(".in.npz")) as data:
        args = [np.asarray(data[name]) for name in names]
    with tempfile.TemporaryDirectory() as tmp:
        flatbuffer, entry = compile_model(model_path, Path(tmp), timeout)
    module = rt.load_vm_flatbuffer(flatbuffer, driver=driver)
    result = module[entry](*args)
    results = list(result) if isinstance(result, (tuple, list)) else [result]
    outputs = [np.asarray(r.to_host() if hasattr(r, "to_host") else r) for r in results]
    return [_as_declared(o, v) for o, v in zip(outputs, model.graph.output)]


def _as_declared(out: np.ndarray, value: onnx.ValueInfoProto) -> np.ndarray:
    """IREE's integers are signless: uint32 / uint64 outputs come back as int32 / int64
    arrays. Reinterpret the bits as the graph output's declared type."""
    elem_type = value.type.tensor_type.elem_type
    if elem_type not in (onnx.TensorProto.UINT32, onnx.TensorProto.UINT64):
        return out
    declared = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem_type))
    if out.dtype.kind == "i" and out.dtype.itemsize == declared.itemsize:
        return out.view(declared)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("folder", type=Path)
    parser.add_argument("--timeout", type=float, default=120.0, help="per tool call, seconds")
    parser.add_argument("--driver", default="local-task", choices=["local-task", "local-sync"])
    options = parser.parse_args()
    print(
        f"iree-base-compiler {version('iree-base-compiler')}, "
        f"iree-base-runtime {version('iree-base-runtime')}, onnx {onnx.__version__}",
        flush=True,
    )
    for model_path in sorted(options.folder.glob("*.onnx")):
        case = model_path.with_suffix("")
        if not model_path.with_suffix(".in.npz").exists():
            continue
        for stale in (Path(f"{case}.out.npz"), Path(f"{case}.err.txt")):
            stale.unlink(missing_ok=True)
        start = time.perf_counter()
        try:
            outputs = run_case(model_path, options.driver, options.timeout)
            np.savez(f"{case}.out.npz", **{f"out{i}": o for i, o in enumerate(outputs)})
            status = "ok"
        except Exception as exc:  # noqa: BLE001 - every failure is reported to the test
            message = " ".join(str(exc).split())[:2000]
            Path(f"{case}.err.txt").write_text(f"{type(exc).__name__}: {message}\n")
            status = "error"
        print(f"{case.name}: {status} ({time.perf_counter() - start:.1f} s)", flush=True)


if __name__ == "__main__":
    main()
