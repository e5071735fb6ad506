"""Valid models from the wild that the grids never build (issue 9): each case is written from
the failing model, and the rewrite is compared with onnxruntime's native CumProd (>= 1.25)
running the original model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import onnxscript.rewriter
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import rewriter
import rewriter.io
from rewriter.decompose import plan_cumprods
from rewriter.rules import cumprod_rules
from rewriter.specialize import SpecializeFunctionsPass
from rewriter.targets import target_named
from tests.helpers import all_nodes, functions_model, op_types, refuses_broadly, run_ort

OPSET = [helper.make_opsetid("", 26)]
LOCAL = "local"


def _native(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """The original model on onnxruntime's own CumProd kernel."""
    assert ort.__version__ >= "1.25", "the main environment must have a native CumProd"
    return run_ort(model, feeds)


VIA = ["pass", "rules"]  # decompose_cumprod, or the onnxscript rule set


def _rewrite(model: onnx.ModelProto, via: str = "pass", **options: object) -> onnx.ModelProto:
    if via == "rules":
        rules = cumprod_rules(**options)  # type: ignore[arg-type]
        return onnxscript.rewriter.rewrite(model, pattern_rewrite_rules=rules)
    rewritten = rewriter.decompose_cumprod(model, **options)  # type: ignore[arg-type]
    assert isinstance(rewritten, onnx.ModelProto)
    return rewritten


def _check_against_native(
    model: onnx.ModelProto, feeds: dict[str, np.ndarray], via: str = "pass", **options: object
) -> onnx.ModelProto:
    onnx.checker.check_model(model, full_check=True)
    rewritten = _rewrite(model, via, **options)
    onnx.checker.check_model(rewritten, full_check=True)
    assert "CumProd" not in op_types(rewritten)
    expected = _native(model, feeds)
    actual = run_ort(rewritten, feeds)
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        assert a.dtype == e.dtype and a.shape == e.shape
        np.testing.assert_array_equal(a, e)  # integers / exact float products
    return rewritten


def _ref_attr(name: str, ref: str) -> onnx.AttributeProto:
    attr = onnx.AttributeProto()
    attr.name, attr.ref_attr_name, attr.type = name, ref, onnx.AttributeProto.INT
    return attr


def _model(nodes, inputs, outputs, functions=(), initializers=()) -> onnx.ModelProto:  # type: ignore[no-untyped-def]
    graph = helper.make_graph(nodes, "main", inputs, outputs, list(initializers))
    return helper.make_model(
        graph,
        opset_imports=[*OPSET, helper.make_opsetid(LOCAL, 1)],
        functions=list(functions),
        ir_version=10,
    )


def _loop_model(
    body_nodes: list[onnx.NodeProto],
    elem: int,
    declared: list | None,
    x_shape: list,
    y_shape: list | None,
    *,
    declared_out: list | None = None,
) -> onnx.ModelProto:
    """y = Loop(n, x): the body maps its carried value ``acc`` (declared ``declared``) to
    ``out`` (declared ``declared_out``, default the same) with ``body_nodes``."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["c"], ["co"]), *body_nodes],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("c", TensorProto.BOOL, []),
            helper.make_tensor_value_info("acc", elem, declared),
        ],
        [
            helper.make_tensor_value_info("co", TensorProto.BOOL, []),
            helper.make_tensor_value_info(
                "out", elem, declared if declared_out is None else declared_out
            ),
        ],
    )
    return _model(
        [helper.make_node("Loop", ["n", "", "x"], ["y"], body=body)],
        [
            helper.make_tensor_value_info("n", TensorProto.INT64, []),
            helper.make_tensor_value_info("x", elem, x_shape),
        ],
        [helper.make_tensor_value_info("y", elem, y_shape)],
    )


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
    model = _model(
        calls,
        [helper.make_tensor_value_info("x", TensorProto.INT64, [4])],
        [
            helper.make_tensor_value_info(n, TensorProto.INT64, [4])
            for n in ("both", "plain", "rev", "rev0")
        ],
        [_function_by_reference()],
    )
    x = np.array([2, 3, 5, 7], dtype=np.int64)
    _check_against_native(model, {"x": x})
    both, plain, rev, rev0 = run_ort(rewriter.decompose_cumprod(model), {"x": x})  # type: ignore[arg-type]
    np.testing.assert_array_equal(both, [105, 35, 7, 1])  # the case, by hand
    np.testing.assert_array_equal(plain, [2, 6, 30, 210])
    np.testing.assert_array_equal(rev, [210, 105, 35, 7])
    np.testing.assert_array_equal(rev0, [2, 6, 30, 210])


def _cumprod_function(name: str, axis: int = 1) -> onnx.FunctionProto:
    nodes = [
        helper.make_node("Constant", [], ["axis"], value_int=axis),
        helper.make_node("CumProd", ["x", "axis"], ["y"]),
    ]
    return helper.make_function(LOCAL, name, ["x"], ["y"], nodes, OPSET)


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
    model = _model(
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
        [_cumprod_function("B"), a],
    )
    rng = np.random.default_rng(1)
    feeds = {  # powers of two: every product is exact in float32, whatever the order
        "wide": np.exp2(rng.integers(-1, 2, (4, 1000))).astype(np.float32),
        "tall": np.exp2(rng.integers(-1, 2, (1000, 4))).astype(np.float32),
    }
    _check_against_native(model, feeds)


def test_function_called_with_different_element_types() -> None:
    model = _model(
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
        [_cumprod_function("B")],
    )
    rng = np.random.default_rng(2)
    feeds = {
        "h": np.exp2(rng.integers(-1, 2, (3, 5))).astype(np.float16),
        "u": rng.integers(0, 2**32, (3, 5), dtype=np.uint64).astype(np.uint32),
    }
    rewritten = _check_against_native(model, feeds)
    assert len(rewritten.functions) == 2  # one specialization per element type


def test_a_specialisation_does_not_replace_a_function_of_the_same_name() -> None:
    """B called with two element types is specialised as B__0 and B__1; the model's own
    B__0 (a Neg) must stay what its caller calls, not be overwritten."""
    own = helper.make_function(
        LOCAL, "B__0", ["x"], ["y"], [helper.make_node("Neg", ["x"], ["y"])], OPSET
    )
    model = _model(
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
        [_cumprod_function("B"), own],
    )
    rng = np.random.default_rng(4)
    h = np.exp2(rng.integers(-1, 2, (3, 5))).astype(np.float32)
    u = rng.integers(-3, 4, (3, 5)).astype(np.int32)
    rewritten = _check_against_native(model, {"h": h, "u": u})
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
    model = _model(
        [helper.make_node("A", ["x"], ["y"], domain=LOCAL)],
        [helper.make_tensor_value_info("x", TensorProto.INT32, [3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.INT32, [3, 4])],
        [a, _cumprod_function("B")],
    )
    x = np.random.default_rng(3).integers(-(2**31), 2**31, (3, 4)).astype(np.int32)
    _check_against_native(model, {"x": x})


def test_unused_function_with_cumprod_is_lowered_type_generically() -> None:
    model = _model(
        [helper.make_node("Relu", ["x"], ["y"])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
        [_cumprod_function("Unused", axis=0)],
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

        expected = _native(with_call(model), {"x": data})
        actual = run_ort(with_call(rewritten), {"x": data})
        np.testing.assert_array_equal(actual[0], expected[0])


def test_a_function_input_declared_in_its_value_info_keeps_its_type(
    caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    """Found by a mutation review: no call site gives F's input a type, but F declares it
    float16 (IR >= 10 functions may). That type must choose the lowering: float16 multiplied
    in float32 and rounded once, as the native kernel does, not the type-generic lowering
    (float16 products rounded at every step, and a warning). The CumProd reads a Neg of the
    input, so the declared type must also flow through the body."""
    nodes = [
        helper.make_node("Constant", [], ["axis"], value_int=0),
        helper.make_node("Neg", ["x"], ["t"]),
        helper.make_node("CumProd", ["t", "axis"], ["y"]),
    ]
    f = helper.make_function(LOCAL, "Typed", ["x"], ["y"], nodes, OPSET)
    f.value_info.extend([helper.make_tensor_value_info("x", TensorProto.FLOAT16, [64])])
    model = _model(
        [helper.make_node("Relu", ["x"], ["y"])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
        [f],
    )
    path = tmp_path / "typed.onnx"
    onnx.save(model, path)
    loaded = rewriter.io.load_model(path)  # the command line's way in
    assert loaded.functions[(LOCAL, "Typed", "")].inputs[0].dtype == ir.DataType.FLOAT16
    with caplog.at_level("WARNING", logger="rewriter"):
        rewritten = rewriter.decompose_cumprod(model)
    assert isinstance(rewritten, onnx.ModelProto)
    assert "element type is not known" not in caplog.text

    def with_call(m: onnx.ModelProto) -> onnx.ModelProto:
        c = onnx.ModelProto()
        c.CopyFrom(m)
        del c.graph.node[:]
        c.graph.node.append(helper.make_node("Typed", ["x"], ["y"], domain=LOCAL))
        c.graph.input[0].CopyFrom(helper.make_tensor_value_info("x", TensorProto.FLOAT16, [64]))
        c.graph.output[0].CopyFrom(helper.make_tensor_value_info("y", TensorProto.FLOAT16, [64]))
        return c

    data = np.random.default_rng(13).uniform(0.9, 1.1, 64).astype(np.float16)
    expected = _native(with_call(model), {"x": data})
    actual = run_ort(with_call(rewritten), {"x": data})
    np.testing.assert_array_equal(actual[0], expected[0])  # rounded once, like the kernel


def test_a_function_input_shape_declared_in_the_ir_is_not_built_on() -> None:
    """An ``ir.Model`` whose function input carries a type and a shape ([4]) that no call
    site confirms: the element type is taken, the shape is not (a function may be called
    with other shapes), so the lowered function is right when called with [6]."""
    nodes = [
        helper.make_node("Constant", [], ["axis"], value_int=0),
        helper.make_node("Neg", ["x"], ["t"]),
        helper.make_node("CumProd", ["t", "axis"], ["y"]),
    ]
    model = _model(
        [helper.make_node("Relu", ["x"], ["y"])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
        [helper.make_function(LOCAL, "Shaped", ["x"], ["y"], nodes, OPSET)],
    )
    ir_model = ir.serde.deserialize_model(model)
    x = ir_model.functions[(LOCAL, "Shaped", "")].inputs[0]
    x.type, x.shape = ir.TensorType(ir.DataType.FLOAT), ir.Shape([4])
    rewriter.decompose_cumprod(ir_model)
    rewritten = ir.serde.serialize_model(ir_model)
    assert "CumProd" not in op_types(rewritten)

    def with_call(m: onnx.ModelProto) -> onnx.ModelProto:
        c = onnx.ModelProto()
        c.CopyFrom(m)
        del c.functions[0].value_info[:]  # the call below is [6]
        del c.graph.node[:]
        c.graph.node.append(helper.make_node("Shaped", ["x"], ["y"], domain=LOCAL))
        c.graph.input[0].CopyFrom(helper.make_tensor_value_info("x", TensorProto.FLOAT, [6]))
        c.graph.output[0].CopyFrom(helper.make_tensor_value_info("y", TensorProto.FLOAT, [6]))
        return c

    data = np.array([2, -3, 0.5, 4, -1, 3], np.float32)
    expected = _native(with_call(model), {"x": data})
    np.testing.assert_array_equal(run_ort(with_call(rewritten), {"x": data})[0], expected[0])


@pytest.mark.parametrize("via", VIA)
def test_stale_value_info_is_not_trusted(via: str) -> None:
    nodes = [
        helper.make_node("Neg", ["x"], ["h"]),
        helper.make_node("Constant", [], ["axis"], value_int=1),
        helper.make_node("CumProd", ["h", "axis"], ["y"]),
    ]
    model = _model(
        nodes,
        [helper.make_tensor_value_info("x", TensorProto.INT64, [2, 5])],
        [helper.make_tensor_value_info("y", TensorProto.INT64, [2, 5])],
    )
    model.graph.value_info.append(helper.make_tensor_value_info("h", TensorProto.INT64, [10, 1, 1]))
    x = np.arange(1, 11, dtype=np.int64).reshape(2, 5)
    # The checker takes the stale value_info (full_check would refuse it): check without.
    onnx.checker.check_model(model)
    rewritten = _rewrite(model, via)
    onnx.checker.check_model(rewritten, full_check=True)
    assert "CumProd" not in op_types(rewritten)
    (y,) = run_ort(rewritten, {"x": x})
    np.testing.assert_array_equal(y, np.cumprod(-x, axis=1))


@pytest.mark.parametrize("target", ["onnxruntime", "tract", "portable"])
@pytest.mark.parametrize("via", VIA)
def test_value_info_inference_cannot_confirm_is_not_kept(via: str, target: str) -> None:
    """Found by a review from outside: h declares [2, 6] (written for one batch size), x is
    [N, M] and the model is fed [6, 2]. Inference cannot confirm the declaration, which the
    rewrite kept: onnxruntime folded the lowering's Shape(h) from it ((2, 6), wrong values,
    on every target). A computed value's unconfirmed static dims are dropped now."""
    nodes = [
        helper.make_node("Neg", ["x"], ["h"]),
        helper.make_node("Constant", [], ["axis"], value_int=1),
        helper.make_node("CumProd", ["h", "axis"], ["y"]),
    ]
    model = _model(
        nodes,
        [helper.make_tensor_value_info("x", TensorProto.INT64, ["N", "M"])],
        [helper.make_tensor_value_info("y", TensorProto.INT64, ["N", "M"])],
    )
    model.graph.value_info.append(helper.make_tensor_value_info("h", TensorProto.INT64, [2, 6]))
    x = np.arange(1, 13, dtype=np.int64).reshape(6, 2)
    rewritten = _check_against_native(model, {"x": x}, via, target=target, max_length=16)
    (y,) = run_ort(rewritten, {"x": x})
    np.testing.assert_array_equal(y, np.cumprod(-x, axis=1))  # not only native's word for it


@pytest.mark.parametrize("declared", ["x", "x as an output", "upstream"])
def test_a_traced_shape_of_a_reshape_is_not_folded(declared: str) -> None:
    """Found by a review from outside: x = Reshape(a, s) with s a graph input, declared (3, 2)
    (traced once), fed s = (2, 3): onnxruntime folded the lowering's Shape(x) from the
    declaration (3 rows of 2, wrong values). The same with x also a graph output declared
    (3, 2) (kept: its rank, for the checker) and with the declaration upstream of x."""
    head = "t" if declared == "upstream" else "x"
    nodes = [helper.make_node("Reshape", ["a", "s"], [head])]
    if declared == "upstream":
        nodes.append(helper.make_node("Relu", ["t"], ["x"]))
    nodes += [
        helper.make_node("Constant", [], ["axis"], value_int=1),
        helper.make_node("CumProd", ["x", "axis"], ["y"]),
    ]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["p", "q"])]
    if declared == "x as an output":
        outputs.append(helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 2]))
    model = _model(
        nodes,
        [
            helper.make_tensor_value_info("a", TensorProto.FLOAT, [6]),
            helper.make_tensor_value_info("s", TensorProto.INT64, [2]),
        ],
        outputs,
    )
    if declared != "x as an output":
        model.graph.value_info.append(
            helper.make_tensor_value_info(head, TensorProto.FLOAT, [3, 2])
        )
    a = np.arange(1, 7, dtype=np.float32)
    feeds = {"a": a, "s": np.array([2, 3], dtype=np.int64)}
    rewritten = _check_against_native(model, feeds)
    np.testing.assert_array_equal(run_ort(rewritten, feeds)[0], np.cumprod(a.reshape(2, 3), 1))


@pytest.mark.parametrize("via", VIA)
def test_declared_shapes_off_the_way_to_a_cumprod_are_kept(via: str) -> None:
    """Found by a review from outside: the declared shapes inference cannot confirm were
    blanked in the whole model, also of values no CumProd is computed from (a contrib op's
    output, whose shape no later tool can infer again). Only those on the way to a CumProd
    are (onnxruntime may fold a lowering's Shape from them); the others stay as declared,
    in the main graph and in a function body."""
    body = helper.make_function(
        LOCAL,
        "Side",
        ["a"],
        ["b"],
        [helper.make_node("Relu", ["a"], ["inner"]), helper.make_node("Neg", ["inner"], ["b"])],
        OPSET,
    )
    body.value_info.append(helper.make_tensor_value_info("inner", TensorProto.FLOAT, [4, 5]))
    model = _model(
        [
            helper.make_node("Gelu", ["q"], ["g1"], domain="com.microsoft"),
            helper.make_node("Relu", ["g1"], ["z"]),
            helper.make_node("Relu", ["x"], ["r"]),
            helper.make_node("Neg", ["r"], ["w"]),
            helper.make_node("Side", ["x"], ["s"], domain=LOCAL),
            helper.make_node("Neg", ["x"], ["h"]),
            helper.make_node("CumProd", ["h", "axis"], ["y"]),
        ],
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 5]),
            helper.make_tensor_value_info("q", TensorProto.FLOAT, [4, 5]),
        ],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["N", 5]) for n in ("y", "w", "s")]
        + [helper.make_tensor_value_info("z", TensorProto.FLOAT, [4, 5])],
        functions=[body],
        initializers=[helper.make_tensor("axis", TensorProto.INT64, [], [1])],
    )
    model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    for name in ("g1", "r", "h"):  # r and h written for a batch of 4
        model.graph.value_info.append(
            helper.make_tensor_value_info(name, TensorProto.FLOAT, [4, 5])
        )
    rewritten = _rewrite(model, via)
    declared = {
        v.name: [
            d.dim_value if d.HasField("dim_value") else None for d in v.type.tensor_type.shape.dim
        ]
        for v in rewritten.graph.value_info
    }
    assert declared["g1"] == [4, 5] and declared["r"] == [4, 5], declared
    assert declared.get("h", [None, 5]) == [None, 5], declared  # on the way: not built on
    (function,) = rewritten.functions
    (inner,) = function.value_info
    assert [d.dim_value for d in inner.type.tensor_type.shape.dim] == [4, 5]
    x = np.arange(1, 16, dtype=np.float32).reshape(3, 5) / 4
    (y, *_) = run_ort(rewritten, {"x": x, "q": np.ones((4, 5), np.float32)})
    np.testing.assert_array_equal(y, np.cumprod(-x, axis=1))


def _declared_for_a_batch_of_4(kind: str) -> onnx.ModelProto:
    """x [N, 5]; c = Neg(x) declares [4, 5] (written for a batch of 4), and reaches a CumProd
    along axis 0 through ``kind``: a function's input, a Scan's state, an If branch's
    outer-scope read."""
    c_nodes = [helper.make_node("Neg", ["x"], ["c"])]
    axis0 = helper.make_tensor("axis", TensorProto.INT64, [], [0])
    functions = []
    if kind == "function input":
        functions = [
            helper.make_function(
                LOCAL,
                "Scanned",
                ["a"],
                ["b"],
                [
                    helper.make_node("Constant", [], ["ax"], value_int=0),
                    helper.make_node("CumProd", ["a", "ax"], ["b"]),
                ],
                OPSET,
            )
        ]
        nodes = [*c_nodes, helper.make_node("Scanned", ["c"], ["y"], domain=LOCAL)]
    elif kind == "scan state":
        body = helper.make_graph(
            [
                helper.make_node("Constant", [], ["ax"], value_int=0),
                helper.make_node("CumProd", ["s_in", "ax"], ["s_out"]),
                helper.make_node("Identity", ["e"], ["e_out"]),
            ],
            "body",
            [
                helper.make_tensor_value_info("s_in", TensorProto.FLOAT, None),
                helper.make_tensor_value_info("e", TensorProto.FLOAT, [1]),
            ],
            [
                helper.make_tensor_value_info("s_out", TensorProto.FLOAT, None),
                helper.make_tensor_value_info("e_out", TensorProto.FLOAT, [1]),
            ],
        )
        nodes = [
            *c_nodes,
            helper.make_node("Scan", ["c", "steps"], ["y", "unused"], body=body, num_scan_inputs=1),
        ]
    else:  # an If branch reading c from the outer scope
        branch = helper.make_graph(
            [helper.make_node("Relu", ["c"], ["t"])],
            "branch",
            [],
            [helper.make_tensor_value_info("t", TensorProto.FLOAT, None)],
        )
        nodes = [
            *c_nodes,
            helper.make_node("If", ["flag"], ["i"], then_branch=branch, else_branch=branch),
            helper.make_node("CumProd", ["i", "axis"], ["y"]),
        ]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 5])]
    if kind == "scan state":
        inputs.append(helper.make_tensor_value_info("steps", TensorProto.FLOAT, [2, 1]))
    if kind == "if branch":
        inputs.append(helper.make_tensor_value_info("flag", TensorProto.BOOL, []))
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 5])]
    if kind == "scan state":
        outputs.append(helper.make_tensor_value_info("unused", TensorProto.FLOAT, [2, 1]))
    model = _model(nodes, inputs, outputs, functions, [axis0] if kind == "if branch" else [])
    model.graph.value_info.append(helper.make_tensor_value_info("c", TensorProto.FLOAT, [4, 5]))
    return model


@pytest.mark.parametrize(
    ("kind", "target"),
    [
        ("function input", "onnxruntime"),
        ("function input", "tract"),  # the function inlined
        ("scan state", "onnxruntime"),  # (tract refuses a CumProd in a Scan body)
        ("if branch", "onnxruntime"),
        ("if branch", "tract"),
    ],
)
def test_a_declared_shape_reaching_a_cumprod_through_a_call_or_subgraph(
    kind: str, target: str
) -> None:
    """Found by a review of cumprod_cone: each way a declared shape reaches a CumProd other
    than node inputs (a function input back to its call, a subgraph input back to its node,
    a subgraph's outer-scope read) must count as on the way, or its unconfirmed [4, 5] is
    kept and onnxruntime folds the lowering's Shape from it (fed a batch of 3). Native
    onnxruntime refuses some of these originals for the declaration itself: numpy is the
    reference."""
    model = _declared_for_a_batch_of_4(kind)
    x = np.arange(1, 16, dtype=np.float32).reshape(3, 5) / 4
    feeds: dict[str, np.ndarray] = {"x": x}
    if kind == "scan state":
        feeds["steps"] = np.zeros((2, 1), np.float32)
    if kind == "if branch":
        feeds["flag"] = np.array(True)
    rewritten = _rewrite(model, target=target)
    assert "CumProd" not in op_types(rewritten)
    onnx.checker.check_model(rewritten, full_check=True)
    want = np.cumprod(-x, axis=0)
    if kind == "scan state":
        want = np.cumprod(want, axis=0)  # two steps
    if kind == "if branch":
        want = np.cumprod(np.maximum(-x, 0), axis=0)
    np.testing.assert_allclose(run_ort(rewritten, feeds)[0], want, rtol=1e-6)


def test_a_stale_shape_off_the_way_to_a_cumprod_is_still_dropped() -> None:
    """Found by the same review: a declaration contradicting inference ([3, 5] for a [2, 5]
    value), after the CumProd, must still be dropped (onnx's full check refuses the output
    otherwise), not only on the way to a CumProd."""
    model = _model(
        [
            helper.make_node("Relu", ["x"], ["r"]),
            helper.make_node("CumProd", ["r", "axis"], ["y"]),
            helper.make_node("Neg", ["y"], ["z"]),
        ],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 5])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 5])],
        initializers=[helper.make_tensor("axis", TensorProto.INT64, [], [1])],
    )
    model.graph.value_info.append(helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 5]))
    x = np.arange(1, 11, dtype=np.float32).reshape(2, 5) / 4
    rewritten = _rewrite(model)
    onnx.checker.check_model(rewritten, full_check=True)
    np.testing.assert_allclose(run_ort(rewritten, {"x": x})[0], -np.cumprod(x, 1), rtol=1e-6)


def test_an_unconfirmed_graph_output_read_by_another_node_keeps_its_rank() -> None:
    """Found by the same review, in the fix above before it kept ranks: a graph output r
    declared (2, 3) that inference cannot confirm and another node reads lost its shape, and
    the checker refused the rewrite ("Field 'shape' of 'type' is required")."""
    model = _model(
        [
            helper.make_node("Reshape", ["a", "s"], ["r"]),
            helper.make_node("Relu", ["r"], ["z"]),
            helper.make_node("CumProd", ["b", "axis"], ["y"]),
        ],
        [
            helper.make_tensor_value_info("a", TensorProto.FLOAT, [6]),
            helper.make_tensor_value_info("s", TensorProto.INT64, [2]),
            helper.make_tensor_value_info("b", TensorProto.FLOAT, [2, 3]),
        ],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 3]) for n in ("r", "z", "y")],
        initializers=[helper.make_tensor("axis", TensorProto.INT64, [], [1])],
    )
    feeds = {
        "a": np.arange(1, 7, dtype=np.float32),
        "s": np.array([2, 3], dtype=np.int64),
        "b": np.arange(1, 7, dtype=np.float32).reshape(2, 3),
    }
    rewritten = _check_against_native(model, feeds)
    r = next(o for o in rewritten.graph.output if o.name == "r")
    assert len(r.type.tensor_type.shape.dim) == 2


@pytest.mark.parametrize("via", VIA)
def test_unknown_rank_integer_in_a_loop_body(via: str) -> None:
    """A Loop-carried value declared without shape: rank unknown inside the body."""
    nodes = [
        helper.make_node("Constant", [], ["axis"], value_int=-1),
        helper.make_node("CumProd", ["acc", "axis"], ["out"], exclusive=1),
    ]
    model = _loop_model(nodes, TensorProto.INT64, None, ["A", "B"], ["A", "B"])
    x = np.array([[3, 5, 7], [2, -9, 4]], dtype=np.int64)
    _check_against_native(model, {"n": np.array(3, dtype=np.int64), "x": x}, via)


@pytest.mark.parametrize("strategy", ["auto", "loop", "scan", "dynamic", "logsum", "doubling"])
def test_run_time_axis_out_of_range_fails_like_native(strategy: str) -> None:
    model = _model(
        [helper.make_node("CumProd", ["x", "axis"], ["y"])],
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
            helper.make_tensor_value_info("axis", TensorProto.INT64, []),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
    )
    rewritten = rewriter.decompose_cumprod(model, strategy=strategy, max_length=8)
    x = np.ones((2, 3), dtype=np.float32)
    for bad in (5, 2, -3):
        with pytest.raises(Exception):  # noqa: B017 - onnxruntime's own error, like native
            _native(model, {"x": x, "axis": np.array(bad, dtype=np.int64)})
        with pytest.raises(Exception):  # noqa: B017
            run_ort(rewritten, {"x": x, "axis": np.array(bad, dtype=np.int64)})
    for good in (-2, -1, 0, 1):
        feeds = {"x": np.arange(1, 7, dtype=np.float32).reshape(2, 3), "axis": np.array(good)}
        np.testing.assert_array_equal(run_ort(rewritten, feeds)[0], _native(model, feeds)[0])


@pytest.mark.parametrize(("name", "value"), [("exclusive", 2), ("exclusive", -1), ("reverse", 7)])
def test_malformed_attributes_are_refused(name: str, value: int) -> None:
    model = _model(
        [
            helper.make_node("Constant", [], ["axis"], value_int=0),
            helper.make_node("CumProd", ["x", "axis"], ["y"], name="bad", **{name: value}),
        ],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
    )
    with pytest.raises(Exception):  # noqa: B017 - native refuses it too
        _native(model, {"x": np.ones(3, dtype=np.float32)})
    with pytest.raises(rewriter.InvalidCumProdError, match=rf"'bad'.*{name}.*0 or 1"):
        rewriter.decompose_cumprod(model)


def test_attribute_of_the_wrong_type_names_the_node() -> None:
    node = helper.make_node("CumProd", ["x", "axis"], ["y"], name="floaty", exclusive=1.0)
    model = _model(
        [helper.make_node("Constant", [], ["axis"], value_int=0), node],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
    )
    with pytest.raises(rewriter.InvalidCumProdError, match=r"'floaty'.*must be an int"):
        rewriter.decompose_cumprod(model)


@pytest.mark.parametrize("strategy", ["auto", "blocked", "radix", "scan", "loop", "dynamic"])
@pytest.mark.parametrize("opset", [11, 13, 14])
def test_empty_symbolic_dim_below_opset_14(strategy: str, opset: int) -> None:
    model = _model(
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
        np.testing.assert_array_equal(y, _native(model, {"x": x})[0])


def test_zeros_in_logsum_do_not_rely_on_exp_of_minus_infinity() -> None:
    """Zeros are masked explicitly (onnxruntime 1.20.1's vectorised Exp(-inf) is 5.6e-309)."""
    model = _model(
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


def _converter_in_subgraph() -> onnx.ModelProto:
    """A ReduceSum-13 (axes as input) inside an If branch: onnx's converter to 11 would have to
    turn its input into an attribute, and it only adapts the main graph."""
    then = helper.make_graph(
        [
            helper.make_node("Constant", [], ["axes"], value_ints=[0]),
            helper.make_node("ReduceSum", ["x", "axes"], ["t"], keepdims=1),
        ],
        "then",
        [],
        [helper.make_tensor_value_info("t", TensorProto.FLOAT, [1, 3])],
    )
    other = helper.make_graph(
        [helper.make_node("Slice", ["x", "zero", "one"], ["e"])],
        "else",
        [],
        [helper.make_tensor_value_info("e", TensorProto.FLOAT, [1, 3])],
    )
    return _model(
        [
            helper.make_node("Constant", [], ["axis"], value_int=0),
            helper.make_node("CumProd", ["x0", "axis"], ["x"]),
            helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other),
        ],
        [
            helper.make_tensor_value_info("x0", TensorProto.FLOAT, [2, 3]),
            helper.make_tensor_value_info("c", TensorProto.BOOL, []),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])],
        initializers=[
            helper.make_tensor("zero", TensorProto.INT64, [1], [0]),
            helper.make_tensor("one", TensorProto.INT64, [1], [1]),
        ],
    )


def test_target_opset_refuses_a_subgraph_node_the_converter_cannot_reach() -> None:
    model = ir.serde.deserialize_model(_converter_in_subgraph())
    before = ir.serde.serialize_model(model).SerializeToString()
    with pytest.raises(rewriter.OpsetError, match=r"ReduceSum.*If.*does not adapt subgraphs"):
        rewriter.decompose_cumprod(model, target_opset=11)
    # Nothing changed: not even the CumProd, which was lowered before the opset pass ran.
    assert ir.serde.serialize_model(model).SerializeToString() == before


def test_target_opset_failure_leaves_the_ir_model_as_it_was() -> None:
    model = ir.serde.deserialize_model(_converter_in_subgraph())
    before = ir.serde.serialize_model(model).SerializeToString()
    with pytest.raises(ValueError):
        rewriter.DecomposeCumProdPass(target_opset=11)(model)
    assert ir.serde.serialize_model(model).SerializeToString() == before
    assert any(n.op_type == "CumProd" for n in model.graph)


def test_target_opset_with_external_weights_from_another_folder(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # ReduceSum-13 with its axes as an initializer in the main graph needs the converter.
    weights = np.arange(1, 601, dtype=np.float32).reshape(200, 3)
    model = _model(
        [
            helper.make_node("Add", ["x", "w"], ["s"]),
            helper.make_node("ReduceSum", ["s", "axes"], ["r"], keepdims=1),
            helper.make_node("Constant", [], ["axis"], value_int=1),
            helper.make_node("CumProd", ["r", "axis"], ["y"]),
        ],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [200, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])],
        initializers=[
            onnx.numpy_helper.from_array(weights, "w"),
            helper.make_tensor("axes", TensorProto.INT64, [1], [0]),
        ],
    )
    folder = tmp_path / "models"
    folder.mkdir()
    onnx.save(
        model, folder / "m.onnx", save_as_external_data=True, location="w.bin", size_threshold=0
    )
    monkeypatch.chdir(tmp_path)  # not the model's folder
    ir_model = ir.load(folder / "m.onnx")
    rewriter.decompose_cumprod(ir_model, target_opset=11)
    out = tmp_path / "out" / "m.onnx"
    out.parent.mkdir()
    ir.save(ir_model, out, external_data="m.onnx.data")
    proto = onnx.load(out)
    assert [o.version for o in proto.opset_import if o.domain == ""] == [11]
    x = np.ones((200, 3), dtype=np.float32)
    (y,) = run_ort(proto, {"x": x})
    np.testing.assert_allclose(
        y, np.cumprod((x + weights).sum(0, keepdims=True), axis=1), rtol=1e-6
    )


def test_sparse_initializers_and_training_info_are_kept() -> None:
    model = _model(
        [
            helper.make_node("Constant", [], ["axis"], value_int=0),
            helper.make_node("CumProd", ["x", "axis"], ["y"]),
        ],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
    )
    sparse = helper.make_sparse_tensor(
        helper.make_tensor("sp", TensorProto.FLOAT, [1], [2.0]),
        helper.make_tensor("sp_idx", TensorProto.INT64, [1], [1]),
        [4],
    )
    model.graph.sparse_initializer.append(sparse)
    training = onnx.TrainingInfoProto()
    training.algorithm.name = "algo"
    model.training_info.append(training)
    rewritten = rewriter.decompose_cumprod(model)
    assert isinstance(rewritten, onnx.ModelProto)
    assert list(rewritten.graph.sparse_initializer) == [sparse]
    assert list(rewritten.training_info) == [training]


@pytest.mark.parametrize("held_by", ["main graph", "branch"])
def test_a_sparse_initializer_a_node_reads_is_one_clear_error(held_by: str) -> None:
    """Found by a review from outside: onnx_ir does not load sparse initializers, and one a
    node reads (here in an If branch) made onnx_ir's cloner raise a RuntimeError from deep
    inside. One line now, naming the node and the tensor; a path is a TypeError."""
    then = helper.make_graph(
        [helper.make_node("Add", ["c", "sp"], ["t"], name="add_sparse")],
        "then",
        [],
        [helper.make_tensor_value_info("t", TensorProto.FLOAT, [4])],
    )
    model = _model(
        [
            helper.make_node("Constant", [], ["axis"], value_int=0),
            helper.make_node("CumProd", ["x", "axis"], ["c"]),
            helper.make_node("If", ["b"], ["y"], then_branch=then, else_branch=then),
        ],
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [4]),
            helper.make_tensor_value_info("b", TensorProto.BOOL, []),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
    )
    sparse = helper.make_sparse_tensor(
        helper.make_tensor("sp", TensorProto.FLOAT, [1], [2.0]),
        helper.make_tensor("sp_idx", TensorProto.INT64, [1], [1]),
        [4],
    )
    if held_by == "branch":
        model.graph.node[-1].attribute[0].g.sparse_initializer.append(sparse)
    else:
        model.graph.sparse_initializer.append(sparse)
    with pytest.raises(
        rewriter.InputModelError,
        match=r"^node 'add_sparse' \(Add\) reads the sparse initializer 'sp', which onnx_ir",
    ):
        rewriter.decompose_cumprod(model)
    with pytest.raises(TypeError, match=r"takes an onnx\.ModelProto or an onnx_ir\.Model, not str"):
        rewriter.decompose_cumprod("model.onnx")  # type: ignore[arg-type]


def test_subgraph_initializer_named_like_a_generated_value() -> None:
    then = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["t"])],
        "then",
        [],
        [helper.make_tensor_value_info("t", TensorProto.FLOAT, [3])],
        [helper.make_tensor("cumprod_Constant_0", TensorProto.FLOAT, [1], [1.0])],
    )
    model = _model(
        [
            helper.make_node("Constant", [], ["axis"], value_int=0),
            helper.make_node("CumProd", ["x", "axis"], ["c"], name="cumprod"),
            helper.make_node("If", ["b"], ["y"], then_branch=then, else_branch=then),
            helper.make_node("Add", ["y", "c"], ["z"]),
        ],
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [3]),
            helper.make_tensor_value_info("b", TensorProto.BOOL, []),
        ],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [3])],
    )
    rewritten = rewriter.decompose_cumprod(model, strategy="chain")
    assert isinstance(rewritten, onnx.ModelProto)
    onnx.checker.check_model(rewritten, full_check=True)


@pytest.mark.parametrize("opset", [13, 11])
def test_a_default_attribute_spelled_out_does_not_block_an_older_opset(opset: int) -> None:
    """Reshape-14's allowzero=0 is the default: below 14 it is dropped (same meaning), not
    sent to onnx's converter, which has no 14 -> 13 adapter."""
    model = _model(
        [
            helper.make_node("Reshape", ["x", "s"], ["r"], allowzero=0),
            helper.make_node("Constant", [], ["axis"], value_int=0),
            helper.make_node("CumProd", ["r", "axis"], ["y"]),
        ],
        [helper.make_tensor_value_info("x", TensorProto.INT64, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.INT64, [6])],
        initializers=[helper.make_tensor("s", TensorProto.INT64, [1], [6])],
    )
    x = np.arange(1, 7, dtype=np.int64).reshape(2, 3)
    rewritten = rewriter.decompose_cumprod(model, target_opset=opset)
    assert isinstance(rewritten, onnx.ModelProto)
    assert [o.version for o in rewritten.opset_import if o.domain == ""] == [opset]
    np.testing.assert_array_equal(run_ort(rewritten, {"x": x})[0], _native(model, {"x": x})[0])


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
    model = _model(
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
        [a, _cumprod_function("B")],
    )
    rng = np.random.default_rng(5)
    feeds = {
        "h": np.exp2(rng.integers(-1, 2, (3, 5))).astype(np.float16),
        "u": rng.integers(0, 2**32, (3, 5), dtype=np.uint64).astype(np.uint32),
    }
    rewritten = _check_against_native(model, feeds)
    assert sorted(f.name for f in rewritten.functions) == ["A__0", "A__1", "B__0", "B__1"]
    assert "CastLike" not in op_types(rewritten)


def _odd(shape: tuple[int, ...], seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(-9, 9, shape).astype(np.int64) | 1


# An If whose branches both define ``h``: [2, 6] in one, [6, 2] (a Transpose) in the other.
_IF_REUSING_H = """
    y = If (c) <
        then_branch = tg () => (int64[12] t) {
            ax = Constant <value = int64 {1}> ()
            h = Identity (x)
            p = CumProd (h, ax)
            fl = Constant <value = int64[1] {12}> ()
            t = Reshape (p, fl)
        },
        else_branch = eg () => (int64[12] e) {
            ax2 = Constant <value = int64 {0}> ()
            h = Transpose <perm = [1, 0]> (x)
            p2 = CumProd (h, ax2)
            fl2 = Constant <value = int64[1] {12}> ()
            e = Reshape (p2, fl2)
        }
    >
"""


@pytest.mark.parametrize("via", VIA)
def test_if_branches_reusing_a_name_with_other_shapes(via: str) -> None:
    """A lookup by name alone gave the then-branch's CumProd the else-branch's static dims
    (wrong values)."""
    model = onnx.parser.parse_model(
        '<ir_version: 10, opset_import: ["" : 26]>'
        f" main (int64[2, 6] x, bool c) => (int64[12] y) {{ {_IF_REUSING_H} }}"
    )
    for c in (True, False):
        _check_against_native(model, {"x": _odd((2, 6), 0), "c": np.array(c)}, via)


@pytest.mark.parametrize("via", VIA)
def test_loop_bodies_reusing_names_with_other_shapes_and_types(via: str) -> None:
    """Two Loop bodies (as exporters name them) both define ``h``: other shapes in the first
    pair, other element types in the second (which inference, merged by name, refused)."""
    text = """
        <ir_version: 10, opset_import: ["" : 26]>
        main (T1[3, 4] a, T2[4, 3] b, int64 n) => (T1[3, 4] ya, T2[4, 3] yb) {
            t = Constant <value = bool {1}> ()
            ya = Loop (n, t, a) <
                body = b1 (int64 i, bool c, T1[3, 4] acc) => (bool co, T1[3, 4] out) {
                    co = Identity (c)
                    ax = Constant <value = int64 {1}> ()
                    h = Identity (acc)
                    out = CumProd (h, ax)
                }
            >
            yb = Loop (n, t, b) <
                body = b2 (int64 i, bool c, T2[4, 3] acc) => (bool co, T2[4, 3] out) {
                    co = Identity (c)
                    ax = Constant <value = int64 {0}> ()
                    h = Identity (acc)
                    out = CumProd (h, ax)
                }
            >
        }
    """
    for t1, t2 in (("int64", "int64"), ("int64", "int32")):
        model = onnx.parser.parse_model(text.replace("T1", t1).replace("T2", t2))
        feeds = {
            "a": _odd((3, 4), 1).astype(t1),
            "b": _odd((4, 3), 2).astype(t2),
            "n": np.array(2, np.int64),
        }
        _check_against_native(model, feeds, via)


@pytest.mark.parametrize("via", VIA)
def test_function_with_if_branches_reusing_a_name(via: str) -> None:
    """The same If inside a model-local function (types propagated node by node there)."""
    model = onnx.parser.parse_model(
        '<ir_version: 10, opset_import: ["" : 26, "local" : 1]>'
        " main (int64[2, 6] x, bool c) => (int64[12] y) { y = local.F (x, c) }"
        ' <domain: "local", opset_import: ["" : 26]>'
        f" F (x, c) => (y) {{ {_IF_REUSING_H} }}"
    )
    for c in (True, False):
        _check_against_native(model, {"x": _odd((2, 6), 3), "c": np.array(c)}, via)


@pytest.mark.parametrize("via", VIA)
@pytest.mark.parametrize("declared", [[3, 4], [6, 2], ["A", 4]])
def test_a_loop_body_input_declared_with_stale_dims(declared: list[int | str], via: str) -> None:
    """A Loop body's carried input declared with dims it does not have (no runtime checks
    them, so onnxruntime runs the original): the lowering must not take them, and the
    declaration is dropped, since onnxruntime folds Shape of the input from it."""
    nodes = [
        helper.make_node("Constant", [], ["ax"], value_int=1),
        helper.make_node("CumProd", ["acc", "ax"], ["out"]),
    ]
    model = _loop_model(nodes, TensorProto.INT64, declared, [4, 3], [4, 3])
    _check_against_native(model, {"x": _odd((4, 3), 4), "n": np.array(2, np.int64)}, via)


def test_a_loop_body_input_declared_with_stale_dims_inside_a_function() -> None:
    """The same Loop inside a model-local function: the body input's stale declaration is
    dropped there too (found by mutation: kept, onnxruntime still gave the right values, but
    the lowering's Shape of that input sits next to a declaration that contradicts it)."""
    nodes = [
        helper.make_node("Constant", [], ["ax"], value_int=1),
        helper.make_node("CumProd", ["acc", "ax"], ["out"]),
    ]
    loop = _loop_model(nodes, TensorProto.INT64, [3, 4], [4, 3], [4, 3]).graph.node[0]
    f = helper.make_function(LOCAL, "F", ["n", "x"], ["y"], [loop], OPSET)
    model = _model(
        [helper.make_node("F", ["n", "x"], ["y"], domain=LOCAL)],
        [
            helper.make_tensor_value_info("n", TensorProto.INT64, []),
            helper.make_tensor_value_info("x", TensorProto.INT64, [4, 3]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.INT64, [4, 3])],
        [f],
    )
    rewritten = _check_against_native(model, {"x": _odd((4, 3), 4), "n": np.array(2, np.int64)})
    (body,) = [a.g for n in rewritten.functions[0].node for a in n.attribute if a.name == "body"]
    acc = next(v for v in body.input if v.name == "acc")
    assert not any(d.HasField("dim_value") for d in acc.type.tensor_type.shape.dim)


@pytest.mark.parametrize("via", VIA)
def test_a_stale_loop_body_input_read_inside_an_if_of_the_body(via: str) -> None:
    """The body's carried v is declared [2, 3] but doubles along axis 0 every iteration, and
    the CumProd reading it sits in an If inside the body: the declaration of the body input
    around the If is dropped too (found by mutation: with only the If's own inputs checked,
    onnxruntime folded Shape(v) from [2, 3] and failed in the lowering's Reshape). The
    reference is onnx.reference: onnxruntime's own CumProd fails on the original."""
    f32 = TensorProto.FLOAT
    then = helper.make_graph(
        [helper.make_node("CumProd", ["v", "ax"], ["c"])],
        "then",
        [],
        [helper.make_tensor_value_info("c", f32, [None, 3])],
    )
    other = helper.make_graph(
        [helper.make_node("Identity", ["v"], ["e"])],
        "else",
        [],
        [helper.make_tensor_value_info("e", f32, [None, 3])],
    )
    body = helper.make_graph(
        [
            helper.make_node("If", ["cin"], ["w"], then_branch=then, else_branch=other),
            helper.make_node("Concat", ["w", "w"], ["vn"], axis=0),
            helper.make_node("Identity", ["cin"], ["cout"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cin", TensorProto.BOOL, []),
            helper.make_tensor_value_info("v", f32, [2, 3]),
        ],
        [
            helper.make_tensor_value_info("cout", TensorProto.BOOL, []),
            helper.make_tensor_value_info("vn", f32, [None, 3]),
        ],
    )
    model = _model(
        [helper.make_node("Loop", ["n", "cond", "x"], ["y"], body=body)],
        [
            helper.make_tensor_value_info("x", f32, [2, 3]),
            helper.make_tensor_value_info("n", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
        ],
        [helper.make_tensor_value_info("y", f32, [None, 3])],
        initializers=[helper.make_tensor("ax", TensorProto.INT64, [], [0])],
    )
    x = np.array([[1, -2, 0.5], [2, 0.25, -1]], np.float32)  # exact products in any order
    rewritten = _rewrite(model, via)
    onnx.checker.check_model(rewritten, full_check=True)
    for trips in (1, 3):
        feeds = {"x": x, "n": np.array(trips, np.int64), "cond": np.array(True)}
        expected = ReferenceEvaluator(model).run(None, feeds)[0]
        np.testing.assert_array_equal(run_ort(rewritten, feeds)[0], expected)


@pytest.mark.parametrize("via", VIA)
def test_a_loop_body_value_that_changes_shape_between_iterations(via: str) -> None:
    """The body transposes its carried value, declared [2, 3] (right for the first iteration
    only): the rule path once baked the declaration in (wrong values from the second)."""
    nodes = [
        helper.make_node("Constant", [], ["ax"], value_int=1),
        helper.make_node("CumProd", ["acc", "ax"], ["cp"]),
        helper.make_node("Transpose", ["cp"], ["out"], perm=[1, 0]),
    ]
    model = _loop_model(nodes, TensorProto.INT64, [2, 3], [2, 3], [None, None], declared_out=[3, 2])
    for trips in (1, 2, 3):
        _check_against_native(model, {"x": _odd((2, 3), 5), "n": np.array(trips, np.int64)}, via)


INLINING_TARGETS = [
    name
    for name, t in rewriter.TARGETS.items()
    if not t.local_functions and not refuses_broadly(name)
]


def _functions_feeds() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(11)
    return {  # powers of two: every product is exact in float32, whatever the order
        "a": (np.exp2(rng.integers(-2, 3, (3, 5))) * rng.choice([-1, 1], (3, 5))).astype(
            np.float32
        ),
        "b": rng.integers(-(2**31), 2**31, (3, 5)).astype(np.int32) | 1,
    }


@pytest.mark.parametrize("target", INLINING_TARGETS)
def test_functions_are_inlined_for_a_runtime_that_loads_none(target: str) -> None:
    """OpenVINO, tract, IREE, tinygrad and onnx2tf load no model-local function (a call to
    one fails there; tests/test_runtime_tables.py runs this model on them): for their
    targets every call is inlined (attributes by reference through two calls, one function
    called with two element types, one without CumProd) and unused functions dropped."""
    assert {"openvino", "tract", "iree", "tinygrad", "tflite"} <= set(INLINING_TARGETS)
    model, _ = functions_model()
    rewritten = _check_against_native(model, _functions_feeds(), target=target)
    assert not rewritten.functions
    assert {n.domain for n in all_nodes(rewritten)} <= {"", "ai.onnx"}
    assert [o.domain for o in rewritten.opset_import] == [""]  # tinygrad: no 'local'


def test_functions_stay_functions_for_onnxruntime() -> None:
    model, _ = functions_model()
    rewritten = _check_against_native(model, _functions_feeds(), target="onnxruntime")
    # F specialised per call signature, G and K kept; Unused lowered type-generically
    assert {f.name for f in rewritten.functions} >= {"G", "K", "Unused"}


def _mismatched_function_model() -> onnx.ModelProto:
    """y = CumProd(R(x), 1), R(x) = Relu(x) in a function importing ai.onnx 18 (the model
    26): valid, but onnx_ir's inliner takes only one version per domain."""
    relu = helper.make_function(
        LOCAL,
        "R",
        ["x"],
        ["y"],
        [helper.make_node("Relu", ["x"], ["y"])],
        [helper.make_opsetid("", 18)],
    )
    return _model(
        [
            helper.make_node("R", ["x"], ["r"], domain=LOCAL),
            helper.make_node("CumProd", ["r", "axis"], ["y"], name="scan"),
        ],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        [relu],
        [helper.make_tensor("axis", TensorProto.INT64, [], [1])],
    )


def test_a_function_the_inliner_cannot_take_is_refused_for_such_a_runtime() -> None:
    model = _mismatched_function_model()
    onnx.checker.check_model(model, full_check=True)
    with pytest.raises(
        rewriter.TargetError,
        match=r"^the openvino target loads no model-local function.*\(local\.R\): Opset "
        r"mismatch",
    ):
        rewriter.decompose_cumprod(model, target="openvino")
    x = np.array([[1, -2, 3], [4, 5, -6]], dtype=np.float32)
    _check_against_native(model, {"x": x}, target="onnxruntime")  # kept there


def test_rules_say_the_functions_stay(caplog: pytest.LogCaptureFixture) -> None:
    model = _model(
        [helper.make_node("B", ["x"], ["y"], domain=LOCAL)],
        [helper.make_tensor_value_info("x", TensorProto.INT32, [3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.INT32, [3, 4])],
        [_cumprod_function("B")],
    )
    x = np.arange(1, 13, dtype=np.int32).reshape(3, 4)
    with caplog.at_level("WARNING", logger="rewriter.rules"):
        _check_against_native(model, {"x": x}, "rules", target="tract")
    assert "the model's functions stay functions, which tract does not load" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="rewriter.rules"):
        _check_against_native(model, {"x": x}, "rules", target="onnxruntime")
    assert "functions stay" not in caplog.text


def _call_model(
    function: onnx.FunctionProto, call: onnx.NodeProto, outputs: list[str]
) -> onnx.ModelProto:
    """The main graph is ``call`` on a: float [3, 4] (the outputs ``outputs``, float [3, 4])."""
    return _model(
        [call],
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [3, 4])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [3, 4]) for n in outputs],
        [function],
    )


def _three_outputs() -> onnx.FunctionProto:
    """F(x) = (CumProd(x, 1), Identity(x), Neg(x))."""
    return helper.make_function(
        LOCAL,
        "F",
        ["x"],
        ["y", "z", "w"],
        [
            helper.make_node("Constant", [], ["ax"], value_int=1),
            helper.make_node("CumProd", ["x", "ax"], ["y"]),
            helper.make_node("Identity", ["x"], ["z"]),
            helper.make_node("Neg", ["x"], ["w"]),
        ],
        OPSET,
    )


A34 = {"a": (np.arange(1, 13, dtype=np.float32).reshape(3, 4) / 4)}


@pytest.mark.parametrize("target", ["onnxruntime", "tract"])
@pytest.mark.parametrize(
    "outputs", [["y1", "", "w1"], ["y1", "z1", ""]], ids=["middle", "trailing"]
)
def test_a_call_leaving_an_output_unnamed(target: str, outputs: list[str]) -> None:
    """Found by a review from outside: a call leaving an output unnamed (valid ONNX). The
    inliner gave the inlined Identity the empty name (no output: refused as a checker
    failure of the rewrite); a trailing one was dropped by onnx_ir's writer and the checker
    then refused the call, on every target, blaming the input. Unnamed call outputs are
    named first (rewriter.inline.NameCallOutputsPass)."""
    call = helper.make_node("F", ["a"], outputs, domain=LOCAL)
    model = _call_model(_three_outputs(), call, [n for n in outputs if n])
    _check_against_native(model, A34, target=target)


def test_an_unnamed_call_output_takes_no_name_of_an_unread_graph_input() -> None:
    """A graph input no node reads named as the pass would name an unnamed call output
    (``F_unused_1``): the new name must differ (found by mutation: the clash made the
    rewrite fail the checker, reported as the input model's fault)."""
    call = helper.make_node("F", ["a"], ["y1", "", "w1"], domain=LOCAL)
    model = _call_model(_three_outputs(), call, ["y1", "w1"])
    model.graph.input.append(helper.make_tensor_value_info("F_unused_1", TensorProto.FLOAT, [1]))
    _check_against_native(model, A34 | {"F_unused_1": np.ones(1, np.float32)})


def test_inlined_names_kept_apart_from_names_in_subgraphs() -> None:
    """Found by a review from outside: F's value t inlined into the main graph, while an If
    branch defines its own t (valid: the checker and onnxruntime take it). onnx_ir's inliner
    keeps inlined names apart from those it has seen, not from a subgraph's: the rewrite
    failed the checker (not SSA). onnx_ir's NameFixPass runs after the inliner."""
    f = helper.make_function(
        LOCAL,
        "F",
        ["x"],
        ["y"],
        [
            helper.make_node("Constant", [], ["ax"], value_int=1),
            helper.make_node("Neg", ["x"], ["t"]),
            helper.make_node("CumProd", ["t", "ax"], ["y"]),
        ],
        OPSET,
    )
    branch = helper.make_graph(
        [helper.make_node("Abs", ["a"], ["t"])],
        "then",
        [],
        [helper.make_tensor_value_info("t", TensorProto.FLOAT, [3, 4])],
    )
    other = helper.make_graph(
        [helper.make_node("Neg", ["a"], ["e"])],
        "else",
        [],
        [helper.make_tensor_value_info("e", TensorProto.FLOAT, [3, 4])],
    )
    model = _model(
        [
            helper.make_node("F", ["a"], ["y1"], domain=LOCAL),
            helper.make_node("If", ["c"], ["y2"], then_branch=branch, else_branch=other),
        ],
        [
            helper.make_tensor_value_info("a", TensorProto.FLOAT, [3, 4]),
            helper.make_tensor_value_info("c", TensorProto.BOOL, []),
        ],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [3, 4]) for n in ("y1", "y2")],
        [f],
    )
    for c in (True, False):
        _check_against_native(model, {**A34, "c": np.array(c)}, target="tract")


def test_a_function_nothing_calls_does_not_stop_the_inlining() -> None:
    """Found by a review from outside: an unused function calling one the inliner cannot
    take (another ai.onnx version) was refused; unused functions are dropped first."""
    g = helper.make_function(
        LOCAL,
        "G",
        ["x"],
        ["y"],
        [helper.make_node("Relu", ["x"], ["y"])],
        [helper.make_opsetid("", 18)],
    )
    unused = helper.make_function(
        LOCAL,
        "U",
        ["x"],
        ["y"],
        [helper.make_node("G", ["x"], ["y"], domain=LOCAL)],
        [*OPSET, helper.make_opsetid(LOCAL, 1)],
    )
    model = _model(
        [
            helper.make_node("Constant", [], ["axis"], value_int=1),
            helper.make_node("CumProd", ["a", "axis"], ["y"]),
        ],
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4])],
        [g, unused],
    )
    rewritten = _check_against_native(model, A34, target="tract")
    assert not rewritten.functions


def _cycle() -> onnx.ModelProto:
    """A calls B, B calls A (invalid; the checker does not see it)."""
    a, b = (
        helper.make_function(
            LOCAL,
            name,
            ["x"],
            ["y"],
            [helper.make_node(callee, ["x"], ["y"], domain=LOCAL)],
            [*OPSET, helper.make_opsetid(LOCAL, 1)],
        )
        for name, callee in (("A", "B"), ("B", "A"))
    )
    return _model(
        [
            helper.make_node("A", ["a"], ["b"], domain=LOCAL),
            helper.make_node("Constant", [], ["axis"], value_int=1),
            helper.make_node("CumProd", ["b", "axis"], ["y"]),
        ],
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4])],
        [a, b],
    )


def _passthrough() -> onnx.ModelProto:
    """F(x) = (CumProd(x, 1), x): a function returning its input (valid ONNX; onnxruntime
    does not load it); the inliner renamed the graph's input a to the call's output z1."""
    f = helper.make_function(
        LOCAL,
        "F",
        ["x"],
        ["y", "x"],
        [
            helper.make_node("Constant", [], ["ax"], value_int=1),
            helper.make_node("CumProd", ["x", "ax"], ["y"]),
        ],
        OPSET,
    )
    call = helper.make_node("F", ["a"], ["y1", "z1"], domain=LOCAL)
    return _call_model(f, call, ["y1", "z1"])


@pytest.mark.parametrize(
    ("case", "problem"),
    [
        (_cycle, r"Cyclic dependency detected between functions: local::A -> local::B"),
        (_passthrough, r"inlining renames the graph's inputs or outputs \(\['a'\]"),
    ],
    ids=["cycle", "passthrough"],
)
def test_what_the_inliner_cannot_take_is_a_target_error(case, problem: str) -> None:  # type: ignore[no-untyped-def]
    """Found by a review from outside: a cycle raised onnx_ir's PreconditionError (not a
    ValueError), a function returning its input renamed the graph's input silently."""
    with pytest.raises(
        rewriter.TargetError, match=r"^the tract target loads no model-local " + ".*" + problem
    ):
        rewriter.decompose_cumprod(case(), target="tract")


def test_an_inlined_function_value_info_is_not_kept() -> None:
    """Found by a review from outside: F declares its value t [2, 6] (one call signature);
    the call takes [N, M], fed [6, 2]. Inlined, the declaration became the graph's, and
    onnxruntime folded the lowering's Shape(t) from it: (2, 6) and wrong values."""
    f = helper.make_function(
        LOCAL,
        "F",
        ["x"],
        ["y"],
        [
            helper.make_node("Constant", [], ["ax"], value_int=1),
            helper.make_node("Neg", ["x"], ["t"]),
            helper.make_node("CumProd", ["t", "ax"], ["u"]),
            helper.make_node("Neg", ["u"], ["y"]),
        ],
        OPSET,
    )
    f.value_info.extend([helper.make_tensor_value_info("t", TensorProto.FLOAT, [2, 6])])
    model = _model(
        [helper.make_node("F", ["a"], ["y"], domain=LOCAL)],
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["N", "M"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", "M"])],
        [f],
    )
    a = np.array([[1, 2], [-3, 4], [0.5, 2], [0.5, 2], [2, -1], [3, 0.25]], np.float32)
    for target in INLINING_TARGETS:
        _check_against_native(model, {"a": a}, target=target, max_length=16)


def _overridable_reshape(default: list[int]) -> onnx.ModelProto:
    """y = CumProd(Reshape(x, s), 1), s an initializer (``default``) that is also a graph
    input: a feed may replace it."""
    return _model(
        [
            helper.make_node("Reshape", ["x", "s"], ["r"]),
            helper.make_node("CumProd", ["r", "axis"], ["y"]),
        ],
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [6]),
            helper.make_tensor_value_info("s", TensorProto.INT64, [2]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["a", "b"])],
        initializers=[
            helper.make_tensor("s", TensorProto.INT64, [2], default),
            helper.make_tensor("axis", TensorProto.INT64, [], [1]),
        ],
    )


@pytest.mark.parametrize("target", ["onnxruntime", "tract"])
@pytest.mark.parametrize("via", VIA)
@pytest.mark.parametrize("default", [[2, 3], [6, 1]], ids=["2x3", "length-1"])
def test_an_overridable_initializer_is_not_a_constant(
    via: str, target: str, default: list[int]
) -> None:
    """Found by a review from outside: shape inference read s's default, so the lowering was
    built for it; fed another s the rewrite gave the default's shape and wrong values (with
    a default of length 1, x itself, unscanned). Inference takes such inputs as inputs."""
    model = _overridable_reshape(default)
    x = np.arange(1, 7, dtype=np.float32)
    for s in ([3, 2], [2, 3], default):
        feeds = {"x": x, "s": np.array(s, dtype=np.int64)}
        rewritten = _check_against_native(model, feeds, via, target=target, max_length=8)
        np.testing.assert_array_equal(run_ort(rewritten, feeds)[0], np.cumprod(x.reshape(s), 1))


@pytest.mark.parametrize("target", ["onnxruntime", "tract"])
@pytest.mark.parametrize("via", VIA)
def test_an_overridable_axis_is_a_run_time_axis(via: str, target: str) -> None:
    """The axis an initializer (1) that is also a graph input: a caller may feed another
    one, so the lowering takes it at run time (found by mutation: built for the default, a
    fed axis 0 scanned axis 1)."""
    model = _model(
        [helper.make_node("CumProd", ["x", "axis"], ["y"], exclusive=1)],
        [
            helper.make_tensor_value_info("x", TensorProto.INT32, [3, 4]),
            helper.make_tensor_value_info("axis", TensorProto.INT64, []),
        ],
        [helper.make_tensor_value_info("y", TensorProto.INT32, [3, 4])],
        initializers=[helper.make_tensor("axis", TensorProto.INT64, [], [1])],
    )
    x = np.arange(3, 15, dtype=np.int32).reshape(3, 4)
    for axis in (0, 1, -1, -2):
        feeds = {"x": x, "axis": np.array(axis, np.int64)}
        rewritten = _check_against_native(model, feeds, via, target=target)
        ones = np.ones_like(np.take(x, [0], axis=axis))
        shifted = np.concatenate([ones, np.delete(x, -1, axis=axis)], axis=axis)
        np.testing.assert_array_equal(run_ort(rewritten, feeds)[0], np.cumprod(shifted, axis))


@pytest.mark.parametrize("via", VIA)
def test_an_overridable_axis_of_an_empty_x_stays_optional(via: str) -> None:
    """An empty x needs no scan, so the rewrite no longer reads the axis; its initializer is
    still the default of a graph input and must stay (found by mutation: dropped, the
    rewritten model required a feed of ``axis``)."""
    model = _model(
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
        _check_against_native(model, feeds, via)


def test_an_overridable_input_without_a_shape_is_refused_as_the_checker_would() -> None:
    """Found by a review from outside: x declared without a shape (which the ONNX checker
    refuses) and also an initializer of 3 elements came out declared [3] (onnx_ir's C API
    calls set it from the tensor, so its checker pass does not see it), and onnxruntime then
    refused the 5-element feed the original takes. Refused now, as the checker would."""
    model = _model(
        [helper.make_node("CumProd", ["x", "axis"], ["y"])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["M"])],
        initializers=[
            helper.make_tensor("x", TensorProto.FLOAT, [3], [2.0, 3.0, 4.0]),
            helper.make_tensor("axis", TensorProto.INT64, [], [0]),
        ],
    )
    with pytest.raises(onnx.checker.ValidationError, match="Field 'shape' of 'type' is required"):
        onnx.checker.check_model(model, full_check=True)
    for options in ({}, {"target_opset": 18}):
        with pytest.raises(
            rewriter.InputModelError, match=r"graph input 'x' \(also an initializer\) declares no"
        ):
            rewriter.decompose_cumprod(model, **options)  # type: ignore[arg-type]


def test_an_overridable_input_keeps_a_symbolic_declared_shape() -> None:
    """x declared [N] and an initializer of 3 elements: the output still takes 5."""
    model = _model(
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


@pytest.mark.parametrize("elem", [TensorProto.FLOAT16, TensorProto.UINT32])
def test_types_flow_through_a_call_inside_a_function(elem: int) -> None:
    """Found by a review from outside: G(x) = H(K(x)), H's CumProd got x's type from K's
    output, which the propagation inside functions did not follow (calls to local functions
    were skipped): a type-generic lowering, float16 multiplied in float16 (9 ulp where the
    native kernel has 0) and uint32 multiplied as uint32 (onnxruntime 1.20.1 has no such Mul)."""
    axis = helper.make_node("Constant", [], ["ax"], value_int=-1)
    h = helper.make_function(
        LOCAL, "H", ["x"], ["y"], [axis, helper.make_node("CumProd", ["x", "ax"], ["y"])], OPSET
    )
    k = helper.make_function(
        LOCAL, "K", ["x"], ["y"], [helper.make_node("Identity", ["x"], ["y"])], OPSET
    )
    g = helper.make_function(
        LOCAL,
        "G",
        ["x"],
        ["y"],
        [
            helper.make_node("K", ["x"], ["t"], domain=LOCAL),
            helper.make_node("H", ["t"], ["y"], domain=LOCAL),
        ],
        [*OPSET, helper.make_opsetid(LOCAL, 1)],
    )
    model = _model(
        [helper.make_node("G", ["x"], ["y"], domain=LOCAL)],
        [helper.make_tensor_value_info("x", elem, [4, 7])],
        [helper.make_tensor_value_info("y", elem, [4, 7])],
        [h, k, g],
    )
    work = ir.serde.deserialize_model(model)
    SpecializeFunctionsPass()(work)
    (plan,) = plan_cumprods(work)
    assert plan.site.spec.dtype == ir.DataType(elem)


def test_a_type_generic_lowering_is_warned(caplog: pytest.LogCaptureFixture) -> None:
    """Noticed in a review from outside: a CumProd whose x has no known element type (here
    in a function nothing calls) is lowered in x's own type, which for float16 / bfloat16 is
    less accurate than the native kernel: said once, naming the node's place."""
    model = _model(
        [helper.make_node("Relu", ["x"], ["y"])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
        [_cumprod_function("Unused", axis=0)],
    )
    with caplog.at_level("WARNING", logger="rewriter.decompose"):
        rewriter.decompose_cumprod(model)
    lines = [
        r.getMessage() for r in caplog.records if "element type is not known" in r.getMessage()
    ]
    assert len(lines) == 1 and "function 'local.Unused'" in lines[0], lines
    caplog.clear()
    typed = _model(  # the same CumProd called with float16: specialised, nothing to say
        [helper.make_node("Unused", ["x"], ["y"], domain=LOCAL)],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [3])],
        [_cumprod_function("Unused", axis=0)],
    )
    with caplog.at_level("WARNING", logger="rewriter.decompose"):
        rewriter.decompose_cumprod(typed)
    assert "element type is not known" not in caplog.text


@pytest.mark.parametrize("via", VIA)
def test_function_overloads_stay_apart(via: str) -> None:
    """Two overloads of one function (IR 10: same domain and name, ``overload`` "inc" and
    "exc": inclusive and exclusive CumProd), one called on float16, the other on int64:
    each call must reach its own overload, typed by its own call. float16 tells a call
    typed from its caller (multiplied in float32, rounded once, as the native kernel) from
    a type-generic lowering (float16 products), which a function taken for uncalled, or
    called with two types, gets."""
    overloads = []
    for overload, exclusive in (("inc", 0), ("exc", 1)):
        function = helper.make_function(
            LOCAL,
            "B",
            ["x"],
            ["y"],
            [
                helper.make_node("Constant", [], ["axis"], value_int=1),
                helper.make_node("CumProd", ["x", "axis"], ["y"], exclusive=exclusive),
            ],
            OPSET,
        )
        function.overload = overload
        overloads.append(function)
    calls = []
    for overload, name, out in (("inc", "f", "p"), ("exc", "i", "q")):
        call = helper.make_node("B", [name], [out], domain=LOCAL)
        call.overload = overload
        calls.append(call)
    model = _model(
        calls,
        [
            helper.make_tensor_value_info("f", TensorProto.FLOAT16, [3, 5]),
            helper.make_tensor_value_info("i", TensorProto.INT64, [3, 5]),
        ],
        [
            helper.make_tensor_value_info("p", TensorProto.FLOAT16, [3, 5]),
            helper.make_tensor_value_info("q", TensorProto.INT64, [3, 5]),
        ],
        overloads,
    )
    rng = np.random.default_rng(6)
    f = rng.uniform(0.5, 2.0, (3, 5)).astype(np.float16)
    i = rng.integers(-9, 10, (3, 5)) | 1
    rewritten = _check_against_native(model, {"f": f, "i": i}, via)
    p, q = run_ort(rewritten, {"f": f, "i": i})
    np.testing.assert_array_equal(p, np.cumprod(f.astype(np.float32), 1).astype(np.float16))
    np.testing.assert_array_equal(q[:, 0], 1)
    np.testing.assert_array_equal(q[:, 1:], np.cumprod(i, 1)[:, :-1])


@pytest.mark.parametrize("also_output", ["input", "initializer"])
def test_a_graph_output_that_is_also_an_input_keeps_downstream_shapes(also_output: str) -> None:
    """Found by a red-team review of the library: x (or a weight) listed as a graph output
    too lost its declared shape before shape inference, so everything computed from it had
    unknown rank: a static CumProd was lowered for a run-time rank (onnxruntime) or refused
    ("the rank of x is not known", tract, TFLite, IREE). Its shape is kept now."""
    w = (np.arange(21, dtype=np.int64).reshape(3, 7) % 5) - 2
    model = _model(
        [
            helper.make_node("Mul", ["x", "w"], ["xw"]),
            helper.make_node("CumProd", ["xw", "axis"], ["y"]),
        ],
        [helper.make_tensor_value_info("x", TensorProto.INT64, [3, 7])],
        [
            helper.make_tensor_value_info("y", TensorProto.INT64, [3, 7]),
            helper.make_tensor_value_info(
                "x" if also_output == "input" else "w", TensorProto.INT64, [3, 7]
            ),
        ],
        initializers=[
            onnx.numpy_helper.from_array(w, "w"),
            helper.make_tensor("axis", TensorProto.INT64, [], [1]),
        ],
    )
    for target in ("onnxruntime", "tract"):
        (plan,) = plan_cumprods(ir.serde.deserialize_model(model), target=target_named(target))
        assert plan.site.spec.describe() == "int64 [3, 7] axis 1", plan.site.spec.describe()
    x = np.random.default_rng(3).integers(-5, 6, (3, 7))
    _check_against_native(model, {"x": x}, target="tract")


def test_a_proto_without_its_external_data_from_another_folder_is_one_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by a red-team review of the library: a ModelProto loaded with
    ``load_external_data=False`` carries no folder; from another working directory the
    rewrite failed with a bare FileNotFoundError naming only the file. Now one
    InputModelError naming the tensor and what to pass instead; from the model's folder it
    still works (bitwise against native)."""
    w = (np.arange(64, dtype=np.int64).reshape(2, 32) % 5) - 2
    model = _model(
        [
            helper.make_node("Mul", ["x", "w"], ["xw"]),
            helper.make_node("Constant", [], ["axis"], value_int=1),
            helper.make_node("CumProd", ["xw", "axis"], ["y"]),
        ],
        [helper.make_tensor_value_info("x", TensorProto.INT64, [2, 32])],
        [helper.make_tensor_value_info("y", TensorProto.INT64, [2, 32])],
        initializers=[onnx.numpy_helper.from_array(w, "w")],
    )
    (tmp_path / "in").mkdir()
    onnx.save(
        model,
        tmp_path / "in" / "m.onnx",
        save_as_external_data=True,
        location="m.data",
        size_threshold=0,
    )
    lazy = onnx.load(str(tmp_path / "in" / "m.onnx"), load_external_data=False)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(
        rewriter.InputModelError, match=r"tensor 'w' keeps its data in 'm.data', which is not found"
    ):
        rewriter.decompose_cumprod(lazy)
    monkeypatch.chdir(tmp_path / "in")
    rewritten = rewriter.decompose_cumprod(lazy)
    assert isinstance(rewritten, onnx.ModelProto)
    x = np.random.default_rng(4).integers(-5, 6, (2, 32))
    np.testing.assert_array_equal(run_ort(rewritten, {"x": x})[0], np.cumprod(x * w, axis=1))


@pytest.mark.parametrize("declared", [["k"], [None]])
@pytest.mark.parametrize("target", ["onnxruntime", "spec"])
def test_a_loop_carried_value_that_changes_rank(declared: list, target: str) -> None:
    """A Loop body's carried value declared rank 1 that is rank 2 from the second iteration
    on (a valid model: the checker passes it, onnxruntime runs it). onnxruntime folded the
    lowering's Shape(Shape(v)) from the declared rank and scanned axis 0 instead of -1:
    wrong values, no error (found by a review from outside). The declared rank is now
    dropped like unconfirmed static dims; the Loop's count and condition keep theirs
    (onnxruntime's Loop refuses them without)."""

    def const(name: str, value: np.ndarray) -> onnx.NodeProto:
        return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(value))

    vi = helper.make_tensor_value_info
    body = helper.make_graph(
        [
            const("a", np.array(-1, np.int64)),
            helper.make_node("CumProd", ["v", "a"], ["cp"], name="scan"),
            const("sh", np.array([3, 3], np.int64)),
            helper.make_node("Expand", ["cp", "sh"], ["e"]),
            const("rows", np.array([[1], [2], [3]], np.int64)),
            helper.make_node("Add", ["e", "rows"], ["v2"]),
            helper.make_node("Identity", ["cond"], ["more"]),
        ],
        "body",
        [
            vi("i", TensorProto.INT64, []),
            vi("cond", TensorProto.BOOL, []),
            vi("v", TensorProto.INT64, declared),
        ],
        [vi("more", TensorProto.BOOL, []), vi("v2", TensorProto.INT64, [3, 3])],
    )
    graph = helper.make_graph(
        [helper.make_node("Loop", ["n", "", "v0"], ["vf"], body=body)],
        "g",
        [vi("n", TensorProto.INT64, []), vi("v0", TensorProto.INT64, [3])],
        [vi("vf", TensorProto.INT64, ["p", "q"])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26)], ir_version=11)
    onnx.checker.check_model(model, full_check=True)
    rewritten = rewriter.decompose_cumprod(model, target=target)
    for n in (1, 2, 3):
        feeds = {"n": np.array(n, np.int64), "v0": np.array([2, 3, 5], np.int64)}
        v = feeds["v0"]
        for _ in range(n):  # numpy's loop, the reference
            v = np.broadcast_to(np.cumprod(v, axis=-1), (3, 3)) + np.array([[1], [2], [3]])
        (got,) = run_ort(rewritten, feeds)
        np.testing.assert_array_equal(got, v, err_msg=f"n={n}")


def _called_twice(second_rank: int) -> onnx.ModelProto:
    """y = F(F(x)[..]) with F(a) = CumProd(a, 1) (node 'cp'): the second call on a tensor of
    rank ``second_rank`` (rank 1: the axis is out of range for that call only)."""
    f = helper.make_function(
        LOCAL,
        "F",
        ["a"],
        ["b"],
        [
            helper.make_node("Constant", [], ["ax"], value=helper.make_tensor("v", 7, [], [1])),
            helper.make_node("CumProd", ["a", "ax"], ["b"], name="cp"),
        ],
        [helper.make_opsetid("", 26)],
    )
    shape = helper.make_tensor("shape", TensorProto.INT64, [second_rank], [6, 1][:second_rank])
    return _model(
        [
            helper.make_node("F", ["x"], ["f1"], domain=LOCAL, name="first"),
            helper.make_node("Reshape", ["f1", "shape"], ["r"]),
            helper.make_node("F", ["r"], ["y"], domain=LOCAL, name="second"),
        ],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [6, 1][:second_rank])],
        [f],
        [shape],
    )


@pytest.mark.parametrize("target", ["tract", "openvino"])
def test_an_inlined_node_is_named_as_in_the_input_model(target: str) -> None:
    """The inliner names a function's node anew in its second copy ('cp_2'), a name the
    input model lacks, and the message placed it in the main graph (session-32 note): errors,
    warnings and plans name the function's node and say it was inlined."""
    with pytest.raises(
        rewriter.InvalidCumProdError,
        match=r"^CumProd node 'cp' in function 'local\.F' \(inlined into graph 'main'\): axis 1 "
        r"is out of range \[-1, 0\] for rank 1$",
    ):
        rewriter.decompose_cumprod(_called_twice(1), target=target)
    model = ir.from_proto(_called_twice(2))
    rewrite = rewriter.DecomposeCumProdPass(target=target)
    rewrite(model)
    assert [(p.site.name, p.site.location) for p in rewrite.plans] == [
        ("cp", "function 'local.F' (inlined into graph 'main')")
    ] * 2
