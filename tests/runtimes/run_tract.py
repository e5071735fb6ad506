"""Runs every case of a folder on tract (protocol: tests/runtimes/__init__.py) with the
project's own runner, ``rewriter.runtimes.run_tract`` (what ``--verify`` uses):
``tract.onnx().load(path).into_model().into_runnable()``, inputs in graph-input order, outputs
tract keeps as TDim (its symbolic integer type, e.g. a Shape) converted to int64."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: not the tests package
import tract
from runtimes import library_runner, run_folder

if __name__ == "__main__":
    run_folder(Path(sys.argv[1]), f"tract {tract.version()}", library_runner("tract"))
