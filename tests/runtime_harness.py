"""Runs models on the real runtimes from the main environment.

Each runtime lives in its own environment, ``.venv-NAME`` at the repo root, made by
``scripts/runtimes/NAME.sh`` (``scripts/install_runtimes.sh`` runs them all; tflite only with
``CUMPROD_TFLITE=1``). :func:`run_cases` writes ``CASE.onnx`` + ``CASE.in.npz`` into a folder,
runs ``tests/runtimes/run_NAME.py FOLDER`` with that environment's Python, and reads back
``CASE.out.npz`` or ``CASE.err.txt`` (the protocol: tests/runtimes/__init__.py). The models are
built and the results compared in the main environment only."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np
import onnx
import pytest

ROOT = Path(__file__).resolve().parents[1]
RUNNERS = ROOT / "tests" / "runtimes"
RUNTIMES = ["openvino", "tract", "tinygrad", "iree", "tflite", "mnn", "tvm", "ncnn"]
DEFAULT_TIMEOUT = 1200.0  # seconds for one runner process (it is restarted after a crash)

Result = list[np.ndarray] | str
Case = tuple[onnx.ModelProto, dict[str, np.ndarray]]

# Every element type on the runtimes whose compiler dominates the suite's time (IREE 40-50 s
# a model, tinygrad 13-20 s, measured on the tables of tests/test_runtime_tables.py) is the
# opt-in tier CUMPROD_FULL=1. Otherwise they run these five, which take every path those
# targets have: 4- and 8-byte floats and integers, a float computed in a wider type, an
# unsigned type. The other runtimes run every type.
FULL = os.environ.get("CUMPROD_FULL") == "1"
SLOW_COMPILE = frozenset({"iree", "tinygrad"})
CI_TYPES = frozenset(
    {
        onnx.TensorProto.FLOAT,
        onnx.TensorProto.DOUBLE,
        onnx.TensorProto.BFLOAT16,
        onnx.TensorProto.INT64,
        onnx.TensorProto.UINT32,
    }
)


def runs_type(runtime: str, elem_type: int) -> bool:
    """Whether the tests run ``elem_type`` on ``runtime`` (every type with CUMPROD_FULL=1)."""
    return FULL or runtime not in SLOW_COMPILE or elem_type in CI_TYPES


def python_for(runtime: str) -> Path | None:
    """The Python of ``runtime``'s environment (``CUMPROD_<NAME>_PYTHON`` overrides
    ``.venv-NAME/bin/python``), or None when it or the runtime's runner is missing."""
    override = os.environ.get(f"CUMPROD_{runtime.upper()}_PYTHON")
    python = Path(override) if override else ROOT / f".venv-{runtime}" / "bin" / "python"
    if not python.exists() or not (RUNNERS / f"run_{runtime}.py").exists():
        return None
    return python


def require(runtime: str) -> Path:
    """``runtime``'s Python; when missing, fails the test on CI (CI=true) and skips it
    elsewhere, saying how to install it."""
    python = python_for(runtime)
    if python is None:
        reason = (
            f"{runtime}: .venv-{runtime} or tests/runtimes/run_{runtime}.py is missing "
            f"(scripts/runtimes/{runtime}.sh installs the environment)"
        )
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    return python


def _crashed_cases(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.running"))


def run_cases(
    runtime: str,
    cases: dict[str, Case],
    tmp_path: Path,
    *,
    timeout: float = DEFAULT_TIMEOUT,
) -> dict[str, Result]:
    """Runs every case on ``runtime``: name -> its outputs in graph-output order, or the error
    (one line, a str). A case that crashes the runner process or makes it time out is reported
    as an error and the runner starts again on the cases left."""
    python = require(runtime)
    folder = tmp_path / runtime
    folder.mkdir(parents=True, exist_ok=True)
    for name, (model, feeds) in cases.items():
        for stale in (f"{name}.out.npz", f"{name}.err.txt"):  # a folder used before
            (folder / stale).unlink(missing_ok=True)
        onnx.save(model, folder / f"{name}.onnx")
        np.savez(folder / f"{name}.in.npz", **feeds)
    log = []
    for _attempt in range(len(cases) + 1):
        try:
            done = subprocess.run(
                [str(python), str(RUNNERS / f"run_{runtime}.py"), str(folder)],
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
                cwd=folder,
            )
            log.append(done.stdout + done.stderr)
            failure = f"runner exited with {done.returncode}" if done.returncode else ""
        except subprocess.TimeoutExpired:
            failure = f"runner timed out after {timeout:.0f} s"
        crashed = _crashed_cases(folder)
        for marker in crashed:  # the case in progress when the process died
            marker.with_suffix(".err.txt").write_text(f"Crash: {failure}\n")
            marker.unlink()
        if not crashed:
            if failure:
                raise RuntimeError(f"{runtime} runner failed: {failure}\n{log[-1][-3000:]}")
            break
    results: dict[str, Result] = {}
    for name in cases:
        error, out = folder / f"{name}.err.txt", folder / f"{name}.out.npz"
        if error.exists():
            results[name] = error.read_text().strip()
        elif out.exists():
            with np.load(out) as data:
                results[name] = [data[f"out{i}"] for i in range(len(data.files))]
        else:
            results[name] = f"NoResult: the {runtime} runner wrote nothing for this case"
    return results
