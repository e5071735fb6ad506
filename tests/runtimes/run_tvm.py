"""Runs every case of a folder on Apache TVM (protocol: tests/runtimes/__init__.py) with the
project's own runner, ``rewriter.runtimes.run_tvm`` (what ``--verify`` uses).

Each model is imported with Relax's ONNX frontend (symbolic dims stay symbolic), compiled for
the CPU with ``tvm.compile(mod, target="llvm")`` once per distinct model file and run on a
``relax.VirtualMachine``, inputs in graph-input order; outputs in the graph's declared types."""

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
        f"apache-tvm {version('apache-tvm')}, onnx {onnx.__version__}",
        library_runner("tvm"),
    )
