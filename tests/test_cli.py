"""The command line on real files in a temporary folder: ``rewriter.cli.main`` in this process
as a fresh process runs it (its own stderr handler, stdout and stderr captured), and as a
subprocess where the process itself is what is tested (``python -m rewriter``, a fresh
interpreter's imports)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from onnx import TensorProto, helper, numpy_helper

from rewriter.lowerings import LOWERINGS
from rewriter.verify import compare
from tests.helpers import counts, cumprod_model, op_types, reference, run_cli, run_ort

EXAMPLE = Path(__file__).resolve().parents[1] / "rewriter" / "examples" / "example.onnx"


def cli_process(
    *args: str | Path, cwd: Path | None = None, code: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m rewriter ARGS`` (or ``python -c CODE ARGS``) in a subprocess."""
    command = [sys.executable, "-m", "rewriter"] if code is None else [sys.executable, "-c", code]
    return subprocess.run(
        [*command, *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
        check=False,
    )


cli = run_cli


def files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def _save(model: onnx.ModelProto, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, path)
    return path


def _weighted_model(size: int = 4096) -> onnx.ModelProto:
    """y = CumProd(x * w, 1) with w an initializer big enough to go to external data."""
    w = np.random.default_rng(0).uniform(0.9, 1.1, (2, size)).astype(np.float32)
    graph = helper.make_graph(
        [
            helper.make_node("Mul", ["x", "w"], ["xw"]),
            helper.make_node("CumProd", ["xw", "axis"], ["y"], name="scan"),
        ],
        "weighted",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, size])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, size])],
        [numpy_helper.from_array(w, "w"), helper.make_tensor("axis", TensorProto.INT64, [], [1])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26)])


def test_help_lists_every_option() -> None:
    """In process: ``python -m rewriter`` itself runs as a process in tests/test_readme.py."""
    result = cli("--help")
    assert result.returncode == 0
    for option in (
        "-o",
        "--strategy",
        "--verify",
        "--dim",
        "--report",
        "--list",
        "--in-place",
        "-q",
        "-v",
    ):
        assert option in result.stdout


def test_single_file(tmp_path: Path) -> None:
    source = shutil.copy(EXAMPLE, tmp_path / "model.onnx")
    before = Path(source).read_bytes()
    result = cli(source, "-o", tmp_path / "out.onnx")
    assert result.returncode == 0, result.stderr
    assert "4 CumProd rewritten" in result.stdout
    assert Path(source).read_bytes() == before
    rewritten = onnx.load(tmp_path / "out.onnx")
    onnx.checker.check_model(rewritten, full_check=True)
    assert "CumProd" not in op_types(rewritten)
    assert files(tmp_path) == ["model.onnx", "out.onnx"]

    rng = np.random.default_rng(0)
    feeds = {
        "betas": rng.uniform(0, 0.1, 10).astype(np.float32),
        "v": rng.uniform(0, 1, (2, 5)).astype(np.float32),
        "dims": np.array([2, 3, 4, 5], np.int64),
        "alpha": rng.uniform(0, 1, (2, 6)).astype(np.float32),
        "axis": np.array(1, np.int64),
    }
    got = dict(
        zip(["alphas_cumprod", "weights", "strides", "transmittance"], run_ort(rewritten, feeds))
    )
    np.testing.assert_array_equal(got["strides"], reference(feeds["dims"], 0, 1, 1))
    np.testing.assert_allclose(
        got["alphas_cumprod"], reference(1 - feeds["betas"], 0, 0, 0), rtol=2**-23
    )


def test_default_output_goes_beside_the_input(tmp_path: Path) -> None:
    source = shutil.copy(EXAMPLE, tmp_path / "model.onnx")
    assert cli(source).returncode == 0
    assert files(tmp_path) == ["model.nocumprod.onnx", "model.onnx"]


def test_in_place(tmp_path: Path) -> None:
    source = Path(shutil.copy(EXAMPLE, tmp_path / "model.onnx"))
    result = cli(source, "--in-place")
    assert result.returncode == 0, result.stderr
    assert files(tmp_path) == ["model.onnx"]
    assert "CumProd" not in op_types(onnx.load(source))


def test_folder_batch_with_a_bad_file(tmp_path: Path) -> None:
    models = tmp_path / "models"
    _save(cumprod_model(TensorProto.FLOAT, [2, 3], 1), models / "a.onnx")
    _save(cumprod_model(TensorProto.INT32, [4], 0, reverse=1), models / "sub" / "b.onnx")
    (models / "bad.onnx").write_bytes(b"this is not a model")
    result = cli(models, "-o", tmp_path / "out")
    assert result.returncode == 2
    assert files(tmp_path / "out") == ["a.onnx", "sub", "sub/b.onnx"]
    assert "bad.onnx" in result.stderr and "not a readable ONNX model" in result.stderr
    assert "Traceback" not in result.stderr
    assert "3 file(s): 1 failed, 2 rewritten" in result.stdout


def test_external_data_output_folder_is_self_contained(tmp_path: Path) -> None:
    source = tmp_path / "in" / "model.onnx"
    source.parent.mkdir()
    onnx.save(_weighted_model(), source, save_as_external_data=True, location="weights.bin")
    report = tmp_path / "report.json"
    result = cli(source, "-o", tmp_path / "out" / "model.onnx", "--report", report)
    assert result.returncode == 0, result.stderr
    model_file, data_file = files(tmp_path / "out")
    assert model_file == "model.onnx"
    assert data_file.startswith("model.onnx.") and data_file.endswith(".data")
    (node,) = json.loads(report.read_text())["files"][0]["nodes"]
    moved = tmp_path / "elsewhere"
    shutil.move(tmp_path / "out", moved)
    shutil.rmtree(tmp_path / "in")  # the output must not point at the input's weights
    x = np.random.default_rng(1).uniform(0.9, 1.1, (2, 4096)).astype(np.float32)
    import onnxruntime as ort

    session = ort.InferenceSession(str(moved / "model.onnx"), providers=["CPUExecutionProvider"])
    w = numpy_helper.to_array(
        onnx.load(moved / "model.onnx").graph.initializer[0], base_dir=str(moved)
    )
    expected = reference((x * w).astype(np.float64), 1, 0, 0)  # x * w rounds as ORT's Mul does
    bound = LOWERINGS[node["lowering"]].max_ulps(ir.DataType.FLOAT, counts(x.shape, 1, 0, 0))
    result = compare(session.run(None, {"x": x})[0], expected, ir.DataType.FLOAT, bound)
    assert result.ok, result.detail


def _no_axis() -> onnx.ModelProto:
    graph = helper.make_graph(
        [helper.make_node("CumProd", ["x"], ["y"], name="scan")],
        "main",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26)])


def _bad_inputs(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    good = cumprod_model(TensorProto.FLOAT, [2, 3], 1)
    truncated = tmp_path / "truncated.onnx"
    truncated.write_bytes(_weighted_model().SerializeToString()[:500])
    missing = tmp_path / "missing_data" / "model.onnx"
    missing.parent.mkdir()
    onnx.save(_weighted_model(), missing, save_as_external_data=True, location="w.bin")
    (missing.parent / "w.bin").unlink()
    unchecked = cumprod_model(TensorProto.FLOAT, [2, 3], 1)
    unchecked.graph.node.add(op_type="Relu", input=["nowhere"], output=["z"])
    scalar = cumprod_model(TensorProto.FLOAT, [], 0)
    return {
        "does not exist": (tmp_path / "nope.onnx", "no such file"),
        "not ONNX": (tmp_path / "notes.onnx", "not a readable ONNX model"),
        "truncated": (truncated, "not a readable ONNX model"),
        "external data missing": (missing, "external data file 'w.bin' is missing"),
        "fails the checker": (
            _save(unchecked, tmp_path / "unchecked.onnx"),
            "fails the ONNX checker",
        ),
        "no axis": (
            _save(_no_axis(), tmp_path / "no_axis.onnx"),
            "CumProd node 'scan' in graph 'main': it has no axis input",
        ),
        "axis out of range": (
            _save(cumprod_model(TensorProto.FLOAT, [2, 3], 2), tmp_path / "range.onnx"),
            "CumProd node 'cumprod' in graph 'main': axis 2 is out of range",
        ),
        "rank-0 input": (_save(scalar, tmp_path / "scalar.onnx"), "x is a scalar (rank 0)"),
        "output folder not writable": (_save(good, tmp_path / "good.onnx"), "cannot write"),
    }


@pytest.mark.parametrize(
    "case",
    [
        "does not exist",
        "not ONNX",
        "truncated",
        "external data missing",
        "fails the checker",
        "no axis",
        "axis out of range",
        "rank-0 input",
        "output folder not writable",
    ],
)
def test_bad_input_is_one_line_exit_2_nothing_written(tmp_path: Path, case: str) -> None:
    (tmp_path / "notes.onnx").write_text("hello")
    source, message = _bad_inputs(tmp_path)[case]
    (tmp_path / "blocker").write_text("a file where a folder should be")
    out = (
        tmp_path / "blocker" / "out.onnx"
        if case == "output folder not writable"
        else tmp_path / "out" / "out.onnx"
    )
    before = files(tmp_path)
    result = cli(source, "-o", out)
    assert result.returncode == 2
    errors = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(errors) == 1, result.stderr
    assert errors[0].startswith(f"error: {source}") and message in errors[0], errors[0]
    assert "Traceback" not in result.stderr
    assert files(tmp_path) == before


def test_verbose_shows_the_traceback(tmp_path: Path) -> None:
    (tmp_path / "notes.onnx").write_text("hello")
    result = cli(tmp_path / "notes.onnx", "-v")
    assert result.returncode == 2 and "Traceback" in result.stderr


def test_list_writes_nothing(tmp_path: Path) -> None:
    source = shutil.copy(EXAMPLE, tmp_path / "model.onnx")
    result = cli("--list", source)
    assert result.returncode == 0
    lines = [line for line in result.stdout.splitlines() if "CumProd '" in line]
    assert len(lines) == 4
    assert "CumProd 'cumprod_8' int64 axis=0 exclusive, reverse -> dynamic" in result.stdout
    assert "axis=run-time -> dynamic" in result.stdout
    assert files(tmp_path) == ["model.onnx"]


def test_report_json(tmp_path: Path) -> None:
    source = shutil.copy(EXAMPLE, tmp_path / "model.onnx")
    (tmp_path / "plain.onnx").write_bytes(
        onnx.parser.parse_model(
            '<ir_version: 10, opset_import: ["" : 21]>'
            " g (float[2] x) => (float[2] y) { y = Relu (x) }"
        ).SerializeToString()
    )
    result = cli(
        source,
        tmp_path / "plain.onnx",
        "-o",
        tmp_path / "out",
        "--report",
        tmp_path / "report.json",
        "--verify",
        "2",
    )
    assert result.returncode == 0, result.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    by_name = {Path(f["input"]).name: f for f in report["files"]}
    assert by_name["model.onnx"]["status"] == "rewritten"
    assert [n["lowering"] for n in by_name["model.onnx"]["nodes"]] == [
        "dynamic",
        "dynamic",
        "dynamic",
        "dynamic",
    ]
    assert (
        by_name["model.onnx"]["verify"]["ok"] is True
        and by_name["model.onnx"]["verify"]["runs"] == 2
    )
    assert by_name["plain.onnx"]["status"] == "copied"
    assert (tmp_path / "out" / "plain.onnx").read_bytes() == (tmp_path / "plain.onnx").read_bytes()
    # what produced it (found missing by a review of the README): the tool and its options
    assert report["tool"].startswith("cumprod-rewriter ")
    assert report["options"] == {
        "target": "onnxruntime",
        "strategy": "auto",
        "target_opset": None,
        "max_length": None,
        "verify": 2,
        "dims": {},
        "list": False,
    }


def test_verify_passes(tmp_path: Path) -> None:
    source = shutil.copy(EXAMPLE, tmp_path / "model.onnx")
    result = cli(source, "-o", tmp_path / "out.onnx", "--verify", "--dim", "T=50")
    assert result.returncode == 0, result.stderr
    # 4 outputs, and each of the 4 CumProd alone on adversarial values
    assert result.stdout.count("[ok]") == 8 and "MISMATCH" not in result.stdout
    assert result.stdout.count("alone (") == 4


def test_running_on_its_own_output_changes_nothing(tmp_path: Path) -> None:
    source = shutil.copy(EXAMPLE, tmp_path / "model.onnx")
    assert cli(source, "-o", tmp_path / "once.onnx").returncode == 0
    result = cli(tmp_path / "once.onnx", "-o", tmp_path / "twice.onnx")
    assert result.returncode == 0 and "no CumProd" in result.stdout
    assert (tmp_path / "twice.onnx").read_bytes() == (tmp_path / "once.onnx").read_bytes()
    result = cli(tmp_path / "once.onnx")  # no -o: nothing to write
    assert result.returncode == 0 and not (tmp_path / "once.nocumprod.onnx").exists()


def test_quiet_prints_nothing_on_success(tmp_path: Path) -> None:
    source = shutil.copy(EXAMPLE, tmp_path / "model.onnx")
    result = cli(source, "-q", "-o", tmp_path / "out.onnx")
    assert result.returncode == 0 and result.stdout == "" and result.stderr == ""


def test_target_opset(tmp_path: Path) -> None:
    source = shutil.copy(EXAMPLE, tmp_path / "model.onnx")
    result = cli(source, "-o", tmp_path / "out.onnx", "--target-opset", "18", "--verify")
    assert result.returncode == 0, result.stderr
    rewritten = onnx.load(tmp_path / "out.onnx")
    assert [(o.domain, o.version) for o in rewritten.opset_import] == [("", 18)]
    assert rewritten.ir_version == 8
    result = cli(source, "-o", tmp_path / "bad.onnx", "--target-opset", "9")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"error: {source}: cannot lower to ai.onnx opset 9: the target must be between 11 "
        "and the model's own opset 26"
    ]
    assert not (tmp_path / "bad.onnx").exists()


def test_list_shows_each_nodes_lowering_for_the_target(tmp_path: Path) -> None:
    model = _save(cumprod_model(TensorProto.FLOAT, ["N", 6], 0), tmp_path / "m.onnx")
    default = cli(str(model), "--list")
    assert default.returncode == 0 and "-> dynamic" in default.stdout
    refused = cli(str(model), "--list", "--target", "iree")
    assert refused.returncode == 2 and "--max-length N" in refused.stderr
    bounded = cli(str(model), "--list", "--target", "iree", "--max-length", "64")
    assert bounded.returncode == 0 and "-> doubling" in bounded.stdout
    assert files(tmp_path) == ["m.onnx"]  # --list writes nothing


def test_max_length_bounds_a_run_time_length(tmp_path: Path) -> None:
    model = _save(cumprod_model(TensorProto.INT64, ["N", 3], 0), tmp_path / "m.onnx")
    out = tmp_path / "out.onnx"
    done = cli(str(model), "-o", str(out), "--target", "portable", "--max-length", "8")
    assert done.returncode == 0, done.stderr
    rewritten = onnx.load(out)
    assert not {"Loop", "Scan", "If"} & set(op_types(rewritten))
    x = np.arange(1, 16, dtype=np.int64).reshape(5, 3)
    np.testing.assert_array_equal(run_ort(rewritten, {"x": x})[0], np.cumprod(x, axis=0))
    with pytest.raises(Exception, match=r"(?i)reshape"):  # 9 > 8: fails, never wrong
        run_ort(rewritten, {"x": np.ones((9, 3), dtype=np.int64)})
    assert cli(str(model), "--max-length", "0").returncode == 2


def test_training_info_is_kept(tmp_path: Path) -> None:
    model = cumprod_model(TensorProto.FLOAT, [3, 4], 1)
    training = onnx.TrainingInfoProto()
    training.algorithm.name = "algo"
    model.training_info.append(training)
    source = _save(model, tmp_path / "m.onnx")
    done = cli(str(source), "-o", str(tmp_path / "out.onnx"))
    assert done.returncode == 0, done.stderr
    assert list(onnx.load(tmp_path / "out.onnx").training_info) == [training]


@pytest.mark.parametrize("listing", [False, True], ids=["rewrite", "list"])
def test_a_function_that_cannot_be_inlined_for_the_target_is_one_line(
    tmp_path: Path, listing: bool
) -> None:
    """tract loads no model-local function: the target inlines them, and refuses (exit 2,
    one line naming the file and the function, nothing written) one the inliner cannot take
    (here: it imports ai.onnx 18, the model 26)."""
    relu = helper.make_function(
        "local",
        "R",
        ["x"],
        ["y"],
        [helper.make_node("Relu", ["x"], ["y"])],
        [helper.make_opsetid("", 18)],
    )
    graph = helper.make_graph(
        [
            helper.make_node("R", ["x"], ["r"], domain="local"),
            helper.make_node("CumProd", ["r", "axis"], ["y"], name="scan"),
        ],
        "main",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor("axis", TensorProto.INT64, [], [1])],
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 26), helper.make_opsetid("local", 1)],
        functions=[relu],
    )
    source = _save(model, tmp_path / "model.onnx")
    before = files(tmp_path)
    options = ["--list"] if listing else ["-o", tmp_path / "out.onnx"]
    result = cli(source, "--target", "tract", *options)
    assert result.returncode == 2
    errors = [line for line in result.stderr.splitlines() if line.strip()]
    assert errors == [
        f"error: {source}: the tract target loads no model-local function, and onnx_ir's "
        "inliner cannot inline them (local.R): Opset mismatch when inlining function "
        "'local::R': domain '' has version 26 in the model but version 18 in the function"
    ], result.stderr
    assert files(tmp_path) == before
    assert cli(source, "--list").returncode == 0  # onnxruntime loads functions: kept


def test_a_dim_name_the_model_lacks_is_warned(tmp_path: Path) -> None:
    """Found by a review: --dim with a name no input has (a typo of N) was taken silently,
    so a user who meant to verify a long length saw "ok" for the default sizes."""
    source = _save(cumprod_model(TensorProto.FLOAT, [4, "N"], 1), tmp_path / "model.onnx")
    out = tmp_path / "out.onnx"
    report = tmp_path / "report.json"
    result = cli(
        source, "-o", out, "--verify", "--dim", "n=600", "--dim", "N=5", "--quiet",
        "--report", report,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if line.strip()]
    warned = (
        "--dim n: no symbolic dim of the model's inputs or CumProds has that name; nothing "
        "was fed at that size"
    )
    assert warnings == [f"warning: {source}: {warned}"], result.stderr
    assert out.exists()
    # the report holds it too (it did not: session-32 note)
    (file,) = json.loads(report.read_text())["files"]
    assert file["warnings"] == [warned]
    result = cli(source, "-o", out, "--dim", "N=5", "--quiet", "--report", report)
    assert result.returncode == 0, result.stderr  # and without --verify
    ignored = "--dim only sets sizes for --verify, which was not given: ignored"
    assert result.stderr.strip() == f"warning: {ignored}"
    assert json.loads(report.read_text())["warnings"] == [ignored]


def test_a_dim_too_large_to_feed_is_one_line(tmp_path: Path) -> None:
    """Found by a review from outside: --dim N=100000000 --verify made feeds of 10^8 * rows
    elements and the process was killed for memory (24 GB), leaving a staging folder. The
    whole-model feeds are bounded (rewriter.verify.FEED_LIMIT): exit 2, one line, nothing
    written."""
    source = _save(cumprod_model(TensorProto.FLOAT, [4, "N"], 1), tmp_path / "model.onnx")
    before = files(tmp_path)
    result = cli(source, "-o", tmp_path / "out.onnx", "--verify", "--dim", "N=100000000")
    assert result.returncode == 2, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and "graph input 'x' would have shape (4, 100000000)" in errors[0]
    assert "give smaller --dim sizes" in errors[0], errors
    assert files(tmp_path) == before


def test_quiet_drops_warnings_and_a_bad_target_opset_is_a_usage_error(tmp_path: Path) -> None:
    """``-q`` says "errors only": the target's per-node warnings still printed (found by a
    review of the README). ``--target-opset -1`` reached the library and came back as a
    per-file "ValueError: ..." line; it is a usage error now, like ``--max-length 0``."""
    model = _save(cumprod_model(TensorProto.FLOAT, ("n", 4), 1), tmp_path / "m.onnx")
    loud = cli(model, "-o", tmp_path / "loud.onnx", "--target", "iree", "--max-length", "8")
    assert loud.returncode == 0, loud.stderr
    assert "WARNING" in loud.stderr and "iree" in loud.stderr  # IREE's subnormals
    quiet = cli(model, "-o", tmp_path / "q.onnx", "--target", "iree", "--max-length", "8", "-q")
    assert quiet.returncode == 0, quiet.stderr
    assert (quiet.stdout, quiet.stderr) == ("", "")
    assert (tmp_path / "q.onnx").exists()
    bad = cli(model, "-o", tmp_path / "b.onnx", "--target-opset", "-1")
    assert bad.returncode == 2
    assert "--target-opset: must be a whole number >= 1, got '-1'" in bad.stderr
    assert "ValueError" not in bad.stderr and not (tmp_path / "b.onnx").exists()


def test_import_rewriter_loads_nothing_heavy_and_reaches_every_module() -> None:
    """In a fresh interpreter: ``import rewriter`` imports no onnx (its names load on first
    use, so that a Ctrl-C while ``python -m rewriter`` starts is caught by its __main__), and
    the package's modules stay reachable as attributes, as they were when it imported them
    all; the README's ``rewriter.rules.cumprod_rules()`` after a plain ``import rewriter`` was
    an AttributeError once (found by a review of the README)."""
    code = (
        "import sys, rewriter; print('onnx' in sys.modules); "
        "assert 'rewriter.rules' not in sys.modules; "
        "print(type(rewriter.rules.cumprod_rules()).__name__); "
        "print(callable(rewriter.pytorch.translation_table)); "
        "print(rewriter.lowerings.STRATEGIES == rewriter.STRATEGIES); "
        "print(rewriter.io.load_model.__module__); print(hasattr(rewriter, 'no_such_name'))"
    )
    done = cli_process(code=code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [
        "False",
        "RewriteRuleSet",
        "True",
        "True",
        "rewriter.io.load",
        "False",
    ]


def test_list_reports_what_the_rewrite_would_refuse(tmp_path: Path) -> None:
    """``--list --target tract --target-opset 11`` listed "-> chain" and exited 0 where the
    rewrite refuses the node (below opset 14 over symbolic dims tract would need an If):
    --list ignored --target-opset, and planned without the rewrite's own checks (found by a
    review of the README). It now runs the rewrite on a copy in memory; the options it
    ignores are named."""
    model = _save(cumprod_model(TensorProto.FLOAT, ("a", 5), 1), tmp_path / "m.onnx")
    listed = cli(
        model, "--list", "--target", "tract", "--target-opset", "11", "-o", tmp_path / "x.onnx"
    )
    rewrite = cli(model, "-o", tmp_path / "o.onnx", "--target", "tract", "--target-opset", "11")
    assert listed.returncode == rewrite.returncode == 2
    refusal = "use --target-opset 14 or later (target opset 11)"
    assert refusal in listed.stderr and refusal in rewrite.stderr
    assert "warning: --list writes nothing: -o ignored" in listed.stderr
    fine = cli(model, "--list", "--target", "tract", "--target-opset", "14")
    assert fine.returncode == 0, fine.stderr
    assert " -> " in fine.stdout
    assert files(tmp_path) == ["m.onnx"]


def test_warnings_name_the_file_and_an_empty_folder_says_so(tmp_path: Path) -> None:
    """In a folder run a target's warning named a node and a graph but not the file (found
    by a review of the README); an empty folder printed "0 file(s): ; 0 CumProd node(s)
    rewritten (none)"."""
    folder = tmp_path / "models"
    folder.mkdir()
    for name in ("a.onnx", "b.onnx"):
        _save(cumprod_model(TensorProto.FLOAT, (3, "n"), 1), folder / name)
    done = cli(folder, "-o", tmp_path / "out", "--target", "iree", "--max-length", "8")
    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stderr.splitlines() if line.startswith("WARNING")]
    assert warnings, done.stderr
    for name in ("a.onnx", "b.onnx"):
        assert any(f"{folder / name}: CumProd" in line for line in warnings), warnings
    (tmp_path / "empty").mkdir()
    empty = cli(tmp_path / "empty")
    assert empty.returncode == 0, empty.stderr
    assert empty.stdout.strip() == "0 files: no .onnx model found"


def test_verify_given_before_the_model_takes_its_default_count(tmp_path: Path) -> None:
    """``cumprod-rewriter --verify model.onnx`` failed with "argument --verify: must be a
    whole number >= 1, got 'model.onnx'" (found by a review of the README): a --verify
    followed by something that is not a count is given without one. A count still works,
    and a bad one is still refused."""
    from rewriter.cli import _bare_verify, main

    model = _save(cumprod_model(TensorProto.FLOAT, (3, 4), 1), tmp_path / "m.onnx")
    assert main(["--verify", str(model), "-o", str(tmp_path / "o.onnx")]) == 0
    assert (tmp_path / "o.onnx").exists()
    assert _bare_verify(["--verify", "m.onnx"]) == ["--verify=3", "m.onnx"]
    assert _bare_verify(["--verify", "2", "m.onnx"]) == ["--verify", "2", "m.onnx"]
    assert _bare_verify(["--verify", "-1"]) == ["--verify", "-1"]
    assert _bare_verify(["--", "--verify", "x"]) == ["--", "--verify", "x"]
    with pytest.raises(SystemExit) as exited:
        main(["--verify", "0", str(model)])
    assert exited.value.code == 2


def test_the_file_tag_is_put_once_on_a_record_two_handlers_see(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The command line's filter puts the file in front of the library's log lines; a record
    that two handlers see (pytest's, a user's) got it twice, and a % in the path was read as
    a format."""
    import logging

    from rewriter.cli import _FileTag

    tag = _FileTag()
    tag.current = "/models/a%b.onnx"
    first, second = logging.StreamHandler(sys.stdout), logging.StreamHandler(sys.stdout)
    logger = logging.getLogger("rewriter.test_tag")
    for handler in (first, second):
        handler.addFilter(tag)
        logger.addHandler(handler)
    logger.propagate = False
    try:
        logger.warning("CumProd %s in graph 'g'", "'cp'")
    finally:
        for handler in (first, second):
            logger.removeHandler(handler)
    lines = capsys.readouterr().out.splitlines()
    assert lines == ["/models/a%b.onnx: CumProd 'cp' in graph 'g'"] * 2
