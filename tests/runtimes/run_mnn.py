"""Runs every case of a folder on MNN's CPU backend (protocol: tests/runtimes/__init__.py) with
the project's own runner, ``rewriter.runtimes.run_mnn`` (what ``--verify`` uses).

Each model is converted by MNN's converter library in a child process (never the
``mnnconvert`` console script, which pip-installs packages and posts a usage log), once per
distinct model file, loaded with ``MNN.nn.load_module_from_file`` and run with
``Module.forward``. Integer feeds are cast to int32 and float ones to float32 (what the
converter makes every input), outputs back to the graph's declared types.
``CUMPROD_MNN_TIMEOUT`` bounds one conversion (seconds, default 300)."""

from __future__ import annotations

import sys
from importlib.metadata import version
from pathlib import Path

import onnx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: not the tests package
from runtimes import library_runner, run_folder

if __name__ == "__main__":
    run_folder(
        Path(sys.argv[1]), f"mnn {version('mnn')}, onnx {onnx.__version__}", library_runner("mnn")
    )
