"""What the pass knows about one CumProd node, checked once before anything is changed."""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx_ir as ir

from rewriter.errors import InvalidCumProdError
from rewriter.types import TypeTable

__all__ = ["CUMPROD_TYPES", "FLOAT_TYPES", "INTEGER_TYPES", "CumProdSite", "inspect_cumprod"]

FLOAT_TYPES = frozenset(
    {ir.DataType.BFLOAT16, ir.DataType.FLOAT16, ir.DataType.FLOAT, ir.DataType.DOUBLE}
)
INTEGER_TYPES = frozenset(
    {ir.DataType.INT32, ir.DataType.INT64, ir.DataType.UINT32, ir.DataType.UINT64}
)
CUMPROD_TYPES = FLOAT_TYPES | INTEGER_TYPES
_AXIS_TYPES = frozenset({ir.DataType.INT32, ir.DataType.INT64})


@dataclasses.dataclass(frozen=True)
class CumProdSite:
    """One validated CumProd node and the facts a lowering is chosen and built from.

    Attributes:
        x: The input to scan.
        axis_value: The axis input (a 0-D int32 / int64 value), or None when the axis exists
            only as a Python int (``axis`` then holds it).
        name: The node's name, for messages ("" when it has none).
        location: Human-readable place of the node (for messages and reports).
        opset: The ai.onnx version imported where the node lives (graph or function).
        dtype: Element type of ``x`` (one of :data:`CUMPROD_TYPES`).
        shape: Shape of ``x`` when known (dims may be symbolic or unknown).
        axis: The scanned axis, normalized to ``[0, rank)``, when it is a constant and the
            rank is known; ``None`` when it is only known at run time.
        exclusive: The ``exclusive`` attribute.
        reverse: The ``reverse`` attribute.
        node: The CumProd node the site was read from; None for one built from values
            (e.g. the PyTorch translation, where only the input exists).
    """

    x: ir.Value
    axis_value: ir.Value | None
    name: str
    location: str
    opset: int
    dtype: ir.DataType
    shape: ir.Shape | None
    axis: int | None
    exclusive: bool
    reverse: bool
    node: ir.Node | None = None

    @property
    def rank(self) -> int | None:
        return None if self.shape is None else self.shape.rank()

    @property
    def scan_length(self) -> int | None:
        """The static length of the scanned axis, or None when unknown or symbolic."""
        if self.shape is None or self.axis is None:
            return None
        dim = self.shape[self.axis]
        return dim if isinstance(dim, int) else None

    def axis_lengths(self) -> list[int | None]:
        """The static lengths of the axes this CumProd may scan: its axis, or every axis
        when the axis is only known at run time (None for a symbolic or unknown length)."""
        if self.shape is None:
            return [None]
        axes = range(self.shape.rank()) if self.axis is None else [self.axis]
        return [d if isinstance(d := self.shape[k], int) else None for k in axes]

    @property
    def is_float(self) -> bool:
        return self.dtype in FLOAT_TYPES


def _constant_axis(value: ir.Value) -> np.ndarray | None:
    """The axis as an array when it is a constant (initializer that is not a graph input,
    or a Constant node), else None."""
    if value.is_graph_input():
        return None
    if value.const_value is not None:
        return value.const_value.numpy()
    producer = value.producer()
    if producer is None or producer.op_type != "Constant" or producer.domain not in ("", "ai.onnx"):
        return None
    # Read the attribute directly: ir.convenience.get_const_tensor would rename the tensor.
    attr = producer.attributes.get("value")
    if attr is not None and attr.type == ir.AttributeType.TENSOR:
        return attr.as_tensor().numpy()
    attr = producer.attributes.get("value_int")
    if attr is not None:
        return np.array(attr.as_int(), dtype=np.int64)
    attr = producer.attributes.get("value_ints")
    if attr is not None:
        return np.array(attr.as_ints(), dtype=np.int64)
    return None


def inspect_cumprod(
    node: ir.Node, *, location: str, opset: int, scope: str, types: TypeTable
) -> CumProdSite:
    """Validate a CumProd node and gather its facts.

    Raises:
        InvalidCumProdError: naming the node and what is wrong with it.
    """

    def fail(problem: str) -> InvalidCumProdError:
        return InvalidCumProdError(node.name or "", location, problem)

    if len(node.inputs) < 1 or node.inputs[0] is None:
        raise fail("it has no input x")
    if len(node.inputs) < 2 or node.inputs[1] is None:
        raise fail("it has no axis input (CumProd takes x and a 0-D axis tensor)")
    x, axis_value = node.inputs[0], node.inputs[1]
    dtype, shape = types.lookup(scope, x)
    if dtype is None:
        raise fail(f"the element type of x ('{x.name}') cannot be determined")
    if dtype not in CUMPROD_TYPES:
        allowed = ", ".join(sorted(t.name.lower() for t in CUMPROD_TYPES))
        raise fail(f"x has element type {dtype.name.lower()}; CumProd takes {allowed}")
    rank = None if shape is None else shape.rank()
    if rank == 0:
        raise fail("x is a scalar (rank 0); CumProd needs rank >= 1")

    axis_dtype, axis_shape = types.lookup(scope, axis_value)
    if axis_dtype is not None and axis_dtype not in _AXIS_TYPES:
        raise fail(f"axis has element type {axis_dtype.name.lower()}; it must be int32 or int64")
    if axis_shape is not None and axis_shape.rank() != 0:
        raise fail(f"axis must be a 0-D tensor, got shape {list(axis_shape.dims)}")

    axis: int | None = None
    constant = _constant_axis(axis_value)
    if constant is not None:
        if constant.ndim != 0:
            raise fail(f"axis must be a 0-D tensor, got shape {list(constant.shape)}")
        if constant.dtype not in (np.int32, np.int64):
            raise fail(f"axis has element type {constant.dtype}; it must be int32 or int64")
        raw = int(constant)
        if rank is not None:
            if not -rank <= raw < rank:
                raise fail(f"axis {raw} is out of range [{-rank}, {rank - 1}] for rank {rank}")
            axis = raw % rank

    return CumProdSite(
        x=x,
        axis_value=axis_value,
        name=node.name or "",
        node=node,
        location=location,
        opset=opset,
        dtype=dtype,
        shape=shape,
        axis=axis,
        exclusive=bool(node.attributes.get_int("exclusive", 0)),
        reverse=bool(node.attributes.get_int("reverse", 0)),
    )
