"""Malformed CumProd nodes: one clear error naming the node and the problem; nothing changed."""

from __future__ import annotations

import onnx
import onnx_ir as ir
import pytest
from onnx import TensorProto, helper

import rewriter
from tests.helpers import cumprod_model, op_types


def _model(
    node: onnx.NodeProto,
    x_type: int = TensorProto.FLOAT,
    x_shape: list | None = None,
    initializers: list | None = None,
) -> onnx.ModelProto:
    shape = [2, 3] if x_shape is None else x_shape
    graph = helper.make_graph(
        [node],
        "main",
        [helper.make_tensor_value_info("x", x_type, shape)],
        [helper.make_tensor_value_info("y", x_type, shape)],
        initializers or [],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26)])


def _axis(
    value: object, dims: list[int] | None = None, elem: int = TensorProto.INT64
) -> onnx.TensorProto:
    values = value if isinstance(value, list) else [value]
    return helper.make_tensor("axis", elem, [] if dims is None else dims, values)


BAD = {
    "no axis input": (
        _model(helper.make_node("CumProd", ["x"], ["y"], name="scan")),
        "no axis input",
    ),
    "axis of shape [1]": (
        _model(
            helper.make_node("CumProd", ["x", "axis"], ["y"], name="scan"),
            initializers=[_axis(1, [1])],
        ),
        "axis must be a 0-D tensor",
    ),
    "axis input declared [1]": (
        helper.make_model(
            helper.make_graph(
                [helper.make_node("CumProd", ["x", "axis"], ["y"], name="scan")],
                "main",
                [
                    helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
                    helper.make_tensor_value_info("axis", TensorProto.INT64, [1]),
                ],
                [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
            ),
            opset_imports=[helper.make_opsetid("", 26)],
        ),
        "axis must be a 0-D tensor",
    ),
    "axis too large": (
        _model(
            helper.make_node("CumProd", ["x", "axis"], ["y"], name="scan"), initializers=[_axis(2)]
        ),
        "axis 2 is out of range [-2, 1]",
    ),
    "axis too small": (
        _model(
            helper.make_node("CumProd", ["x", "axis"], ["y"], name="scan"), initializers=[_axis(-3)]
        ),
        "axis -3 is out of range [-2, 1]",
    ),
    "float axis": (
        _model(
            helper.make_node("CumProd", ["x", "axis"], ["y"], name="scan"),
            initializers=[_axis(1.0, elem=TensorProto.FLOAT)],
        ),
        "axis has element type float;",
    ),
    "rank-0 x": (
        _model(
            helper.make_node("CumProd", ["x", "axis"], ["y"], name="scan"),
            x_shape=[],
            initializers=[_axis(0)],
        ),
        "x is a scalar (rank 0)",
    ),
    "int8 x": (
        _model(
            helper.make_node("CumProd", ["x", "axis"], ["y"], name="scan"),
            x_type=TensorProto.INT8,
            initializers=[_axis(0)],
        ),
        "x has element type int8",
    ),
    "bool x": (
        _model(
            helper.make_node("CumProd", ["x", "axis"], ["y"], name="scan"),
            x_type=TensorProto.BOOL,
            initializers=[_axis(0)],
        ),
        "x has element type bool",
    ),
}


@pytest.mark.parametrize("case", BAD, ids=list(BAD))
def test_malformed_cumprod_is_one_clear_error(case: str) -> None:
    model, problem = BAD[case]
    before = model.SerializeToString()
    with pytest.raises(rewriter.InvalidCumProdError) as info:
        rewriter.decompose_cumprod(model)
    message = str(info.value)
    assert message.startswith("CumProd node 'scan' in graph 'main': ")
    assert problem in message
    assert "\n" not in message
    assert isinstance(info.value, ValueError)
    assert model.SerializeToString() == before


def test_logsum_on_integers_is_refused() -> None:
    model = cumprod_model(TensorProto.INT64, [4], 0)
    with pytest.raises(rewriter.StrategyError, match="'logsum' is inexact for int64"):
        rewriter.decompose_cumprod(model, strategy="logsum")


def test_unknown_strategy() -> None:
    with pytest.raises(ValueError, match="unknown strategy 'fast'"):
        rewriter.DecomposeCumProdPass("fast")


def test_a_bad_node_leaves_an_ir_model_untouched() -> None:
    """Two CumProds, the second malformed: the first must not have been rewritten."""
    text = """
    <ir_version: 11, opset_import: ["" : 26]>
    main (float[2, 3] x) => (float[2, 3] y, float[2, 3] z) {
        ax = Constant <value = int64 {1}> ()
        y = CumProd (x, ax)
        bad = Constant <value = int64 {5}> ()
        z = CumProd (x, bad)
    }
    """
    model = ir.from_onnx_text(text)
    before = ir.to_proto(model).SerializeToString()
    with pytest.raises(rewriter.InvalidCumProdError, match="axis 5 is out of range"):
        rewriter.DecomposeCumProdPass()(model)
    assert ir.to_proto(model).SerializeToString() == before


def test_element_type_unknown_below_opset_15_is_refused() -> None:
    """A function never called: its CumProd's element type is unknown, so it gets a
    type-generic lowering, whose ones need CastLike (opset 15): refused below that."""
    text = """
    <ir_version: 8, opset_import: ["" : 26, "local" : 1]>
    main (float[2] x) => (float[2] y) { y = Identity (x) }
    <domain: "local", opset_import: ["" : 26]>
    Unused (v) => (w) {
        ax = Constant <value = int64 {0}> ()
        w = CumProd (v, ax)
    }
    """
    model = onnx.parser.parse_model(text)
    with pytest.raises(
        rewriter.StrategyError, match=r"function 'local\.Unused'.*not known.*opset 15"
    ):
        rewriter.decompose_cumprod(model, target_opset=14)
    assert "CumProd" not in op_types(rewriter.decompose_cumprod(model))


def test_an_input_that_fails_the_checker_is_blamed_not_the_rewrite(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A graph output typed without a shape field: the full checker refuses the original too.
    The error said the rewritten model failed it; it now says the input does."""
    from rewriter.cli import main

    model = cumprod_model(TensorProto.FLOAT, [3, 4], 1)
    model.graph.output[0].type.tensor_type.ClearField("shape")
    with pytest.raises(
        rewriter.InputModelError,
        match=r"the input model fails the ONNX checker .*: output 'y' of graph 'main' has no shape",
    ):
        rewriter.decompose_cumprod(model)
    source = tmp_path / "noshape.onnx"
    onnx.save(model, source)
    assert main([str(source), "-o", str(tmp_path / "out.onnx"), "-q"]) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["noshape.onnx"]


def test_a_checker_refusal_names_the_node_or_the_value() -> None:
    """onnx's checker names a bad node on a later line of its message, and a graph input or
    output without a type not at all: the one-line refusal names them (a review of the README
    found "Field 'type' of 'value_info' is required but missing" naming nothing)."""
    model = cumprod_model(TensorProto.FLOAT, [3, 4], 1)
    model.graph.node.insert(0, helper.make_node("Relu", ["x"], ["r"], name="act", alpha=1.0))
    with pytest.raises(rewriter.InputModelError, match=r"node 'act' \(Relu\): Unrecognized"):
        rewriter.decompose_cumprod(model)
    model.graph.node[0].name = ""
    with pytest.raises(rewriter.InputModelError, match="a Relu node without a name: Unrec"):
        rewriter.decompose_cumprod(model)
    model = cumprod_model(TensorProto.FLOAT, [3, 4], 1)
    model.graph.output[0].ClearField("type")
    with pytest.raises(
        rewriter.InputModelError, match="output 'y' of graph 'main' has no type \\(Field 'type'"
    ):
        rewriter.decompose_cumprod(model)


def test_a_name_that_is_not_utf8_is_one_line_naming_the_node(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    """Found by a review from outside: one flipped byte made a name invalid UTF-8; the
    checker raised a UnicodeDecodeError, not a ValidationError, and the line printed was
    onnx_ir's clone_graph dump, naming neither the node nor the value."""
    from rewriter.cli import main

    model = cumprod_model(TensorProto.FLOAT, [3, 4], 1)
    model.graph.node.append(helper.make_node("Mul", ["y", "y"], ["z"], name="mul"))
    model.graph.output[0].name = "z"
    data = model.SerializeToString().replace(b"\x0a\x01y\x0a\x01y", b"\x0a\x01y\x0a\x01\xb4")
    source = tmp_path / "bad.onnx"
    source.write_bytes(data)
    assert main([str(source), "-o", str(tmp_path / "out.onnx"), "-q"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines == [f"error: {source}: node 'mul' ('Mul'): its input b'\\xb4' is not valid UTF-8"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.onnx"]
