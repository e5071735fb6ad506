"""External data where valid models keep it and this tool refused it: in a subgraph's
initializer, in a ``Constant``'s value (main graph and function), run from another folder;
and behind the symbolic links of the Hugging Face cache (``snapshots/<rev>/model.onnx`` ->
``blobs/<hash>``). Each result is checked bitwise against onnxruntime's native CumProd on
the original file (int64)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.external_data_helper import convert_model_to_external_data

import rewriter
from rewriter import io
from rewriter.cli import main
from rewriter.convert import convert_file
from tests.io.test_file_safety import snapshot

SHAPE = [4, 64]  # 2 KiB of int64: over onnx_ir's 1000-byte lifting limit


def _weight(name: str) -> onnx.TensorProto:
    w = (np.arange(256, dtype=np.int64).reshape(SHAPE) % 7) * 2 - 5  # odd: -5 .. 7
    return numpy_helper.from_array(w, name)


def _io(
    graph_name: str, nodes: list[onnx.NodeProto], inits: list[onnx.TensorProto]
) -> onnx.GraphProto:
    return helper.make_graph(
        nodes,
        graph_name,
        [helper.make_tensor_value_info("x", TensorProto.INT64, SHAPE)],
        [helper.make_tensor_value_info("y", TensorProto.INT64, SHAPE)],
        [helper.make_tensor("axis", TensorProto.INT64, [], [1]), *inits],
    )


def _model(graph: onnx.GraphProto, **kwargs: object) -> onnx.ModelProto:
    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 26)], ir_version=10, **kwargs
    )


def _native_and_rewritten_agree(source: Path, out: Path) -> None:
    x = np.random.default_rng(7).integers(-9, 10, SHAPE) | 1
    expected = ort.InferenceSession(str(source)).run(None, {"x": x})[0]
    got = ort.InferenceSession(str(out)).run(None, {"x": x})[0]
    assert "CumProd" not in {n.op_type for n in onnx.load(str(out)).graph.node}
    np.testing.assert_array_equal(got, expected)


def _convert_from_elsewhere(tmp_path: Path, source: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    out = tmp_path / "out" / "m.onnx"
    report = convert_file(source, out)
    assert report.status == "rewritten", report.error
    return out


def test_an_external_subgraph_initializer_is_checked_from_another_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """onnx's default external-data save moves subgraph initializers out too; the in-memory
    checker left them as references onnx's checker looked for in the working folder."""
    then = helper.make_graph(
        [
            helper.make_node("Mul", ["x", "w"], ["xw"]),
            helper.make_node("CumProd", ["xw", "axis"], ["t"], name="scan"),
        ],
        "then",
        [],
        [helper.make_tensor_value_info("t", TensorProto.INT64, SHAPE)],
        [_weight("w")],
    )
    other = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["e"])],
        "else",
        [],
        [helper.make_tensor_value_info("e", TensorProto.INT64, SHAPE)],
    )
    graph = _io(
        "sub",
        [helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)],
        [helper.make_tensor("c", TensorProto.BOOL, [], [True])],
    )
    model = _model(graph)
    convert_model_to_external_data(model, location="m.bin", size_threshold=1024)
    (tmp_path / "in").mkdir()
    source = tmp_path / "in" / "m.onnx"
    onnx.save(model, source)
    stored = onnx.load(str(source), load_external_data=False)
    branch = next(a.g for a in stored.graph.node[0].attribute if a.name == "then_branch")
    assert branch.initializer[0].data_location == TensorProto.EXTERNAL
    _native_and_rewritten_agree(source, _convert_from_elsewhere(tmp_path, source, monkeypatch))


def test_an_external_constant_value_is_checked_and_written_with_the_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Constant's value saved as external data (``convert_attribute=True``): the checker
    looked for it in the working folder, and onnx_ir's save, which moves initializers only,
    left the output pointing at a data file its folder does not have."""
    graph = _io(
        "const",
        [
            helper.make_node("Constant", [], ["w"], value=_weight("wc")),
            helper.make_node("Mul", ["x", "w"], ["xw"]),
            helper.make_node("CumProd", ["xw", "axis"], ["y"], name="scan"),
        ],
        [],
    )
    model = _model(graph)
    convert_model_to_external_data(
        model, location="m.bin", size_threshold=1024, convert_attribute=True
    )
    (tmp_path / "in").mkdir()
    source = tmp_path / "in" / "m.onnx"
    onnx.save(model, source)
    stored = onnx.load(str(source), load_external_data=False)
    assert stored.graph.node[0].attribute[0].t.data_location == TensorProto.EXTERNAL
    _native_and_rewritten_agree(source, _convert_from_elsewhere(tmp_path, source, monkeypatch))


def test_an_external_constant_in_a_function_is_read_from_the_models_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A function body's Constant with external data: the loader set the data folder on the
    main graph's tensors only, so the function's was read relative to the working folder."""
    (tmp_path / "in").mkdir()
    w = numpy_helper.to_array(_weight("wf"))
    (tmp_path / "in" / "f.bin").write_bytes(w.tobytes())
    value = TensorProto(name="wf", data_type=TensorProto.INT64, dims=SHAPE)
    value.data_location = TensorProto.EXTERNAL
    for key, text in (("location", "f.bin"), ("offset", "0"), ("length", str(w.nbytes))):
        value.external_data.add(key=key, value=text)
    function = helper.make_function(
        "local",
        "Scale",
        ["a"],
        ["b"],
        [
            helper.make_node("Constant", [], ["k"], value=value),
            helper.make_node("Mul", ["a", "k"], ["ak"]),
            helper.make_node("Constant", [], ["ax"], value_int=1),
            helper.make_node("CumProd", ["ak", "ax"], ["b"], name="scan"),
        ],
        [helper.make_opsetid("", 26)],
    )
    graph = _io("fn", [helper.make_node("Scale", ["x"], ["y"], domain="local")], [])
    model = _model(
        graph,
        functions=[function],
    )
    model.opset_import.append(helper.make_opsetid("local", 1))
    source = tmp_path / "in" / "m.onnx"
    onnx.save(model, source)
    _native_and_rewritten_agree(source, _convert_from_elsewhere(tmp_path, source, monkeypatch))


def _hugging_face_cache(root: Path) -> tuple[Path, Path]:
    """``root/blobs/<hash>`` files and ``root/snapshots/rev/`` links to them, as
    ``huggingface_hub.snapshot_download`` leaves a model with external data."""
    graph = _io(
        "hf",
        [
            helper.make_node("Mul", ["x", "w"], ["xw"]),
            helper.make_node("CumProd", ["xw", "axis"], ["y"], name="scan"),
        ],
        [_weight("w")],
    )
    staging = root / "download"
    staging.mkdir(parents=True)
    onnx.save(
        _model(graph),
        staging / "model.onnx",
        save_as_external_data=True,
        location="model.onnx_data",
        size_threshold=1024,
    )
    blobs, snapshot_dir = root / "blobs", root / "snapshots" / "rev"
    blobs.mkdir()
    snapshot_dir.mkdir(parents=True)
    for name, blob in (("model.onnx", "1a2b"), ("model.onnx_data", "3c4d")):
        (staging / name).rename(blobs / blob)
        os.symlink(Path("..", "..", "blobs", blob), snapshot_dir / name)
    staging.rmdir()
    return snapshot_dir / "model.onnx", blobs


def test_the_hugging_face_cache_layout_is_read_through_its_links(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """onnx's checker refuses every linked data file and onnx_ir every link leaving the
    model's folder: a model downloaded by huggingface_hub was refused. Now accepted as
    onnxruntime 1.25+ accepts it (the data's real path beside the model file's real path);
    the blobs are never written."""
    source, blobs = _hugging_face_cache(tmp_path / "cache")
    before = {p.name: p.read_bytes() for p in blobs.iterdir()}
    assert io.load_model(source).graph.initializers["w"].const_value is not None
    out = _convert_from_elsewhere(tmp_path, source, monkeypatch)
    _native_and_rewritten_agree(source, out)
    assert not any(p.is_symlink() for p in out.parent.iterdir())
    assert main([str(source), "--in-place", "-q"]) == 0  # the link replaced, not its blob
    assert not source.is_symlink()
    assert {p.name: p.read_bytes() for p in blobs.iterdir()} == before
    assert "CumProd" not in {n.op_type for n in onnx.load(str(source)).graph.node}


def test_a_data_link_to_another_folder_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A data file that links out of the model's folder (as an archive can carry, to any
    file of the machine) is refused on one line naming the file and the tensor, nothing
    written: its bytes would otherwise be copied into the output's weights."""
    source, blobs = _hugging_face_cache(tmp_path / "cache")
    elsewhere = tmp_path / "private"
    elsewhere.mkdir()
    (blobs / "3c4d").rename(elsewhere / "key")
    data = source.parent / "model.onnx_data"
    data.unlink()
    os.symlink(elsewhere / "key", data)
    before = snapshot(tmp_path)
    assert main([str(source), "-o", str(tmp_path / "out.onnx")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert f"{source}: external data file 'model.onnx_data' (tensor 'w')" in err[0]
    assert "outside the model's folder" in err[0]
    assert snapshot(tmp_path) == before


def test_a_data_file_with_hard_links_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """onnx's checker and onnx_ir refuse a data file with more than one hard link (as uv's
    package installs, DVC's cache and ``cp -al`` leave them); onnxruntime reads it, and so
    does this tool now."""
    graph = _io(
        "hard",
        [
            helper.make_node("Mul", ["x", "w"], ["xw"]),
            helper.make_node("CumProd", ["xw", "axis"], ["y"], name="scan"),
        ],
        [_weight("w")],
    )
    (tmp_path / "in").mkdir()
    source = tmp_path / "in" / "m.onnx"
    onnx.save(
        _model(graph), source, save_as_external_data=True, location="m.bin", size_threshold=1024
    )
    (tmp_path / "cache").mkdir()
    os.link(tmp_path / "in" / "m.bin", tmp_path / "cache" / "m.bin")
    before = (tmp_path / "in" / "m.bin").read_bytes()
    _native_and_rewritten_agree(source, _convert_from_elsewhere(tmp_path, source, monkeypatch))
    assert (tmp_path / "in" / "m.bin").read_bytes() == before
    assert (tmp_path / "in" / "m.bin").stat().st_nlink == 2


def _externalize(tensor: onnx.TensorProto, folder: Path, name: str) -> None:
    """Move ``tensor``'s data into the file ``name`` of ``folder`` (appended)."""
    data = folder / name
    offset = data.stat().st_size if data.exists() else 0
    with open(data, "ab") as out:
        out.write(tensor.raw_data)
    length = len(tensor.raw_data)
    tensor.ClearField("raw_data")
    tensor.data_location = TensorProto.EXTERNAL
    for key, text in (("location", name), ("offset", str(offset)), ("length", str(length))):
        tensor.external_data.add(key=key, value=text)


def _function_branch_weight(folder: Path, cumprod: bool, constant: bool = True) -> Path:
    """y = F(x), F's body an If whose then-branch multiplies by an initializer w kept in
    ``w.bin`` (and, with ``cumprod``, runs a CumProd): a tensor in a subgraph of a function
    body, which neither the main graph's walk nor ``ir.save`` reaches. The If's condition is
    a Constant (the rewrite inlines the branch, w becoming a Constant node) or, with
    ``constant`` false, computed at run time (true: x has elements), so the If and its
    initializer stay."""
    then_nodes = [helper.make_node("Mul", ["a", "w"], ["aw" if cumprod else "t"])]
    if cumprod:
        then_nodes += [
            helper.make_node("Constant", [], ["ax"], value_int=1),
            helper.make_node("CumProd", ["aw", "ax"], ["t"], name="scan"),
        ]
    then = helper.make_graph(
        then_nodes,
        "then",
        [],
        [helper.make_tensor_value_info("t", TensorProto.INT64, SHAPE)],
        [_weight("w")],
    )
    other = helper.make_graph(
        [helper.make_node("Identity", ["a"], ["e"])],
        "else",
        [],
        [helper.make_tensor_value_info("e", TensorProto.INT64, SHAPE)],
    )
    function = helper.make_function(
        "local",
        "F",
        ["a"],
        ["b"],
        [
            helper.make_node(
                "Constant", [], ["c"], value=helper.make_tensor("c", TensorProto.BOOL, [], [True])
            )
            if constant
            else helper.make_node("Size", ["a"], ["c"]),
            helper.make_node("Cast", ["c"], ["cb"], to=TensorProto.BOOL),
            helper.make_node("If", ["cb"], ["b"], then_branch=then, else_branch=other),
        ],
        [helper.make_opsetid("", 26)],
    )
    graph = _io("fnif", [helper.make_node("F", ["x"], ["y"], domain="local")], [])
    model = _model(graph, functions=[function])
    model.opset_import.append(helper.make_opsetid("local", 1))
    folder.mkdir(parents=True)
    _externalize(model.functions[0].node[2].attribute[1].g.initializer[0], folder, "w.bin")
    source = folder / "m.onnx"
    onnx.save(model, source)
    return source


@pytest.mark.parametrize("constant", [True, False], ids=["inlined", "kept"])
@pytest.mark.parametrize("cumprod", [True, False], ids=["rewritten", "copied"])
def test_an_external_tensor_in_a_function_subgraph_is_carried(
    tmp_path: Path, cumprod: bool, constant: bool
) -> None:
    """Rewritten: the save left the tensor pointing at ``w.bin``, which the output's folder
    does not have (refused by the output's check); copied (no CumProd): the copy pointed at
    it too, and ran nowhere. Its If inlined (a Constant condition) or kept."""
    source = _function_branch_weight(tmp_path / "in", cumprod, constant)
    out = tmp_path / "out" / "m.onnx"
    report = convert_file(source, out)
    assert report.status == ("rewritten" if cumprod else "copied"), report.error
    assert not (tmp_path / "out" / "w.bin").exists()
    x = np.random.default_rng(8).integers(-9, 10, SHAPE) | 1
    expected = ort.InferenceSession(str(source)).run(None, {"x": x})[0]
    np.testing.assert_array_equal(ort.InferenceSession(str(out)).run(None, {"x": x})[0], expected)


@pytest.mark.parametrize("cumprod", [True, False], ids=["rewritten", "copied"])
def test_the_data_file_of_a_function_subgraph_is_never_an_output(
    tmp_path: Path, cumprod: bool
) -> None:
    """``-o`` naming the data file of a tensor in a function's subgraph replaced the
    input's weights with the output model, and the input then computed garbage."""
    source = _function_branch_weight(tmp_path / "in", cumprod)
    data = tmp_path / "in" / "w.bin"
    before = snapshot(tmp_path)
    report = convert_file(source, data)
    assert report.status == "failed"
    assert "refusing to write over" in (report.error or "")
    assert snapshot(tmp_path) == before


def _training_info_weight(folder: Path) -> Path:
    """The _io model with a training_info whose initialization graph has an initializer
    kept in ``train.bin``."""
    graph = _io(
        "train",
        [
            helper.make_node("Mul", ["x", "w"], ["xw"]),
            helper.make_node("CumProd", ["xw", "axis"], ["y"], name="scan"),
        ],
        [_weight("w")],
    )
    model = _model(graph)
    init = helper.make_graph(
        [helper.make_node("Identity", ["w0"], ["w1"])],
        "init",
        [],
        [helper.make_tensor_value_info("w1", TensorProto.INT64, SHAPE)],
        [_weight("w0")],
    )
    info = model.training_info.add()
    info.initialization.CopyFrom(init)
    info.initialization_binding.add(key="w", value="w1")
    folder.mkdir(parents=True)
    _externalize(model.training_info[0].initialization.initializer[0], folder, "train.bin")
    source = folder / "m.onnx"
    onnx.save(model, source)
    return source


def test_training_info_external_data_is_carried_and_never_an_output(tmp_path: Path) -> None:
    """training_info is carried as it is (onnx_ir does not load it): its external tensor kept
    pointing at ``train.bin``, absent from the output's folder, and ``-o train.bin`` was
    taken, replacing the input's training weights with the output model."""
    source = _training_info_weight(tmp_path / "in")
    before = snapshot(tmp_path)
    report = convert_file(source, tmp_path / "in" / "train.bin")
    assert report.status == "failed" and "refusing to write over" in (report.error or "")
    assert snapshot(tmp_path) == before
    out = tmp_path / "out" / "m.onnx"
    assert convert_file(source, out).status == "rewritten"
    written = onnx.load(str(out))  # external data loaded from the output's folder
    (kept,) = written.training_info[0].initialization.initializer
    np.testing.assert_array_equal(numpy_helper.to_array(kept), numpy_helper.to_array(_weight("w0")))
    _native_and_rewritten_agree(source, out)


def test_a_string_initializer_beside_external_weights(tmp_path: Path) -> None:
    """With external weights the output's initializers over 256 bytes go to a data file;
    onnx_ir 1.1 tried to move a string initializer there too and raised ("StringTensor does
    not support tobytes"): the model was refused."""
    words = np.array([f"word {k} é" for k in range(200)], dtype=object)
    graph = _io(
        "strings",
        [
            helper.make_node("Mul", ["x", "w"], ["xw"]),
            helper.make_node("CumProd", ["xw", "axis"], ["y"], name="scan"),
            helper.make_node("Identity", ["words"], ["said"]),
        ],
        [_weight("w"), numpy_helper.from_array(words, "words")],
    )
    graph.output.append(helper.make_tensor_value_info("said", TensorProto.STRING, [200]))
    source = tmp_path / "in" / "m.onnx"
    source.parent.mkdir()
    onnx.save(
        _model(graph), source, save_as_external_data=True, location="m.bin", size_threshold=1024
    )
    out = tmp_path / "out" / "m.onnx"
    report = convert_file(source, out)
    assert report.status == "rewritten", report.error
    x = np.random.default_rng(9).integers(-9, 10, SHAPE) | 1
    expected = ort.InferenceSession(str(source)).run(None, {"x": x})
    got = ort.InferenceSession(str(out)).run(None, {"x": x})
    np.testing.assert_array_equal(got[0], expected[0])
    assert list(got[1]) == list(expected[1]) == list(words)


def _weighted_at(folder: Path, location: str, data_at: Path) -> Path:
    """The Mul + CumProd model with w stored at ``location`` (written to ``data_at``)."""
    graph = _io(
        "dots",
        [
            helper.make_node("Mul", ["x", "w"], ["xw"]),
            helper.make_node("CumProd", ["xw", "axis"], ["y"], name="scan"),
        ],
        [_weight("w")],
    )
    model = _model(graph)
    data_at.parent.mkdir(parents=True, exist_ok=True)
    folder.mkdir(parents=True, exist_ok=True)
    _externalize(model.graph.initializer[1], data_at.parent, data_at.name)
    entry = next(e for e in model.graph.initializer[1].external_data if e.key == "location")
    entry.value = location
    source = folder / "m.onnx"
    onnx.save(model, source)
    return source


def test_a_location_with_dots_that_stays_inside_is_read(tmp_path: Path) -> None:
    """``sub/../w.bin`` names a file of the model's folder (onnx's checker and onnxruntime
    read it); it was refused as leaving the folder."""
    (tmp_path / "in" / "sub").mkdir(parents=True)
    source = _weighted_at(tmp_path / "in", "sub/../w.bin", tmp_path / "in" / "w.bin")
    out = tmp_path / "out" / "m.onnx"
    assert convert_file(source, out).status == "rewritten"
    _native_and_rewritten_agree(source, out)


@pytest.mark.parametrize("how", ["dots", "link"])
def test_a_location_that_leaves_the_folder_is_refused(tmp_path: Path, how: str) -> None:
    """``sub/../../w.bin`` leaves the folder by its letters; ``lnk/../w.bin`` looks inside
    but ``lnk`` is a link to another folder, whose parent holds the file read."""
    (tmp_path / "in" / "sub").mkdir(parents=True)
    (tmp_path / "far" / "deep").mkdir(parents=True)
    os.symlink(tmp_path / "far" / "deep", tmp_path / "in" / "lnk")
    location, data = {
        "dots": ("sub/../../w.bin", tmp_path / "w.bin"),
        "link": ("lnk/../w.bin", tmp_path / "far" / "w.bin"),
    }[how]
    source = _weighted_at(tmp_path / "in", location, data)
    before = snapshot(tmp_path)
    report = convert_file(source, tmp_path / "out" / "m.onnx")
    assert report.status == "failed"
    expected = "leaves the model's folder" if how == "dots" else "is a symbolic link to"
    assert expected in (report.error or ""), report.error
    assert snapshot(tmp_path) == before


def _training_algorithm_with_cumprod(folder: Path) -> Path:
    """``_training_info_weight``'s model whose training algorithm runs a CumProd."""
    source = _training_info_weight(folder)
    model = onnx.load(str(source), load_external_data=False)
    model.training_info[0].algorithm.CopyFrom(
        helper.make_graph(
            [helper.make_node("CumProd", ["w", "axis"], ["w_next"], name="train_scan")],
            "algorithm",
            [],
            [helper.make_tensor_value_info("w_next", TensorProto.INT64, SHAPE)],
        )
    )
    model.training_info[0].update_binding.add(key="w", value="w_next")
    onnx.save(model, source)
    return source


def test_training_info_is_refused_under_a_lower_opset_and_its_cumprod_warned_about(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """training_info is carried as it is: its CumProd stays (warned), and under
    ``--target-opset`` its nodes would have stood under an opset they were not written for
    (the output declared opset 18 with a CumProd in its training algorithm)."""
    source = _training_algorithm_with_cumprod(tmp_path / "in")
    before = snapshot(tmp_path)
    report = convert_file(source, tmp_path / "out" / "low.onnx", target_opset=18)
    assert report.status == "failed"
    assert "cannot lower to ai.onnx opset 18: the model's training_info holds 2 node(s)" in (
        report.error or ""
    ), report.error
    assert snapshot(tmp_path) == before
    with pytest.raises(ValueError, match="training_info holds 2 node"):
        rewriter.decompose_cumprod(onnx.load(str(source)), target_opset=18)
    from rewriter.convert import list_file  # --list says so too (it said "listed")

    listed = list_file(source, target_opset=18)
    assert listed.status == "failed" and "training_info holds 2 node" in (listed.error or "")
    assert list_file(source).status == "listed"
    with caplog.at_level("WARNING"):
        assert convert_file(source, tmp_path / "out" / "m.onnx").status == "rewritten"
    assert "training_info keeps its 1 CumProd" in caplog.text


def _describe(tensor: onnx.TensorProto, doc: str) -> onnx.TensorProto:
    tensor.doc_string = doc
    tensor.metadata_props.add(key="origin", value=doc)
    return tensor


def _descriptions(path: Path) -> dict[tuple[str, str], tuple[str, list[tuple[str, str]]]]:
    """(graph name, initializer name) -> (doc_string, metadata_props)."""
    from rewriter.protos import model_graphs

    return {
        (graph.name, t.name): (t.doc_string, [(p.key, p.value) for p in t.metadata_props])
        for graph in model_graphs(onnx.load(str(path), load_external_data=False))
        for t in graph.initializer
    }


def test_external_initializers_keep_their_doc_string_and_metadata(tmp_path: Path) -> None:
    """onnx_ir's save builds the tensors it moves to external data without their doc_string
    and metadata_props: the output lost both, for the main graph's initializers and a
    branch's. Two sibling branches describing one name differently are left as saved (which
    description is whose is not known); the values stay right."""

    def branch(name: str, doc: str) -> onnx.GraphProto:
        return helper.make_graph(
            [helper.make_node("Mul", ["x", "v"], [f"{name}_out"])],
            name,
            [],
            [helper.make_tensor_value_info(f"{name}_out", TensorProto.INT64, SHAPE)],
            [_describe(_weight("v"), doc)],
        )

    graph = _io(
        "described",
        [
            helper.make_node("Mul", ["x", "w"], ["xw"]),
            helper.make_node("CumProd", ["xw", "axis"], ["s"], name="scan"),
            helper.make_node(
                "If",
                ["c"],
                ["b"],
                then_branch=branch("then", "then's"),
                else_branch=branch("else", "else's"),
            ),
            helper.make_node("Mul", ["s", "b"], ["y"]),
        ],
        [
            _describe(_weight("w"), "the weights"),
            helper.make_tensor("c", TensorProto.BOOL, [], [True]),
        ],
    )
    graph.initializer[0].doc_string = "the axis"
    graph.initializer.append(_describe(_weight("u"), "unused"))
    convert_model_to_external_data(model := _model(graph), location="m.bin", size_threshold=1024)
    (tmp_path / "in").mkdir()
    source = tmp_path / "in" / "m.onnx"
    onnx.save(model, source)
    before = _descriptions(source)
    assert before["described", "w"] == ("the weights", [("origin", "the weights")])
    out = tmp_path / "out.onnx"
    assert convert_file(source, out).status == "rewritten"
    after = _descriptions(out)
    stored = onnx.load(str(out), load_external_data=False)
    assert {t.name for t in stored.graph.initializer if t.data_location} >= {"w", "u"}
    for name in ("w", "u"):
        assert after["described", name] == before["described", name], name
    for name in ("then", "else"):  # its own description or none, never its sibling's
        assert after[name, "v"] in (before[name, "v"], ("", [])), name
    x = np.random.default_rng(7).integers(-9, 10, SHAPE) | 1
    expected = ort.InferenceSession(str(source)).run(None, {"x": x})[0]
    np.testing.assert_array_equal(ort.InferenceSession(str(out)).run(None, {"x": x})[0], expected)


def test_small_external_weights_leave_no_empty_data_file(tmp_path: Path) -> None:
    """Weights of 256 bytes or less go into the output model (onnx_ir's save threshold); an
    empty, unreferenced ``out.onnx.<hex>.data`` was left beside it (found by a review from
    outside)."""
    w = numpy_helper.from_array((np.arange(12, dtype=np.int64) % 5) * 2 + 1, "w")
    graph = helper.make_graph(
        [
            helper.make_node("Mul", ["x", "w"], ["xw"]),
            helper.make_node("CumProd", ["xw", "axis"], ["y"], name="scan"),
        ],
        "small",
        [helper.make_tensor_value_info("x", TensorProto.INT64, [12])],
        [helper.make_tensor_value_info("y", TensorProto.INT64, [12])],
        [helper.make_tensor("axis", TensorProto.INT64, [], [0]), w],
    )
    (tmp_path / "in").mkdir()
    source = tmp_path / "in" / "m.onnx"
    onnx.save(_model(graph), source, save_as_external_data=True, size_threshold=0, location="m.bin")
    assert (tmp_path / "in" / "m.bin").stat().st_size == 96
    (tmp_path / "out").mkdir()
    out = tmp_path / "out" / "m.onnx"
    assert convert_file(source, out).status == "rewritten"
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["m.onnx"]
    x = np.array([3, -1, 5, 1, 7, -3, 1, 1, 3, -5, 1, 1], np.int64)
    want = ort.InferenceSession(str(source)).run(None, {"x": x})[0]
    np.testing.assert_array_equal(ort.InferenceSession(str(out)).run(None, {"x": x})[0], want)
