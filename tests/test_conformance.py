"""The onnx package's own CumProd conformance cases, and the spec's 1-d examples."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest

import rewriter
from tests.bounds import check, ulp_bound
from tests.helpers import (
    conformance_cases,
    cumprod_model,
    lower_or_refused,
    np_dtype,
    op_types,
    ort_strategies,
    run_ort,
    strategies_for,
)


def test_the_onnx_package_ships_cumprod_cases() -> None:
    assert len(conformance_cases()) >= 9


def _graph(model: onnx.ModelProto, strategy: str) -> tuple[bytes, rewriter.decompose.Planned]:
    ir_model = ir.serde.deserialize_model(model)
    rewrite = rewriter.DecomposeCumProdPass(strategy)
    rewrite(ir_model)
    (plan,) = rewrite.plans
    return ir.serde.serialize_model(ir_model).graph.SerializeToString(), plan


def _alias_of(model: onnx.ModelProto, strategy: str) -> str | None:
    """The strategy whose graph ``strategy`` emits for the model, if another: auto's pick;
    scan for dynamic on a static length. The alias is asserted, not run again."""
    graph, plan = _graph(model, strategy)
    if strategy == "auto":
        other = plan.lowering.name
    elif strategy == "dynamic" and plan.site.spec.length is not None:
        other = "scan"
    else:
        return None
    assert graph == _graph(model, other)[0], (strategy, other)
    return other


@pytest.mark.parametrize("strategy", ort_strategies())
def test_onnx_conformance_cases(strategy: str) -> None:
    """Every case of the onnx package (built on first use, so not at import: one test per
    strategy runs them all)."""
    for case in conformance_cases():
        _conformance_case(case, strategy)


def _conformance_case(case: object, strategy: str) -> None:
    model: onnx.ModelProto = case.model  # type: ignore[attr-defined]
    if strategy in ("auto", "dynamic") and _alias_of(model, strategy):
        return  # the same graph as another strategy's cell (asserted)
    elem = model.graph.input[0].type.tensor_type.elem_type
    dtype = np_dtype(elem)
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
        # The contract's bound for the longest product in the case (the expected outputs
        # are small exact values: only logsum's float64 Log / Exp may round).
        k = np.full(actual.shape, max(actual.shape))
        bound = ulp_bound(plan.lowering.name, dtype, k) if dtype == np.float64 else 0.0
        problem = check(actual, np.asarray(outputs[0]), dtype, bound)
        assert problem is None, f"{case.name}: {problem}"  # type: ignore[attr-defined]


SPEC = [  # the spec text's examples on [1, 2, 3]
    (0, 0, [1, 2, 6]),
    (1, 0, [1, 1, 2]),
    (0, 1, [6, 6, 3]),
    (1, 1, [6, 3, 1]),
]
# logsum refuses integers (test_bad_input); auto and dynamic are aliases here.
SPEC_RUNS = [
    (elem, strategy)
    for elem in (onnx.TensorProto.FLOAT, onnx.TensorProto.INT64)
    for strategy in rewriter.STRATEGIES
    if strategy in strategies_for(elem) and strategy not in ("auto", "dynamic")
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
