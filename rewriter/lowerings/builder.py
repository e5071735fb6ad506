"""A small node builder for lowerings: constants as Constant nodes (valid in graphs, subgraphs
and functions alike), fresh names that collide with nothing in the model, and the few ops
whose signature depends on the opset (Reshape, Split's sizes, the reductions' axes,
Unsqueeze) behind one helper each."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import onnx_ir as ir

from rewriter.graphs import NameSource

__all__ = ["END", "Builder", "NameSource"]

END = int(np.iinfo(np.int64).max)  # a Slice to the end
_INT64_MIN = np.iinfo(np.int64).min


class Builder:
    """Creates nodes for one lowering site into a flat list, in topological order.

    Every node goes through :meth:`op_multi`, and subgraph bodies through :meth:`child`: a
    subclass that overrides the two can emit the same lowerings elsewhere (an onnxscript
    rewriter's or exporter's op recorder) while subgraph bodies stay plain ``ir.Graph``s.

    Attributes:
        opset: The ai.onnx version the nodes must be valid at.
        nodes: The nodes created so far.
    """

    def __init__(self, opset: int, names: NameSource, prefix: str) -> None:
        self.opset = opset
        self.nodes: list[ir.Node] = []
        self._names = names
        self._prefix = prefix

    def child(self) -> Builder:
        """A builder for a subgraph body (same opset and names, its own node list)."""
        return Builder(self.opset, self._names, self._prefix)

    def fresh_name(self, kind: str) -> str:
        """A name unused anywhere in the model, for a value or node of ``kind``."""
        return self._names.fresh(f"{self._prefix}_{kind}")

    def value(
        self, suffix: str, dtype: ir.DataType | None = None, shape: ir.Shape | None = None
    ) -> ir.Value:
        """A new named value (for subgraph inputs); ``shape`` is kept only with a ``dtype``
        (onnx_ir does not serialize a shape without a type, and warns)."""
        if dtype is None:
            return ir.Value(name=self.fresh_name(suffix))
        return ir.Value(name=self.fresh_name(suffix), type=ir.TensorType(dtype), shape=shape)

    def op(self, op_type: str, *inputs: ir.Value | None, **attributes: object) -> ir.Value:
        """Append a node with one output and return that output."""
        return self.op_multi(op_type, *inputs, n_out=1, **attributes)[0]

    def op_multi(
        self, op_type: str, *inputs: ir.Value | None, n_out: int, **attributes: object
    ) -> Sequence[ir.Value]:
        """Append a node with ``n_out`` outputs (``n_out``, not ``num_outputs``, so that
        Split's ``num_outputs`` attribute can be passed) and return them."""
        outputs = [ir.Value(name=self.fresh_name(op_type)) for _ in range(n_out)]
        node = ir.node(
            op_type,
            inputs,
            attributes=attributes,  # type: ignore[arg-type]
            outputs=outputs,
            name=self.fresh_name(op_type),
        )
        self.nodes.append(node)
        return node.outputs

    def const(self, value: object, dtype: ir.DataType | None = None) -> ir.Value:
        """A Constant node holding ``value`` (numpy conversion; int -> int64 by default)."""
        array = np.asarray(value)
        if dtype is not None:
            array = array.astype(dtype.numpy())
        elif array.dtype.kind == "i" or array.size == 0:  # [] means an empty index list
            array = array.astype(np.int64)
        tensor = ir.tensor(array, dtype=dtype)
        return self.op("Constant", value=tensor)

    def cast(self, x: ir.Value, to: ir.DataType) -> ir.Value:
        return self.op("Cast", x, to=int(to))

    def subgraph(
        self, emit: Callable[[Builder], ir.Value], dtype: ir.DataType | None, name: str
    ) -> ir.Graph:
        """A no-input subgraph (an If branch) whose one output is what ``emit`` builds."""
        body = self.child()
        out = body.op("Identity", emit(body))
        if dtype is not None:
            out.type = ir.TensorType(dtype)
        return body.graph([], [out], name)

    def graph(self, inputs: Sequence[ir.Value], outputs: Sequence[ir.Value], name: str) -> ir.Graph:
        """Wrap this builder's nodes into a subgraph (If branch, Loop body)."""
        return ir.Graph(inputs, outputs, nodes=self.nodes, name=self._names.fresh(name))

    # -- ops whose form depends on the opset -------------------------------------------------

    def slice_axis(self, x: ir.Value, axis: int, start: int, end: int, step: int = 1) -> ir.Value:
        """``x[start:end:step]`` along ``axis`` (Slice with inputs, valid from opset 10)."""
        return self.op(
            "Slice",
            x,
            self.const([start]),
            self.const([end]),
            self.const([axis]),
            self.const([step]),
        )

    def flip(self, x: ir.Value, axis: int) -> ir.Value:
        """Reverse ``x`` along ``axis``: Slice with step -1 (a view-like copy, one pass)."""
        return self.slice_axis(x, axis, -1, _INT64_MIN, -1)

    def split(self, x: ir.Value, axis: int, n: int, size: int = 1) -> list[ir.Value]:
        """``x`` cut into its n slices of ``size`` along ``axis`` (from opset 18 the n equal
        parts, whatever their size; before, the sizes as an input (13) or attribute)."""
        if n == 1:
            return [x]
        if self.opset >= 18:
            return list(self.op_multi("Split", x, n_out=n, axis=axis, num_outputs=n))
        if self.opset >= 13:
            return list(self.op_multi("Split", x, self.const([size] * n), n_out=n, axis=axis))
        return list(self.op_multi("Split", x, n_out=n, axis=axis, split=[size] * n))

    def reduce(self, op_type: str, x: ir.Value, axis: int, keepdims: int) -> ir.Value:
        """``op_type`` (ReduceProd, ReduceMax) of ``x`` along ``axis``: the axes an input
        from opset 18, an attribute before."""
        if self.opset >= 18:
            return self.op(op_type, x, self.const([axis]), keepdims=keepdims)
        return self.op(op_type, x, axes=[axis], keepdims=keepdims)

    def unsqueeze(self, x: ir.Value, axis: int) -> ir.Value:
        """``x`` with a new dim of 1 at ``axis``: the axes an input from opset 13."""
        if self.opset >= 13:
            return self.op("Unsqueeze", x, self.const([axis]))
        return self.op("Unsqueeze", x, axes=[axis])

    def reshape(self, x: ir.Value, shape: ir.Value) -> ir.Value:
        """Reshape where a 0 in ``shape`` means 0 (``allowzero=1`` from opset 14)."""
        if self.opset >= 14:
            return self.op("Reshape", x, shape, allowzero=1)
        return self.op("Reshape", x, shape)

    def shift_exclusive(self, y3: ir.Value, one: ir.Value) -> ir.Value:
        """Inclusive to exclusive scan along axis 1 of a rank-3 ``y3``:
        ``[1, y[0], ..., y[n-2]]``. Pad one slice of ``one`` in front, then drop the last
        slice (right for n = 0 too, where Slice-then-Pad would make a length-1 result).
        The pads are full-rank: the ``axes`` input of Pad-18 is avoided because
        onnxruntime's transpose optimizer rewrites it wrongly after a Transpose (1.32)."""
        padded = self.op("Pad", y3, self.const([0, 1, 0, 0, 0, 0]), one)
        return self.slice_axis(padded, 1, 0, -1)
