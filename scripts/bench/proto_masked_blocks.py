"""Experiment (issue 52, not a lowering of the rewriter): CumProd as a two-level blocked scan
whose in-block prefixes come from one masked ReduceProd over a (.., B, B) tile, for tinygrad,
which fuses the unrolled trees (``carry``, ``radix``) into one huge elementwise kernel that takes
minutes to generate; this form compiled within 1.21x of the CumSum model there and ran at
0.61-1.25x carry's time (``scripts/results/compile-2026-12-06-summary.md``). Not for IREE (it
compiles fast but ran 16-472x CumSum) nor onnxruntime (its ReduceProd saturates on integer
overflow over a middle axis: wrong results).

Formula, on the (o, n, i) view of x, n static, block B::

    n <= B: T[o, k, j, i] = x[o, j, i] if j <= k else 1    (j < k: exclusive)
            y[o, k, i]    = ReduceProd_j T                 (a (o, n, n, i) tile)
    else:   exclusive: the inclusive scan of (1, x_0, ..., x_{n-2}) (Slice, Concat)
            pad n to m * B with ones; view (o * m, B, i); P = the in-block scan above
            t = P[:, B - 1, :] viewed (o, m, i), the block totals
            C = the EXCLUSIVE scan of t along m, by this same scheme (recursively)
            y = P viewed (o, m, B, i) * C viewed (o, m, 1, i), viewed (o, m * B, i), [0, n)

Accuracy: every output is the product of its k factors (the ones multiply exactly), formed by
the runtime's ReduceProd order inside a block and one Mul by the carry: integers bit-exact
with wraparound; floats within the k - 1 ulps of a tree of k - 1 multiplications (as
``carry``; checked against numpy in ``bench_runtime.py``).

Cost: a tile of B times the elements of x per level (B = 64: 64x memory traffic, of which a
compiler fuses the Where into the reduction); about 16 nodes per level, 2 levels for n up to
B * B. No control flow, no Split into r slices.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

__all__ = ["masked_blocks_model"]


class _Graph:
    def __init__(self, elem_type: int) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.elem_type = elem_type
        self.count = 0

    def name(self, hint: str) -> str:
        self.count += 1
        return f"{hint}_{self.count}"

    def const(self, value: np.ndarray, hint: str = "c") -> str:
        name = self.name(hint)
        self.inits.append(numpy_helper.from_array(value, name))
        return name

    def op(self, op_type: str, inputs: list[str], hint: str = "", **attrs: object) -> str:
        out = self.name(hint or op_type.lower())
        self.nodes.append(helper.make_node(op_type, inputs, [out], **attrs))
        return out

    def reshape(self, x: str, shape: tuple[int, ...]) -> str:
        return self.op("Reshape", [x, self.const(np.array(shape, np.int64), "shape")])

    def one(self) -> str:
        dtype = helper.tensor_dtype_to_np_dtype(self.elem_type)
        return self.const(np.ones((), dtype), "one")


def _tile_scan(g: _Graph, x3: str, dims: tuple[int, int, int], *, exclusive: bool) -> str:
    """(o, n, i) -> its scan along n by one masked ReduceProd over an (o, n, n, i) tile."""
    o, n, i = dims
    k = np.arange(n)
    mask = (k[None, :] < k[:, None]) if exclusive else (k[None, :] <= k[:, None])
    m = g.const(mask.reshape(1, n, n, 1), "mask")
    rows = g.reshape(x3, (o, 1, n, i))  # x[o, j, i] at [o, ., j, i]
    tile = g.op("Where", [m, rows, g.one()], "tile")  # (o, n(k), n(j), i)
    return g.op("ReduceProd", [tile], "prefix", axes=[2], keepdims=0)  # (o, n, i)


def _scan(g: _Graph, x3: str, dims: tuple[int, int, int], block: int, *, exclusive: bool) -> str:
    o, n, i = dims
    if n <= block:
        return _tile_scan(g, x3, dims, exclusive=exclusive)
    if exclusive:  # the inclusive scan of x shifted by one: (1, x_0, ..., x_{n-2})
        ones = g.op("Expand", [g.one(), g.const(np.array([o, 1, i], np.int64))], "ones")
        head = g.op(
            "Slice",
            [
                x3,
                g.const(np.array([0], np.int64)),
                g.const(np.array([n - 1], np.int64)),
                g.const(np.array([1], np.int64)),
            ],
        )
        x3 = g.op("Concat", [ones, head], "shifted", axis=1)
    m = -(-n // block)
    if m * block != n:
        pads = np.array([0, 0, 0, 0, m * block - n, 0], np.int64)
        x3 = g.op("Pad", [x3, g.const(pads, "pads"), g.one()], "padded")
    blocks = g.reshape(x3, (o * m, block, i))
    prefix = _tile_scan(g, blocks, (o * m, block, i), exclusive=False)
    last = g.op(
        "Slice",
        [
            prefix,
            g.const(np.array([block - 1], np.int64)),
            g.const(np.array([block], np.int64)),
            g.const(np.array([1], np.int64)),
        ],
        "totals",
    )
    totals = g.reshape(last, (o, m, i))
    carries = _scan(g, totals, (o, m, i), block, exclusive=True)
    y = g.op("Mul", [g.reshape(prefix, (o, m, block, i)), g.reshape(carries, (o, m, 1, i))], "y")
    y = g.reshape(y, (o, m * block, i))
    if m * block != n:
        y = g.op(
            "Slice",
            [
                y,
                g.const(np.array([0], np.int64)),
                g.const(np.array([n], np.int64)),
                g.const(np.array([1], np.int64)),
            ],
        )
    return y


def masked_blocks_model(
    elem_type: int, shape: tuple[int, ...], axis: int, block: int = 64
) -> onnx.ModelProto:
    """One inclusive forward CumProd of x (static ``shape``) along ``axis``, as the masked
    blocked scan above, at opset 17 (ReduceProd's axes as an attribute)."""
    g = _Graph(elem_type)
    o = int(np.prod(shape[:axis], dtype=np.int64))
    n = shape[axis]
    i = int(np.prod(shape[axis + 1 :], dtype=np.int64))
    x3 = g.reshape("x", (o, n, i))
    y3 = _scan(g, x3, (o, n, i), block, exclusive=False)
    g.nodes.append(
        helper.make_node("Reshape", [y3, g.const(np.array(shape, np.int64), "shape")], ["y"])
    )
    graph = helper.make_graph(
        g.nodes,
        "bench",
        [helper.make_tensor_value_info("x", elem_type, list(shape))],
        [helper.make_tensor_value_info("y", elem_type, list(shape))],
        g.inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


if __name__ == "__main__":  # a self-check against numpy
    import onnx.reference

    rng = np.random.default_rng(0)
    cases = [((3, 200), 1, 16), ((50, 4, 3), 0, 8), ((2, 37, 5), 1, 4), ((2, 300, 3), 1, 4)]
    for shape, axis, block in cases:
        for elem_type in (TensorProto.INT32, TensorProto.DOUBLE):
            dtype = helper.tensor_dtype_to_np_dtype(elem_type)
            x = rng.integers(-3, 4, shape).astype(dtype)
            model = masked_blocks_model(elem_type, shape, axis, block)
            onnx.checker.check_model(model, full_check=True)
            (y,) = onnx.reference.ReferenceEvaluator(model).run(None, {"x": x})
            expected = np.cumprod(x, axis=axis, dtype=dtype)
            assert np.array_equal(y, expected), (shape, axis, elem_type)
            print(shape, axis, block, elem_type, len(model.graph.node), "nodes: equal")
