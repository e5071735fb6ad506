"""Runs every case of a folder on OpenVINO's CPU plugin (protocol: tests/runtimes/__init__.py).

OpenVINO reads the .onnx file itself (``Core.read_model``). On CPUs with bfloat16 units (this
machine: avx512_bf16) its default ``INFERENCE_PRECISION_HINT`` is bf16; the runner compiles with
the default unless ``CUMPROD_OV_PRECISION`` names another hint (e.g. ``f32``)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: not the tests package
import openvino as ov
from runtimes import run_folder

CORE = ov.Core()
CONFIG = (
    {"INFERENCE_PRECISION_HINT": os.environ["CUMPROD_OV_PRECISION"]}
    if os.environ.get("CUMPROD_OV_PRECISION")
    else {}
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
    hint = CORE.get_property("CPU", "INFERENCE_PRECISION_HINT")
    run_folder(
        Path(sys.argv[1]),
        f"openvino {ov.__version__}, precision hint {CONFIG.get('INFERENCE_PRECISION_HINT', hint)}",
        run_case,
    )
