"""Runs every case of a folder on OpenVINO's CPU plugin (protocol: tests/runtimes/__init__.py).

OpenVINO reads the .onnx file itself (``Core.read_model``). On CPUs with bfloat16 units (this
machine: avx512_bf16) its default ``INFERENCE_PRECISION_HINT`` is bf16 (elementwise float32 ops
still measured exact). The runner compiles with the defaults, as users do, unless
``CUMPROD_OV_CONFIG`` gives properties as ``KEY=VALUE,KEY=VALUE`` (e.g.
``EXECUTION_MODE_HINT=ACCURACY``)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: not the tests package
import openvino as ov
from runtimes import run_folder

CORE = ov.Core()
CONFIG = dict(
    item.split("=", 1) for item in os.environ.get("CUMPROD_OV_CONFIG", "").split(",") if item
)


def run_case(
    model_path: Path, inputs: list[str], outputs: list[str], feeds: dict[str, np.ndarray]
) -> list[np.ndarray]:
    compiled = CORE.compile_model(CORE.read_model(str(model_path)), "CPU", CONFIG)
    request = compiled.create_infer_request()
    request.infer({name: feeds[name] for name in inputs})
    results = []
    for i, name in enumerate(outputs):
        port = next((p for p in compiled.outputs if name in p.get_names()), compiled.outputs[i])
        results.append(np.array(request.get_tensor(port).data, copy=True))
    return results


if __name__ == "__main__":
    run_folder(Path(sys.argv[1]), f"openvino {ov.__version__}, config {CONFIG}", run_case)
