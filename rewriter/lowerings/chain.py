"""``chain``: the running product unrolled, for short static axes.

Formula, on the (o, n, i) view of x, n static::

    x_0, ..., x_{n-1} = Split(x3, axis=1)     (num_outputs=n from opset 18, split sizes before)
    c_0 = x_0,  c_k = c_{k-1} * x_k                     (k in reverse order when ``reverse``)
    y = Concat(c_0, ..., c_{n-1})                       inclusive
    y = Concat(1, c_0, ..., c_{n-2})                    exclusive (the ones slice: View.ones)

Accuracy: the multiplications of the sequential kernel in its order: integers bit-exact with
wraparound, float32 / float64 bitwise equal to onnxruntime's native kernel; float16 /
bfloat16 multiplied in float32, rounded once.

On the 2-D view (``View.flat``: from opset 18, or with inner static) Split cuts the n
equal column blocks: the same products.

Cost: n - 1 Muls over one slice each, one Split and one Concat (two passes over memory), no
loop at all: n + 2 nodes, so only for short axes (``Target.chain_max_length``): a session of
a 512-chain takes 14-19 ms to create on onnxruntime, and compiling runtimes pay per node.
Needs a static length n (outer and inner may be known only at run time).
"""

from __future__ import annotations

import onnx_ir as ir

from rewriter.lowerings.builder import Builder
from rewriter.lowerings.view import View
from rewriter.site import ScanSpec
from rewriter.targets import Target

__all__ = ["build", "chain", "unsupported"]


def unsupported(spec: ScanSpec, target: Target) -> str | None:
    n = spec.length if spec.length is not None else spec.max_length
    most = target.chain_max_length
    if n is not None and n > most:  # no length at all: checked by lowerings.choose
        return f"strategy 'chain' unrolls at most {most} steps, the axis has {n}"
    return None


def chain(
    b: Builder,
    slices: list[ir.Value],
    v: View,
    *,
    exclusive: bool,
    seed: ir.Value | None = None,
    slice_first: bool = False,
) -> list[ir.Value]:
    """The running products of ``slices`` (from the end in ``v.reverse``), started from
    ``seed`` when given. ``slice_first``: each Mul takes the slice first (its last use:
    onnxruntime may write the product in its place)."""
    n = len(slices)
    outputs: list[ir.Value] = []  # in scan order
    running = seed
    for idx in range(n - 1, -1, -1) if v.reverse else range(n):
        if exclusive:
            running = v.ones(b, slices[idx]) if running is None else running
            outputs.append(running)
            if len(outputs) == n:
                break
        running = slices[idx] if running is None else _times(b, running, slices[idx], slice_first)
        if not exclusive:
            outputs.append(running)
    return outputs[::-1] if v.reverse else outputs


def _times(b: Builder, running: ir.Value, piece: ir.Value, slice_first: bool) -> ir.Value:
    return b.op("Mul", piece, running) if slice_first else b.op("Mul", running, piece)


def build(b: Builder, x3: ir.Value, v: View) -> ir.Value:
    """The scan along axis 1 of ``x3`` (in the compute type); n is static."""
    n = v.static_length
    assert n is not None
    # on the 2-D view the slices are column blocks of inner (static below opset 18: see
    # view.takes_flat_view)
    size = v.inner if v.flat and isinstance(v.inner, int) else 1
    assert not v.flat or isinstance(v.inner, int) or b.opset >= 18, "Split needs the sizes"
    slices = b.split(x3, 1, n, size)
    outputs = chain(b, slices, v, exclusive=v.exclusive)
    if n == 1:
        return outputs[0] if outputs[0] is not x3 else b.op("Identity", x3)
    return b.op("Concat", *outputs, axis=1)
