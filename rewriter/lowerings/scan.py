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

Cost: n Scan iterations, each one Mul over an (o, i) slab; two Transposes unless o = 1. A
run-time n gets an If that skips the Scan when n = 0 (onnxruntime's Scan fails on zero
iterations), or on targets without If a slab of ones scanned first and sliced off.

On a static first axis where ``Target.scan_over_x`` (:func:`build_first_axis`) the Scan runs
over x itself: no view and no Reshape back, which onnxruntime copies into a graph output
(float32 1M: 102 us for a Mul alone, 235 us with the Reshape); the same products.
"""

from __future__ import annotations

import onnx_ir as ir

from rewriter.lowerings.builder import END, Builder
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
    slice_rank: int,
    init: ir.Value | None = None,
) -> tuple[ir.Value, ir.Value]:
    """Scan along axis 0 of ``x`` in ``v``'s type: (the running products, the product of
    all slices), seeded by ``init`` (broadcastable to a slice; ones by default). The body's
    values have rank ``slice_rank`` (onnxruntime's Scan-9/11 refuses a body output without
    a shape over symbolic dims); without ``Target.scan_directions`` reverse is a flip."""
    dtype = v.dtype
    if init is None:
        shape = b.op("Shape", x)
        rest = b.op("Slice", shape, b.const([1]), b.const([END]))
        init = b.op("Expand", v.one, rest)
    flip = v.reverse and not v.target.scan_directions
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
        if v.reverse and not flip
        else {}
    )
    total, y = b.op_multi("Scan", init, x, n_out=2, body=graph, num_scan_inputs=1, **directions)
    if flip:
        y = b.flip(y, 0)
    return y, total


def _padded(b: Builder, x: ir.Value, rank: int, n: ir.Value, v: View) -> ir.Value:
    """The scan along axis 0 of a rank-``rank`` ``x`` of run-time length ``n`` without If:
    one slab of ones scanned first, so the Scan always runs; the inclusive scan
    [1, y_0, ..., y_{n-1}] holds the exclusive result in its first n slabs and the
    inclusive one in its last n (in scan order). One Pad (a copy of x) and a Slice."""
    pads = [0] * (2 * rank)
    pads[rank if v.reverse else 0] = 1
    padded = b.op("Pad", x, b.const(pads), v.one)
    y, _ = scan_front(b, padded, v, exclusive=False, slice_rank=rank - 1)
    drop_first = v.exclusive == v.reverse  # forward inclusive / reverse exclusive
    if drop_first:
        return b.op("Slice", y, b.const([1]), b.op("Add", n, b.const([1])), b.const([0]))
    return b.op("Slice", y, b.const([0]), n, b.const([0]))


def _scan(b: Builder, x: ir.Value, rank: int, n: ir.Value | None, v: View) -> ir.Value:
    """The scan along axis 0 of a rank-``rank`` ``x``; ``n``: its run-time length, where
    an If skips the Scan at n = 0 (onnxruntime's Scan fails on zero iterations: "Invalid
    dim0_offset"), or without If :func:`_padded`."""

    def scanned(sb: Builder) -> ir.Value:
        y, _ = scan_front(sb, x, v, exclusive=v.exclusive, slice_rank=rank - 1)
        return y

    if n is None:
        return scanned(b)
    if "If" in v.target.missing_ops:
        return _padded(b, x, rank, n, v)
    return b.op(
        "If",
        b.op("Equal", b.op("Reshape", n, b.const([])), b.const(0)),
        then_branch=b.subgraph(lambda sb: sb.op("Identity", x), v.dtype, "cumprod_empty"),
        else_branch=b.subgraph(scanned, v.dtype, "cumprod_scan"),
    )


def build(b: Builder, x3: ir.Value, v: View) -> ir.Value:
    """The scan along axis 1 of ``x3`` (in the compute type)."""
    outer, length, inner = (v.tensor(b, d) for d in v.dims())
    if v.outer == 1:
        front = b.reshape(x3, b.op("Concat", length, outer, inner, axis=0))
    else:
        front = b.op("Transpose", x3, perm=[1, 0, 2])
    y = _scan(b, front, 3, length if v.static_length is None else None, v)
    if v.outer == 1:
        return b.reshape(y, b.op("Concat", outer, length, inner, axis=0))
    return b.op("Transpose", y, perm=[1, 0, 2])


def build_first_axis(
    b: Builder, x: ir.Value, spec: ScanSpec, *, dtype: ir.DataType | None, target: Target
) -> ir.Value | None:
    """The scan along axis 0 of x itself (not empty; ``spec.axis`` 0, the rank known) in
    ``dtype``, as :func:`build` scans the view; None (nothing emitted) without
    ``Target.scan_over_x``."""
    assert spec.axis == 0 and spec.dims is not None and spec.dims
    if not target.scan_over_x:
        return None
    # the scan reads only the view's type, one and target (x is not viewed)
    v = View(spec, dtype, 1, 1, 1, one_for(b, x, dtype), target)
    n = None if spec.length is not None else b.slice_axis(b.op("Shape", x), 0, 0, 1)
    return _scan(b, x, len(spec.dims), n, v)  # (a static n >= 1 here: n = 0 is empty)
