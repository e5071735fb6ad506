"""Runs every case of a folder on tinygrad's ONNX runner, CPU device (protocol:
tests/runtimes/__init__.py).

A fresh ``OnnxRunner`` per case: a runner caches symbolic sizes and the values of inputs it
needs as Python constants (an axis input) from its first call, so a reused runner is wrong on
later calls with other shapes or axes."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np

os.environ.setdefault("DEV", "CPU")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: not the tests package
import tinygrad
from runtimes import run_folder
from tinygrad import Device
from tinygrad.nn.onnx import OnnxRunner


def run_case(
    model_path: Path, inputs: list[str], outputs: list[str], feeds: dict[str, np.ndarray]
) -> list[np.ndarray]:
    runner = OnnxRunner(model_path)
    results = runner({name: feeds[name] for name in inputs})
    return [results[name].numpy() for name in outputs]


if __name__ == "__main__":
    version = getattr(tinygrad, "__version__", None)
    if version is None:
        from importlib.metadata import version as dist_version

        version = dist_version("tinygrad")
    run_folder(Path(sys.argv[1]), f"tinygrad {version}, device {Device.DEFAULT}", run_case)
