"""Runs every case of a folder on ncnn (protocol: tests/runtimes/__init__.py) with the
project's own runner, ``rewriter.runtimes.run_ncnn`` (what ``--verify`` uses).

Each model is converted to ncnn's .param / .bin by the pnnx program (with its defaults and the
shapes fed), once per distinct model file and shapes, and run by ncnn's Python binding on
float32 feeds; outputs in the graph's declared types. ``CUMPROD_PNNX_TIMEOUT`` bounds one
conversion (seconds, default 300)."""

from __future__ import annotations

import sys
from importlib.metadata import version
from pathlib import Path

import onnx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: not the tests package
from runtimes import library_runner, run_folder

if __name__ == "__main__":
    run_folder(
        Path(sys.argv[1]),
        f"ncnn {version('ncnn')}, pnnx {version('pnnx')}, onnx {onnx.__version__}",
        library_runner("ncnn"),
    )
