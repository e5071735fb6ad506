"""Running a model: in onnxruntime (bfloat16 through OrtValues), or in ``onnx.reference``
with a CumProd that multiplies as onnxruntime's native kernel does."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx

from rewriter.verify.compare import numpy_cumprod

__all__: list[str] = []


def _ort_session(model: str | bytes) -> Any:
    import onnxruntime as ort

    ort.set_default_logger_severity(3)
    options = ort.SessionOptions()
    # fatal only: a run that fails (the first feeds' sizes may not fit the model) raises, and
    # is reported in one line; its error log leaked onto the terminal, red, even with -q
    options.log_severity_level = 4
    return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])


def _run_original(session: Any, path: str, feeds: dict[str, Any]) -> list[Any]:
    """The original model on ``feeds``: in onnxruntime, or the spec's reference when
    onnxruntime cannot load it (``session`` None)."""
    if session is not None:
        return _session_run(session, feeds)
    return _run_reference(path, feeds)


_BFLOAT16 = "tensor(bfloat16)"


def _session_run(session: Any, feeds: dict[str, Any]) -> list[Any]:
    """``session.run``, through OrtValues when a feed or an output is bfloat16:
    onnxruntime's Python binding converts neither way for it ("Numpy_type 256 can't be
    converted to MLDataType", "No corresponding Numpy type"), so ``--verify`` found every
    model with bfloat16 inputs or outputs a mismatch. The 16-bit patterns are passed in
    and read out as they are (``ml_dtypes.bfloat16`` arrays, as numpy and onnx.reference
    hold them)."""
    import ml_dtypes

    wide = any(getattr(v, "dtype", None) == ml_dtypes.bfloat16 for v in feeds.values())
    if not wide and all(o.type != _BFLOAT16 for o in session.get_outputs()):
        return list(session.run(None, feeds))
    import ctypes

    import onnxruntime as ort

    values = {}
    for name, value in feeds.items():
        array = np.ascontiguousarray(value)
        if array.dtype == ml_dtypes.bfloat16:
            values[name] = ort.OrtValue.ortvalue_from_numpy_with_onnx_type(
                array.view(np.uint16), onnx.TensorProto.BFLOAT16
            )
        else:
            values[name] = ort.OrtValue.ortvalue_from_numpy(array)
    results = []
    for out in session.run_with_ort_values(None, values):
        if out.data_type() != _BFLOAT16:
            results.append(out.numpy())
            continue
        shape = tuple(out.shape())
        count = int(np.prod(shape))
        bits = np.empty(0, np.uint16)
        if count:
            bits = np.ctypeslib.as_array((ctypes.c_uint16 * count).from_address(out.data_ptr()))
        results.append(bits.copy().view(ml_dtypes.bfloat16).reshape(shape))
    return results


def _run_reference(path: str, feeds: dict[str, Any]) -> list[Any]:
    """The model in ``onnx.reference``, its CumProd as onnxruntime's native kernel computes
    it (:func:`_reference_cumprod`)."""
    from onnx.reference import ReferenceEvaluator

    with np.errstate(all="ignore"):  # the special inputs' inf * 0 and the like
        evaluator = ReferenceEvaluator(path, new_ops=[_reference_cumprod()])
        return list(evaluator.run(None, feeds))


def _reference_cumprod() -> type:
    """onnx.reference's CumProd multiplies float16 and bfloat16 in their own type, rounding
    at every step; onnxruntime's native kernel (float16) and every lowering here multiply in
    float32 and round once. A bfloat16 original, which onnxruntime cannot run, was checked
    against the former, and a 1-ulp difference a later Cast to an integer kept was reported
    a mismatch. This CumProd multiplies as onnxruntime does (:func:`numpy_cumprod`)."""
    import ml_dtypes
    from onnx.reference.op_run import OpRun

    class CumProd(OpRun):  # type: ignore[misc]
        op_domain = ""

        def _run(self, x, axis, exclusive=None, reverse=None):  # type: ignore[no-untyped-def]
            axis = np.asarray(axis)
            if axis.ndim != 0:
                raise ValueError(f"Axis must be a rank-0 tensor, got `{axis.ndim}`.")
            k = int(axis) + (x.ndim if int(axis) < 0 else 0)
            wide = x.dtype in (np.float16, ml_dtypes.bfloat16)
            out = numpy_cumprod(
                x, k, bool(exclusive), bool(reverse), np.float32 if wide else x.dtype
            )
            return (out.astype(x.dtype),)

    return CumProd
