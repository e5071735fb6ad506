"""Runs every case of a folder on tract (protocol: tests/runtimes/__init__.py).

``tract.onnx().load(path).into_model()`` (analysed and typed, symbolic dims kept as symbols)
``.into_runnable()``; inputs are passed in graph-input order. Outputs tract keeps as TDim
(its symbolic integer type, e.g. a Shape) are converted to int64."""

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
    return [_to_numpy(r) for r in results]


def _to_numpy(tensor: tract.Tensor) -> np.ndarray:
    """A TDim tensor (tract's symbolic-integer type, which Shape and some int64 values come out
    as) cannot be exported by the Python API: it is converted to int64 first."""
    try:
        return tensor.to_numpy()
    except tract.TractError as exc:
        if "TDim" not in str(exc):
            raise
        return tensor.convert_to(tract.DatumType.I64).to_numpy()


if __name__ == "__main__":
    run_folder(Path(sys.argv[1]), f"tract {tract.version()}", run_case)
