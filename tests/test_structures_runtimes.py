"""Issue 56's runtime items on the real runtimes (slow tier, like tests/test_runtimes.py):
a rewrite whose output the runtime computes wrong in a structure around it.

- tinygrad 0.14 (clang): an int32 ``chain`` (exclusive + reverse, n = 4) followed by the
  model's own ``Cast(int64)`` gave the unwrapped products in the int64 output (C's signed
  overflow is undefined: the products are computed as uint32 there now)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest

import rewriter
from tests import runtime_harness

pytestmark = pytest.mark.slow

CAST_AFTER = """
<ir_version: 10, opset_import: ["" : 26]>
g ({t}[1,4] x) => ({t}[1,4] y, int64[1,4] y64) {{
  ax = Constant<value = int64 ax {{1}}>()
  y = CumProd<exclusive={ex}, reverse={rev}>(x, ax)
  y64 = Cast<to=7>(y)
}}
"""
ATTRS = [(1, 1), (1, 0), (0, 1), (0, 0)]


def numpy_cumprod(x: np.ndarray, exclusive: int, reverse: int) -> np.ndarray:
    """CumProd along axis 1 in x's own type (numpy wraps integers)."""
    x = x[:, ::-1] if reverse else x
    y = np.cumprod(x, axis=1, dtype=x.dtype)
    if exclusive:
        y = np.concatenate([np.ones_like(y[:, :1]), y[:, :-1]], axis=1)
    return y[:, ::-1] if reverse else y


@pytest.mark.parametrize("strategy", ["auto", "chain", "radix", "doubling"])
def test_tinygrad_wraps_int32_products_before_the_models_cast(
    strategy: str, tmp_path: Path
) -> None:
    x = np.array([[1, 3, 100000, 100000]], np.int32)
    cases = {}
    for ex, rev in ATTRS:
        model = onnx.parser.parse_model(CAST_AFTER.format(t="int32", ex=ex, rev=rev))
        lowered = rewriter.decompose_cumprod(model, target="tinygrad", strategy=strategy)
        cases[f"ex{ex}_rev{rev}"] = (lowered, {"x": x})
    results = runtime_harness.run_cases("tinygrad", cases, tmp_path)
    for ex, rev in ATTRS:
        got = results[f"ex{ex}_rev{rev}"]
        assert not isinstance(got, str), got
        y = numpy_cumprod(x, ex, rev)
        np.testing.assert_array_equal(got[0], y, err_msg=f"int32 ex{ex} rev{rev}")
        np.testing.assert_array_equal(got[1], y.astype(np.int64), err_msg=f"int64 ex{ex} rev{rev}")


def test_tinygrad_wraps_int64_products(tmp_path: Path) -> None:
    """int64 products past 2^63 wrap as numpy's (computed as uint64 there)."""
    x = np.array([[3, 5_000_000_000, 7_000_000_000, 11]], np.int64)
    cases = {}
    for ex, rev in ATTRS:
        model = onnx.parser.parse_model(CAST_AFTER.format(t="int64", ex=ex, rev=rev))
        cases[f"ex{ex}_rev{rev}"] = (rewriter.decompose_cumprod(model, target="tinygrad"), {"x": x})
    results = runtime_harness.run_cases("tinygrad", cases, tmp_path)
    for ex, rev in ATTRS:
        got = results[f"ex{ex}_rev{rev}"]
        assert not isinstance(got, str), got
        np.testing.assert_array_equal(got[0], numpy_cumprod(x, ex, rev), err_msg=f"ex{ex} rev{rev}")


@pytest.mark.xfail(
    strict=True,
    reason="OpenVINO 2026.4 returns the final carried value of a Loop growing through a Concat "
    "as (1, 5) instead of (1, 6) on the rewrite (every strategy; the same model with Identity "
    "for CumProd is right there): warned per Loop (Target.loop_with_cumprods, "
    "test_structures.py::test_a_loop_holding_two_cumprods_is_warned_on_openvino)",
)
def test_openvino_growing_loop_concat(tmp_path: Path) -> None:
    """The generator's smallest failing model (seed 56): a Loop (trip 2) whose carried value
    grows by one column each iteration, a CumProd of it (axis from Shape arithmetic) and of
    an outer value in the body. Reference: the original on onnxruntime's native CumProd.
    It takes two lowered CumProds in the body: one of the growing value (or of a CumProd of
    it) and one of an outer-scope value returned as a scan output; with either alone (the
    others Identity) OpenVINO is right."""
    from onnx import TensorProto

    from tests.test_structure_fuzz import Level, Spec, _Builder, _feeds, _session

    spec = Spec(
        elem_type=TensorProto.FLOAT,
        shape=(1, 4),
        dims=("symbolic", "unknown"),
        rank_declared=True,
        levels=(Level("grow", -1, 0, 1, "constant"), Level("plain", -1, 0, 1, "shape")),
        other_type=TensorProto.FLOAT,
        seed=3819971897,
        specials=False,
    )
    builder = _Builder(spec, reference=False)
    model, data = builder.build()
    feeds = _feeds(spec, data, builder.axis_inputs)
    native = _session(model).run(None, feeds)
    rewritten = rewriter.decompose_cumprod(model, target="openvino")
    got = runtime_harness.run_cases("openvino", {"grow": (rewritten, feeds)}, tmp_path)["grow"]
    assert not isinstance(got, str), got
    for n, g in zip(native, got):
        assert g.shape == n.shape
        np.testing.assert_allclose(g, n, rtol=1e-5)
