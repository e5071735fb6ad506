"""``scan``: the sequential running product, carried by an ONNX Scan over the scanned axis.

Formula, on the (o, n, i) view of x::

    x' = Transpose(x3, (1, 0, 2))  (n, o, i)     (a Reshape instead when o = 1)
    state_0 = ones(o, i)
    state_k = state_{k-1} * x'[k],  out_k = state_k (inclusive) or state_{k-1} (exclusive)
    y3 = Transpose back(Stack_k(out_k))
    reverse: Scan's own scan_input_directions / scan_output_directions = 1, or, for runtimes
             that ignore Scan directions (IREE), x' and the result flipped along n

Accuracy: the multiplications of the sequential kernel in its order: integers bit-exact with
wraparound, float32 / float64 bitwise equal to onnxruntime's native kernel (at most k - 1 ulps
at position k); float16 / bfloat16 multiplied in float32, rounded once.

Cost: n Scan iterations, each one Mul over an (o, i) slab (vectorised); two Transposes unless
o = 1. Good for short and medium n; n iterations of per-step overhead make it slow for long
axes with small slabs (see ``blocked``). Any rank, run-time axis and dims (an If skips the
Scan when n = 0 at run time: onnxruntime's Scan fails on zero iterations; on targets without
If a slab of ones is scanned first instead, and sliced off).

The first axis (``build_first_axis``, called by :func:`rewriter.lowerings.lower` when the
axis is statically 0): the Scan runs over x itself, whose slices x[k] are the slabs, and its
stacked output already has x's shape: no view, no Reshape back. A Reshape that writes a graph
output is a full copy in onnxruntime (float32 1M: 102 us for a Mul alone, 235 us followed by
a Reshape to the output). Same products in the same order, the same
n = 0 guard (If, or the ones slab on targets without If) and the same flip where Scan
ignores directions; x's other dims may be anything, known or not (a slice of an empty x is
empty, and Scan steps over empty slices). Only where ``Target.scan_over_x`` (onnxruntime;
on tract it was slower), elsewhere the view.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from rewriter.lowerings.builder import Builder
from rewriter.lowerings.view import View, one_for
from rewriter.site import ScanSpec
from rewriter.targets import Target

__all__ = ["build", "build_first_axis", "scan_front"]


def scan_front(
    b: Builder,
    x: ir.Value,
    v: View,
    *,
    exclusive: bool,
    reverse: bool,
    slice_rank: int,
    init: ir.Value | None = None,
) -> tuple[ir.Value, ir.Value]:
    """Scan along axis 0 of ``x``: (the running products, the product of all slices).

    ``init`` (broadcastable to a slice) seeds the running product; ones by default. The body's
    values get the slice's rank (``slice_rank``) as their shape: onnxruntime's Scan-9/11
    refuses a body output without a shape when the input's dims are symbolic. Where the
    target ignores Scan directions, ``reverse`` flips the input and the outputs instead.
    """
    return _scan_axis0(
        b,
        x,
        dtype=v.dtype,
        one=v.one,
        target=v.target,
        exclusive=exclusive,
        reverse=reverse,
        slice_rank=slice_rank,
        init=init,
    )


def _scan_axis0(
    b: Builder,
    x: ir.Value,
    *,
    dtype: ir.DataType | None,
    one: ir.Value,
    target: Target,
    exclusive: bool,
    reverse: bool,
    slice_rank: int,
    init: ir.Value | None = None,
) -> tuple[ir.Value, ir.Value]:
    """:func:`scan_front` on its parts: the compute type, a 0-D one in it, the target."""
    if init is None:
        shape = b.op("Shape", x)
        rest = b.op("Slice", shape, b.const([1]), b.const([np.iinfo(np.int64).max]))
        init = b.op("Expand", one, rest)
    flip = reverse and not target.scan_directions
    if flip:
        x = b.flip(x, 0)
    body = b.child()
    sliced = ir.Shape([None] * slice_rank)
    state = body.value("state", dtype, sliced)
    item = body.value("item", dtype, sliced)
    product = body.op("Mul", state, item)
    out = body.op("Identity", state if exclusive else product)
    for value in (product, out):
        if dtype is not None:  # (a shape without a type is not serialized: onnx_ir warns)
            value.type = ir.TensorType(dtype)
            value.shape = ir.Shape([None] * slice_rank)
    graph = body.graph([state, item], [product, out], "cumprod_scan_body")
    directions = (
        {"scan_input_directions": [1], "scan_output_directions": [1]}
        if reverse and not flip
        else {}
    )
    total, y = b.op_multi("Scan", init, x, n_out=2, body=graph, num_scan_inputs=1, **directions)
    if flip:
        y = b.flip(y, 0)
    return y, total


def _scan_padded(b: Builder, front: ir.Value, v: View) -> ir.Value:
    """The scan of ``front`` (n, o, i) without an If for n = 0, for targets without If: one
    slab of ones is put before the first item scanned (after the last when reverse), so the
    Scan always runs at least once; the inclusive scan of that is [1, y_0, ..., y_{n-1}],
    whose first n slabs are the exclusive result and last n the inclusive one (in scan
    order). One extra slab copy (Pad) and a Slice."""
    n = v.tensor(b, v.length)  # a run-time length here: no node made
    return _padded_axis0(
        b,
        front,
        3,
        n,
        dtype=v.dtype,
        one=v.one,
        target=v.target,
        exclusive=v.exclusive,
        reverse=v.reverse,
    )


def _padded_axis0(
    b: Builder,
    x: ir.Value,
    rank: int,
    n: ir.Value,
    *,
    dtype: ir.DataType | None,
    one: ir.Value,
    target: Target,
    exclusive: bool,
    reverse: bool,
) -> ir.Value:
    """:func:`_scan_padded` along axis 0 of a rank-``rank`` ``x``, whose length along axis 0
    is ``n`` (a 1-element int64 tensor)."""
    pads = [0] * (2 * rank)
    pads[rank if reverse else 0] = 1
    padded = b.op("Pad", x, b.const(pads), one)
    y, _ = _scan_axis0(
        b,
        padded,
        dtype=dtype,
        one=one,
        target=target,
        exclusive=False,
        reverse=reverse,
        slice_rank=rank - 1,
    )
    drop_first = exclusive == reverse  # forward inclusive / reverse exclusive
    if drop_first:
        return b.op("Slice", y, b.const([1]), b.op("Add", n, b.const([1])), b.const([0]))
    return b.op("Slice", y, b.const([0]), n, b.const([0]))


def build(b: Builder, x3: ir.Value, v: View) -> ir.Value:
    """The scan along axis 1 of ``x3`` (in the compute type)."""
    if v.length == 0:
        return b.op("Identity", x3)  # an empty axis: the result is x itself
    outer, length, inner = (v.tensor(b, d) for d in v.dims())
    if v.outer == 1:
        front = b.reshape(x3, b.op("Concat", length, outer, inner, axis=0))
    else:
        front = b.op("Transpose", x3, perm=[1, 0, 2])

    def scanned(sb: Builder) -> ir.Value:
        y, _ = scan_front(sb, front, v, exclusive=v.exclusive, reverse=v.reverse, slice_rank=2)
        return y

    if v.static_length is None and "If" not in v.target.missing_ops:
        # onnxruntime's Scan fails on zero iterations ("Invalid dim0_offset"): branch.
        y = b.op(
            "If",
            b.op("Equal", b.op("Reshape", length, b.const([])), b.const(0)),
            then_branch=b.subgraph(lambda sb: sb.op("Identity", front), v.dtype, "cumprod_empty"),
            else_branch=b.subgraph(scanned, v.dtype, "cumprod_scan"),
        )
    elif v.static_length is None:
        y = _scan_padded(b, front, v)
    else:
        y = scanned(b)
    if v.outer == 1:
        return b.reshape(y, b.op("Concat", outer, length, inner, axis=0))
    return b.op("Transpose", y, perm=[1, 0, 2])


def build_first_axis(
    b: Builder, x: ir.Value, spec: ScanSpec, *, dtype: ir.DataType | None, target: Target
) -> ir.Value | None:
    """The scan along axis 0 of ``x`` itself (in the compute type ``dtype``; ``spec.axis`` is
    0, the rank known): a Scan over x's slices, whose output has x's shape (module
    docstring). Empty: x itself; a length known only at run time gets the If (or, on targets
    without If, the ones slab) of :func:`build`. None (nothing emitted) on targets that keep
    the view (module docstring)."""
    assert spec.axis == 0 and spec.dims is not None and spec.dims
    if not target.scan_over_x:
        return None
    if spec.empty:
        return b.op("Identity", x)
    rank = len(spec.dims)
    one = one_for(b, x, dtype)

    def scanned(sb: Builder) -> ir.Value:
        y, _ = _scan_axis0(
            sb,
            x,
            dtype=dtype,
            one=one,
            target=target,
            exclusive=spec.exclusive,
            reverse=spec.reverse,
            slice_rank=rank - 1,
        )
        return y

    if spec.length is not None:
        return scanned(b)  # n >= 1 here (n = 0 is empty)
    n = b.slice_axis(b.op("Shape", x), 0, 0, 1)
    if "If" not in target.missing_ops:
        # onnxruntime's Scan fails on zero iterations ("Invalid dim0_offset"): branch.
        return b.op(
            "If",
            b.op("Equal", b.op("Reshape", n, b.const([])), b.const(0)),
            then_branch=b.subgraph(lambda sb: sb.op("Identity", x), dtype, "cumprod_empty"),
            else_branch=b.subgraph(scanned, dtype, "cumprod_scan"),
        )
    return _padded_axis0(
        b,
        x,
        rank,
        n,
        dtype=dtype,
        one=one,
        target=target,
        exclusive=spec.exclusive,
        reverse=spec.reverse,
    )
