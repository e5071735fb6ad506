"""``rewriter.lowerings.wide``: the float32 product trees' block totals and carries taken in
float64 where the target computes float64, so that a block's own products cannot overflow
where the sequential product does not: on prefixes that swing by 2^+-70 factors (block
products up to 2^+-140) every element as onnxruntime's native CumProd gives it, built below
opset 18, where the block totals' ReduceProd takes its axes as an attribute. From opset 18,
and the same trees near 1: tests/lowerings/test_tree_accuracy.py."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto

import rewriter
from tests.helpers import cumprod_model, native, op_types, run_ort, swinging


@pytest.mark.parametrize("strategy", ["carry", "radix", "blocked"])
@pytest.mark.parametrize("attrs", [(0, 0), (1, 1)], ids=["inclusive", "exclusive-reverse"])
@pytest.mark.parametrize(("shape", "axis"), [((3, 2048), 1), ((2048, 3), 0)], ids=["last", "first"])
def test_swinging_prefixes_below_opset_18_as_native(
    strategy: str, attrs: tuple[int, int], shape: tuple[int, int], axis: int
) -> None:
    x = swinging(shape, axis)
    if attrs[1]:
        x = np.ascontiguousarray(np.flip(x, axis))  # the same walk in scan order
    model = cumprod_model(TensorProto.FLOAT, shape, axis, exclusive=attrs[0], reverse=attrs[1])
    lowered = rewriter.decompose_cumprod(model, strategy=strategy, target_opset=17)
    ops = op_types(lowered)
    assert "CumProd" not in ops
    expected = native(model, {"x": x})[0]
    assert np.isfinite(expected).all() and (expected != 0).all()
    np.testing.assert_array_equal(run_ort(lowered, {"x": x})[0], expected, err_msg=str(ops))
