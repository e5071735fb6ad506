"""Runs in .venv-tflite (scripts/runtimes/tflite.sh): for every CASE.onnx in FOLDER with a
CASE.in.npz (arrays keyed by graph input name), converts a copy of the model with onnx2tf
(onnx2tf rewrites the file it converts), runs the float32 .tflite with the LiteRT interpreter
(ai-edge-litert) and writes CASE.out.npz (out0, out1, ... in graph-output order) or
CASE.err.txt (one line: exception type and message).

Layout: onnx2tf re-lays out rank-3/4/5 tensors channel-last (NCW -> NWC) inside the model. The
inputs are kept in the ONNX layout (``keep_shape_absolutely_input_names`` on every input), so
the ONNX feeds are fed as they are; an output that comes out with the channel-last
permutation of the shape onnx's shape inference gives for these feeds is transposed back (the
line printed for the case says so). Symbolic dims stay dynamic (the signature runner resizes
inputs to the feeds).

Each case is converted in a worker process, restarted after a per-case timeout or a crash, so
one failure never stops the others. Nothing is cached across runs.

    python tests/runtimes/run_tflite.py FOLDER [--timeout SECONDS]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from importlib.metadata import version
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np
import onnx


def _channel_last(rank: int) -> list[int]:
    return [0, *range(2, rank), 1]


def _expected_shapes(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list | None:
    """Output shapes onnx's shape inference gives for these feeds (None where unknown)."""
    fixed = onnx.ModelProto()
    fixed.CopyFrom(model)
    for value in fixed.graph.input:
        if value.name in feeds:
            dims = value.type.tensor_type.shape.dim
            for dim, size in zip(dims, feeds[value.name].shape):
                dim.Clear()
                dim.dim_value = size
    try:
        inferred = onnx.shape_inference.infer_shapes(fixed, data_prop=True)
    except Exception:  # noqa: BLE001 - shapes are only a hint for the layout
        return None
    shapes = []
    for value in inferred.graph.output:
        dims = value.type.tensor_type.shape.dim
        known = all(d.HasField("dim_value") for d in dims)
        shapes.append(tuple(d.dim_value for d in dims) if known else None)
    return shapes


def run_case(model_path: Path) -> tuple[list[np.ndarray], list[str]]:
    """Convert and run one case: its outputs and notes (outputs transposed back)."""
    import onnx2tf
    from ai_edge_litert.interpreter import Interpreter

    model = onnx.load(str(model_path))
    initializers = {t.name for t in model.graph.initializer}
    inputs = [i.name for i in model.graph.input if i.name not in initializers]
    with np.load(model_path.with_suffix(".in.npz")) as data:
        feeds = {name: np.asarray(data[name]) for name in inputs}
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "model.onnx"
        shutil.copyfile(model_path, copy)
        with contextlib.redirect_stdout(io.StringIO()):
            onnx2tf.convert(
                input_onnx_file_path=str(copy),
                output_folder_path=str(Path(tmp) / "tf"),
                copy_onnx_input_output_names_to_tflite=True,
                keep_shape_absolutely_input_names=inputs,
                non_verbose=True,
            )
        interpreter = Interpreter(model_path=str(Path(tmp) / "tf" / "model_float32.tflite"))
        runner = interpreter.get_signature_runner()
        for name, detail in runner.get_input_details().items():
            # onnx2tf turns float16 inputs into float32 ones: widen (exactly) to match
            if feeds[name].dtype == np.float16 and detail["dtype"] == np.float32:
                feeds[name] = feeds[name].astype(np.float32)
        result = runner(**feeds)
    outputs, notes = [], []
    shapes = _expected_shapes(model, feeds) or [None] * len(model.graph.output)
    for k, (value, shape) in enumerate(zip(model.graph.output, shapes)):
        if value.name not in result:
            raise KeyError(f"output {value.name!r} missing from the converted model")
        out = np.asarray(result[value.name])
        if shape is not None and out.shape != shape and out.ndim >= 3:
            perm = _channel_last(out.ndim)
            if tuple(shape[p] for p in perm) == out.shape:
                out = out.transpose(np.argsort(perm))
                notes.append(f"out{k} transposed back from channel-last")
        outputs.append(out)
    return outputs, notes


def worker() -> None:
    """Read case paths from stdin; answer one JSON line per case."""
    for line in sys.stdin:
        model_path = Path(line.strip())
        case = model_path.with_suffix("")
        try:
            outputs, notes = run_case(model_path)
            np.savez(f"{case}.out.npz", **{f"out{i}": o for i, o in enumerate(outputs)})
            reply = {"status": "ok", "notes": notes}
        except Exception as exc:  # noqa: BLE001 - every failure is reported to the test
            message = " ".join(str(exc).split())
            if " error: " in message:  # a converter error: the MLIR diagnostic, not the stack
                message = message.split(" error: ", 1)[1].split(" ^ ", 1)[0]
            message = message[:2000]
            Path(f"{case}.err.txt").write_text(f"{type(exc).__name__}: {message}\n")
            reply = {"status": "error", "notes": []}
        print(json.dumps(reply), flush=True)


class _Worker:
    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self.replies: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.startswith("{"):
                self.replies.put(line)
        self.replies.put("")  # the worker ended

    def ask(self, model_path: Path, timeout: float) -> dict:
        assert self.process.stdin is not None
        self.process.stdin.write(f"{model_path}\n")
        self.process.stdin.flush()
        reply = self.replies.get(timeout=timeout)
        if not reply:
            raise RuntimeError(f"worker died (exit code {self.process.wait()})")
        return json.loads(reply)

    def stop(self) -> None:
        self.process.kill()
        self.process.wait()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("folder", type=Path, nargs="?")
    parser.add_argument("--timeout", type=float, default=180.0, help="per case, seconds")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.worker:
        worker()
        return
    print(
        f"onnx2tf {version('onnx2tf')}, tensorflow {version('tensorflow')}, "
        f"ai-edge-litert {version('ai-edge-litert')}, onnx {onnx.__version__}",
        flush=True,
    )
    work: _Worker | None = None
    for model_path in sorted(options.folder.glob("*.onnx")):
        case = model_path.with_suffix("")
        if not model_path.with_suffix(".in.npz").exists():
            continue
        for stale in (Path(f"{case}.out.npz"), Path(f"{case}.err.txt")):
            stale.unlink(missing_ok=True)
        start = time.perf_counter()
        work = work or _Worker()
        try:
            reply = work.ask(model_path.resolve(), options.timeout)
            status = " ".join([reply["status"], *reply["notes"]])
        except (queue.Empty, RuntimeError) as exc:
            what = (
                f"timed out after {options.timeout:.0f} s" if isinstance(exc, queue.Empty) else exc
            )
            Path(f"{case}.err.txt").write_text(f"{type(exc).__name__}: {what}\n")
            status = "error"
            work.stop()
            work = None
        print(f"{case.name}: {status} ({time.perf_counter() - start:.1f} s)", flush=True)
    if work is not None:
        work.stop()


if __name__ == "__main__":
    main()
