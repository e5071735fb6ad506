"""Running a model on a target's own runtime, when that runtime is installed here.

``--verify`` runs the rewritten model where it will run (OpenVINO, tract, tinygrad, IREE,
MNN, Apache TVM, ncnn) when the runtime can be imported in this Python environment, and on
onnxruntime otherwise. Each runner takes a model file and feeds and returns the outputs in
graph-output order, in the graph's declared element types.

This module imports nothing of the rewriter (only numpy and onnx, and each runtime inside its
runner), so the test suite's per-runtime environments load it by file path
(``tests/runtimes/run_*.py``) and run exactly this code.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

__all__ = ["RUNNERS", "installed", "runner_for"]

Runner = Callable[[Path, dict[str, np.ndarray]], list[np.ndarray]]


def _graph_io(model_path: Path) -> tuple[list[str], list[str], str]:
    import onnx

    graph = onnx.load(str(model_path), load_external_data=False).graph
    initializers = {i.name for i in graph.initializer}
    inputs = [i.name for i in graph.input if i.name not in initializers]
    return inputs, [o.name for o in graph.output], graph.name


def run_openvino(model_path: Path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """OpenVINO's CPU plugin with its default properties (``CUMPROD_OV_CONFIG`` may set
    ``KEY=VALUE,...``)."""
    import openvino as ov

    config = dict(
        item.split("=", 1) for item in os.environ.get("CUMPROD_OV_CONFIG", "").split(",") if item
    )
    inputs, outputs, _ = _graph_io(model_path)
    core = ov.Core()
    compiled = core.compile_model(core.read_model(str(model_path)), "CPU", config)
    request = compiled.create_infer_request()
    request.infer({name: feeds[name] for name in inputs})
    results = []
    for i, name in enumerate(outputs):
        port = next((p for p in compiled.outputs if name in p.get_names()), compiled.outputs[i])
        results.append(np.array(request.get_tensor(port).data, copy=True))
    return results


def run_tract(model_path: Path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """tract: load, type, run (inputs in graph order); TDim outputs read as int64."""
    import tract

    inputs, _, _ = _graph_io(model_path)
    runnable = tract.onnx().load(str(model_path)).into_model().into_runnable()
    results = []
    for tensor in runnable.run([feeds[name] for name in inputs]):
        try:
            results.append(tensor.to_numpy())
        except tract.TractError as exc:  # a TDim (symbolic integer) tensor
            if "TDim" not in str(exc):
                raise
            results.append(tensor.convert_to(tract.DatumType.I64).to_numpy())
    return results


def run_tinygrad(model_path: Path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """tinygrad's ONNX runner on its default device; a fresh runner per call (a runner caches
    symbolic sizes and axis-input values from its first call)."""
    from tinygrad.nn.onnx import OnnxRunner

    inputs, outputs, _ = _graph_io(model_path)
    results = OnnxRunner(model_path)({name: feeds[name] for name in inputs})
    return [results[name].numpy() for name in outputs]


IREE_FLAGS = [
    "--iree-hal-target-device=local",
    "--iree-hal-local-target-device-backends=llvm-cpu",
    "--iree-llvmcpu-target-cpu=generic",
    "--iree-input-demote-f64-to-f32=false",  # float64 stays float64
]


def _run_tool(
    label: str,
    args: list[str],
    timeout_variable: str,
    markers: tuple[str, ...],
    *,
    done: Path | None = None,
    cwd: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """Runs a converter or compiler in a child process (a crash there fails this model
    only), for at most ``$timeout_variable`` seconds (300 by default). A nonzero exit, or
    ``done`` not written, raises RuntimeError naming the first output line with one of
    ``markers`` (else the last line)."""
    timeout = float(os.environ.get(timeout_variable, "300"))
    try:
        result = subprocess.run(
            args, capture_output=True, text=True, timeout=timeout, check=False, cwd=cwd
        )
    except subprocess.TimeoutExpired as exc:
        raise RuntimeError(f"{label} timed out after {timeout:.0f} s") from exc
    if result.returncode != 0 or (done is not None and not done.exists()):
        lines = [ln.strip() for ln in (result.stdout + result.stderr).splitlines() if ln.strip()]
        errors = [ln for ln in lines if any(m in ln.lower() for m in markers)]
        detail = (errors or lines[-1:] or ["no output"])[0]
        raise RuntimeError(f"{label}: exit {result.returncode}: {detail}")
    return result


def _iree_tool(args: list[str], done: Path) -> None:
    _run_tool(Path(args[0]).name, args, "CUMPROD_IREE_TIMEOUT", ("error",), done=done)


def run_iree(model_path: Path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """IREE: ``iree-import-onnx``, ``iree-compile`` for llvm-cpu (:data:`IREE_FLAGS`), run on
    the ``local-task`` driver. IREE's integers are signless: unsigned outputs are read back
    with their declared type."""
    import iree.runtime as rt
    import onnx

    tools = Path(sys.executable).parent
    inputs, _, name = _graph_io(model_path)
    with tempfile.TemporaryDirectory() as tmp:
        mlir, vmfb = Path(tmp) / "model.mlir", Path(tmp) / "model.vmfb"
        _iree_tool([str(tools / "iree-import-onnx"), str(model_path), "-o", str(mlir)], mlir)
        _iree_tool([str(tools / "iree-compile"), *IREE_FLAGS, str(mlir), "-o", str(vmfb)], vmfb)
        driver = os.environ.get("CUMPROD_IREE_DRIVER", "local-task")
        module = rt.load_vm_flatbuffer(vmfb.read_bytes(), driver=driver)
    result = module[name](*[np.asarray(feeds[n]) for n in inputs])
    results = list(result) if isinstance(result, (tuple, list)) else [result]
    arrays = [np.asarray(r.to_host() if hasattr(r, "to_host") else r) for r in results]
    graph = onnx.load(str(model_path), load_external_data=False).graph
    out = []
    for array, value in zip(arrays, graph.output):
        elem = value.type.tensor_type.elem_type
        declared = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem)) if elem else array.dtype
        signless = declared.kind == "u" and array.dtype.kind == "i"
        same_size = array.dtype.itemsize == declared.itemsize
        out.append(array.view(declared) if signless and same_size else array)
    return out


def _declared(model_path: Path) -> list[np.dtype | None]:
    """Each graph output's declared numpy type (None where the graph does not say)."""
    import onnx

    graph = onnx.load(str(model_path), load_external_data=False).graph
    types = [o.type.tensor_type.elem_type for o in graph.output]
    return [np.dtype(onnx.helper.tensor_dtype_to_np_dtype(t)) if t else None for t in types]


def _file_key(model_path: Path) -> str:
    return hashlib.sha256(Path(model_path).read_bytes()).hexdigest()


# argv[0] is the program name the converter's argument parser skips
MNN_CONVERT = (
    "import sys, _tools; _tools.mnnconvert(['mnnconvert', '-f', 'ONNX', "
    "'--modelFile', sys.argv[1], '--MNNModel', sys.argv[2], '--bizCode', 'cumprod'])"
)
_MNN_CONVERTED: dict[str, bytes] = {}  # the model file's sha256 -> the .mnn file's bytes


def _mnn_convert(model_path: Path) -> bytes:
    """The model in MNN's format, by MNN's converter *library* in a child process (a converter
    crash fails this model only), once per distinct model file. Never the ``mnnconvert``
    console script: it pip-installs packages and posts a usage log."""
    key = _file_key(model_path)
    if key in _MNN_CONVERTED:
        return _MNN_CONVERTED[key]
    with tempfile.TemporaryDirectory() as tmp:
        mnn_path = Path(tmp) / "model.mnn"
        args = [sys.executable, "-c", MNN_CONVERT, str(model_path), str(mnn_path)]
        markers = ("error", "not support", "failed", "can't", "abort", "invalid")
        done = _run_tool("MNN's converter", args, "CUMPROD_MNN_TIMEOUT", markers, done=mnn_path)
        if "Converted Success" not in done.stdout:
            raise RuntimeError(f"MNN's converter: {(done.stdout.strip() or 'no output')[-200:]}")
        _MNN_CONVERTED[key] = mnn_path.read_bytes()
    return _MNN_CONVERTED[key]


def run_mnn(model_path: Path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """MNN's CPU backend: the model converted by its converter library (:func:`_mnn_convert`),
    loaded with ``MNN.nn.load_module_from_file`` and run with ``Module.forward``. The converter
    makes every integer input and output int32 and every float one float32: feeds are cast to
    those (int64 / uint32 / uint64 values wrap to 32 bits, float64 rounds; the ``mnn`` target
    warns about both) and outputs back to the graph's declared types."""
    import MNN

    inputs, outputs, _ = _graph_io(model_path)
    with tempfile.TemporaryDirectory() as tmp:
        mnn_path = Path(tmp) / "model.mnn"
        mnn_path.write_bytes(_mnn_convert(model_path))
        module = MNN.nn.load_module_from_file(str(mnn_path), inputs, outputs)
    args = []
    for name in inputs:
        array = np.asarray(feeds[name])
        floating = array.dtype.kind == "f" or array.dtype.name == "bfloat16"
        array = array.astype(np.float32 if floating else np.int32)
        dtype = MNN.expr.float if floating else MNN.expr.int
        args.append(MNN.expr.const(array, list(array.shape), MNN.expr.NCHW, dtype))
    results = []
    for var, declared in zip(module.forward(args), _declared(model_path)):
        out = np.array(var.read(), copy=True)
        results.append(out if declared is None else out.astype(declared))
    return results


_TVM_COMPILED: dict[str, object] = {}  # the model file's sha256 -> its compiled executable


def _tvm_arrays(result: object) -> list[np.ndarray]:
    if isinstance(result, (list, tuple)) or type(result).__name__ == "Array":
        return [a for item in result for a in _tvm_arrays(item)]  # type: ignore[attr-defined]
    return [np.array(result.numpy(), copy=True)]  # type: ignore[attr-defined]


def run_tvm(model_path: Path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """Apache TVM: Relax's ONNX frontend (``tvm.relax.frontend.onnx.from_onnx``; symbolic dims
    stay symbolic), ``tvm.compile(mod, target="llvm")`` once per distinct model file, run on a
    ``relax.VirtualMachine`` on the CPU, inputs in graph-input order; outputs in the graph's
    declared types."""
    import onnx
    import tvm
    from tvm import relax
    from tvm.relax.frontend.onnx import from_onnx

    inputs, _, _ = _graph_io(model_path)
    key = _file_key(model_path)
    if key not in _TVM_COMPILED:
        _TVM_COMPILED[key] = tvm.compile(from_onnx(onnx.load(str(model_path))), target="llvm")
    machine = relax.VirtualMachine(_TVM_COMPILED[key], tvm.cpu())
    args = [tvm.runtime.tensor(np.array(feeds[name], order="C")) for name in inputs]
    results = []
    for out, declared in zip(_tvm_arrays(machine["main"](*args)), _declared(model_path)):
        results.append(out if declared is None or out.dtype == declared else out.astype(declared))
    return results


# pnnx's type suffixes for inputshape=[...]
_PNNX_TYPES = {"float32": "f32", "float64": "f64", "float16": "f16", "int32": "i32", "int64": "i64"}
_NCNN_CONVERTED: dict[str, tuple[bytes, bytes]] = {}  # sha256 + shapes -> (.param, .bin)


def _ncnn_convert(model_path: Path, feeds: list[np.ndarray]) -> tuple[bytes, bytes]:
    """The model as ncnn's .param and .bin, by the ``pnnx`` program of the pnnx package with
    its defaults and ``inputshape`` set to the shapes fed (pnnx converts for those shapes),
    once per distinct model file and shapes. pnnx writes beside the model: it runs on a copy
    in a temporary folder."""
    key = _file_key(model_path) + repr([(a.shape, a.dtype.name) for a in feeds])
    if key in _NCNN_CONVERTED:
        return _NCNN_CONVERTED[key]
    spec = importlib.util.find_spec("pnnx")  # not imported: it imports torch
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the pnnx package is not installed")
    program = Path(next(iter(spec.submodule_search_locations))) / "pnnx"
    shapes = ",".join(
        "[" + ",".join(map(str, a.shape)) + "]" + _PNNX_TYPES.get(a.dtype.name, "f32")
        for a in feeds
    )
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "model.onnx"
        copy.write_bytes(Path(model_path).read_bytes())
        param, weights = Path(tmp) / "model.ncnn.param", Path(tmp) / "model.ncnn.bin"
        args = [str(program), copy.name, f"inputshape={shapes}"]
        markers = ("error", "not supported", "failed", "unknown", "invalid", "max supported")
        _run_tool("pnnx", args, "CUMPROD_PNNX_TIMEOUT", markers, done=weights, cwd=tmp)
        if not param.exists():
            raise RuntimeError("pnnx: no .param file written")
        _NCNN_CONVERTED[key] = (param.read_bytes(), weights.read_bytes())
    return _NCNN_CONVERTED[key]


def run_ncnn(model_path: Path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """ncnn's CPU path with its default options: the model converted by pnnx
    (:func:`_ncnn_convert`; inputs ``in0, in1, ...`` and outputs ``out0, out1, ...`` in graph
    order), run by ncnn's Python binding on float32 feeds (ncnn computes float32 only; the
    ``ncnn`` target lowers nothing else), outputs read back in the graph's declared types."""
    import ncnn

    inputs, outputs, _ = _graph_io(model_path)
    arrays = [np.asarray(feeds[name]) for name in inputs]
    param, weights = _ncnn_convert(model_path, arrays)
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "model.param").write_bytes(param)
        (Path(tmp) / "model.bin").write_bytes(weights)
        with ncnn.Net() as net:
            if net.load_param(str(Path(tmp) / "model.param")) or net.load_model(
                str(Path(tmp) / "model.bin")
            ):
                lines = param.decode().splitlines()[2:]  # magic, then the counts
                kinds = {line.split()[0] for line in lines if line.split()}
                unknown = sorted(k for k in kinds if ncnn.layer_to_index(k) < 0)
                raise RuntimeError(
                    "ncnn could not load pnnx's output"
                    + (f": no layer {', '.join(unknown)} in ncnn" if unknown else "")
                )
            with net.create_extractor() as extractor:
                for i, array in enumerate(arrays):
                    mat = ncnn.Mat(np.ascontiguousarray(array, dtype=np.float32)).clone()
                    extractor.input(f"in{i}", mat)
                for i, declared in enumerate(_declared(model_path)):
                    status, mat = extractor.extract(f"out{i}")
                    if status != 0:
                        raise RuntimeError(f"ncnn: extracting {outputs[i]!r} returned {status}")
                    out = np.array(mat.numpy(), copy=True)
                    results.append(out if declared is None else out.astype(declared))
    return results


RUNNERS: dict[str, tuple[str, Runner]] = {
    "openvino": ("openvino", run_openvino),
    "tract": ("tract", run_tract),
    "tinygrad": ("tinygrad", run_tinygrad),
    "iree": ("iree.runtime", run_iree),
    "mnn": ("MNN", run_mnn),
    "tvm": ("tvm", run_tvm),
    "ncnn": ("ncnn", run_ncnn),
}


def installed(target: str) -> bool:
    """Whether the runtime of ``target`` can be imported in this environment."""
    entry = RUNNERS.get(target)
    if entry is None:
        return False
    try:
        return importlib.util.find_spec(entry[0]) is not None
    except ModuleNotFoundError:
        return False


def runner_for(target: str) -> Runner | None:
    """The runner of ``target``'s runtime when it is installed here, else None."""
    return RUNNERS[target][1] if installed(target) else None
