"""``rewriter.lowerings.logsum``: products as exp(sum(log|x|)) with the sign and zeros
carried apart, computed in float64: every float type with exclusive and reverse within the
contract's bound (tests/bounds.py) of the product in float64 (longdouble for float64), zeros
and a transient overflow as documented, and what it refuses (integers; float64 where the
target has no float64; exclusive where the target's exclusive CumSum is wrong). References:
onnx.reference and numpy."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import rewriter
from tests.bounds import PRECISION, check, ulp_bound
from tests.helpers import (
    FLOATS,
    INTS,
    TYPE_NAMES,
    check_every_type,
    cumprod_model,
    local_model,
    lower,
    np_dtype,
    op_types,
    reference,
    run_ort,
    wide_reference,
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


@pytest.mark.parametrize("elem", FLOATS, ids=TYPE_NAMES.get)
def test_every_float_type_exclusive_and_reverse(elem: int) -> None:
    check_every_type(elem, "logsum", [((3, 40, 2), 1), (("B", 40), 0)])


@pytest.mark.parametrize("elem", INTS, ids=TYPE_NAMES.get)
def test_integers_are_refused(elem: int) -> None:
    with pytest.raises(rewriter.StrategyError, match="'logsum' is inexact for"):
        lower(cumprod_model(elem, (2, 5), 1), "logsum")


def test_float64_on_a_target_without_float64_is_refused() -> None:
    with pytest.raises(rewriter.StrategyError, match="float32 cannot hold float64 inputs"):
        lower(cumprod_model(TensorProto.DOUBLE, (2, 5), 1), "logsum", target="portable")


def test_exclusive_where_the_exclusive_cumsum_is_wrong_is_refused() -> None:
    """IREE computes an exclusive CumSum as the inclusive sum minus x; inclusive is taken."""
    model = cumprod_model(TensorProto.FLOAT, (2, 5), 1, exclusive=1)
    with pytest.raises(rewriter.StrategyError, match="'logsum' takes an exclusive CumSum"):
        lower(model, "logsum", target="iree")
    lower(cumprod_model(TensorProto.FLOAT, (2, 5), 1), "logsum", target="iree")


def _run(elem_type: int, x: np.ndarray, strategy: str) -> np.ndarray:
    model = cumprod_model(elem_type, list(x.shape), -1)
    return run_ort(rewriter.decompose_cumprod(model, strategy=strategy), {"x": x})[0]


@pytest.mark.parametrize("elem_type", [TensorProto.FLOAT, TensorProto.DOUBLE], ids=TYPE_NAMES.get)
def test_transient_overflow_loop_saturates_logsum_does_not(elem_type: int) -> None:
    """A prefix product that overflows and comes back: the sequential lowering saturates
    to inf as numpy does; logsum gives the true (correctly rounded) product. Documented."""
    _, emin = PRECISION[str(np_dtype(elem_type))]
    big = 2.0 ** (-emin - 2)
    x = np.array([[big, big, 1 / big, 1 / big]]).astype(np_dtype(elem_type))
    loop = _run(elem_type, x, "loop")
    assert check(loop, reference(x, -1, 0, 0), x.dtype, 0.0) is None
    assert np.isinf(loop[0, 1:]).all()
    if elem_type == TensorProto.FLOAT:
        logsum = _run(elem_type, x, "logsum")
        bound = ulp_bound("logsum", x.dtype, 4)
        assert check(logsum, wide_reference(x, -1, 0, 0), x.dtype, bound) is None
        assert logsum[0, 3] == 1.0
