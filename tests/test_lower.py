"""``rewriter.lower``: every CumProd lowered in place (empty symbolic dims below opset 14, an
overridable axis initializer kept when nothing reads it, the warning for a type-generic
lowering); references: onnxruntime's native CumProd."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import rewriter
from tests.helpers import (
    LOCAL,
    VIA,
    check_against_native,
    cumprod_function,
    local_model,
    native,
    run_ort,
)


@pytest.mark.parametrize("strategy", ["auto", "blocked", "radix", "scan", "loop", "dynamic"])
@pytest.mark.parametrize("opset", [11, 13, 14])
def test_empty_symbolic_dim_below_opset_14(strategy: str, opset: int) -> None:
    model = local_model(
        [
            helper.make_node("Constant", [], ["axis"], value_int=2),
            helper.make_node("CumProd", ["x", "axis"], ["y"], exclusive=1),
        ],
        [helper.make_tensor_value_info("x", TensorProto.INT64, ["B", "C", 100, 3])],
        [helper.make_tensor_value_info("y", TensorProto.INT64, ["B", "C", 100, 3])],
    )
    rewritten = rewriter.decompose_cumprod(model, strategy=strategy, target_opset=opset)
    for shape in ((2, 0, 100, 3), (2, 3, 100, 3)):
        x = np.random.default_rng(4).integers(-5, 5, shape).astype(np.int64) | 1  # no 0 product
        (y,) = run_ort(rewritten, {"x": x})
        np.testing.assert_array_equal(y, native(model, {"x": x})[0])


@pytest.mark.parametrize("via", VIA)
def test_an_overridable_axis_of_an_empty_x_stays_optional(via: str) -> None:
    """An empty x needs no scan, so the rewrite no longer reads the axis; its initializer is
    still the default of a graph input and must stay (found by mutation: dropped, the
    rewritten model required a feed of ``axis``)."""
    model = local_model(
        [helper.make_node("CumProd", ["x", "axis"], ["y"])],
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [0, 3]),
            helper.make_tensor_value_info("axis", TensorProto.INT64, []),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [0, 3])],
        initializers=[helper.make_tensor("axis", TensorProto.INT64, [], [1])],
    )
    x = np.zeros((0, 3), np.float32)
    for feeds in ({"x": x}, {"x": x, "axis": np.array(0, np.int64)}):
        check_against_native(model, feeds, via)


def test_a_type_generic_lowering_is_warned(caplog: pytest.LogCaptureFixture) -> None:
    """Noticed in a review from outside: a CumProd whose x has no known element type (here
    in a function nothing calls) is lowered in x's own type, which for float16 / bfloat16 is
    less accurate than the native kernel: said once, naming the node's place."""
    model = local_model(
        [helper.make_node("Relu", ["x"], ["y"])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
        [cumprod_function("Unused", axis=0)],
    )
    with caplog.at_level("WARNING", logger="rewriter.decompose"):
        rewriter.decompose_cumprod(model)
    lines = [
        r.getMessage() for r in caplog.records if "element type is not known" in r.getMessage()
    ]
    assert len(lines) == 1 and "function 'local.Unused'" in lines[0], lines
    caplog.clear()
    typed = local_model(  # the same CumProd called with float16: specialised, nothing to say
        [helper.make_node("Unused", ["x"], ["y"], domain=LOCAL)],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [3])],
        [cumprod_function("Unused", axis=0)],
    )
    with caplog.at_level("WARNING", logger="rewriter.decompose"):
        rewriter.decompose_cumprod(typed)
    assert "element type is not known" not in caplog.text
