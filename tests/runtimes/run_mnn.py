"""Runs every case of a folder on MNN's CPU backend (protocol: tests/runtimes/__init__.py).

Each case is converted by MNN's converter library in a child process (``import _tools;
_tools.mnnconvert([...])``: the ``mnnconvert`` console script would pip-install packages and
post a usage log; a converter crash then fails that case only), loaded with
``MNN.nn.load_module_from_file`` and run with ``Module.forward``. The converter gives every
integer input and output int32 and every float one float32: feeds are cast to those (int64 /
uint32 / uint64 values wrap to 32 bits, float64 rounds; the ``mnn`` target warns about both),
and outputs are cast back to the graph's declared type, as a user of the result would. A
model file met again (the same model on other data) is converted once.
``CUMPROD_MNN_TIMEOUT`` bounds one conversion (seconds, default 300)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
from importlib.metadata import version
from pathlib import Path

import numpy as np
import onnx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: not the tests package
import MNN
from runtimes import run_folder

TIMEOUT = float(os.environ.get("CUMPROD_MNN_TIMEOUT", "300"))
# argv[0] is the program name the converter's argument parser skips
CONVERT = (
    "import sys, _tools; _tools.mnnconvert(['mnnconvert', '-f', 'ONNX', "
    "'--modelFile', sys.argv[1], '--MNNModel', sys.argv[2], '--bizCode', 'cumprod'])"
)


class ConvertError(Exception):
    """MNN's converter failed: its first error line."""


def convert(model_path: Path, mnn_path: Path) -> None:
    try:
        done = subprocess.run(
            [sys.executable, "-c", CONVERT, str(model_path), str(mnn_path)],
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise ConvertError(f"the converter timed out after {TIMEOUT:.0f} s") from exc
    lines = [line.strip() for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    if done.returncode != 0 or not mnn_path.exists() or "Converted Success" not in done.stdout:
        markers = ("error", "not support", "failed", "can't", "abort", "invalid")
        errors = [line for line in lines if any(m in line.lower() for m in markers)]
        detail = (errors or lines or ["no output"])[0]
        raise ConvertError(f"exit {done.returncode}: {detail}")


_CONVERTED: dict[str, bytes] = {}  # the model file's sha256 -> the .mnn file's bytes


def converted(model_path: Path) -> bytes:
    """The model converted to MNN's format, once per distinct model file."""
    key = hashlib.sha256(model_path.read_bytes()).hexdigest()
    if key not in _CONVERTED:
        with tempfile.TemporaryDirectory() as tmp:
            mnn_path = Path(tmp) / "model.mnn"
            convert(model_path, mnn_path)
            _CONVERTED[key] = mnn_path.read_bytes()
    return _CONVERTED[key]


def _mnn_feed(array: np.ndarray) -> object:
    if array.dtype.kind == "f":
        array = array.astype(np.float32)
        dtype = MNN.expr.float
    else:
        array = array.astype(np.int32)  # integers are int32 in a converted model
        dtype = MNN.expr.int
    return MNN.expr.const(array, list(array.shape), MNN.expr.NCHW, dtype)


def run_case(
    model_path: Path, inputs: list[str], outputs: list[str], feeds: dict[str, np.ndarray]
) -> list[np.ndarray]:
    graph = onnx.load(str(model_path), load_external_data=False).graph
    with tempfile.TemporaryDirectory() as tmp:
        mnn_path = Path(tmp) / "model.mnn"
        mnn_path.write_bytes(converted(model_path))
        module = MNN.nn.load_module_from_file(str(mnn_path), inputs, outputs)
    results = module.forward([_mnn_feed(np.asarray(feeds[name])) for name in inputs])
    arrays = []
    for var, value in zip(results, graph.output):
        out = np.array(var.read(), copy=True)
        elem = value.type.tensor_type.elem_type
        if elem:
            out = out.astype(onnx.helper.tensor_dtype_to_np_dtype(elem))
        arrays.append(out)
    return arrays


if __name__ == "__main__":
    run_folder(Path(sys.argv[1]), f"mnn {version('mnn')}, onnx {onnx.__version__}", run_case)
