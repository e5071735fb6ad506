"""``torch.onnx.export(..., dynamo=False)``: a symbolic for the TorchScript exporter that runs
the pass on a one-CumProd model at the export's opset and writes the result into the
exporter's graph (see :mod:`rewriter.pytorch`)."""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Sequence
from typing import Any, cast

import numpy as np
import onnx
import onnx_ir as ir

from rewriter import lowerings
from rewriter.pytorch.semantics import LOCATION, NARROW_INTS, compute_dtype, result_dtype, wrap
from rewriter.site import CUMPROD_TYPES
from rewriter.targets import DEFAULT_TARGET, target_named

__all__ = [
    "TORCHSCRIPT_MIN_OPSET",
    "lowered_cumprod",
    "register_torchscript_symbolic",
    "torchscript_symbolic",
    "unregister_torchscript_symbolic",
]

logger = logging.getLogger(__name__)


def lowered_cumprod(
    x_dtype: ir.DataType,
    dims: Sequence[int | None] | None,
    dim: int,
    dtype: ir.DataType | None,
    opset: int,
    *,
    strategy: str = "auto",
    target: str = DEFAULT_TARGET,
    max_length: int | None = None,
) -> ir.Graph:
    """``torch.cumprod(x, dim, dtype=dtype)`` as a graph of ai.onnx ``opset`` (one input, one
    output, no CumProd), for an x of type ``x_dtype`` and dims ``dims`` (None: not static;
    ``dims`` None: rank unknown).

    Built as a one-CumProd opset-26 model with torch's casts around it (:func:`result_dtype`,
    :func:`compute_dtype`, :func:`wrap`), then lowered by the project's pass
    (:func:`rewriter.decompose.decompose_cumprod` with ``target_opset=opset``): the same
    lowering choice, target refusals, per-node warnings, opset conversion and full ONNX check
    as the command line gives.

    Raises:
        ValueError: a dim out of range, an output type with no lowering; the pass's
            CumProdError / OpsetError, naming node ``'aten::cumprod'``.
    """
    from rewriter.decompose import decompose_cumprod

    out = result_dtype(x_dtype, None if dtype is None else int(dtype))
    if out not in CUMPROD_TYPES and out not in NARROW_INTS:
        raise ValueError(f"{LOCATION}: no lowering for output type {out.name.lower()}")
    compute = compute_dtype(x_dtype, out)
    if opset < _BFLOAT16_OPSET and ir.DataType.BFLOAT16 in (x_dtype, out):
        raise ValueError(
            f"{LOCATION}: bfloat16 needs ai.onnx opset {_BFLOAT16_OPSET} or later (Cast and "
            f"Mul take it from there), not {opset}: export with a higher opset_version"
        )
    shape = None if dims is None else ir.Shape(list(dims))
    x = ir.Value(name="x", type=ir.TensorType(x_dtype), shape=shape)
    b = lowerings.Builder(_CUMPROD_OPSET, lowerings.NameSource(("x", "y")), "aten_cumprod")
    xc = x if x_dtype == compute else b.cast(x, compute)
    if dims is not None and len(dims) == 0:  # torch returns a 0-D input as it is (cast)
        y = b.op("Identity", xc)
    else:
        if dims is not None and not -len(dims) <= dim < len(dims):
            raise ValueError(f"{LOCATION}: dim {dim} is out of range for rank {len(dims)}")
        y = b.op("CumProd", xc, b.const(dim))
        y.producer().name = "aten::cumprod"  # type: ignore[union-attr]
    if compute != out:  # an integer type narrower than the input's
        y = wrap(b, y, out)
    y.name, y.type, y.shape = "y", ir.TensorType(out), shape
    graph = ir.Graph(
        [x], [y], nodes=b.nodes, opset_imports={"": _CUMPROD_OPSET}, name="torch.onnx.export"
    )
    model = ir.Model(graph, ir_version=onnx.IR_VERSION)
    decompose_cumprod(
        model, strategy=strategy, target=target, target_opset=opset, max_length=max_length
    )
    # every value typed (subgraphs too), for torch's types: onnx's inference on the result
    proto = onnx.shape_inference.infer_shapes(ir.serde.serialize_model(model), strict_mode=True)
    return ir.serde.deserialize_model(proto).graph


# The first ai.onnx version whose Cast and Mul take bfloat16.
_BFLOAT16_OPSET = 13
# The ai.onnx version that has CumProd: the one-node model is built there, then lowered.
_CUMPROD_OPSET = 26
# The exporter takes a custom symbolic registered at opset k for every export opset >= k
# (the highest registered version <= the export's): one registration covers 11 to 20.
TORCHSCRIPT_MIN_OPSET = 11


def _ir_dtype(dtype: Any) -> ir.DataType:
    """The ONNX element type of a torch dtype or ScalarType number (``dtype=`` of an aten op)."""
    from torch.onnx import JitScalarType  # type: ignore[attr-defined]

    jit = JitScalarType(dtype) if isinstance(dtype, int) else JitScalarType.from_dtype(dtype)
    return ir.DataType(jit.onnx_type().value)


def _torch_dtype(dtype: ir.DataType) -> Any:
    from torch.onnx import JitScalarType  # type: ignore[attr-defined]

    return JitScalarType.from_onnx_type(int(dtype)).dtype()


class _TorchGraphWriter:
    """Writes an ``ir.Graph`` of ai.onnx nodes into the TorchScript exporter's graph.

    In the exporter's graph (and the blocks of its If / Loop nodes) every node goes through
    ``g.op``, which runs torch's per-node ONNX shape inference and records the node for the
    exporter's naming. If and Loop bodies become blocks of their node (the exporter writes
    those two as subgraphs). A Scan body, whose blocks the exporter would drop, becomes a
    graph attribute (``body_g``): a ``torch._C.Graph`` of its own, so it may read nothing
    from the outer graph (the project's Scan bodies read only their inputs). Its nodes are
    created directly, without torch's shape inference, which keys what it learns by value
    name: a separate graph's names would clash with the exporter's. Its values are named
    ``prefix`` + a counter, so they shadow no outer name.

    Every value written gets the element type and dims of its ir value (the lowered graph is
    shape-inferred first: :func:`lowered_cumprod`), so torch's inference and serializer see
    them."""

    def __init__(self, prefix: str) -> None:
        import torch
        from torch.onnx._internal.torchscript_exporter import jit_utils

        self._torch = torch
        self._jit_utils = jit_utils
        self._prefix = prefix
        self._count = 0

    def write(self, sink: Any, graph: ir.Graph, env: dict[ir.Value, Any]) -> None:
        """Emit ``graph``'s initializers and nodes into ``sink`` (the exporter's graph
        context, or a ``torch._C.Block`` of a graph of its own); ``env`` maps the ir values
        already there (graph inputs, outer values) to torch values, and gets the new ones."""
        for value in graph.initializers.values():
            tensor = value.const_value
            assert tensor is not None
            (env[value],), _ = self._emit(
                sink, "Constant", [], attributes=self._tensor_attr(tensor)
            )
            self._typed(sink, value, env[value])
        for node in graph:
            self._node(sink, node, env)

    def _node(self, sink: Any, node: ir.Node, env: dict[ir.Value, Any]) -> None:
        if node.domain not in ("", "ai.onnx"):
            raise ValueError(f"{LOCATION}: a lowered node in domain '{node.domain}'")
        inputs = [self._input(sink, value, env) for value in node.inputs]
        attributes: dict[str, object] = {}
        bodies: list[ir.Graph] = []
        for name, attr in node.attributes.items():
            if attr.type != ir.AttributeType.GRAPH:
                attributes.update(self._attribute(name, attr))
            elif node.op_type in ("If", "Loop"):
                continue
            else:  # a Scan body: a graph of its own
                attributes[f"{name}_g"] = self._own_graph(attr.as_graph())
        if node.op_type == "If":
            bodies = [node.attributes["then_branch"].as_graph()]
            bodies.append(node.attributes["else_branch"].as_graph())
        elif node.op_type == "Loop":
            bodies = [node.attributes["body"].as_graph()]
        n_out = len(node.outputs)
        outputs, blocks = self._emit(
            sink, node.op_type, inputs, n_out=n_out, attributes=attributes, n_blocks=len(bodies)
        )
        for body, block in zip(bodies, blocks):
            inner = block.block if hasattr(block, "block") else block
            for value in body.inputs:
                env[value] = inner.addInputToBlock()
                self._typed(block, value, env[value])
            self.write(block, body, env)
            for value in body.outputs:
                inner.registerOutput(env[value])
        if bodies and hasattr(sink, "params_dict"):  # torch's inference, now with the blocks
            self._torch._C._jit_pass_onnx_node_shape_type_inference(
                outputs[0].node(), sink.params_dict, sink.opset
            )
        for value, made in zip(node.outputs, outputs):
            env[value] = made
            self._typed(sink, value, made)

    def _emit(
        self,
        sink: Any,
        op_type: str,
        inputs: list[Any],
        *,
        n_out: int = 1,
        attributes: dict[str, object] | None = None,
        n_blocks: int = 0,
    ) -> tuple[list[Any], list[Any]]:
        """A node in ``sink``: its outputs and its ``n_blocks`` blocks (as sinks)."""
        if hasattr(sink, "params_dict"):  # the exporter's graph context
            result, contexts, _ = self._jit_utils.add_op_with_blocks(
                sink, op_type, *inputs, outputs=n_out, n_blocks=n_blocks, **(attributes or {})
            )
            return ([result] if n_out == 1 else list(result)), list(contexts)
        node = sink.addNode(f"onnx::{op_type}", inputs)
        for _ in range(n_out - 1):
            node.addOutput()
        for key, value in sorted((attributes or {}).items()):
            self._jit_utils._add_attribute(node, key, value, aten=False)
        return list(node.outputs()), [node.addBlock() for _ in range(n_blocks)]

    def _own_graph(self, body: ir.Graph) -> Any:
        """``body`` as a separate ``torch._C.Graph`` (for a graph attribute)."""
        graph = self._torch._C.Graph()
        env: dict[ir.Value, Any] = {}
        for value in body.inputs:
            env[value] = graph.addInput()
            self._typed(graph.block(), value, env[value])
        self.write(graph.block(), body, env)
        for value in body.outputs:
            graph.registerOutput(env[value])
        return graph

    def _typed(self, sink: Any, value: ir.Value, made: Any) -> None:
        """Give ``made`` the type of ``value``; name it when it is in a graph of its own."""
        if not hasattr(sink, "params_dict"):
            made.setDebugName(f"{self._prefix}{self._count}")
            self._count += 1
        if value.dtype is None:
            return
        torch = self._torch
        dtype = _torch_dtype(value.dtype)
        typed = torch._C.TensorType.create_from_tensor(torch.empty((), dtype=dtype))
        if value.shape is not None:
            typed = typed.with_sizes([d if isinstance(d, int) else None for d in value.shape])
        elif isinstance(made.type(), torch._C.TensorType) and made.type().dim() is not None:
            typed = made.type().with_dtype(dtype)
        made.setType(typed)

    def _input(self, sink: Any, value: ir.Value | None, env: dict[ir.Value, Any]) -> Any:
        if value is None:  # an omitted optional input
            (none,), _ = self._emit(sink, "prim::Constant", [])
            none.setType(self._torch._C.NoneType.get())
            return none
        if value not in env:  # only in a graph of its own (Scan): If / Loop share env
            raise ValueError(
                f"{LOCATION}: a lowered Scan body reads '{value.name}' from the outer graph, "
                "which the TorchScript exporter cannot write"
            )
        return env[value]

    def _attribute(self, name: str, attr: ir.Attr) -> dict[str, object]:
        kinds = {
            ir.AttributeType.INT: "i",
            ir.AttributeType.INTS: "i",
            ir.AttributeType.FLOAT: "f",
            ir.AttributeType.FLOATS: "f",
            ir.AttributeType.STRING: "s",
            ir.AttributeType.STRINGS: "s",
        }
        if attr.type == ir.AttributeType.TENSOR:
            return self._tensor_attr(attr.as_tensor(), name)
        if attr.type not in kinds:
            raise ValueError(f"{LOCATION}: a lowered node with a {attr.type.name} attribute")
        value = attr.value
        if attr.type in (ir.AttributeType.INTS, ir.AttributeType.FLOATS, ir.AttributeType.STRINGS):
            value = list(value)
        return {f"{name}_{kinds[attr.type]}": value}

    def _tensor_attr(self, tensor: ir.TensorProtocol, name: str = "value") -> dict[str, object]:
        torch = self._torch
        array = tensor.numpy()
        if tensor.dtype == ir.DataType.BFLOAT16:
            bits = np.ascontiguousarray(array).view(np.int16)
            return {f"{name}_t": torch.from_numpy(bits.copy()).view(torch.bfloat16)}
        return {f"{name}_t": torch.from_numpy(np.array(array, copy=True))}


def torchscript_symbolic(
    strategy: str = "auto", *, target: str = DEFAULT_TARGET, max_length: int | None = None
) -> Callable[..., Any]:
    """The TorchScript exporter's symbolic for ``aten::cumprod(Tensor self, int dim, *,
    ScalarType? dtype=None)`` (and its ``out=`` form, whose ``out`` type is ``dtype`` when none
    is given, as in torch): ``symbolic(g, self, dim, dtype[, out])`` writes
    :func:`lowered_cumprod` for ``self``'s element type and dims (as torch's shape inference
    knows them: a ``dynamic_axes`` dim is not static) at the export's opset into ``g``, and
    returns its output, typed. Options as for :func:`register_torchscript_symbolic`."""
    lowerings.check_strategy(strategy)
    target_named(target)
    bound = lowerings.whole_number("max_length", max_length, 1)
    calls = itertools.count()

    def aten_cumprod(g: Any, self: Any, dim: Any, dtype: Any, out: Any = None) -> Any:
        import torch
        from torch.onnx import symbolic_helper

        get_const: Any = symbolic_helper._get_const  # an int, or None for a None constant
        axis = get_const(dim, "i", "dim")
        wanted = get_const(dtype, "i", "dtype")
        known = self.type()
        if not isinstance(known, torch._C.TensorType) or known.dtype() is None:
            raise ValueError(f"{LOCATION}: the element type of the input is not known")
        x_dtype = _ir_dtype(known.dtype())
        if wanted is None and out is not None:  # out= without dtype=: out's type is dtype=
            out_type = out.type()
            if isinstance(out_type, torch._C.TensorType) and out_type.dtype() is not None:
                wanted = out_type.dtype()
        result_dtype = None if wanted is None else _ir_dtype(wanted)
        graph = lowered_cumprod(
            x_dtype,
            known.varyingSizes(),
            axis,
            result_dtype,
            g.opset,
            strategy=strategy,
            target=target,
            max_length=bound,
        )
        env: dict[ir.Value, Any] = {graph.inputs[0]: self}
        _TorchGraphWriter(f"aten_cumprod_{next(calls)}_").write(g, graph, env)
        y = env[graph.outputs[0]]
        result = graph.outputs[0].dtype
        assert result is not None
        y.setType(known.with_dtype(_torch_dtype(result)))
        return y

    return cast(Callable[..., Any], aten_cumprod)


def register_torchscript_symbolic(
    strategy: str = "auto", *, target: str = DEFAULT_TARGET, max_length: int | None = None
) -> None:
    """Make ``torch.onnx.export(..., dynamo=False)`` export ``torch.cumprod`` at every opset
    from 11 (20 is torch 2.13's highest for this exporter), with no CumProd in the file.

    Registers :func:`torchscript_symbolic` for ``aten::cumprod`` with
    ``torch.onnx.register_custom_op_symbolic`` at opset 11, which the exporter uses for
    every export opset from 11 up. Calling it again replaces the registration (with the new
    options); :func:`unregister_torchscript_symbolic` removes it. In-place
    (``cumprod_``) and ``out=`` calls reach the exporter as ``aten::cumprod``.

    Why the symbolic writes the lowering itself: the TorchScript exporter has no step after
    export where a placeholder op could be lowered, so a placeholder would need a second
    call on the file (``python -m rewriter``) and leave a file that no runtime loads in
    between. The symbolic instead runs the project's pass on a one-CumProd model of the
    input's type and dims, lowered to the export's opset (:func:`lowered_cumprod`), and
    writes the result into the exporter's graph: one call, the same lowerings, refusals
    and per-node warnings as the pass, and every node checked by the ONNX checker at that
    opset.

    torch's semantics are kept: ``dtype=`` casts first; bool and integer inputs give int64;
    a narrower integer ``dtype`` is computed in int64 and wrapped (as :func:`translation_table`
    does). A scanned dim given in ``dynamic_axes`` is lowered for a length known at run time.

    Args:
        strategy: ``"auto"`` or a lowering name, as for the pass.
        target: The runtime whose kernel gaps to work around, as for the pass.
        max_length: A bound on scanned lengths known only at run time (a ``dynamic_axes``
            dim), as for the pass: the targets without Loop and Scan need it there.
    """
    import torch

    symbolic = torchscript_symbolic(strategy, target=target, max_length=max_length)
    # (torch 2.13 keeps the TorchScript exporter's functions out of torch.onnx.__all__)
    register = torch.onnx.register_custom_op_symbolic  # type: ignore[attr-defined]
    register("aten::cumprod", symbolic, TORCHSCRIPT_MIN_OPSET)


def unregister_torchscript_symbolic() -> None:
    """Remove what :func:`register_torchscript_symbolic` registered (nothing if it is not
    registered): ``aten::cumprod`` is then again unsupported by the TorchScript exporter.

    torch 2.13's ``unregister_custom_op_symbolic`` leaves an empty entry for an op that has
    no built-in symbolic, on which the exporter then fails with "min() arg is an empty
    sequence" instead of its "not supported" error; the empty entry is dropped here."""
    import warnings

    import torch
    from torch.onnx._constants import ONNX_TORCHSCRIPT_EXPORTER_MAX_OPSET as highest
    from torch.onnx._internal.torchscript_exporter import registration

    with warnings.catch_warnings():  # torch warns when there is nothing to remove
        warnings.simplefilter("ignore")
        unregister = torch.onnx.unregister_custom_op_symbolic  # type: ignore[attr-defined]
        unregister("aten::cumprod", TORCHSCRIPT_MIN_OPSET)
    group = registration.registry.get_function_group("aten::cumprod")
    entries = getattr(registration.registry, "_registry", None)
    if group is not None and group.get(highest) is None and entries is not None:
        entries.pop("aten::cumprod", None)
