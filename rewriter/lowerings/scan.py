"""``scan``: the sequential running product, carried by an ONNX Scan over the scanned axis.

Formula, for the scanned axis ``a`` of length n::

    x' = Transpose(x) bringing a to the front (none when a = 0)
    state_0 = ones(shape of x' without its first axis)
    state_i = state_{i-1} * x'[i],  out_i = state_i (inclusive) or state_{i-1} (exclusive)
    y = Transpose back(Stack_i(out_i))
    reverse: Scan's own scan_input_directions / scan_output_directions = 1

Accuracy: the multiplications of the sequential kernel in its order: integers bit-exact with
wraparound, float32 / float64 bitwise equal to onnxruntime's native kernel (at most k - 1 ulps
at position k); float16 / bfloat16 multiplied in float32, rounded once.

Cost: n Scan iterations, each one Mul over a slice (vectorised across the other axes); two
Transposes unless a = 0 (onnxruntime's Scan handles ``scan_input_axes`` slower than an
explicit Transpose pair). Good for short and medium n; n iterations of per-step overhead make
it slow for long axes with small slices (see ``blocked``). Needs a static axis and a known rank.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from rewriter.lowerings import loop
from rewriter.lowerings.builder import Builder
from rewriter.site import CumProdSite

__all__ = ["build", "compute_dtype", "max_ulps", "scan_front", "unsupported"]

unsupported = loop.unsupported
compute_dtype = loop.compute_dtype
max_ulps = loop.max_ulps


def scan_front(
    b: Builder,
    x: ir.Value,
    *,
    dtype: ir.DataType,
    exclusive: bool,
    reverse: bool,
    slice_rank: int,
    init: ir.Value | None = None,
) -> tuple[ir.Value, ir.Value]:
    """Scan along axis 0 of ``x``: (the running products, the product of all slices).

    ``init`` (broadcastable to a slice) seeds the running product; ones by default. The body's
    values get the slice's rank (``slice_rank``) as their shape: onnxruntime's Scan-9/11
    refuses a body output without a shape when the input's dims are symbolic.
    """
    if init is None:
        shape = b.op("Shape", x)
        rest = b.op("Slice", shape, b.const([1]), b.const([np.iinfo(np.int64).max]))
        init = b.op("ConstantOfShape", rest, value=ir.tensor([1], dtype=dtype))
    body = b.child()
    sliced = ir.Shape([None] * slice_rank)
    state = body.value("state", dtype, sliced)
    item = body.value("item", dtype, sliced)
    product = body.op("Mul", state, item)
    out = body.op("Identity", state if exclusive else product)
    for value in (product, out):
        value.type = ir.TensorType(dtype)
        value.shape = ir.Shape([None] * slice_rank)
    graph = body.graph([state, item], [product, out], "cumprod_scan_body")
    directions = {"scan_input_directions": [1], "scan_output_directions": [1]} if reverse else {}
    total, y = b.op_multi("Scan", init, x, n_out=2, body=graph, num_scan_inputs=1, **directions)
    return y, total


def build(b: Builder, x: ir.Value, axis: int, site: CumProdSite, *, dtype: ir.DataType) -> ir.Value:
    """``x`` is in the compute type ``dtype``; ``axis`` is static and non-negative."""
    rank = site.rank
    assert rank is not None
    if site.scan_length == 0:
        return b.op("Identity", x)  # an empty axis: the result is x itself
    perm = [axis, *(d for d in range(rank) if d != axis)]
    front = x if axis == 0 else b.op("Transpose", x, perm=perm)

    def scanned(sb: Builder) -> ir.Value:
        y, _ = scan_front(
            sb,
            front,
            dtype=dtype,
            exclusive=site.exclusive,
            reverse=site.reverse,
            slice_rank=rank - 1,
        )
        return y

    if site.scan_length is None:
        # onnxruntime's Scan fails on zero iterations ("Invalid dim0_offset"): branch.
        length = b.op("Gather", b.op("Shape", front), b.const(0), axis=0)
        y = b.op(
            "If",
            b.op("Equal", length, b.const(0)),
            then_branch=b.subgraph(lambda sb: sb.op("Identity", front), dtype, "cumprod_empty"),
            else_branch=b.subgraph(scanned, dtype, "cumprod_scan"),
        )
    else:
        y = scanned(b)
    if axis == 0:
        return y
    return b.op("Transpose", y, perm=[int(p) for p in np.argsort(perm)])
