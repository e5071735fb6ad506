"""The onnx package's own CumProd conformance cases, and the spec's 1-d examples."""

from __future__ import annotations

import warnings

import numpy as np
import onnx
import onnx_ir as ir
import pytest

import rewriter
from rewriter.verify import compare
from tests.helpers import cumprod_model, lower_or_refused, op_types, run_ort, strategies_for

with warnings.catch_warnings():  # other ops' case generators divide by zero on purpose
    warnings.simplefilter("ignore")
    from onnx.backend.test.case.node import collect_testcases

    CASES = [case for case in collect_testcases("CumProd") if case.model is not None]


def test_the_onnx_package_ships_cumprod_cases() -> None:
    assert len(CASES) >= 9


@pytest.mark.parametrize("strategy", rewriter.STRATEGIES)
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_onnx_conformance_case(case: object, strategy: str) -> None:
    model: onnx.ModelProto = case.model  # type: ignore[attr-defined]
    elem = model.graph.input[0].type.tensor_type.elem_type
    dtype = ir.DataType(elem)
    if lower_or_refused(model, strategy) is None:
        return  # a documented refusal, asserted: logsum on ints, chain without static shapes
    ir_model = ir.serde.deserialize_model(model)
    rewrite = rewriter.DecomposeCumProdPass(strategy)
    rewrite(ir_model)
    rewritten = ir.serde.serialize_model(ir_model)
    onnx.checker.check_model(rewritten, full_check=True)
    assert "CumProd" not in op_types(rewritten)
    (plan,) = rewrite.plans
    for inputs, outputs in case.data_sets:  # type: ignore[attr-defined]
        feeds = {i.name: value for i, value in zip(model.graph.input, inputs)}
        (actual,) = run_ort(rewritten, feeds)
        # The lowering's stated bound, for the longest product in the case.
        k = np.full(actual.shape, max(actual.shape))
        bound = plan.lowering.max_ulps(dtype, k) if dtype == ir.DataType.DOUBLE else 0.0
        result = compare(actual, np.asarray(outputs[0]), dtype, bound)
        assert result.ok, result.detail


SPEC = [  # the spec text's examples on [1, 2, 3]
    (0, 0, [1, 2, 6]),
    (1, 0, [1, 1, 2]),
    (0, 1, [6, 6, 3]),
    (1, 1, [6, 3, 1]),
]
SPEC_RUNS = [
    (elem, strategy)
    for elem in (onnx.TensorProto.FLOAT, onnx.TensorProto.INT64)
    for strategy in rewriter.STRATEGIES
    if strategy in strategies_for(elem)  # logsum / logsum32 refuse integers: test_bad_input
]


@pytest.mark.parametrize("elem_type,strategy", SPEC_RUNS)
@pytest.mark.parametrize("exclusive,reverse,expected", SPEC)
def test_spec_examples(
    exclusive: int, reverse: int, expected: list[int], strategy: str, elem_type: int
) -> None:
    model = cumprod_model(elem_type, [3], 0, exclusive=exclusive, reverse=reverse)
    rewritten = rewriter.decompose_cumprod(model, strategy=strategy)
    x = np.array([1, 2, 3], dtype=np.float32 if elem_type == onnx.TensorProto.FLOAT else np.int64)
    (actual,) = run_ort(rewritten, {"x": x})
    np.testing.assert_array_equal(actual, np.array(expected, dtype=x.dtype))
