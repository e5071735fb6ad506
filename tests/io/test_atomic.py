"""Model files: weights above 2 GiB, atomic writes, the input never modified."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from onnx import TensorProto, helper

from rewriter import io
from rewriter.convert import convert_file
from tests.helpers import cumprod_model, op_types

CHUNK_FLOATS = 64 << 18  # 64 MiB of float32 per initializer


def _sparse_big_model(folder: Path, chunks: int) -> Path:
    """x + w_0 + ... + w_{chunks-1}, then CumProd; the weights (zeros) live in one sparse
    external data file, so the test needs neither the memory nor the disk to build it."""
    inits, nodes, previous = [], [], "x"
    nbytes = CHUNK_FLOATS * 4
    for i in range(chunks):
        init = onnx.TensorProto(name=f"w{i}", data_type=TensorProto.FLOAT, dims=[1, CHUNK_FLOATS])
        init.data_location = onnx.TensorProto.EXTERNAL
        for key, value in (
            ("location", "weights.bin"),
            ("offset", str(i * nbytes)),
            ("length", str(nbytes)),
        ):
            init.external_data.add(key=key, value=value)
        inits.append(init)
        nodes.append(helper.make_node("Add", [previous, f"w{i}"], [f"s{i}"]))
        previous = f"s{i}"
    inits.append(helper.make_tensor("axis", TensorProto.INT64, [], [0]))
    nodes.append(helper.make_node("CumProd", [previous, "axis"], ["y"], name="scan"))
    graph = helper.make_graph(
        nodes,
        "big",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, CHUNK_FLOATS])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, CHUNK_FLOATS])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26)])
    with open(folder / "weights.bin", "wb") as f:
        f.truncate(chunks * nbytes)
    path = folder / "big.onnx"
    path.write_bytes(model.SerializeToString())
    return path


def test_weights_above_2_gib(tmp_path: Path) -> None:
    source = _sparse_big_model(tmp_path, chunks=36)  # 2.25 GiB
    report = convert_file(source, tmp_path / "out" / "big.onnx")
    assert report.status == "rewritten", report.error
    (data,) = (tmp_path / "out").glob("big.onnx.*.data")
    assert data.stat().st_size == 36 * CHUNK_FLOATS * 4 > 2 << 30
    onnx.checker.check_model(str(tmp_path / "out" / "big.onnx"))
    model = ir.load(tmp_path / "out" / "big.onnx")
    assert all(n.op_type != "CumProd" for n in model.graph)
    last = model.graph.initializers["w35"].const_value
    assert isinstance(last, ir.ExternalTensor) and last.location == data.name
    assert not np.any(last.numpy()[0, -1024:])


def test_the_input_is_never_modified(tmp_path: Path) -> None:
    source = tmp_path / "m.onnx"
    onnx.save(cumprod_model(TensorProto.INT64, [3, 4], 1), source)
    before, mtime = source.read_bytes(), source.stat().st_mtime_ns
    assert convert_file(source, tmp_path / "o.onnx").status == "rewritten"
    assert source.read_bytes() == before and source.stat().st_mtime_ns == mtime


def test_a_failed_write_leaves_nothing_and_keeps_an_existing_target(tmp_path: Path) -> None:
    target = tmp_path / "out.onnx"
    target.write_bytes(b"previous content")
    model = ir.serde.deserialize_model(cumprod_model(TensorProto.FLOAT, [2], 0))

    def refuse(staged: Path) -> bool:
        assert staged.exists() and staged.parent != tmp_path
        raise RuntimeError("simulated failure after staging")

    with pytest.raises(RuntimeError):
        io.save_model(model, target, accept=refuse)
    assert sorted(os.listdir(tmp_path)) == ["out.onnx"]
    assert target.read_bytes() == b"previous content"


def test_a_rejected_write_leaves_nothing(tmp_path: Path) -> None:
    model = ir.serde.deserialize_model(cumprod_model(TensorProto.FLOAT, [2], 0))
    assert io.save_model(model, tmp_path / "out.onnx", accept=lambda staged: False) == []
    assert os.listdir(tmp_path) == []


def test_in_place_with_external_data(tmp_path: Path) -> None:
    """The weights are read from the very file being replaced: they must survive."""
    w = np.arange(1, 4097, dtype=np.float32).reshape(1, 4096) / 4096
    graph = helper.make_graph(
        [
            helper.make_node("Mul", ["x", "w"], ["m"]),
            helper.make_node("CumProd", ["m", "a"], ["y"]),
        ],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4096])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4096])],
        [onnx.numpy_helper.from_array(w, "w"), helper.make_tensor("a", TensorProto.INT64, [], [0])],
    )
    source = tmp_path / "m.onnx"
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26)])
    onnx.save(model, source, save_as_external_data=True, location="m.onnx.data")
    assert convert_file(source, source).status == "rewritten"
    # the old data file, now referenced by no model, is kept (never removed: something else
    # may read it); the new one has a fresh name
    names = set(os.listdir(tmp_path))
    assert len(names) == 3 and {"m.onnx", "m.onnx.data"} < names, names
    (new,) = names - {"m.onnx", "m.onnx.data"}
    assert new.startswith("m.onnx.") and new.endswith(".data")
    loaded = onnx.load(source)
    assert "CumProd" not in op_types(loaded)
    np.testing.assert_array_equal(onnx.numpy_helper.to_array(loaded.graph.initializer[0]), w)
