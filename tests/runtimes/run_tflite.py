"""Runs every case of a folder on TFLite through onnx2tf (protocol: tests/runtimes/__init__.py).

A copy of each model is converted with ``onnx2tf.convert`` (onnx2tf rewrites the file it
converts) and the float32 ``.tflite`` it writes runs on the LiteRT interpreter (ai-edge-litert)
through its signature runner, which resizes inputs to the feeds (symbolic dims stay dynamic).
onnx2tf 2.x writes the file with its default backend, ``flatbuffer_direct`` (no TensorFlow);
``CUMPROD_TFLITE_BACKEND=tf_converter`` takes its TensorFlow backend instead (onnx2tf's
``tensorflow`` extra; onnx2tf 1.x has only that one and takes no such option).

Layout: onnx2tf re-lays out rank-3/4/5 tensors channel-last (NCW -> NWC) inside the model. The
inputs are kept in the ONNX layout (``keep_shape_absolutely_input_names`` on every input), so
the ONNX feeds are fed as they are; an output that comes out with the channel-last
permutation of the shape onnx's shape inference gives for these feeds is transposed back.
onnx2tf turns float16 inputs into float32 ones: float16 feeds are widened (exactly). Integer
outputs that come back narrower than declared (flatbuffer_direct computes int64 in int32) are
cast to the declared type, as a user of the result would."""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import sys
import tempfile
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np
import onnx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: not the tests package
import onnx2tf
from ai_edge_litert.interpreter import Interpreter
from runtimes import run_folder

BACKEND = os.environ.get("CUMPROD_TFLITE_BACKEND", "")  # "": onnx2tf's default


def _channel_last(rank: int) -> list[int]:
    return [0, *range(2, rank), 1]


def _expected_shapes(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list:
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
        inferred = onnx.shape_inference.infer_shapes(fixed, data_prop=True).graph.output
    except Exception:  # noqa: BLE001 - shapes are only a hint for the layout
        return [None] * len(model.graph.output)
    shapes = []
    for value in inferred:
        dims = value.type.tensor_type.shape.dim
        known = all(d.HasField("dim_value") for d in dims)
        shapes.append(tuple(d.dim_value for d in dims) if known else None)
    return shapes


def _convert_error(exc: Exception) -> Exception:
    """The converter's MLIR diagnostic instead of the stack it is wrapped in."""
    message = " ".join(str(exc).split())
    if " error: " in message:  # an MLIR diagnostic
        return type(exc)(message.split(" error: ", 1)[1].split(" ^ ", 1)[0])
    keras = "raise e.with_traceback(filtered_tb) from None "
    if keras in message:  # a Keras layer's error, after the traceback it is wrapped in
        return type(exc)(message.split(keras, 1)[1])
    return exc


def run_case(
    model_path: Path, inputs: list[str], outputs: list[str], feeds: dict[str, np.ndarray]
) -> list[np.ndarray]:
    model = onnx.load(str(model_path))
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "model.onnx"
        shutil.copyfile(model_path, copy)
        options = {"tflite_backend": BACKEND} if BACKEND else {}
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                onnx2tf.convert(
                    input_onnx_file_path=str(copy),
                    output_folder_path=str(Path(tmp) / "tf"),
                    copy_onnx_input_output_names_to_tflite=True,
                    keep_shape_absolutely_input_names=inputs,
                    non_verbose=True,
                    **options,
                )
        except Exception as exc:
            raise _convert_error(exc) from exc
        written = sorted((Path(tmp) / "tf").glob("*_float32.tflite"))
        if not written:
            raise RuntimeError("onnx2tf wrote no *_float32.tflite")
        interpreter = Interpreter(model_path=str(written[0]))
    runner = interpreter.get_signature_runner()
    feeds = {name: np.asarray(feeds[name]) for name in inputs}
    for name, detail in runner.get_input_details().items():
        if feeds[name].dtype == np.float16 and detail["dtype"] == np.float32:
            feeds[name] = feeds[name].astype(np.float32)
    result = runner(**feeds)
    arrays = []
    elem_types = {v.name: v.type.tensor_type.elem_type for v in model.graph.output}
    for name, shape in zip(outputs, _expected_shapes(model, feeds)):
        if name not in result:
            raise KeyError(f"output {name!r} missing from the converted model")
        out = np.asarray(result[name])
        declared = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem_types[name]))
        if out.dtype.kind in "iu" and out.dtype != declared:
            out = out.astype(declared)  # flatbuffer_direct gives int64 outputs as int32
        if shape is not None and out.shape != shape and out.ndim >= 3:
            perm = _channel_last(out.ndim)
            if tuple(shape[p] for p in perm) == out.shape:
                out = out.transpose(np.argsort(perm))
        arrays.append(out)
    return arrays


if __name__ == "__main__":
    try:
        tensorflow = f"tensorflow {version('tensorflow')}"
    except PackageNotFoundError:
        tensorflow = "no tensorflow"
    run_folder(
        Path(sys.argv[1]),
        f"onnx2tf {version('onnx2tf')} (backend {BACKEND or 'default'}), {tensorflow}, "
        f"ai-edge-litert {version('ai-edge-litert')}, onnx {onnx.__version__}",
        run_case,
    )
