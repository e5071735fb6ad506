"""Runners for the real runtimes, one per runtime, each run in that runtime's own environment
(``.venv-NAME``, made by ``scripts/runtimes/NAME.sh``) as ``python tests/runtimes/run_NAME.py
FOLDER``. They import nothing from the project but this module, which needs numpy and onnx only;
they import it as the top-level package ``runtimes`` (tests/ put on sys.path), since
tests/__init__.py imports onnxruntime, which their environments lack.

The protocol (shared with tests/runtime_harness.py): for every ``CASE.onnx`` in FOLDER that has
``CASE.in.npz`` (arrays keyed by graph input name) and no result yet, write ``CASE.out.npz``
(``out0``, ``out1``, ... in graph-output order) or ``CASE.err.txt`` (one line: exception type
and message). One failure never stops the others; ``CASE.running`` marks the case in progress,
so a crash of the whole process is blamed on that case. The runtime's version is printed first.
"""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx

# (model path, graph input names, graph output names, feeds) -> outputs in graph-output order
RunCase = Callable[[Path, list[str], list[str], dict[str, np.ndarray]], list[np.ndarray]]


def library_runner(name: str) -> RunCase:
    """``run_NAME`` of the project's own ``rewriter/runtimes.py`` (what ``--verify`` runs on a
    target's runtime), loaded by path: the package itself needs onnx_ir, which these
    environments lack, and that module imports only numpy and onnx."""
    path = Path(__file__).resolve().parents[2] / "rewriter" / "runtimes.py"
    spec = importlib.util.spec_from_file_location("cumprod_runtimes", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    run = getattr(module, f"run_{name}")

    def run_case(
        model_path: Path, inputs: list[str], outputs: list[str], feeds: dict[str, np.ndarray]
    ) -> list[np.ndarray]:
        return list(run(model_path, feeds))

    return run_case


def io_names(model_path: Path) -> tuple[list[str], list[str]]:
    """The graph's run-time input names (initializers left out) and output names."""
    model = onnx.load(str(model_path), load_external_data=False)
    initializers = {t.name for t in model.graph.initializer}
    inputs = [i.name for i in model.graph.input if i.name not in initializers]
    return inputs, [o.name for o in model.graph.output]


def one_line(exc: BaseException) -> str:
    message = str(exc).split("Stack backtrace:")[0]  # tract appends a Rust backtrace
    message = " ".join(message.split())
    if len(message) > 2000:
        message = message[:2000] + " ..."
    return f"{type(exc).__name__}: {message}"


def run_folder(folder: Path, version: str, run_case: RunCase) -> None:
    print(version, flush=True)
    for model_path in sorted(folder.glob("*.onnx")):
        case = model_path.with_suffix("")
        inputs_file = Path(f"{case}.in.npz")
        out_file, err_file = Path(f"{case}.out.npz"), Path(f"{case}.err.txt")
        running = Path(f"{case}.running")
        if not inputs_file.exists() or out_file.exists() or err_file.exists():
            continue
        running.write_text(str(time.time()))
        try:
            with np.load(inputs_file) as data:
                feeds = {name: data[name] for name in data.files}
            inputs, outputs = io_names(model_path)
            results = run_case(model_path, inputs, outputs, feeds)
            if len(results) != len(outputs):
                raise RuntimeError(f"{len(results)} outputs for {len(outputs)} graph outputs")
            np.savez(out_file, **{f"out{i}": np.asarray(r) for i, r in enumerate(results)})
        except Exception as exc:  # noqa: BLE001 - every failure is reported to the test
            err_file.write_text(one_line(exc) + "\n")
        running.unlink()
