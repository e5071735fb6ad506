"""The canonical view: every CumProd is a scan along axis 1 of an (outer, n, inner) view of x.

::

    x3 = Reshape(x, [outer, n, inner])     outer = prod(dims before the axis),
    y3 = lowering(x3)                      inner = prod(dims after it)
    y  = Reshape(y3, Shape(x))

Static dims make the shapes constants; symbolic ones are read from ``Shape(x)`` and
multiplied. A run-time axis or an unknown rank computes them at run time:
``n = Gather(Shape(x), axis)`` (which refuses an axis outside [-r, r-1], as the native op
does), the axis normalised by ``Mod(axis + r, r)``, ``outer`` / ``inner`` the ReduceProd of
the dims on either side. A Reshape copies nothing: the view costs no pass over memory.

Where ``Target.symbolic_rank3`` is false (onnx2tf re-lays out rank-3 tensors) a lowering
that takes one gets the 2-D view ``(outer, n * inner)``: slice k along n is the columns
[k * inner, (k + 1) * inner) (``View.flat``).

Below opset 14 a 0 in a Reshape's shape copies an input dim, so where a dim can be 0 at run
time the lowering sits in ``If(Size(x) == 0, x, lowering)``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import numpy as np
import onnx_ir as ir

from rewriter.lowerings.builder import END, Builder
from rewriter.site import ScanSpec
from rewriter.targets import Target

__all__ = ["Dim", "View", "in_view", "ones_like", "padded"]

Dim = int | ir.Value  # a static size, or a 1-D int64 tensor of one element


@dataclasses.dataclass(frozen=True)
class View:
    """What a lowering computes: the scan along axis 1 of ``x3`` (outer, length, inner).

    Attributes:
        spec: The CumProd (attributes, static facts).
        dtype: The element type the lowering computes in (None: unknown, type-generic).
        outer, length, inner: The view's dims, static ints or 1-element int64 tensors.
        one: A 0-D tensor holding 1 in the compute type (Pad / Expand fill values).
        target: The runtime the output is for (which ops its lowerings may use).
        flat: Whether the tensor is the 2-D ``(outer, length * inner)`` instead of the 3-D
            view (only for lowerings that take it: :func:`in_view`).
    """

    spec: ScanSpec
    dtype: ir.DataType | None
    outer: Dim
    length: Dim
    inner: Dim
    one: ir.Value
    target: Target
    flat: bool = False

    @property
    def exclusive(self) -> bool:
        return self.spec.exclusive

    @property
    def reverse(self) -> bool:
        return self.spec.reverse

    @property
    def static_length(self) -> int | None:
        return self.length if isinstance(self.length, int) else None

    def dims(self) -> tuple[Dim, Dim, Dim]:
        return self.outer, self.length, self.inner

    def tensor(self, b: Builder, dim: Dim) -> ir.Value:
        """A dim as a 1-element int64 tensor."""
        return b.const([dim]) if isinstance(dim, int) else dim

    def ones(self, b: Builder, like: ir.Value) -> ir.Value:
        """A tensor of ones shaped like ``like`` (:func:`ones_like`)."""
        return ones_like(b, like, self.one, self.dtype, self.target)

    def pad_ones_after(self, b: Builder, t: ir.Value, count: int, n: int) -> ir.Value:
        """``t``, (o, n, i), with ``count`` (< n) ones after it along axis 1: a Pad, or a
        Concat of ones for an 8-byte type where ``Target.pad_shifts`` is false."""
        if self.target.pad_shifts or (self.dtype is not None and self.dtype.itemsize < 8):
            return b.op("Pad", t, b.const([0, 0, 0, 0, count, 0]), self.one)
        assert 0 < count < n, (count, n)
        return b.op("Concat", t, self.ones(b, b.slice_axis(t, 1, 0, count)), axis=1)


def ones_like(
    b: Builder, like: ir.Value, one: ir.Value, dtype: ir.DataType | None, target: Target
) -> ir.Value:
    """A tensor of ones shaped like ``like``: ``Expand(one, Shape(like))``, or without
    ``Target.constant_ones`` ``Cast(Equal(c, c))`` with ``c = Less(like, like)``, true
    whatever c is (``Not(c)`` is not: TFLite's float64 ``Less(v, v)`` is not always false)."""
    if target.constant_ones:
        return b.op("Expand", one, b.op("Shape", like))
    test = b.op("Less", like, like)
    true = b.op("Equal", test, test)
    if dtype is None:
        return b.op("CastLike", true, like)
    return b.cast(true, dtype)


def shape_of(b: Builder, *parts: Dim) -> ir.Value:
    """A 1-D int64 shape from static sizes and 1-element tensors."""
    if all(isinstance(p, int) for p in parts):
        return b.const(list(parts))
    pieces = [b.const([p]) if isinstance(p, int) else p for p in parts]
    return b.op("Concat", *pieces, axis=0)


def times(b: Builder, size: Dim, factor: Dim, op: str = "Mul") -> Dim:
    """``size * factor`` (``op="Add"``: ``size + factor``): an int when both are static,
    else a 1-element int64 tensor."""
    if isinstance(size, int) and isinstance(factor, int):
        return size * factor if op == "Mul" else size + factor
    return b.op(op, *(b.const([d]) if isinstance(d, int) else d for d in (size, factor)))


def one_for(b: Builder, x: ir.Value, dtype: ir.DataType | None) -> ir.Value:
    """A scalar 1 of the compute type, or of x's type via CastLike when it is unknown."""
    if dtype is not None:
        return b.const(np.array(1), dtype=dtype)
    if b.opset < 15:
        raise ValueError("a type-generic lowering needs CastLike (opset >= 15)")
    return b.op("CastLike", b.const(np.array(1)), x)


def _static_dims(b: Builder, x: ir.Value, spec: ScanSpec) -> tuple[Dim, Dim, Dim]:
    """(outer, n, inner) for a static rank and axis, symbolic dims read from Shape(x) and
    multiplied one by one (IREE cannot compile a ReduceProd over symbolic dims)."""
    assert spec.dims is not None and spec.axis is not None
    dims, axis = spec.dims, spec.axis
    shape: ir.Value | None = None

    def product(lo: int, hi: int, static: int | None) -> Dim:
        nonlocal shape
        if static is not None:
            return static
        shape = shape or b.op("Shape", x)
        known = math.prod(d for d in dims[lo:hi] if isinstance(d, int))
        result: ir.Value | None = None if known == 1 else b.const([known])
        for k in range(lo, hi):
            if isinstance(dims[k], int):
                continue
            dim = b.slice_axis(shape, 0, k, k + 1)
            result = dim if result is None else b.op("Mul", result, dim)
        assert result is not None
        return result

    return (
        product(0, axis, spec.outer),
        product(axis, axis + 1, spec.length),
        product(axis + 1, len(dims), spec.inner),
    )


def _runtime_dims(b: Builder, x: ir.Value, axis: ir.Value, spec: ScanSpec) -> tuple[Dim, Dim, Dim]:
    """(outer, n, inner) from Shape(x) and the axis at run time."""
    shape = b.op("Shape", x)
    raw = b.op("Reshape", b.cast(axis, ir.DataType.INT64), b.const([1]))
    n = b.op("Gather", shape, raw, axis=0)  # fails for an axis outside [-r, r - 1]
    rank = b.const([spec.rank]) if spec.rank is not None else b.op("Shape", shape)
    pos = b.op("Mod", b.op("Add", raw, rank), rank)
    before = b.op("Slice", shape, b.const([0]), pos)
    after = b.op("Slice", shape, b.op("Add", pos, b.const([1])), b.const([END]))
    return b.op("ReduceProd", before, keepdims=1), n, b.op("ReduceProd", after, keepdims=1)


def padded(
    b: Builder, x3: ir.Value, v: View, build: Callable[[Builder, ir.Value, View], ir.Value]
) -> ir.Value:
    """``build`` on x3 padded with ones to the static length ``bound = v.spec.max_length``,
    sliced back to the run-time n (:func:`guarded_length`)."""
    bound = v.spec.max_length
    assert bound is not None and not isinstance(v.length, int)
    n = v.length
    pads = b.op(
        "Concat", b.const([0, 0, 0, 0]), b.op("Sub", b.const([bound]), n), b.const([0]), axis=0
    )
    y = build(b, b.op("Pad", x3, pads, v.one), dataclasses.replace(v, length=bound))
    y = b.op("Slice", y, b.const([0]), n, b.const([1]))
    return b.reshape(y, shape_of(b, v.outer, guarded_length(b, v, n, bound), v.inner))


def guarded_length(b: Builder, v: View, n: ir.Value, bound: int) -> ir.Value:
    """The scanned length for the final Reshape of a lowering that computed a run-time
    length ``n`` padded to ``bound``: ``n + 1 - (n < bound + 1)``, n + 1 (the Reshape fails,
    as the native op gives no partial product) where n does not fit; ``n`` itself where
    ``Target.run_time_checks`` is False (its device-computed dim was read back wrong)."""
    if v.target.run_time_checks is False:
        return n
    fits = b.cast(b.op("Less", n, b.const([bound + 1])), ir.DataType.INT64)
    return b.op("Sub", b.op("Add", n, b.const([1])), fits)


def takes_flat_view(spec: ScanSpec, target: Target, flat_view: str, opset: int) -> bool:
    """Whether a lowering whose ``Lowering.flat_view`` is ``flat_view`` runs on the 2-D view
    where the target lacks ``symbolic_rank3``: ``"always"``, or ``"static length"`` over a
    static length with inner static or from opset 18 (Split into n equal parts)."""
    if target.symbolic_rank3 or flat_view == "never":
        return False
    if flat_view == "always":
        return True
    return spec.length is not None and (opset >= 18 or spec.inner is not None)


def _before_cast(b: Builder, x: ir.Value) -> tuple[ir.Value, ir.DataType | None]:
    """``(source, to)`` when ``x`` is ``Cast(source, to)`` that ``b`` has just made (the
    compute cast of :func:`rewriter.lowerings.lower`) and nothing uses yet: that Cast is taken
    out again, so that the 2-D view casts after its Reshape (onnx2tf re-laid out a cast
    rank-3 float16 input with symbolic dims: wrong values). Else ``(x, None)``."""
    node = x.producer()
    if node is None or node.op_type != "Cast" or x.uses() or not b.nodes or b.nodes[-1] is not node:
        return x, None
    source = node.inputs[0]
    assert source is not None
    b.nodes.pop()
    node.replace_input_with(0, None)
    return source, ir.DataType(node.attributes["to"].as_int())


def in_view(
    b: Builder,
    x: ir.Value,
    axis: ir.Value | None,
    spec: ScanSpec,
    *,
    dtype: ir.DataType | None,
    target: Target,
    build: Callable[[Builder, ir.Value, View], ir.Value],
    pad_to_bound: bool = False,
    flat: bool = False,
) -> ir.Value:
    """``build`` on the (outer, n, inner) view of ``x`` (in the compute type), in x's shape.
    ``pad_to_bound``: a run-time length is padded with ones to ``spec.max_length`` (ones at
    the end change no prefix product) and the result sliced back (:func:`padded`);
    ``flat``: on the 2-D view. x is not empty (:func:`rewriter.lowerings.lower`)."""
    if spec.length == 1:
        # x itself (exclusive: ones), with no view: IREE failed at run time on a (o, 1, 1)
        # view of symbolic dims and the Reshape back
        if not spec.exclusive:
            return b.op("Identity", x)
        one = one_for(b, x, dtype)
        if dtype is not None and not dtype.is_floating_point():
            # x - x + 1, exact for any integer: over static dims IREE folded Expand(1) into
            # a graph output it cannot return for uint32 / uint64 (nor Cast into them)
            return b.op("Add", b.op("Sub", x, x), one)
        return ones_like(b, x, one, dtype, target)

    def lowered(sb: Builder) -> ir.Value:
        source, to = _before_cast(sb, x) if flat else (x, None)
        if spec.axis is not None and spec.dims is not None:
            outer, n, inner = _static_dims(sb, source, spec)
        else:
            if axis is None:
                raise ValueError("a CumProd without a static axis needs its axis value")
            outer, n, inner = _runtime_dims(sb, source, axis, spec)
        view = View(spec, dtype, outer, n, inner, one_for(sb, x, dtype), target)
        if flat:
            x2 = sb.reshape(source, shape_of(sb, outer, times(sb, n, inner)))
            x2 = x2 if to is None else sb.cast(x2, to)
            y = build(sb, x2, dataclasses.replace(view, flat=True))
        else:  # (source is x)
            view3 = spec.rank == 3 and spec.axis == 1  # x is its own view
            x3 = x if view3 else sb.reshape(x, shape_of(sb, outer, n, inner))
            pad = pad_to_bound and not isinstance(n, int)
            y = padded(sb, x3, view, build) if pad else build(sb, x3, view)
            if x3 is x:
                return y
        full = sb.const(list(spec.dims)) if spec.static_dims else sb.op("Shape", source)  # type: ignore[arg-type]
        return sb.reshape(y, full)

    if b.opset >= 14 or spec.static_dims:
        return lowered(b)
    # Below opset 14 Reshape reads a 0 as "copy this dim": keep empty tensors out of it.
    size = b.op("ReduceProd", b.op("Shape", x), keepdims=0)
    return b.op(
        "If",
        b.op("Equal", size, b.const(0)),
        then_branch=b.subgraph(lambda sb: sb.op("Identity", x), dtype, "cumprod_empty"),
        else_branch=b.subgraph(lowered, dtype, "cumprod_lowered"),
    )
