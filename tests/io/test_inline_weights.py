"""Models whose weights are inline: read from the model file where they lie, written back
streamed, the output an ordinary ONNX file (onnx.load, onnx's checker and onnxruntime take it)
holding the input's initializers byte for byte."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from rewriter import io
from rewriter.convert import convert_file
from rewriter.io.wire import STRIP_OVER, InlineTensor, read_header
from tests.helpers import cumprod_model, op_types

N = 4 * STRIP_OVER  # elements per large initializer: each is left in the file when read

LARGE = {  # name: (array, onnx type)
    "w_f32": (np.linspace(-3, 3, N, dtype=np.float32), TensorProto.FLOAT),
    "w_f16": (np.linspace(-3, 3, N).astype(np.float16), TensorProto.FLOAT16),
    "w_bf16": (np.linspace(-3, 3, N).astype(ml_dtypes.bfloat16), TensorProto.BFLOAT16),
    "w_f64": (np.linspace(-3, 3, N), TensorProto.DOUBLE),
    "w_i64": (np.arange(-N, N, 2, dtype=np.int64) * 1_000_000_007, TensorProto.INT64),
    "w_i8": (np.arange(N, dtype=np.int64).astype(np.int8), TensorProto.INT8),
    "w_bool": (np.arange(N) % 3 == 0, TensorProto.BOOL),
}


def _model(cumprod: bool = True) -> onnx.ModelProto:
    """y = CumProd(x * w_f32, 0) and every initializer as an output (through Identity), so
    the rewrite keeps them all; a small initializer between the large ones, and one large
    one with a doc_string and metadata."""
    inits, nodes, outputs = [], [], []
    for name, (array, elem) in LARGE.items():
        tensor = numpy_helper.from_array(array, name)
        assert tensor.data_type == elem and len(tensor.raw_data) > STRIP_OVER
        inits.append(tensor)
        nodes.append(helper.make_node("Identity", [name], [f"o_{name}"]))
        outputs.append(helper.make_tensor_value_info(f"o_{name}", elem, [N]))
        if name == "w_f16":
            inits.append(helper.make_tensor("small", TensorProto.FLOAT, [2], [1.5, -2.0]))
    inits[0].doc_string = "the scale"
    inits[0].metadata_props.add(key="origin", value="test")
    nodes.append(helper.make_node("Mul", ["x", "w_f32"], ["m"]))
    if cumprod:
        inits.append(helper.make_tensor("axis", TensorProto.INT64, [], [0]))
        nodes.append(helper.make_node("CumProd", ["m", "axis"], ["y"], name="scan"))
    else:
        nodes.append(helper.make_node("Neg", ["m"], ["y"]))
    graph = helper.make_graph(
        nodes,
        "inline",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [N])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [N]), *outputs],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26)])


def _initializers(path: Path) -> dict[str, bytes]:
    return {t.name: t.SerializeToString() for t in onnx.load(str(path)).graph.initializer}


def _assert_same_weights(source: Path, output: Path) -> None:
    before, after = _initializers(source), _initializers(output)
    assert set(LARGE) | {"small"} <= set(after)
    for name, data in before.items():
        if name != "axis":  # the CumProd's: the rewrite needs it no more
            assert after[name] == data, name


@pytest.mark.parametrize("in_place", [False, True])
def test_the_rewritten_model_holds_the_inputs_initializers(tmp_path: Path, in_place: bool) -> None:
    source = tmp_path / "m.onnx"
    onnx.save(_model(), source)
    reference = tmp_path / "reference.onnx"
    onnx.save(_model(), reference)
    output = source if in_place else tmp_path / "out" / "m.onnx"
    report = convert_file(source, output)
    assert report.status == "rewritten", report.error
    assert sorted(p.name for p in output.parent.iterdir()) == sorted(
        ["m.onnx", "reference.onnx"] if in_place else ["m.onnx"]
    )  # one file, inline: no data file, no staging left
    _assert_same_weights(reference, output)
    loaded = onnx.load(str(output))
    assert "CumProd" not in op_types(loaded)
    onnx.checker.check_model(loaded, full_check=True)
    onnx.checker.check_model(str(output))
    (scale,) = [t for t in loaded.graph.initializer if t.name == "w_f32"]
    assert scale.doc_string == "the scale" and scale.metadata_props[0].value == "test"
    # canonical protobuf: the bytes onnx's own serialisation of the loaded model gives
    assert loaded.SerializeToString() == output.read_bytes()
    x = (np.arange(N) < 16).astype(np.float32)  # 16 products, then zeros: no overflow
    session = ort.InferenceSession(str(output), providers=["CPUExecutionProvider"])
    names = ["y", "o_w_f32", "o_w_i64", "o_w_bool"]
    results = dict(zip(names, session.run(names, {"x": x}), strict=True))
    np.testing.assert_array_equal(results["o_w_f32"], LARGE["w_f32"][0])
    np.testing.assert_array_equal(results["o_w_i64"], LARGE["w_i64"][0])
    np.testing.assert_array_equal(results["o_w_bool"], LARGE["w_bool"][0])
    expected = np.cumprod(x.astype(np.float64) * LARGE["w_f32"][0])
    np.testing.assert_allclose(results["y"], expected, rtol=1e-6, atol=0)


def test_the_output_is_the_file_onnx_irs_save_writes(tmp_path: Path) -> None:
    """The streamed write gives the bytes ``ir.save`` gives for the same model held in
    memory (tensors read out of the file first)."""
    source = tmp_path / "m.onnx"
    onnx.save(_model(), source)
    model = io.load_model(source)
    streamed = [v.const_value for v in model.graph.initializers.values()]
    assert sum(isinstance(t, InlineTensor) for t in streamed) == len(LARGE)
    assert io.save_model(model, tmp_path / "streamed.onnx")
    for value in model.graph.initializers.values():
        tensor = value.const_value
        if not isinstance(tensor, InlineTensor):
            continue
        value.const_value = ir.Tensor(
            tensor.numpy().copy(),
            dtype=tensor.dtype,
            name=tensor.name,
            doc_string=tensor.doc_string,
            metadata_props=dict(tensor.metadata_props),
        )
    ir.save(model, tmp_path / "in_memory.onnx")
    assert (tmp_path / "streamed.onnx").read_bytes() == (tmp_path / "in_memory.onnx").read_bytes()


def test_a_model_file_replaced_after_loading_is_not_read_as_the_weights(tmp_path: Path) -> None:
    source = tmp_path / "m.onnx"
    onnx.save(_model(), source)
    model = io.load_model(source)
    other = _model()
    for tensor in other.graph.initializer:
        tensor.raw_data = bytes(len(tensor.raw_data))  # same layout, other bytes
    onnx.save(other, tmp_path / "other.onnx")
    os.replace(tmp_path / "other.onnx", source)
    with pytest.raises(io.ModelFileError, match="changed while it was being rewritten"):
        io.save_model(model, tmp_path / "out.onnx")
    assert sorted(os.listdir(tmp_path)) == ["m.onnx"]


def test_an_unchanged_copy_keeps_inline_weights_beside_external_ones(tmp_path: Path) -> None:
    """A model with nothing to rewrite is copied; with external data its model file is
    written again (new data file names): its inline weights must be in it."""
    model = _model(cumprod=False)
    source = tmp_path / "m.onnx"
    onnx.save(model, tmp_path / "reference.onnx")
    external = numpy_helper.from_array(np.arange(N, dtype=np.float32), "w_external")
    onnx.external_data_helper.set_external_data(external, "m.data")
    (tmp_path / "m.data").write_bytes(np.arange(N, dtype=np.float32).tobytes())
    external.ClearField("raw_data")
    model.graph.initializer.append(external)
    model.graph.node.append(helper.make_node("Identity", ["w_external"], ["o_external"]))
    model.graph.output.append(helper.make_tensor_value_info("o_external", TensorProto.FLOAT, [N]))
    onnx.save(model, source)
    output = tmp_path / "out" / "m.onnx"
    report = convert_file(source, output)
    assert report.status == "copied", report.error
    _assert_same_weights(tmp_path / "reference.onnx", output)
    loaded = onnx.load(str(output))
    onnx.checker.check_model(str(output))
    (kept,) = [t for t in loaded.graph.initializer if t.name == "w_external"]
    np.testing.assert_array_equal(numpy_helper.to_array(kept), np.arange(N, dtype=np.float32))


def test_a_hard_linked_model_is_rewritten_in_place(tmp_path: Path) -> None:
    """onnx_ir refuses external data with other hard links; the model file itself may have
    them (its weights are read from it all the same). The other link keeps the old model."""
    source = tmp_path / "m.onnx"
    onnx.save(_model(), source)
    os.link(source, tmp_path / "link.onnx")
    report = convert_file(source, source)
    assert report.status == "rewritten", report.error
    _assert_same_weights(tmp_path / "link.onnx", source)
    assert "CumProd" in op_types(onnx.load(str(tmp_path / "link.onnx")))


def test_the_checker_sees_what_is_wrong_beside_weights_left_in_the_file(tmp_path: Path) -> None:
    """The checker runs on the model with its large initializers shrunk: what it refuses
    elsewhere it still refuses, and a large initializer one byte short is never shrunk."""
    good = tmp_path / "good.onnx"
    onnx.save(_model(), good)
    io.check_model_file(good)
    undefined = _model()
    undefined.graph.node.append(helper.make_node("Neg", ["nowhere"], ["z"]))
    onnx.save(undefined, tmp_path / "undefined.onnx")
    with pytest.raises(io.ModelFileError, match="nowhere"):
        io.check_model_file(tmp_path / "undefined.onnx")
    short = _model()
    short.graph.initializer[0].raw_data = short.graph.initializer[0].raw_data[:-1]
    onnx.save(short, tmp_path / "short.onnx")
    with pytest.raises(io.ModelFileError, match="too small"):
        io.check_model_file(tmp_path / "short.onnx")
    with pytest.raises(io.ModelFileError, match="too small"):
        io.load_model(tmp_path / "short.onnx")


# The child's allowance above twice the weights: the interpreter's own growth while it reads
# and writes (protobuf arenas for the small part of the model, the pass's graph, buffers).
ALLOWANCE_MIB = 32
WEIGHTS_MIB = 96

_CHILD = """
import json, resource, sys
from pathlib import Path
from rewriter.convert import convert_file

def own_peak_kib():  # this process's own high-water mark, never a parent's
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])

folder = Path(sys.argv[1])
warm = convert_file(folder / "small.onnx", folder / "out" / "small.onnx")  # imports, caches
assert warm.status == "rewritten", warm.error
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
own = own_peak_kib()
report = convert_file(folder / "big.onnx", folder / "out" / "big.onnx")
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"status": report.status, "error": report.error, "before": before,
                  "own": own, "after": after}))
"""

# ru_maxrss starts from the high-water mark of the process that started it (the kernel
# carries it over fork and exec): the child is started by a fresh, small interpreter, never
# by this test's process (which built the model).
_STARTER = "import subprocess, sys; sys.exit(subprocess.run(sys.argv[1:]).returncode)"


@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc/self/status; KiB ru_maxrss")
def test_rewriting_inline_weights_peaks_under_twice_their_size(tmp_path: Path) -> None:
    """A child process rewrites a model holding 96 MiB of inline weights after a small one
    (so its imports are done); its peak resident memory (ru_maxrss, Linux KiB) may grow by at
    most twice the weights plus ALLOWANCE_MIB (measured: 6 MiB; before the streamed read
    and write, 384 MiB). Reading the file whole, checking it whole or
    serialising it whole each costs twice the weights or more."""
    chunk = 32 << 20
    value = helper.make_tensor_value_info
    inits = [helper.make_tensor("axis", TensorProto.INT64, [], [1])]
    nodes = [helper.make_node("CumProd", ["x", "axis"], ["y"], name="scan")]
    outputs = [value("y", TensorProto.FLOAT, [4, 8])]
    for i in range(WEIGHTS_MIB * (1 << 20) // chunk):  # the weights, as outputs
        array = np.full(chunk // 4, 1.0 + i, np.float32)
        inits.append(numpy_helper.from_array(array, f"w{i}"))
        nodes.append(helper.make_node("Identity", [f"w{i}"], [f"o{i}"]))
        outputs.append(value(f"o{i}", TensorProto.FLOAT, [chunk // 4]))
    graph = helper.make_graph(nodes, "big", [value("x", TensorProto.FLOAT, [4, 8])], outputs, inits)
    onnx.save(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26)]),
        tmp_path / "big.onnx",
    )
    del inits, graph
    onnx.save(cumprod_model(TensorProto.FLOAT, [4, 8], 1), tmp_path / "small.onnx")
    root = Path(__file__).resolve().parents[2]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, "-c", _STARTER, sys.executable, "-c", _CHILD, str(tmp_path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["status"] == "rewritten", result["error"]
    # the baseline is the child's own (else growth under it would go unseen)
    assert result["before"] <= result["own"] + 4096, result
    grown_mib = (result["after"] - result["before"]) / 1024
    assert grown_mib <= 2 * WEIGHTS_MIB + ALLOWANCE_MIB, f"peak grew by {grown_mib:.0f} MiB"
    _assert_weights_equal(tmp_path / "big.onnx", tmp_path / "out" / "big.onnx")


def _assert_weights_equal(source: Path, output: Path) -> None:
    before = {t.name: t for t in onnx.load(str(source)).graph.initializer if t.name != "axis"}
    after = {t.name: t for t in onnx.load(str(output)).graph.initializer}
    assert set(before) <= set(after)
    for name, tensor in before.items():
        assert after[name].raw_data == tensor.raw_data, name


def test_inline_weights_over_the_inline_limit_go_to_a_data_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Inline weights too large for one model file are written by onnx_ir's external-data
    save, copied from the input model file (the limit lowered here to this model's size)."""
    monkeypatch.setattr("rewriter.io.atomic._INLINE_LIMIT", 64 << 10)
    source = tmp_path / "m.onnx"
    onnx.save(_model(), source)
    report = convert_file(source, tmp_path / "out" / "m.onnx")
    assert report.status == "rewritten", report.error
    (data,) = (tmp_path / "out").glob("m.onnx.*.data")
    output = tmp_path / "out" / "m.onnx"
    onnx.checker.check_model(str(output))
    loaded = onnx.load(str(output))  # the external data read back in
    expected = onnx.load(str(source))
    after = {t.name: numpy_helper.to_array(t) for t in loaded.graph.initializer}
    for tensor in expected.graph.initializer:
        if tensor.name != "axis":
            np.testing.assert_array_equal(after[tensor.name], numpy_helper.to_array(tensor))
    assert data.stat().st_size >= sum(a.nbytes for a, _ in LARGE.values())


def test_the_header_is_the_model_without_its_large_initializers_bytes(tmp_path: Path) -> None:
    """read_header gives onnx.load's message, field for field and in order, with the large
    initializers' raw_data cleared, and where those bytes are in the file."""
    source = tmp_path / "m.onnx"
    onnx.save(_model(), source)
    header = read_header(source)
    expected = onnx.load(str(source))
    content = source.read_bytes()
    assert set(header.spans) == set(LARGE)
    for tensor in expected.graph.initializer:
        span = header.spans.get(tensor.name)
        if span is not None:
            assert content[span.offset : span.offset + span.length] == tensor.raw_data
            tensor.ClearField("raw_data")
    assert header.proto == expected
    assert [t.name for t in header.proto.graph.initializer] == [
        t.name for t in expected.graph.initializer
    ]
