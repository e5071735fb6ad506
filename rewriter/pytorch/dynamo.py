"""``torch.onnx.export(..., dynamo=True)``: a translation for ``aten::cumprod`` through the
exporter's op recorder (see :mod:`rewriter.pytorch`)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, cast

import onnx
import onnx_ir as ir
import onnxscript
from onnxscript.onnx_types import TensorType

from rewriter import lowerings
from rewriter.lower import node_warnings
from rewriter.pytorch.semantics import LOCATION, NARROW_INTS, compute_dtype, result_dtype, wrap
from rewriter.site import CUMPROD_TYPES, CumProdSite, ScanSpec
from rewriter.targets import DEFAULT_TARGET, target_named

__all__ = ["ExporterBuilder", "cumprod_function", "fixed_arity_schema", "translation_table"]

logger = logging.getLogger(__name__)
# The ai.onnx version torchlib emits at; used when the exporter's recorder does not say.
_FALLBACK_OPSET = 18
_VARIADIC = onnx.defs.OpSchema.FormalParameterOption.Variadic
_SINGLE = onnx.defs.OpSchema.FormalParameterOption.Single


def fixed_arity_schema(
    schema: onnx.defs.OpSchema, num_inputs: int, num_outputs: int
) -> onnx.defs.OpSchema:
    """``schema`` with its variadic input / output parameter expanded into as many single
    parameters as a node uses (same op, domain, version, types and attributes)."""

    def expand(
        params: Sequence[onnx.defs.OpSchema.FormalParameter], count: int
    ) -> list[onnx.defs.OpSchema.FormalParameter]:
        fixed = [p for p in params if p.option != _VARIADIC]
        result = []
        for param in params:
            if param.option != _VARIADIC:
                result.append(
                    onnx.defs.OpSchema.FormalParameter(
                        param.name, param.type_str, param_option=param.option
                    )
                )
                continue
            for k in range(count - len(fixed)):
                result.append(
                    onnx.defs.OpSchema.FormalParameter(
                        f"{param.name}_{k}", param.type_str, param_option=_SINGLE
                    )
                )
        return result

    return onnx.defs.OpSchema(
        schema.name,
        schema.domain,
        schema.since_version,
        inputs=expand(schema.inputs, num_inputs),
        outputs=expand(schema.outputs, num_outputs),
        type_constraints=[
            (c.type_param_str, list(c.allowed_type_strs), c.description)
            for c in schema.type_constraints
        ],
        attributes=[
            onnx.defs.OpSchema.Attribute(a.name, a.type, a.description, required=a.required)
            for a in schema.attributes.values()
        ],
    )


class ExporterBuilder(lowerings.Builder):
    """Emits each node through onnxscript's current evaluator: inside a translation function
    that is torch's op recorder, which adds the nodes to the exported graph. Subgraph bodies
    (:meth:`child`) are plain ``ir.Graph``s whose nodes refer to the recorder's values."""

    def __init__(self, opset: int, names: lowerings.NameSource, prefix: str) -> None:
        super().__init__(opset, names, prefix)
        self._opset = onnxscript.values.Opset("", opset)

    def op_multi(
        self, op_type: str, *inputs: ir.Value | None, n_out: int, **attributes: object
    ) -> Sequence[ir.Value]:
        schema = onnx.defs.get_schema(op_type, self.opset, "")
        if any(p.option == _VARIADIC for p in [*schema.inputs, *schema.outputs]):
            schema = fixed_arity_schema(schema, len(inputs), n_out)
        op = onnxscript.values.Op(self._opset, op_type, schema)
        result = op(*inputs, **attributes)
        outputs = [result] if isinstance(result, ir.Value) else list(result)
        if len(outputs) != n_out:  # a recorder that counts outputs differently
            raise RuntimeError(
                f"the op recorder gave {op_type} {len(outputs)} output(s), expected {n_out}"
            )
        return outputs


def _recorder_opset() -> int:
    """The ai.onnx version of the exporter's op recorder (the current onnxscript evaluator)."""
    from onnxscript import evaluator

    version = getattr(getattr(evaluator.default(), "opset", None), "version", None)
    return version if isinstance(version, int) else _FALLBACK_OPSET


def cumprod_function(
    strategy: str = "auto", *, target: str = DEFAULT_TARGET, max_length: int | None = None
) -> Callable[..., TensorType]:
    """The translation function for ``aten::cumprod(Tensor self, int dim, *, ScalarType?
    dtype=None)``; the exporter calls it with ``self`` an ``ir.Value``, ``dim`` an int and
    ``dtype`` an ONNX data type (or -1 / None). ``max_length``: as for the pass."""
    lowerings.check_strategy(strategy)
    bound = lowerings.whole_number("max_length", max_length, 1)
    runtime = target_named(target)
    names = lowerings.NameSource(())

    # The annotations are what the exporter builds the op's signature from: TensorType is
    # onnxscript's "any tensor"; it passes an ir.Value.
    def aten_cumprod(self: TensorType, dim: int, dtype: int = -1) -> TensorType:
        x = cast(ir.Value, self)
        if x.dtype is None or x.shape is None:
            raise ValueError(f"{LOCATION}: the type and shape of the input must be known")
        out = result_dtype(x.dtype, dtype)
        if out not in CUMPROD_TYPES and out not in NARROW_INTS:
            raise ValueError(f"{LOCATION}: no lowering for output type {out.name.lower()}")
        compute = compute_dtype(x.dtype, out)
        b = ExporterBuilder(_recorder_opset(), names, "cumprod")
        xc = x if x.dtype == compute else b.cast(x, compute)
        rank = x.shape.rank()
        if rank == 0:
            y = xc if xc is not x else b.op("Identity", x)
        else:
            if not -rank <= dim < rank:
                raise ValueError(f"{LOCATION}: dim {dim} is out of range for rank {rank}")
            dims = tuple(d if isinstance(d, int) else (d.value or None) for d in x.shape.dims)
            spec = ScanSpec(
                dtype=compute,
                exclusive=False,
                reverse=False,
                dims=dims,
                axis=dim % rank,
                max_length=bound,
            )
            site = CumProdSite(
                x=xc,
                axis_value=None,
                spec=spec,
                name="aten::cumprod",
                location=LOCATION,
                opset=b.opset,
            )
            lowering = lowerings.choose(site, strategy, runtime)
            for message in node_warnings(site, lowering, runtime):
                logger.warning("%s: %s (target %s)", LOCATION, message, runtime.name)
            y = lowerings.lower(b, site, lowering, runtime)
        if compute != out:  # an integer type narrower than the input's
            y = wrap(b, y, out)
        return cast(TensorType, y)

    return aten_cumprod


def translation_table(
    strategy: str = "auto", *, target: str = DEFAULT_TARGET, max_length: int | None = None
) -> dict[Any, Callable[..., TensorType]]:
    """``{torch.ops.aten.cumprod.default: fn}`` for ``torch.onnx.export(...,
    custom_translation_table=...)``. In-place (``cumprod_``) and ``out=`` calls reach the
    exporter as ``aten::cumprod.default`` after functionalization.

    Args:
        strategy: ``"auto"`` or a lowering name, as for the pass.
        target: The runtime whose kernel gaps to work around, as for the pass.
        max_length: A bound on scanned lengths known only at run time (a dynamic dim), as
            for the pass: the targets without Loop and Scan need it there.
    """
    import torch

    function = cumprod_function(strategy, target=target, max_length=max_length)
    return {torch.ops.aten.cumprod.default: function}
