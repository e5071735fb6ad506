"""``rewriter.site``: a CumProd node validated before anything changes (its attributes, an
axis fed at run time or overridable by a feed), failing as native onnxruntime does."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import rewriter
from tests.helpers import (
    VIA,
    check_against_native,
    local_model,
    native,
    run_ort,
)


@pytest.mark.parametrize("strategy", ["auto", "loop", "scan", "dynamic", "logsum", "doubling"])
def test_run_time_axis_out_of_range_fails_like_native(strategy: str) -> None:
    model = local_model(
        [helper.make_node("CumProd", ["x", "axis"], ["y"])],
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
            helper.make_tensor_value_info("axis", TensorProto.INT64, []),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
    )
    rewritten = rewriter.decompose_cumprod(model, strategy=strategy, max_length=8)
    x = np.ones((2, 3), dtype=np.float32)
    for bad in (5, 2, -3):
        with pytest.raises(Exception):  # noqa: B017 - onnxruntime's own error, like native
            native(model, {"x": x, "axis": np.array(bad, dtype=np.int64)})
        with pytest.raises(Exception):  # noqa: B017
            run_ort(rewritten, {"x": x, "axis": np.array(bad, dtype=np.int64)})
    for good in (-2, -1, 0, 1):
        feeds = {"x": np.arange(1, 7, dtype=np.float32).reshape(2, 3), "axis": np.array(good)}
        np.testing.assert_array_equal(run_ort(rewritten, feeds)[0], native(model, feeds)[0])


@pytest.mark.parametrize(("name", "value"), [("exclusive", 2), ("exclusive", -1), ("reverse", 7)])
def test_malformed_attributes_are_refused(name: str, value: int) -> None:
    model = local_model(
        [
            helper.make_node("Constant", [], ["axis"], value_int=0),
            helper.make_node("CumProd", ["x", "axis"], ["y"], name="bad", **{name: value}),
        ],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
    )
    with pytest.raises(Exception):  # noqa: B017 - native refuses it too
        native(model, {"x": np.ones(3, dtype=np.float32)})
    with pytest.raises(rewriter.InvalidCumProdError, match=rf"'bad'.*{name}.*0 or 1"):
        rewriter.decompose_cumprod(model)


def test_attribute_of_the_wrong_type_names_the_node() -> None:
    node = helper.make_node("CumProd", ["x", "axis"], ["y"], name="floaty", exclusive=1.0)
    model = local_model(
        [helper.make_node("Constant", [], ["axis"], value_int=0), node],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
    )
    with pytest.raises(rewriter.InvalidCumProdError, match=r"'floaty'.*must be an int"):
        rewriter.decompose_cumprod(model)


@pytest.mark.parametrize("target", ["onnxruntime", "tract"])
@pytest.mark.parametrize("via", VIA)
def test_an_overridable_axis_is_a_run_time_axis(via: str, target: str) -> None:
    """The axis an initializer (1) that is also a graph input: a caller may feed another
    one, so the lowering takes it at run time (found by mutation: built for the default, a
    fed axis 0 scanned axis 1)."""
    model = local_model(
        [helper.make_node("CumProd", ["x", "axis"], ["y"], exclusive=1)],
        [
            helper.make_tensor_value_info("x", TensorProto.INT32, [3, 4]),
            helper.make_tensor_value_info("axis", TensorProto.INT64, []),
        ],
        [helper.make_tensor_value_info("y", TensorProto.INT32, [3, 4])],
        initializers=[helper.make_tensor("axis", TensorProto.INT64, [], [1])],
    )
    x = np.arange(3, 15, dtype=np.int32).reshape(3, 4)
    for axis in (0, 1, -1, -2):
        feeds = {"x": x, "axis": np.array(axis, np.int64)}
        rewritten = check_against_native(model, feeds, via, target=target)
        ones = np.ones_like(np.take(x, [0], axis=axis))
        shifted = np.concatenate([ones, np.delete(x, -1, axis=axis)], axis=axis)
        np.testing.assert_array_equal(run_ort(rewritten, feeds)[0], np.cumprod(shifted, axis))
