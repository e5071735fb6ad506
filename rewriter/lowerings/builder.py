"""A small node builder for lowerings: constants as Constant nodes (valid in graphs, subgraphs
and functions alike), fresh names that collide with nothing in the model, and the few ops
whose signature depends on the opset (Pad, Reshape) behind one helper each."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import numpy as np
import onnx_ir as ir

__all__ = ["Builder", "NameSource"]

_INT64_MIN = np.iinfo(np.int64).min


class NameSource:
    """Hands out value and node names not used anywhere in the model."""

    def __init__(self, used: Iterable[str]) -> None:
        self._used = set(used)

    def fresh(self, base: str) -> str:
        i = 0
        while (name := f"{base}_{i}") in self._used:
            i += 1
        self._used.add(name)
        return name

    @classmethod
    def for_model(cls, model: ir.Model) -> NameSource:
        used: set[str] = set()
        graphs: list[ir.Graph] = [model.graph]
        graphs += [f.graph for f in model.functions.values()]  # type: ignore[attr-defined]
        for graph in graphs:
            for value in graph.inputs:
                used.add(value.name or "")
            for node in ir.traversal.RecursiveGraphIterator(graph):
                used.add(node.name or "")
                for operand in [*node.inputs, *node.outputs]:
                    if operand is not None:
                        used.add(operand.name or "")
                for attr in node.attributes.values():
                    if attr.type == ir.AttributeType.GRAPH:
                        used.update(v.name or "" for v in attr.as_graph().inputs)
                    elif attr.type == ir.AttributeType.GRAPHS:
                        for g in attr.as_graphs():
                            used.update(v.name or "" for v in g.inputs)
            used.update(graph.initializers)
        return cls(used)


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
        """A new named value (for subgraph inputs)."""
        type_ = None if dtype is None else ir.TensorType(dtype)
        return ir.Value(name=self.fresh_name(suffix), type=type_, shape=shape)

    def op(
        self,
        op_type: str,
        *inputs: ir.Value | None,
        **attributes: object,
    ) -> ir.Value:
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
        self, emit: Callable[[Builder], ir.Value], dtype: ir.DataType, name: str
    ) -> ir.Graph:
        """A no-input subgraph (an If branch) whose one output is what ``emit`` builds."""
        body = self.child()
        out = body.op("Identity", emit(body))
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

    def pad_axis_before(self, x: ir.Value, axis: int, rank: int, fill: ir.Value) -> ir.Value:
        """Prepend one slice of ``fill`` along ``axis``: Pad with full-rank pads (valid from
        opset 11; the ``axes`` input of Pad-18 is avoided because onnxruntime's transpose
        optimizer rewrites it wrongly after a Transpose, seen in 1.32)."""
        pads = [0] * (2 * rank)
        pads[axis] = 1
        return self.op("Pad", x, self.const(pads), fill)

    def reshape(self, x: ir.Value, shape: ir.Value) -> ir.Value:
        """Reshape where a 0 in ``shape`` means 0 (``allowzero=1`` from opset 14)."""
        if self.opset >= 14:
            return self.op("Reshape", x, shape, allowzero=1)
        return self.op("Reshape", x, shape)

    def shift_exclusive(self, y: ir.Value, axis: int, rank: int, dtype: ir.DataType) -> ir.Value:
        """Inclusive to exclusive scan: ``[1, y[0], ..., y[n-2]]`` along ``axis``.

        Pad one slice of ones in front, then drop the last slice (right for n = 0 too, where
        Slice-then-Pad would make a length-1 result).
        """
        one = self.const(np.array(1), dtype=dtype)
        padded = self.pad_axis_before(y, axis, rank, one)
        return self.slice_axis(padded, axis, 0, -1)
