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
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from rewriter.lowerings import loop
from rewriter.lowerings.builder import Builder
from rewriter.lowerings.view import View
from rewriter.site import ScanSpec
from rewriter.targets import Target

__all__ = ["build", "compute_dtype", "max_ulps", "scan_front", "unsupported"]

compute_dtype = loop.compute_dtype
max_ulps = loop.max_ulps


def unsupported(spec: ScanSpec, target: Target) -> str | None:
    if "Scan" in target.missing_ops:
        return f"strategy 'scan' needs Scan, which {target.name} lacks"
    return None


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
    dtype = v.dtype
    if init is None:
        shape = b.op("Shape", x)
        rest = b.op("Slice", shape, b.const([1]), b.const([np.iinfo(np.int64).max]))
        init = b.op("Expand", v.one, rest)
    flip = reverse and not v.target.scan_directions
    if flip:
        x = b.flip(x, 0)
    body = b.child()
    sliced = ir.Shape([None] * slice_rank)
    state = body.value("state", dtype, sliced)
    item = body.value("item", dtype, sliced)
    product = body.op("Mul", state, item)
    out = body.op("Identity", state if exclusive else product)
    for value in (product, out):
        if dtype is not None:
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
    pads = [0, 0, 0, 1, 0, 0] if v.reverse else [1, 0, 0, 0, 0, 0]
    padded = b.op("Pad", front, b.const(pads), v.one)
    y, _ = scan_front(b, padded, v, exclusive=False, reverse=v.reverse, slice_rank=2)
    n = v.tensor(b, v.length)
    drop_first = v.exclusive == v.reverse  # forward inclusive / reverse exclusive
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
