"""File-safety promises checked in process, in the fast tier: the library's ``convert_file``
and ``rewriter.io`` (which the command line runs under its own checks), and the command
line's usage errors and report, without a subprocess. Found by a mutation review of cli.py,
convert.py and io.py: each test fails with one deliberate bug there (listed in
``scripts/tools/mutation_check.py``) that the fast tier, and for most the whole suite, missed."""

from __future__ import annotations

import json
import logging
import os
import stat
from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from rewriter import io
from rewriter.cli import _FileTag, _WarningCollector, main
from rewriter.convert import convert_file, find_model_files
from tests.io.test_file_safety import run, snapshot, weighted


def two_data_files(folder: Path, name: str) -> Path:
    """y = CumProd(x * w1 * w2, 1); w1 and w2 in data files of their own ("w1", "w2")."""
    rng = np.random.default_rng(3)
    w1, w2 = (rng.uniform(0.9, 1.1, (2, 1024)).astype(np.float32) for _ in range(2))
    graph = helper.make_graph(
        [
            helper.make_node("Mul", ["x", "w1"], ["a"]),
            helper.make_node("Mul", ["a", "w2"], ["b"]),
            helper.make_node("CumProd", ["b", "axis"], ["y"], name="scan"),
        ],
        name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 1024])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 1024])],
        [
            numpy_helper.from_array(w1, "w1"),
            numpy_helper.from_array(w2, "w2"),
            helper.make_tensor("axis", TensorProto.INT64, [], [1]),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26)], ir_version=10)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    onnx.save(
        model, path, save_as_external_data=True, all_tensors_to_one_file=False, size_threshold=0
    )
    return path


# The command line's usage errors and report


def test_in_place_and_o_together_is_a_usage_error(tmp_path: Path) -> None:
    source = weighted(tmp_path, "m.onnx", "m.bin")
    before = snapshot(tmp_path)
    with pytest.raises(SystemExit) as exc:
        main([str(source), "--in-place", "-o", str(tmp_path / "out.onnx")])
    assert exc.value.code == 2
    assert snapshot(tmp_path) == before


def test_verify_zero_is_a_usage_error(tmp_path: Path) -> None:
    source = weighted(tmp_path, "m.onnx", "m.bin")
    before = snapshot(tmp_path)
    with pytest.raises(SystemExit) as exc:
        main([str(source), "--verify=0"])
    assert exc.value.code == 2
    assert snapshot(tmp_path) == before


def test_a_report_over_the_input_is_refused_before_any_work(tmp_path: Path) -> None:
    source = weighted(tmp_path, "m.onnx", "m.bin")
    before = snapshot(tmp_path)
    assert main([str(source), "-o", str(tmp_path / "o.onnx"), "--report", str(source)]) == 2
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("output", ["out/", "out/deeper/m.onnx"])
def test_a_report_naming_a_folder_the_outputs_make_is_refused_before_any_work(
    tmp_path: Path, output: str
) -> None:
    """Found by a review from outside: ``-o out/ --report out`` wrote the models, then failed
    on the report ("Is a directory")."""
    source = weighted(tmp_path, "m.onnx", "m.bin")
    before = snapshot(tmp_path)
    argv = [str(source), "-o", str(tmp_path / output), "--report", str(tmp_path / "out")]
    assert main(argv) == 2
    assert snapshot(tmp_path) == before


def test_a_report_in_missing_folders_makes_them_as_o_does(tmp_path: Path) -> None:
    """--report refused a folder that did not exist where -o made it (session-32 note)."""
    source = two_data_files(tmp_path, "m.onnx")
    report = tmp_path / "logs" / "today" / "r.json"
    output = tmp_path / "out" / "new" / "m.onnx"
    assert main([str(source), "-o", str(output), "--report", str(report)]) == 0
    assert output.is_file()
    assert json.loads(report.read_text())["files"][0]["status"] == "rewritten"


def test_a_report_that_is_a_symlink_is_replaced_not_written_through(tmp_path: Path) -> None:
    """An output that is a symbolic link is replaced by the file (as sed -i does); the file
    it pointed to is untouched (the report is staged and renamed, like a model)."""
    source = weighted(tmp_path / "in", "m.onnx", "m.bin")
    other = tmp_path / "notes.txt"
    other.write_text("someone else's file\n")
    link = tmp_path / "report.json"
    link.symlink_to(other)
    assert main([str(source), "-o", str(tmp_path / "o.onnx"), "--report", str(link), "-q"]) == 0
    assert other.read_text() == "someone else's file\n"
    assert not link.is_symlink()
    assert json.loads(link.read_text())["files"][0]["status"] == "rewritten"


def _symbolic_cumprod(folder: Path, name: str, dims: list[int | str]) -> Path:
    graph = helper.make_graph(
        [helper.make_node("CumProd", ["x", "axis"], ["y"], name="scan")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.INT32, dims)],
        [helper.make_tensor_value_info("y", TensorProto.INT32, dims)],
        [helper.make_tensor("axis", TensorProto.INT64, [], [1])],
    )
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26)]), path)
    return path


@pytest.mark.parametrize("quiet", [False, True])
def test_the_report_records_each_files_warnings(
    tmp_path: Path, quiet: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """--report holds what the library warned about each file (a review of the README
    found it held none, so a batch run's report hid them); -q prints none but still records
    them; a file without warnings records none, not its neighbour's."""
    _symbolic_cumprod(tmp_path / "in", "a.onnx", [2, "n"])  # iree: the bound is not checked
    _symbolic_cumprod(tmp_path / "in", "b.onnx", [2, 5])
    report = tmp_path / "report.json"
    argv = [str(tmp_path / "in"), "-o", str(tmp_path / "out"), "--target", "iree"]
    argv += ["--max-length", "16", "--report", str(report)] + (["-q"] if quiet else [])
    assert main(argv) == 0
    files = {Path(f["input"]).name: f for f in json.loads(report.read_text())["files"]}
    assert [f["status"] for f in files.values()] == ["rewritten", "rewritten"]
    (warning,) = files["a.onnx"]["warnings"]
    assert warning.startswith("CumProd 'scan' in graph 'g': "), warning  # no file tag
    assert "iree does not check the length bound (16)" in warning
    # nothing of the run stays on the loggers (main() may run again in this process)
    assert not [
        h for h in logging.getLogger("rewriter").handlers if isinstance(h, _WarningCollector)
    ]
    assert not [
        f for h in logging.getLogger().handlers for f in h.filters if isinstance(f, _FileTag)
    ]
    assert files["b.onnx"]["warnings"] == []
    # what reached the handlers of the root logger (the command line's: stderr)
    shown = [r.getMessage() for r in caplog.records if "length bound" in r.getMessage()]
    assert len(shown) == (0 if quiet else 1), shown


def test_a_batch_lists_the_files_that_did_not_verify(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """At the end of a run over several files, the ones --verify refused (nothing written)
    are listed with the failed ones (a review of the README found them missing there)."""
    real = io.save_model

    def doubled(model: ir.Model, target: Path, **kwargs: object) -> bool:  # a wrong rewrite
        proto = ir.serde.serialize_model(model)
        for out in proto.graph.output:
            for node in proto.graph.node:
                node.output[:] = [n + "_inner" if n == out.name else n for n in node.output]
            proto.graph.node.append(helper.make_node("Add", [out.name + "_inner"] * 2, [out.name]))
        return real(ir.serde.deserialize_model(proto), target, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(io, "save_model", doubled)
    _symbolic_cumprod(tmp_path / "in", "a.onnx", [2, 5])
    (tmp_path / "in" / "b.onnx").write_bytes(b"not a model")
    assert main([str(tmp_path / "in"), "-o", str(tmp_path / "out"), "--verify", "-q"]) == 2
    err = capsys.readouterr().err
    listed = err.split("2 file(s) failed or did not verify:\n", 1)[1].splitlines()
    assert len(listed) == 2, err
    assert "a.onnx: --verify found a mismatch; nothing written" in listed[1], err
    assert "b.onnx" in listed[0], err


# The library: convert_file and rewriter.io


def test_convert_file_never_writes_over_the_inputs_data_file(tmp_path: Path) -> None:
    """An output that is the input's own external data file is refused by the library too
    (without the command line's check of the whole plan)."""
    source = weighted(tmp_path, "m.onnx", "m.bin")
    before = snapshot(tmp_path)
    report = convert_file(source, tmp_path / "m.bin")
    assert report.status == "failed", report
    assert "the external data of the input" in (report.error or "")
    assert snapshot(tmp_path) == before


def test_in_place_on_a_model_without_cumprod_writes_nothing(tmp_path: Path) -> None:
    """No CumProd and output == input: 'unchanged', nothing written (no copy over itself,
    no fresh data file; the input's inode and bytes untouched)."""
    source = weighted(tmp_path, "m.onnx", "m.bin", cumprod=False)
    before, inode = snapshot(tmp_path), source.stat().st_ino
    report = convert_file(source, source)
    assert (report.status, report.output) == ("unchanged", None), report
    assert snapshot(tmp_path) == before
    assert source.stat().st_ino == inode


def test_a_folder_scan_skips_our_own_outputs(tmp_path: Path) -> None:
    weighted(tmp_path / "models", "a.onnx", "a.bin")
    weighted(tmp_path / "models", "a.nocumprod.onnx", "b.bin", cumprod=False)
    found = find_model_files([tmp_path / "models"])
    assert [rel.name for _, rel in found] == ["a.onnx"]


def test_a_folder_scan_takes_any_case_and_skips_data_named_onnx(tmp_path: Path) -> None:
    """Found by a red-team review: a data file named ``*.onnx`` was taken for a model (the
    run then failed on it), and ``B.ONNX`` was silently left out."""
    weighted(tmp_path / "models", "a.onnx", "weights.onnx")
    weighted(tmp_path / "models", "B.ONNX", "b.bin")
    found = find_model_files([tmp_path / "models"])
    assert sorted(rel.name for _, rel in found) == ["B.ONNX", "a.onnx"]
    assert main([str(tmp_path / "models"), "-o", str(tmp_path / "out"), "-q"]) == 0
    for name in ("a.onnx", "B.ONNX"):
        onnx.checker.check_model(str(tmp_path / "out" / name), full_check=True)
        assert "CumProd" not in {n.op_type for n in onnx.load(tmp_path / "out" / name).graph.node}
    written = sorted(p.name for p in (tmp_path / "out").iterdir() if p.suffix.lower() == ".onnx")
    assert written == ["B.ONNX", "a.onnx"]


def test_two_inputs_to_one_output_name_both_inputs(tmp_path: Path) -> None:
    """Found by a red-team review: the refusal named the output twice, not the inputs."""
    first = weighted(tmp_path / "a", "m.onnx", "m.bin")
    second = weighted(tmp_path / "b", "m.onnx", "m.bin")
    out = tmp_path / "out" / "m.onnx"
    with pytest.raises(io.ModelFileError) as exc:
        io.check_write_plan([(first, out), (second, out)], in_place=False)
    assert f"several inputs would be written there ({first} and {second})" in str(exc.value)


def test_a_new_output_takes_the_inputs_mode(tmp_path: Path) -> None:
    source = weighted(tmp_path / "in", "m.onnx", "m.bin")
    source.chmod(0o600)
    out = tmp_path / "out" / "m.onnx"
    assert convert_file(source, out).status == "rewritten"
    assert stat.S_IMODE(out.stat().st_mode) == 0o600


def test_a_new_data_file_takes_the_strictest_input_data_mode(tmp_path: Path) -> None:
    source = two_data_files(tmp_path / "in", "m.onnx")
    (tmp_path / "in" / "w1").chmod(0o644)
    (tmp_path / "in" / "w2").chmod(0o600)
    source.chmod(0o644)
    out = tmp_path / "out" / "m.onnx"
    assert convert_file(source, out).status == "rewritten"
    (data,) = out.parent.glob("m.onnx.*.data")
    assert stat.S_IMODE(data.stat().st_mode) == 0o600


def test_a_hard_link_of_the_input_is_refused_as_output(tmp_path: Path) -> None:
    source = weighted(tmp_path, "m.onnx", "m.bin")
    os.link(source, tmp_path / "hard.onnx")
    with pytest.raises(io.ModelFileError, match="refusing to write over the input"):
        io.check_write_plan([(source, tmp_path / "hard.onnx")], in_place=False)


def test_external_data_one_byte_short_is_refused(tmp_path: Path) -> None:
    source = weighted(tmp_path, "m.onnx", "m.bin")
    data = tmp_path / "m.bin"
    data.write_bytes(data.read_bytes()[:-1])
    with pytest.raises(io.ModelFileError, match="is too short for tensor 'w'"):
        io.load_model(source)


def test_the_data_file_goes_in_before_the_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The model's rename is the commit point: when the data file's rename into the output
    folder fails, the old output (model and data) is untouched and still runs."""
    source = weighted(tmp_path / "in", "m.onnx", "m.bin")
    out = tmp_path / "out" / "m.onnx"
    assert convert_file(source, out).status == "rewritten"
    before, values = snapshot(out.parent), run(out)
    real = os.replace

    def replace(src: object, dst: object, *args: object, **kwargs: object) -> None:
        # only the commit's rename of the data file into the output folder fails (onnx_ir's
        # own renames inside the staging folder go through)
        if Path(str(dst)).parent == out.parent and str(dst).endswith(".data"):
            raise PermissionError(13, "Permission denied (simulated)")
        real(src, dst, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "replace", replace)
    report = convert_file(source, out, strategy="loop")
    monkeypatch.undo()
    assert report.status == "failed" and "cannot write" in (report.error or "")
    assert snapshot(out.parent) == before
    np.testing.assert_array_equal(run(out), values)


def test_a_small_external_tensor_is_read_from_the_models_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by the same review: a valid model whose external tensor is small (512 bytes,
    saved with size_threshold=0) was refused as failing the ONNX checker when the command ran
    from another folder (onnx_ir's checker call keeps tensors of 1000 bytes or fewer, as
    references onnx's checker resolves from the working directory)."""
    w = (np.arange(64, dtype=np.int64).reshape(2, 32) % 5) * 2 - 3  # odd: -3 .. 5
    graph = helper.make_graph(
        [
            helper.make_node("Mul", ["x", "w"], ["xw"]),
            helper.make_node("CumProd", ["xw", "axis"], ["y"], name="scan"),
        ],
        "small",
        [helper.make_tensor_value_info("x", TensorProto.INT64, [2, 32])],
        [helper.make_tensor_value_info("y", TensorProto.INT64, [2, 32])],
        [numpy_helper.from_array(w, "w"), helper.make_tensor("axis", TensorProto.INT64, [], [1])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26)], ir_version=10)
    (tmp_path / "in").mkdir()
    source = tmp_path / "in" / "m.onnx"
    onnx.save(model, source, save_as_external_data=True, location="m.bin", size_threshold=0)
    assert (tmp_path / "in" / "m.bin").stat().st_size == w.nbytes == 512
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    out = tmp_path / "out" / "m.onnx"
    report = convert_file(source, out)
    assert report.status == "rewritten", report.error
    x = np.random.default_rng(5).integers(-7, 8, (2, 32)) | 1
    expected = ort.InferenceSession(str(source)).run(None, {"x": x})[0]
    np.testing.assert_array_equal(ort.InferenceSession(str(out)).run(None, {"x": x})[0], expected)


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_verbose_holds_for_its_own_run_only(tmp_path: Path) -> None:
    """-v logs each lowered node in its run and not in the next main() of the process, and a
    run leaves the loggers' levels and handlers as it found them (-v stayed on the root
    logger, and onnx_ir's level stayed raised, after an in-process run: session-32 note)."""
    source = two_data_files(tmp_path, "model.onnx")
    root, onnx_ir_logger = logging.getLogger(), logging.getLogger("onnx_ir")
    before = (root.level, list(root.handlers), onnx_ir_logger.level)
    seen = _Records()
    root.addHandler(seen)
    try:
        assert main([str(source), "-o", str(tmp_path / "a.onnx"), "-v"]) == 0
        verbose = [r for r in seen.records if r.levelno == logging.DEBUG]
        assert any("lowered CumProd 'scan'" in r.getMessage() for r in verbose), verbose
        assert (root.level, onnx_ir_logger.level) == before[::2]
        seen.records.clear()
        assert main([str(source), "-o", str(tmp_path / "b.onnx")]) == 0
        assert not [r for r in seen.records if r.levelno < logging.WARNING]
    finally:
        root.removeHandler(seen)
    assert (root.level, list(root.handlers), onnx_ir_logger.level) == before


def test_convert_file_never_writes_over_another_models_data(tmp_path: Path) -> None:
    """The library refuses as the command line does: an output that another model (not the
    input) reads as external data is never replaced, and a model that changed since a
    scan is read again (the scans' cache must not hide a new reader)."""
    source = weighted(tmp_path / "in", "m.onnx", "m.bin")
    weighted(tmp_path, "other.onnx", "w.bin", cumprod=False)
    free = tmp_path / "free.bin"
    free.write_bytes(b"read by no model")
    before = snapshot(tmp_path)
    report = convert_file(source, tmp_path / "w.bin")
    assert report.status == "failed"
    assert report.error == (
        f"{source}: {tmp_path / 'w.bin'}: refusing to write over the external data of the model "
        f"{tmp_path / 'other.onnx'}; nothing written"
    )
    assert snapshot(tmp_path) == before
    io.check_write_plan([(source, free)], in_place=False)  # no reader yet: allowed
    weighted(tmp_path, "other.onnx", "free.bin", cumprod=False)  # now other.onnx reads it
    with pytest.raises(io.ModelFileError, match=r"other\.onnx; nothing written"):
        io.check_write_plan([(source, free)], in_place=False)


@pytest.mark.parametrize("link", ["hard", "symbolic"])
def test_a_link_to_another_models_data_is_never_written_over(tmp_path: Path, link: str) -> None:
    """The same through a link: ``-o`` naming a hard or symbolic link to another model's
    data file (matched by inode, or by the resolved path) is refused, naming the file."""
    source = weighted(tmp_path / "in", "m.onnx", "m.bin")
    weighted(tmp_path, "other.onnx", "w.bin", cumprod=False)
    alias = tmp_path / "alias.bin"
    if link == "hard":
        os.link(tmp_path / "w.bin", alias)
    else:
        alias.symlink_to("w.bin")
    with pytest.raises(io.ModelFileError) as caught:
        io.check_write_plan([(source, alias)], in_place=False)
    assert str(caught.value) == (
        f"{alias}: refusing to write over the external data of the model "
        f"{tmp_path / 'other.onnx'} ({tmp_path / 'w.bin'}); nothing written"
    )


def test_kept_data_is_not_called_unreferenced_when_a_model_there_cannot_be_read(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Noticed by an earlier session: after a commit, the replaced model's old data files
    were all named as read by no .onnx file of the folder when one .onnx file there could
    not be read, which that file (or another) may well do. Now one warning names the
    unreadable model and the kept files no readable model reads; a file a readable model
    reads (w1, by other.onnx) is never named."""
    source = two_data_files(tmp_path, "a.onnx")  # reads w1 and w2
    other = onnx.load(source, load_external_data=False)  # reads w1 only
    (w2,) = (t for t in onnx.load(source).graph.initializer if t.name == "w2")
    (i,) = (i for i, t in enumerate(other.graph.initializer) if t.name == "w2")
    other.graph.initializer[i].CopyFrom(w2)
    (tmp_path / "other.onnx").write_bytes(other.SerializeToString())
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(b"not a model")
    with caplog.at_level(logging.WARNING, logger="rewriter.io"):
        assert convert_file(source, source).status == "rewritten"
    warned = [r.getMessage() for r in caplog.records if r.name == "rewriter.io"]
    assert warned == [
        f"kept {tmp_path / 'w2'}, the external data of the model {source} replaced: cannot "
        f"tell whether a .onnx file in its folder still reads it, as {broken} cannot be read"
    ]
    assert (tmp_path / "w1").is_file() and (tmp_path / "w2").is_file()  # never removed
    # without the unreadable model the same commit names w2 (only) as read by nothing
    caplog.clear()
    source = two_data_files(tmp_path / "b", "a.onnx")
    (tmp_path / "b" / "other.onnx").write_bytes(other.SerializeToString())
    with caplog.at_level(logging.WARNING, logger="rewriter.io"):
        assert convert_file(source, source).status == "rewritten"
    warned = [r.getMessage() for r in caplog.records if r.name == "rewriter.io"]
    assert warned == [
        f"kept {tmp_path / 'b' / 'w2'}, the external data of the model {source} replaced, "
        "which no .onnx file in its folder reads any more (remove it when nothing else does)"
    ]
