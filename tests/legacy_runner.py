"""Runs in the onnxruntime 1.20.1 environment (numpy, onnx 1.17, onnxruntime 1.20.1 only):
for every CASE.onnx in a folder, checks it with that onnx's checker, runs it on CASE.in.npz and
writes CASE.out.npz, or CASE.err.txt with the reason. Started by ``tests.helpers.LegacyBatch``
(test_legacy_runtime, test_structures_legacy, the PyTorch exporters' tests), which compares
the results in the main environment."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort


def main(folder: Path) -> None:
    ort.set_default_logger_severity(3)
    print(f"onnxruntime {ort.__version__}, onnx {onnx.__version__}")
    for model_path in sorted(folder.glob("*.onnx")):
        case = model_path.with_suffix("")
        try:
            onnx.checker.check_model(str(model_path), full_check=True)
            session = ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
            feeds = dict(np.load(f"{case}.in.npz"))
            outputs = session.run(None, feeds)
            np.savez(f"{case}.out.npz", *outputs)
        except Exception as exc:  # noqa: BLE001 - every failure is reported to the test
            Path(f"{case}.err.txt").write_text(f"{type(exc).__name__}: {exc}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
