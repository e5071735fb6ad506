"""``rewriter.specialize``: a model-local function computing a CumProd gets one call signature
(attributes taken by reference, element types, shapes) per distinct call, at any depth of calls;
each rewrite compared with onnxruntime's native CumProd on the original."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

import rewriter
from tests.helpers import (
    LOCAL,
    OPSET,
    check_against_native,
    cumprod_function,
    local_model,
    native,
    op_types,
    run_ort,
)


def _ref_attr(name: str, ref: str) -> onnx.AttributeProto:
    attr = onnx.AttributeProto()
    attr.name, attr.ref_attr_name, attr.type = name, ref, onnx.AttributeProto.INT
    return attr


def _function_by_reference() -> onnx.FunctionProto:
    """F(x) = CumProd(x, 0) with exclusive / reverse taken from F's attributes ex / rev."""
    node = helper.make_node("CumProd", ["x", "axis"], ["y"])
    node.attribute.extend([_ref_attr("exclusive", "ex"), _ref_attr("reverse", "rev")])
    axis = helper.make_node("Constant", [], ["axis"], value_int=0)
    return helper.make_function(
        LOCAL, "F", ["x"], ["y"], [axis, node], OPSET, attributes=["ex", "rev"]
    )


def test_function_attributes_by_reference() -> None:
    calls = [
        helper.make_node("F", ["x"], ["both"], domain=LOCAL, ex=1, rev=1),
        helper.make_node("F", ["x"], ["plain"], domain=LOCAL),
        helper.make_node("F", ["x"], ["rev"], domain=LOCAL, rev=1),
        # the same attributes as the call above, another value: another specialisation
        helper.make_node("F", ["x"], ["rev0"], domain=LOCAL, rev=0),
    ]
    model = local_model(
        calls,
        [helper.make_tensor_value_info("x", TensorProto.INT64, [4])],
        [
            helper.make_tensor_value_info(n, TensorProto.INT64, [4])
            for n in ("both", "plain", "rev", "rev0")
        ],
        [_function_by_reference()],
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
    a = helper.make_function(
        LOCAL,
        "A",
        ["x"],
        ["y"],
        [helper.make_node("B", ["x"], ["y"], domain=LOCAL)],
        [*OPSET, helper.make_opsetid(LOCAL, 1)],
    )
    model = local_model(
        [
            helper.make_node("B", ["wide"], ["p"], domain=LOCAL),
            helper.make_node("A", ["tall"], ["q"], domain=LOCAL),
        ],
        [
            helper.make_tensor_value_info("wide", TensorProto.FLOAT, [4, 1000]),
            helper.make_tensor_value_info("tall", TensorProto.FLOAT, [1000, 4]),
        ],
        [
            helper.make_tensor_value_info("p", TensorProto.FLOAT, [4, 1000]),
            helper.make_tensor_value_info("q", TensorProto.FLOAT, [1000, 4]),
        ],
        [cumprod_function("B"), a],
    )
    rng = np.random.default_rng(1)
    feeds = {  # powers of two: every product is exact in float32, whatever the order
        "wide": np.exp2(rng.integers(-1, 2, (4, 1000))).astype(np.float32),
        "tall": np.exp2(rng.integers(-1, 2, (1000, 4))).astype(np.float32),
    }
    check_against_native(model, feeds)


def test_function_called_with_different_element_types() -> None:
    model = local_model(
        [
            helper.make_node("B", ["h"], ["p"], domain=LOCAL),
            helper.make_node("B", ["u"], ["q"], domain=LOCAL),
        ],
        [
            helper.make_tensor_value_info("h", TensorProto.FLOAT16, [3, 5]),
            helper.make_tensor_value_info("u", TensorProto.UINT32, [3, 5]),
        ],
        [
            helper.make_tensor_value_info("p", TensorProto.FLOAT16, [3, 5]),
            helper.make_tensor_value_info("q", TensorProto.UINT32, [3, 5]),
        ],
        [cumprod_function("B")],
    )
    rng = np.random.default_rng(2)
    feeds = {
        "h": np.exp2(rng.integers(-1, 2, (3, 5))).astype(np.float16),
        "u": rng.integers(0, 2**32, (3, 5), dtype=np.uint64).astype(np.uint32),
    }
    rewritten = check_against_native(model, feeds)
    assert len(rewritten.functions) == 2  # one specialization per element type


def test_a_specialisation_does_not_replace_a_function_of_the_same_name() -> None:
    """B called with two element types is specialised as B__0 and B__1; the model's own
    B__0 (a Neg) must stay what its caller calls, not be overwritten."""
    own = helper.make_function(
        LOCAL, "B__0", ["x"], ["y"], [helper.make_node("Neg", ["x"], ["y"])], OPSET
    )
    model = local_model(
        [
            helper.make_node("B", ["h"], ["p"], domain=LOCAL),
            helper.make_node("B", ["u"], ["q"], domain=LOCAL),
            helper.make_node("B__0", ["h"], ["n"], domain=LOCAL),
        ],
        [
            helper.make_tensor_value_info("h", TensorProto.FLOAT, [3, 5]),
            helper.make_tensor_value_info("u", TensorProto.INT32, [3, 5]),
        ],
        [
            helper.make_tensor_value_info("p", TensorProto.FLOAT, [3, 5]),
            helper.make_tensor_value_info("q", TensorProto.INT32, [3, 5]),
            helper.make_tensor_value_info("n", TensorProto.FLOAT, [3, 5]),
        ],
        [cumprod_function("B"), own],
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
    outer_nodes = [
        helper.make_node("Constant", [], ["axis"], value_int=0),
        helper.make_node("CumProd", ["x", "axis"], ["c"], reverse=1),
        helper.make_node("B", ["c"], ["y"], domain=LOCAL),
    ]
    a = helper.make_function(
        LOCAL, "A", ["x"], ["y"], outer_nodes, [*OPSET, helper.make_opsetid(LOCAL, 1)]
    )
    model = local_model(
        [helper.make_node("A", ["x"], ["y"], domain=LOCAL)],
        [helper.make_tensor_value_info("x", TensorProto.INT32, [3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.INT32, [3, 4])],
        [a, cumprod_function("B")],
    )
    x = np.random.default_rng(3).integers(-(2**31), 2**31, (3, 4)).astype(np.int32)
    check_against_native(model, {"x": x})


def test_unused_function_with_cumprod_is_lowered_type_generically() -> None:
    model = local_model(
        [helper.make_node("Relu", ["x"], ["y"])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
        [cumprod_function("Unused", axis=0)],
    )
    rewritten = rewriter.decompose_cumprod(model)
    assert isinstance(rewritten, onnx.ModelProto)
    onnx.checker.check_model(rewritten, full_check=True)
    assert "CumProd" not in op_types(rewritten)
    # Call the lowered function now, with two types, and compare with the original's.
    for elem, data in (
        (TensorProto.INT64, np.array([3, -5, 7, 2**40], dtype=np.int64)),
        (TensorProto.DOUBLE, np.array([0.5, -0.0, 3.0, np.inf])),
    ):

        def with_call(m: onnx.ModelProto, elem: int = elem) -> onnx.ModelProto:
            c = onnx.ModelProto()
            c.CopyFrom(m)
            del c.graph.node[:]
            c.graph.node.append(helper.make_node("Unused", ["x"], ["y"], domain=LOCAL))
            c.graph.input[0].CopyFrom(helper.make_tensor_value_info("x", elem, [4]))
            c.graph.output[0].CopyFrom(helper.make_tensor_value_info("y", elem, [4]))
            return c

        expected = native(with_call(model), {"x": data})
        actual = run_ort(with_call(rewritten), {"x": data})
        np.testing.assert_array_equal(actual[0], expected[0])


def test_a_function_called_from_specialised_callers_gets_their_types() -> None:
    """A is called with float16 and with uint32 (two specialisations); B, called from A, must
    be specialised per type too, from the types inside each A, and lowered for its type (a
    type-generic lowering, CastLike, would mean B's types were lost)."""
    a = helper.make_function(
        LOCAL,
        "A",
        ["x"],
        ["y"],
        [helper.make_node("B", ["x"], ["y"], domain=LOCAL)],
        [*OPSET, helper.make_opsetid(LOCAL, 1)],
    )
    model = local_model(
        [
            helper.make_node("A", ["h"], ["p"], domain=LOCAL),
            helper.make_node("A", ["u"], ["q"], domain=LOCAL),
        ],
        [
            helper.make_tensor_value_info("h", TensorProto.FLOAT16, [3, 5]),
            helper.make_tensor_value_info("u", TensorProto.UINT32, [3, 5]),
        ],
        [
            helper.make_tensor_value_info("p", TensorProto.FLOAT16, [3, 5]),
            helper.make_tensor_value_info("q", TensorProto.UINT32, [3, 5]),
        ],
        [a, cumprod_function("B")],
    )
    rng = np.random.default_rng(5)
    feeds = {
        "h": np.exp2(rng.integers(-1, 2, (3, 5))).astype(np.float16),
        "u": rng.integers(0, 2**32, (3, 5), dtype=np.uint64).astype(np.uint32),
    }
    rewritten = check_against_native(model, feeds)
    assert sorted(f.name for f in rewritten.functions) == ["A__0", "A__1", "B__0", "B__1"]
    assert "CastLike" not in op_types(rewritten)
