"""``rewriter.specialize``: a model-local function computing a CumProd gets one call signature
(attributes taken by reference, element types, shapes) per distinct call, at any depth of calls;
each rewrite compared with onnxruntime's native CumProd on the original."""

from __future__ import annotations

import numpy as np
import onnx

import rewriter
from tests.helpers import (
    calling,
    check_against_native,
    cumprod_function_text,
    native,
    op_types,
    parse_local,
    run_ort,
)

# F(x) = CumProd(x, 0) with exclusive / reverse taken from F's attributes ex / rev.
F_BY_REFERENCE = """F <ex, rev> (x) => (y) {
    axis = Constant<value_int = 0>()
    y = CumProd<exclusive: int = @ex, reverse: int = @rev>(x, axis)
}"""
A_CALLS_B = "A (x) => (y) { y = local.B(x) }"


def _two_types(callee: str, first: str, second: str, *functions: str) -> onnx.ModelProto:
    """p = callee(h), q = callee(u): h and p of type ``first``, u and q of type ``second``,
    all [3, 5]."""
    return parse_local(
        f"""main ({first}[3, 5] h, {second}[3, 5] u) => ({first}[3, 5] p, {second}[3, 5] q) {{
            p = local.{callee}(h)
            q = local.{callee}(u)
        }}""",
        *functions,
    )


def _float16_and_uint32(seed: int) -> dict[str, np.ndarray]:
    """Feeds h: float16 powers of two (every product exact) and u: uint32, both [3, 5]."""
    rng = np.random.default_rng(seed)
    return {
        "h": np.exp2(rng.integers(-1, 2, (3, 5))).astype(np.float16),
        "u": rng.integers(0, 2**32, (3, 5), dtype=np.uint64).astype(np.uint32),
    }


def test_function_attributes_by_reference() -> None:
    model = parse_local(
        """main (int64[4] x) => (int64[4] both, int64[4] plain, int64[4] rev, int64[4] rev0) {
            both = local.F<ex = 1, rev = 1>(x)
            plain = local.F(x)
            rev = local.F<rev = 1>(x)
            # the same attributes as the call above, another value: another specialisation
            rev0 = local.F<rev = 0>(x)
        }""",
        F_BY_REFERENCE,
    )
    x = np.array([2, 3, 5, 7], dtype=np.int64)
    check_against_native(model, {"x": x})
    both, plain, rev, rev0 = run_ort(rewriter.decompose_cumprod(model), {"x": x})  # type: ignore[arg-type]
    np.testing.assert_array_equal(both, [105, 35, 7, 1])  # the case, by hand
    np.testing.assert_array_equal(plain, [2, 6, 30, 210])
    np.testing.assert_array_equal(rev, [210, 105, 35, 7])
    np.testing.assert_array_equal(rev0, [2, 6, 30, 210])


def test_function_called_with_different_shapes_directly_and_through_another() -> None:
    # B called directly with float[4, 1000] and through A with float[1000, 4].
    model = parse_local(
        """main (float[4, 1000] wide, float[1000, 4] tall) => (float[4, 1000] p, float[1000, 4] q) {
            p = local.B(wide)
            q = local.A(tall)
        }""",
        cumprod_function_text("B"),
        A_CALLS_B,
    )
    rng = np.random.default_rng(1)
    feeds = {  # powers of two: every product is exact in float32, whatever the order
        "wide": np.exp2(rng.integers(-1, 2, (4, 1000))).astype(np.float32),
        "tall": np.exp2(rng.integers(-1, 2, (1000, 4))).astype(np.float32),
    }
    check_against_native(model, feeds)


def test_function_called_with_different_element_types() -> None:
    model = _two_types("B", "float16", "uint32", cumprod_function_text("B"))
    rewritten = check_against_native(model, _float16_and_uint32(2))
    assert len(rewritten.functions) == 2  # one specialization per element type


def test_a_specialisation_does_not_replace_a_function_of_the_same_name() -> None:
    """B called with two element types is specialised as B__0 and B__1; the model's own
    B__0 (a Neg) must stay what its caller calls, not be overwritten."""
    model = parse_local(
        """main (float[3, 5] h, int32[3, 5] u) => (float[3, 5] p, int32[3, 5] q, float[3, 5] n) {
            p = local.B(h)
            q = local.B(u)
            n = local.B__0(h)
        }""",
        cumprod_function_text("B"),
        "B__0 (x) => (y) { y = Neg(x) }",
    )
    rng = np.random.default_rng(4)
    h = np.exp2(rng.integers(-1, 2, (3, 5))).astype(np.float32)
    u = rng.integers(-3, 4, (3, 5)).astype(np.int32)
    rewritten = check_against_native(model, {"h": h, "u": u})
    p, q, n = run_ort(rewritten, {"h": h, "u": u})
    np.testing.assert_array_equal(q, np.cumprod(u, 1, dtype=np.int32))
    np.testing.assert_array_equal(n, -h)
    np.testing.assert_array_equal(p, np.cumprod(h, 1))
    assert len(rewritten.functions) == 3


def test_nested_functions_with_cumprod_in_both() -> None:
    model = parse_local(
        "main (int32[3, 4] x) => (int32[3, 4] y) { y = local.A(x) }",
        """A (x) => (y) {
            axis = Constant<value_int = 0>()
            c = CumProd<reverse = 1>(x, axis)
            y = local.B(c)
        }""",
        cumprod_function_text("B"),
    )
    x = np.random.default_rng(3).integers(-(2**31), 2**31, (3, 4)).astype(np.int32)
    check_against_native(model, {"x": x})


def test_unused_function_with_cumprod_is_lowered_type_generically() -> None:
    model = parse_local(
        "main (float[3] x) => (float[3] y) { y = Relu(x) }",
        cumprod_function_text("Unused", axis=0),
    )
    rewritten = rewriter.decompose_cumprod(model)
    assert isinstance(rewritten, onnx.ModelProto)
    onnx.checker.check_model(rewritten, full_check=True)
    assert "CumProd" not in op_types(rewritten)
    # Call the lowered function now, with two types, and compare with the original's.
    for elem, data in (
        ("int64", np.array([3, -5, 7, 2**40], dtype=np.int64)),
        ("double", np.array([0.5, -0.0, 3.0, np.inf])),
    ):
        expected = native(calling(model, "Unused", f"{elem}[4]"), {"x": data})
        actual = run_ort(calling(rewritten, "Unused", f"{elem}[4]"), {"x": data})
        np.testing.assert_array_equal(actual[0], expected[0])


def test_a_function_called_from_specialised_callers_gets_their_types() -> None:
    """A is called with float16 and with uint32 (two specialisations); B, called from A, must
    be specialised per type too, from the types inside each A, and lowered for its type (a
    type-generic lowering, CastLike, would mean B's types were lost)."""
    model = _two_types("A", "float16", "uint32", A_CALLS_B, cumprod_function_text("B"))
    rewritten = check_against_native(model, _float16_and_uint32(5))
    assert sorted(f.name for f in rewritten.functions) == ["A__0", "A__1", "B__0", "B__1"]
    assert "CastLike" not in op_types(rewritten)
