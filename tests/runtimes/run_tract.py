"""Runs every case of a folder on tract (protocol: tests/runtimes/__init__.py).

``tract.onnx().load(path).into_model()`` (analysed and typed, symbolic dims kept as symbols)
``.into_runnable()``; inputs are passed in graph-input order."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: not the tests package
import tract
from runtimes import run_folder

ONNX = tract.onnx()


def run_case(
    model_path: Path, inputs: list[str], outputs: list[str], feeds: dict[str, np.ndarray]
) -> list[np.ndarray]:
    runnable = ONNX.load(str(model_path)).into_model().into_runnable()
    results = runnable.run([feeds[name] for name in inputs])
    return [r.to_numpy() for r in results]


if __name__ == "__main__":
    run_folder(Path(sys.argv[1]), f"tract {tract.version()}", run_case)
