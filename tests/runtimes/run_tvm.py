"""Runs every case of a folder on Apache TVM (protocol: tests/runtimes/__init__.py).

Each case is imported with Relax's ONNX frontend (``tvm.relax.frontend.onnx.from_onnx``;
symbolic dims stay symbolic), compiled for the CPU with ``tvm.compile(mod, target="llvm")``
and run on a ``relax.VirtualMachine``, inputs in graph-input order; a model file met again
(the same model on other data) reuses its compiled form. Outputs are read back as
numpy arrays, in the graph's declared type."""

from __future__ import annotations

import hashlib
import sys
from importlib.metadata import version
from pathlib import Path

import numpy as np
import onnx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: not the tests package
import tvm
from runtimes import run_folder
from tvm import relax
from tvm.relax.frontend.onnx import from_onnx


def _arrays(result: object) -> list[np.ndarray]:
    if isinstance(result, (list, tuple)) or type(result).__name__ == "Array":
        return [a for item in result for a in _arrays(item)]  # type: ignore[attr-defined]
    return [np.array(result.numpy(), copy=True)]  # type: ignore[attr-defined]


_COMPILED: dict[str, object] = {}  # the model file's sha256 -> its compiled executable


def compile_model(model_path: Path) -> object:
    """The model imported and compiled for llvm, once per distinct model file."""
    key = hashlib.sha256(model_path.read_bytes()).hexdigest()
    if key not in _COMPILED:
        module = from_onnx(onnx.load(str(model_path)))
        _COMPILED[key] = tvm.compile(module, target="llvm")
    return _COMPILED[key]


def run_case(
    model_path: Path, inputs: list[str], outputs: list[str], feeds: dict[str, np.ndarray]
) -> list[np.ndarray]:
    model = onnx.load(str(model_path), load_external_data=False)
    machine = relax.VirtualMachine(compile_model(model_path), tvm.cpu())
    args = [tvm.runtime.tensor(np.array(feeds[name], order="C")) for name in inputs]
    arrays = _arrays(machine["main"](*args))
    results = []
    for out, value in zip(arrays, model.graph.output):
        elem = value.type.tensor_type.elem_type
        declared = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem)) if elem else out.dtype
        results.append(out if out.dtype == declared else out.astype(declared))
    return results


if __name__ == "__main__":
    run_folder(
        Path(sys.argv[1]), f"apache-tvm {version('apache-tvm')}, onnx {onnx.__version__}", run_case
    )
