"""Runs every case of a folder on tinygrad's ONNX runner, CPU device (protocol:
tests/runtimes/__init__.py), with the project's own runner, ``rewriter.runtimes.run_tinygrad``
(what ``--verify`` uses).

A fresh ``OnnxRunner`` per case: a runner caches symbolic sizes and the values of inputs it
needs as Python constants (an axis input) from its first call, so a reused runner is wrong on
later calls with other shapes or axes."""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("DEV", "CPU")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: not the tests package
import tinygrad
from runtimes import library_runner, run_folder
from tinygrad import Device

if __name__ == "__main__":
    version = getattr(tinygrad, "__version__", None)
    if version is None:
        from importlib.metadata import version as dist_version

        version = dist_version("tinygrad")
    run_folder(
        Path(sys.argv[1]),
        f"tinygrad {version}, device {Device.DEFAULT}",
        library_runner("tinygrad"),
    )
