"""``rewriter.lowerings.builder``: the node builder's opset-dependent ops (Slice, Pad,
Reshape) give what numpy gives at every opset the lowerings are built at, run on
onnx.reference and onnxruntime; and the names it hands out collide with nothing in the
model."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from onnx.reference import ReferenceEvaluator

from rewriter.lowerings.builder import Builder, NameSource
from tests.helpers import run_ort

OPSETS = [11, 13, 14, 18, 26]


def _built(
    opset: int, shape: tuple[int, ...], build: Callable[[Builder, ir.Value], ir.Value]
) -> onnx.ModelProto:
    """A model y = build(x) of the builder's nodes alone, at ``opset``."""
    x = ir.Value(name="x", type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape(shape))
    b = Builder(opset, NameSource(["x", "y"]), "t")
    y = b.op("Identity", build(b, x))
    y.name, y.type = "y", ir.TensorType(ir.DataType.FLOAT)
    y.shape = ir.Shape([f"d{i}" for i in range(len(shape))])  # every build keeps the rank
    graph = ir.Graph([x], [y], nodes=b.nodes, opset_imports={"": opset}, name="g")
    proto = ir.serde.serialize_model(ir.Model(graph, ir_version=7))
    onnx.checker.check_model(proto, full_check=True)
    return proto


def _both(model: onnx.ModelProto, x: np.ndarray) -> list[np.ndarray]:
    return [ReferenceEvaluator(model).run(None, {"x": x})[0], run_ort(model, {"x": x})[0]]


def _x(shape: tuple[int, ...]) -> np.ndarray:
    return np.arange(1, 1 + int(np.prod(shape)), dtype=np.float32).reshape(shape)


@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize("n", [0, 1, 5])
def test_shift_exclusive(opset: int, n: int) -> None:
    """[1, y[0], ..., y[n-2]] along axis 1, the empty axis staying empty."""
    shape = (2, n, 3)
    model = _built(opset, shape, lambda b, x: b.shift_exclusive(x, b.const(np.float32(1))))
    x = _x(shape)
    expected = np.concatenate([np.ones((2, 1, 3), np.float32), x], axis=1)[:, :n]
    for got in _both(model, x):
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("opset", OPSETS)
def test_flip(opset: int) -> None:
    shape = (2, 5, 3)
    x = _x(shape)
    for got in _both(_built(opset, shape, lambda b, v: b.flip(v, 1)), x):
        np.testing.assert_array_equal(got, np.flip(x, 1))


@pytest.mark.parametrize("opset", [14, 18, 26])
def test_reshape_keeps_a_zero_from_opset_14(opset: int) -> None:
    """A 0 in the target shape means 0 (allowzero=1), not "copy this dim": (2, 0) -> (0, 5)."""
    shape = (2, 0)
    model = _built(opset, shape, lambda b, v: b.reshape(v, b.const([0, 5])))
    for got in _both(model, _x(shape)):
        assert got.shape == (0, 5)


def test_reshape_below_opset_14_has_no_allowzero() -> None:
    """Reshape-13 has no allowzero (a 0 there copies the input's dim)."""
    model = _built(13, (2, 3), lambda b, v: b.reshape(v, b.const([0, 3])))
    (reshape,) = [n for n in model.graph.node if n.op_type == "Reshape"]
    assert not reshape.attribute
    for got in _both(model, _x((2, 3))):
        np.testing.assert_array_equal(got, _x((2, 3)))


def test_fresh_names_collide_with_nothing_in_the_model() -> None:
    """Built twice, the second time with every name of the first build taken: no name of
    the second build is one of them, and no two of its names are equal."""

    def names(used: list[str]) -> list[str]:
        b = Builder(26, NameSource(used), "t")
        x = ir.Value(name="x")
        b.shift_exclusive(b.flip(x, 1), b.const(np.float32(1)))
        return [n.name for n in b.nodes] + [v.name for n in b.nodes for v in n.outputs]

    first = names(["x"])
    second = names(["x", *first])
    assert len(set(second)) == len(second)
    assert not set(second) & {"x", *first}
