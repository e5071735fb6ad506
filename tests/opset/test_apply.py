"""``rewriter.opset``: onnx's version converter applied to a model (what it cannot reach in a
subgraph refused with nothing changed, external weights from another folder, defaults spelled
out); references: numpy and onnxruntime's native CumProd."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from onnx import TensorProto, helper

import rewriter
from tests.helpers import (
    local_model,
    native,
    run_ort,
)


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
    return local_model(
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
    model = local_model(
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


@pytest.mark.parametrize("opset", [13, 11])
def test_a_default_attribute_spelled_out_does_not_block_an_older_opset(opset: int) -> None:
    """Reshape-14's allowzero=0 is the default: below 14 it is dropped (same meaning), not
    sent to onnx's converter, which has no 14 -> 13 adapter."""
    model = local_model(
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
    np.testing.assert_array_equal(run_ort(rewritten, {"x": x})[0], native(model, {"x": x})[0])
