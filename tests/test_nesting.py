"""CumProd inside If branches, Loop bodies (with outer-scope values), model-local functions,
with a run-time axis and symbolic dims."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto

import rewriter
from tests.bounds import check, factor_counts, ulp_bound
from tests.helpers import (
    EXACT_STRATEGIES,
    lower_or_refused,
    op_types,
    ort_strategies,
    reference,
    run_ort,
    scan_body_model,
    wide_reference,
)

STRATEGIES = ort_strategies()


def _within(strategy: str, y: np.ndarray, x: np.ndarray, axis: int, *, ex: int, rev: int) -> None:
    """y is CumProd(x) within the contract (tests/bounds.py); auto: an exact kernel."""
    lowering = "scan" if strategy in ("auto", "dynamic") else strategy
    bound = ulp_bound(lowering, x.dtype, factor_counts(x.shape, axis, bool(ex), bool(rev)))
    problem = check(y, wide_reference(x, axis, ex, rev), x.dtype, bound)
    assert problem is None, problem


def _rewrite(text: str, strategy: str) -> tuple[onnx.ModelProto, onnx.ModelProto | None]:
    """(the model, its lowering), or (the model, None) when the strategy refuses it for a
    reason it documents (chain: a length that is not static; asserted by lower_or_refused)."""
    model = onnx.parser.parse_model(text)
    onnx.checker.check_model(model)
    rewritten = lower_or_refused(model, strategy)
    if rewritten is None:
        return model, None
    onnx.checker.check_model(rewritten, full_check=True)
    assert "CumProd" not in op_types(rewritten)
    return model, rewritten


IF_MODEL = """
<ir_version: 11, opset_import: ["" : 26]>
main (float[2, 5] x, bool cond) => (float[2, 5] y) {
    y = If (cond) <
        then_branch = then_g () => (float[2, 5] t) {
            ax = Constant <value = int64 {1}> ()
            t = CumProd <exclusive = 1> (x, ax)
        },
        else_branch = else_g () => (float[2, 5] e) {
            ax0 = Constant <value = int64 {0}> ()
            e = CumProd <reverse = 1> (x, ax0)
        }
    >
}
"""


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_if_branches(strategy: str) -> None:
    _, rewritten = _rewrite(IF_MODEL, strategy)
    if rewritten is None:
        return
    x = np.random.default_rng(0).uniform(0.5, 2, (2, 5)).astype(np.float32)
    for cond, axis, ex, rev in ((True, 1, 1, 0), (False, 0, 0, 1)):
        (y,) = run_ort(rewritten, {"x": x, "cond": np.array(cond)})
        _within(strategy, y, x, axis, ex=ex, rev=rev)


LOOP_MODEL = """
<ir_version: 11, opset_import: ["" : 26]>
main (int64[3, 4] x, int64 trips) => (int64[3, 4] y) {
    start = Identity (x)
    go = Constant <value = bool {1}> ()
    y = Loop (trips, go, start) <
        body = body_g (int64 i, bool c_in, int64[3, 4] acc) => (bool c_out, int64[3, 4] next) {
            c_out = Identity (c_in)
            ax = Constant <value = int32 {-1}> ()
            scanned = CumProd (x, ax)
            next = Add (acc, scanned)
        }
    >
}
"""


@pytest.mark.parametrize("strategy", EXACT_STRATEGIES)
def test_loop_body_using_an_outer_scope_value(strategy: str) -> None:
    _, rewritten = _rewrite(LOOP_MODEL, strategy)
    if rewritten is None:
        return
    x = np.random.default_rng(1).integers(-50, 50, (3, 4)).astype(np.int64)
    (y,) = run_ort(rewritten, {"x": x, "trips": np.array(3, np.int64)})
    np.testing.assert_array_equal(y, x + 3 * reference(x, -1, 0, 0))


FUNCTION_MODEL = """
<ir_version: 11, opset_import: ["" : 26, "local" : 1]>
main (float[2, 3] a, float[4, 2] b, int64[5] n) => (float[2, 3] ya, float[4, 2] yb, int64[5] yn) {
    ya = local.RunningProduct (a)
    yb = local.RunningProduct (b)
    yn = local.ScaledProduct (n)
}
<domain: "local", opset_import: ["" : 26]>
RunningProduct (v) => (w) {
    ax = Constant <value = int64 {0}> ()
    w = CumProd <exclusive = 1, reverse = 1> (v, ax)
}
<domain: "local", opset_import: ["" : 26]>
ScaledProduct (v) => (w) {
    two = Constant <value = int64 {2}> ()
    doubled = Mul (v, two)
    ax = Constant <value = int64 {0}> ()
    w = CumProd (doubled, ax)
}
"""


@pytest.mark.parametrize("strategy", EXACT_STRATEGIES)
def test_model_local_functions_called_twice(strategy: str) -> None:
    _, rewritten = _rewrite(FUNCTION_MODEL, strategy)
    if rewritten is None:
        return
    assert {f.name for f in rewritten.functions} == {"RunningProduct", "ScaledProduct"}
    rng = np.random.default_rng(2)
    a = rng.uniform(-2, 2, (2, 3)).astype(np.float32)
    b = rng.uniform(-2, 2, (4, 2)).astype(np.float32)
    n = rng.integers(-9, 9, 5).astype(np.int64)
    ya, yb, yn = run_ort(rewritten, {"a": a, "b": b, "n": n})
    _within(strategy, ya, a, 0, ex=1, rev=1)
    _within(strategy, yb, b, 0, ex=1, rev=1)
    np.testing.assert_array_equal(yn, reference(2 * n, 0, 0, 0))


NESTED_MODEL = """
<ir_version: 11, opset_import: ["" : 26, "local" : 1]>
main (double[N, 6] x, bool cond, int64 ax) => (double[N, 6] y) {
    y = local.Maybe (x, cond, ax)
}
<domain: "local", opset_import: ["" : 26]>
Maybe (v, c, a) => (w) {
    w = If (c) <
        then_branch = t_g () => (double[N, 6] t) {
            trips = Constant <value = int64 {2}> ()
            go = Constant <value = bool {1}> ()
            t = Loop (trips, go, v) <
                body = b_g (int64 i, bool ci, double[N, 6] acc) => (bool co, double[N, 6] nxt) {
                    co = Identity (ci)
                    nxt = CumProd (acc, a)
                }
            >
        },
        else_branch = e_g () => (double[N, 6] e) { e = Identity (v) }
    >
}
"""


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("axis", [0, 1, -1, -2])
def test_function_if_loop_runtime_axis_symbolic_dims(strategy: str, axis: int) -> None:
    """CumProd three levels deep (function > If > Loop), axis a run-time input, dim N symbolic."""
    _, rewritten = _rewrite(NESTED_MODEL, strategy)
    if rewritten is None:
        return
    x = np.random.default_rng(3).uniform(0.5, 1.5, (3, 6))
    (y,) = run_ort(rewritten, {"x": x, "cond": np.array(True), "ax": np.array(axis)})
    wide = x.astype(np.longdouble)
    expected = np.cumprod(np.cumprod(wide, axis=axis), axis=axis)
    # CumProd of CumProd: output j multiplies j inner results, inner result i carries at most
    # i - 1 roundings (k - 1 ulps each, relative 2^-53 per ulp or less); with the outer j - 1:
    # sum(i - 1 for i <= j) + j - 1 = (j - 1)(j + 2) / 2 roundings, 20 for j = 6. logsum:
    # its own bound on each of the two scans (1490 k + 2), summed the same way.
    j = factor_counts(x.shape, axis, False, False).astype(np.float64)
    bound = (1490.0 * j + 2) * j * 2 if strategy == "logsum" else (j - 1) * (j + 2) / 2
    problem = check(y, expected, x.dtype, bound)
    assert problem is None, problem
    (y,) = run_ort(rewritten, {"x": x, "cond": np.array(False), "ax": np.array(axis)})
    np.testing.assert_array_equal(y, x)


@pytest.mark.parametrize("opset", [13, 14, None])
def test_a_scan_body_output_keeps_a_shape(opset: int | None) -> None:
    """Found by a review from outside: below opset 14 a CumProd over symbolic dims is lowered
    inside an If (empty x or not), whose output has no shape; as a Scan body's output that
    made onnxruntime fail ("Subgraph must have the shape set for all outputs but yi did
    not"). The lowered output declares x's shape."""
    model = scan_body_model(TensorProto.FLOAT, ("a", "b", "c"), 0, exclusive=1)
    lowered = rewriter.decompose_cumprod(model, target_opset=opset)
    x = np.arange(1, 13, dtype=np.float32).reshape(2, 3, 2)
    (y,) = run_ort(lowered, {"x": x})
    np.testing.assert_array_equal(y, reference(x, 1, 1, 0))
