"""``torch.onnx.export`` for models that call ``torch.cumprod``, with either exporter.

torch's exporters have no translation for ``aten::cumprod`` (PyTorch issue 102948): the
dynamo one's torchlib raises NotImplementedError, the TorchScript one says "Exporting the
operator 'aten::cumprod' to ONNX opset version N is not supported".

- ``dynamo=True``: :func:`translation_table` returns one for ``custom_translation_table=``::

      torch.onnx.export(model, args, dynamo=True,
                        custom_translation_table=rewriter.pytorch.translation_table())

  It emits the same lowerings as the pass (``rewriter.lowerings.lower`` with the lowering
  ``choose(site, "auto")`` picks), through the exporter's op recorder, at the exporter's
  opset.
- ``dynamo=False``: :func:`register_torchscript_symbolic` registers a symbolic for the
  TorchScript exporter, once, for every opset from 11 to 20::

      rewriter.pytorch.register_torchscript_symbolic()
      torch.onnx.export(model, args, f, dynamo=False, opset_version=17)

  The symbolic runs the pass on a one-CumProd model of the input's type and dims at the
  export's opset (:func:`lowered_cumprod`) and writes the result into the exporter's graph.

Either way the file has no CumProd: it runs on onnxruntime 1.20.1 and later. Integers are
bit-exact (wraparound included); floats hold each lowering's stated bound.

torch's semantics are kept: the input is cast to ``dtype=`` first when given; without it, bool
and integer inputs give int64 (as ``torch.cumprod`` does). A ``dtype`` narrower than the
input's integer type (int32 from int64; int8, uint8, int16) is computed in int64 and wrapped to
its width with ``Mod``, never by an out-of-range Cast. A 0-D input comes back cast.

torch is imported only by the functions that need it (``pip install
cumprod-rewriter[torch]``).

Exporter detail (torch 2.13, dynamo): its op recorder gives an op one output per declared
output parameter and passes every argument to the first variadic input, so a ``Loop`` with a
carried value and a scan output cannot be recorded from the ONNX schema as it is. Ops with
variadic parameters are therefore recorded with a schema of the same op whose parameters are
fixed to the arity used (:func:`fixed_arity_schema`); the node is the standard ONNX op.
"""

from rewriter.pytorch.dynamo import (
    ExporterBuilder,
    cumprod_function,
    fixed_arity_schema,
    translation_table,
)
from rewriter.pytorch.torchscript import (
    TORCHSCRIPT_MIN_OPSET,
    lowered_cumprod,
    register_torchscript_symbolic,
    torchscript_symbolic,
    unregister_torchscript_symbolic,
)

__all__ = [
    "TORCHSCRIPT_MIN_OPSET",
    "ExporterBuilder",
    "cumprod_function",
    "fixed_arity_schema",
    "lowered_cumprod",
    "register_torchscript_symbolic",
    "torchscript_symbolic",
    "translation_table",
    "unregister_torchscript_symbolic",
]
