"""``rewriter.lowerings.logsum``: products as exp(sum(log|x|)) with the sign and zeros
carried apart; references: numpy in float64."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

import rewriter
import rewriter.io
from tests.helpers import (
    local_model,
    op_types,
    run_ort,
)


def test_zeros_in_logsum_do_not_rely_on_exp_of_minus_infinity() -> None:
    """Zeros are masked explicitly (onnxruntime 1.20.1's vectorised Exp(-inf) is 5.6e-309)."""
    model = local_model(
        [
            helper.make_node("Constant", [], ["axis"], value_int=0),
            helper.make_node("CumProd", ["x", "axis"], ["y"]),
        ],
        [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [16])],
        [helper.make_tensor_value_info("y", TensorProto.DOUBLE, [16])],
    )
    rewritten = rewriter.decompose_cumprod(model, strategy="logsum")
    assert isinstance(rewritten, onnx.ModelProto)
    ops = op_types(rewritten)
    assert "Equal" in ops  # the zero mask
    x = np.array([2.0, -3.0, 0.0, 5.0, -0.0, 1.5, np.inf, 2.0] * 2)
    (y,) = run_ort(rewritten, {"x": x})
    expected = np.cumprod(x)
    np.testing.assert_array_equal(np.signbit(y), np.signbit(expected))
    np.testing.assert_array_equal(np.isnan(y), np.isnan(expected))
    finite = np.isfinite(expected)
    np.testing.assert_allclose(y[finite], expected[finite], rtol=2.0**-50)
