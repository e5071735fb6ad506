"""What the pass knows about one CumProd node, checked once before anything is changed.

Every CumProd is described by one immutable :class:`ScanSpec`: a scan along axis 1 of an
(outer, length, inner) view of x. The lowerings are functions of that description (and of
the 3-D view built from it, :mod:`rewriter.view`); nothing else about the node reaches them.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import onnx_ir as ir

from rewriter.errors import InvalidCumProdError
from rewriter.graphs import Located
from rewriter.types import TypeTable

__all__ = [
    "CUMPROD_TYPES",
    "FLOAT_TYPES",
    "INTEGER_TYPES",
    "CumProdSite",
    "ScanSpec",
    "inspect_cumprod",
]

FLOAT_TYPES = frozenset(
    {ir.DataType.BFLOAT16, ir.DataType.FLOAT16, ir.DataType.FLOAT, ir.DataType.DOUBLE}
)
INTEGER_TYPES = frozenset(
    {ir.DataType.INT32, ir.DataType.INT64, ir.DataType.UINT32, ir.DataType.UINT64}
)
CUMPROD_TYPES = FLOAT_TYPES | INTEGER_TYPES
_AXIS_TYPES = frozenset({ir.DataType.INT32, ir.DataType.INT64})

Dim = int | str | None  # a static size, a symbolic name, or unknown


@dataclasses.dataclass(frozen=True)
class ScanSpec:
    """A CumProd as a scan along axis 1 of an (outer, length, inner) view of x.

    Attributes:
        dtype: Element type of x; None when it cannot be known statically (an unused
            function, a value produced by an op shape inference does not know): then only
            type-generic lowerings apply.
        exclusive: The ``exclusive`` attribute.
        reverse: The ``reverse`` attribute.
        dims: The dims of x when its rank is known (ints, symbolic names or None).
        axis: The scanned axis in ``[0, rank)`` when it is a constant and the rank is
            known; None when it is only known at run time (the view is then computed from
            ``Shape(x)`` and the axis at run time, range-checked like the native op).
        max_length: A bound on the scanned length when it is only known at run time: the
            largest dim when the axis is a run-time value and every dim is static, else
            given by the user (``max_length=``). Lowerings that need a static length run on
            x padded to it (with a run-time check that the length fits).
    """

    dtype: ir.DataType | None
    exclusive: bool
    reverse: bool
    dims: tuple[Dim, ...] | None
    axis: int | None
    max_length: int | None = None

    @property
    def rank(self) -> int | None:
        return None if self.dims is None else len(self.dims)

    @property
    def is_float(self) -> bool:
        return self.dtype in FLOAT_TYPES

    def _product(self, lo: int, hi: int) -> int | None:
        assert self.dims is not None
        part = self.dims[lo:hi]
        if any(d == 0 for d in part):
            return 0
        if all(isinstance(d, int) for d in part):
            return math.prod(part)  # type: ignore[arg-type]
        return None

    @property
    def outer(self) -> int | None:
        """The static product of the dims before the axis (None: known at run time)."""
        if self.dims is None or self.axis is None:
            return None
        return self._product(0, self.axis)

    @property
    def length(self) -> int | None:
        """The static length n of the scanned axis (None: known at run time)."""
        if self.dims is None or self.axis is None:
            return None
        d = self.dims[self.axis]
        return d if isinstance(d, int) else None

    @property
    def inner(self) -> int | None:
        """The static product of the dims after the axis (None: known at run time)."""
        if self.dims is None or self.axis is None:
            return None
        return self._product(self.axis + 1, len(self.dims))

    @property
    def static_dims(self) -> bool:
        """Whether the rank and every dim of x are known statically."""
        return self.dims is not None and all(isinstance(d, int) for d in self.dims)

    @property
    def static_view(self) -> bool:
        """Whether outer, length and inner are all static (the view is a constant Reshape)."""
        return None not in (self.outer, self.length, self.inner)

    @property
    def empty(self) -> bool:
        """Whether x is statically known to have no elements."""
        return self.dims is not None and any(d == 0 for d in self.dims)

    def describe(self) -> str:
        kind = self.dtype.name.lower() if self.dtype is not None else "unknown type"
        shape = "unknown rank" if self.dims is None else str(list(self.dims))
        axis = "run-time axis" if self.axis is None else f"axis {self.axis}"
        return f"{kind} {shape} {axis}"


@dataclasses.dataclass(frozen=True)
class CumProdSite:
    """One validated CumProd node: where it is and its :class:`ScanSpec`.

    Attributes:
        x: The input to scan.
        axis_value: The axis input (a 0-D int32 / int64 value); None only when the spec's
            axis is static (a site built from values, not from a node).
        spec: The scan it computes.
        name: The node's name, for messages ("" when it has none).
        location: Human-readable place of the node (for messages and reports).
        opset: The ai.onnx version imported where the node lives (graph or function).
        node: The CumProd node the site was read from; None for one built from values
            (e.g. the PyTorch translation, where only the input exists).
        in_scan: Whether the node is inside a Scan body (see ``Target.scan_in_scan``).
        in_if: Whether the node is inside an If branch (see ``Target.symbols_in_if``).
        axis_rank_known: Whether the axis is known to be 0-D (declared, inferred or a
            constant); when not, the lowering checks its rank at run time.
    """

    x: ir.Value
    axis_value: ir.Value | None
    spec: ScanSpec
    name: str
    location: str
    opset: int
    node: ir.Node | None = None
    in_scan: bool = False
    in_if: bool = False
    axis_rank_known: bool = True

    # Read-only views of the spec, for reports.
    @property
    def dtype(self) -> ir.DataType | None:
        return self.spec.dtype

    @property
    def shape(self) -> ir.Shape | None:
        return None if self.spec.dims is None else ir.Shape(list(self.spec.dims))

    @property
    def axis(self) -> int | None:
        return self.spec.axis

    @property
    def exclusive(self) -> bool:
        return self.spec.exclusive

    @property
    def reverse(self) -> bool:
        return self.spec.reverse

    @property
    def rank(self) -> int | None:
        return self.spec.rank

    @property
    def scan_length(self) -> int | None:
        return self.spec.length


def constant_value(value: ir.Value) -> np.ndarray | None:
    """The value as an array when it is a constant (initializer that is not a graph input,
    or a Constant node), else None."""
    if value.is_graph_input():
        return None
    if value.const_value is not None:
        return value.const_value.numpy()
    producer = value.producer()
    if producer is None or producer.op_type != "Constant" or producer.domain not in ("", "ai.onnx"):
        return None
    if any(attr.is_ref() for attr in producer.attributes.values()):
        return None  # a function's attribute by reference, unresolved (the rule set)
    # Read the attribute directly: ir.convenience.get_const_tensor would rename the tensor.
    attr = producer.attributes.get("value")
    if attr is not None and attr.type == ir.AttributeType.TENSOR:
        return attr.as_tensor().numpy()
    attr = producer.attributes.get("value_int")
    if attr is not None and attr.type == ir.AttributeType.INT:
        return np.array(attr.as_int(), dtype=np.int64)
    attr = producer.attributes.get("value_ints")
    if attr is not None and attr.type == ir.AttributeType.INTS:
        return np.array(attr.as_ints(), dtype=np.int64)
    return None


def _flag(node: ir.Node, name: str, fail: type[Exception] | None = None) -> bool:
    """An ``exclusive`` / ``reverse`` attribute: absent = 0; must be an int 0 or 1."""
    attr = node.attributes.get(name)
    if attr is None:
        return False
    if attr.is_ref():
        raise ValueError(f"attribute '{name}' refers to '{attr.ref_attr_name}', unresolved")
    if attr.type != ir.AttributeType.INT:
        raise ValueError(f"attribute '{name}' must be an int, got {attr.type.name.lower()}")
    value = attr.as_int()
    if value not in (0, 1):
        raise ValueError(f"attribute '{name}' must be 0 or 1, got {value}")
    return bool(value)


def inspect_cumprod(where: Located, types: TypeTable) -> CumProdSite:
    """Validate the CumProd node at ``where`` and gather its facts, its types looked up in
    ``types`` (the scope of its graph or function); errors name it as the input model does
    (``Located.name``: an inlined copy by its name in the function).

    Raises:
        InvalidCumProdError: naming the node and what is wrong with it.
    """
    node, name, location = where.node, where.name, where.location

    def fail(problem: str) -> InvalidCumProdError:
        return InvalidCumProdError(name, location, problem)

    if len(node.inputs) < 1 or node.inputs[0] is None:
        raise fail("it has no input x")
    if len(node.inputs) < 2 or node.inputs[1] is None:
        raise fail("it has no axis input (CumProd takes x and a 0-D axis tensor)")
    if len(node.inputs) > 2 or len(node.outputs) != 1:
        raise fail("CumProd takes exactly two inputs and gives one output")
    unknown = sorted(set(node.attributes) - {"exclusive", "reverse"})
    if unknown:
        raise fail(f"unknown attribute(s) {', '.join(unknown)}")
    try:
        exclusive, reverse = _flag(node, "exclusive"), _flag(node, "reverse")
    except ValueError as exc:
        raise fail(str(exc)) from None
    x, axis_value = node.inputs[0], node.inputs[1]
    dtype, shape = types.lookup(where.scope, x)
    if dtype is not None and dtype not in CUMPROD_TYPES:
        allowed = ", ".join(sorted(t.name.lower() for t in CUMPROD_TYPES))
        raise fail(f"x has element type {dtype.name.lower()}; CumProd takes {allowed}")
    rank = None if shape is None else shape.rank()
    if rank == 0:
        raise fail("x is a scalar (rank 0); CumProd needs rank >= 1")

    axis_dtype, axis_shape = types.lookup(where.scope, axis_value)
    if axis_dtype is not None and axis_dtype not in _AXIS_TYPES:
        raise fail(f"axis has element type {axis_dtype.name.lower()}; it must be int32 or int64")
    if axis_shape is not None and axis_shape.rank() != 0:
        raise fail(f"axis must be a 0-D tensor, got shape {list(axis_shape.dims)}")

    axis: int | None = None
    constant = constant_value(axis_value)
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

    dims: tuple[Dim, ...] | None = None
    if shape is not None:
        dims = tuple(
            d if isinstance(d, int) else (d.value if d.value else None) for d in shape.dims
        )
    bound = None
    static = [d for d in dims or () if isinstance(d, int)]
    if axis is None and dims and len(static) == len(dims):
        bound = max(static)
    spec = ScanSpec(
        dtype=dtype, exclusive=exclusive, reverse=reverse, dims=dims, axis=axis, max_length=bound
    )
    return CumProdSite(
        x=x,
        axis_value=axis_value,
        spec=spec,
        name=name,
        node=node,
        location=location,
        opset=where.opset,
        in_scan=where.in_scan,
        in_if=where.in_if,
        axis_rank_known=axis_shape is not None or constant is not None,
    )
