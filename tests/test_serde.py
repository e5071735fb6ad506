"""``rewriter.serde``: what onnx_ir drops between protobuf and IR is carried back (the declared
shape of a graph input that is also an initializer)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

import rewriter
from tests.helpers import (
    local_model,
    run_ort,
)


def test_an_overridable_input_keeps_a_symbolic_declared_shape() -> None:
    """x declared [N] and an initializer of 3 elements: the output still takes 5."""
    model = local_model(
        [helper.make_node("CumProd", ["x", "axis"], ["y"])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N"])],
        initializers=[
            helper.make_tensor("x", TensorProto.FLOAT, [3], [2.0, 3.0, 4.0]),
            helper.make_tensor("axis", TensorProto.INT64, [], [0]),
        ],
    )
    for options in ({}, {"target_opset": 18}):
        rewritten = rewriter.decompose_cumprod(model, **options)  # type: ignore[arg-type]
        assert isinstance(rewritten, onnx.ModelProto)
        onnx.checker.check_model(rewritten, full_check=True)
        (dim,) = rewritten.graph.input[0].type.tensor_type.shape.dim
        assert dim.dim_param == "N"
        feeds = {"x": np.arange(1, 6, dtype=np.float32)}
        np.testing.assert_array_equal(run_ort(rewritten, feeds)[0], [1, 2, 6, 24, 120])
