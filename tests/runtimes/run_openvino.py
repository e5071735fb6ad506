"""Runs every case of a folder on OpenVINO's CPU plugin (protocol: tests/runtimes/__init__.py)
with the project's own runner, ``rewriter.runtimes.run_openvino`` (what ``--verify`` uses).

OpenVINO reads the .onnx file itself (``Core.read_model``). On CPUs with bfloat16 units (this
machine: avx512_bf16) its default ``INFERENCE_PRECISION_HINT`` is bf16 (elementwise float32 ops
still measured exact). It compiles with the defaults, as users do, unless ``CUMPROD_OV_CONFIG``
gives properties as ``KEY=VALUE,KEY=VALUE`` (e.g. ``EXECUTION_MODE_HINT=ACCURACY``)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: not the tests package
import openvino as ov
from runtimes import library_runner, run_folder

if __name__ == "__main__":
    config = os.environ.get("CUMPROD_OV_CONFIG", "")
    run_folder(
        Path(sys.argv[1]),
        f"openvino {ov.__version__}, config {config!r}",
        library_runner("openvino"),
    )
