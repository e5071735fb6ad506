"""The command never loses or exposes a byte: run as a subprocess on real files.

Refused outputs, kept modes and owners, fresh data-file names with the model's rename as the
commit point, shared data files, signals, leftover staging, --report failures and the
one-line messages for odd but readable models. Permission cases run as ``nobody`` through
``setpriv`` (the tests run as root); without it they skip, saying why.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.helpers import cumprod_model, run_cli

EXAMPLE = Path(__file__).resolve().parents[2] / "rewriter" / "examples" / "example.onnx"
NOBODY = 65534
SETPRIV = shutil.which("setpriv")


def cli(
    *args: str | Path,
    cwd: Path | None = None,
    code: str | None = None,
    user: int | None = None,
) -> subprocess.CompletedProcess[str]:
    """``python -m rewriter ARGS`` (or ``python -c CODE ARGS``), as ``user`` if given."""
    command = [sys.executable, "-m", "rewriter"] if code is None else [sys.executable, "-c", code]
    if user is not None:
        assert SETPRIV is not None
        command = [SETPRIV, f"--reuid={user}", f"--regid={user}", "--clear-groups", *command]
    return subprocess.run(
        [*command, *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
        check=False,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )


def cli_many(
    runs: dict[str, tuple[list[str | Path], Path]],
) -> dict[str, subprocess.CompletedProcess[str]]:
    """Several ``python -m rewriter ARGS`` at once (name -> (args, cwd)): the command's
    start-up is mostly waiting, so the cases of one test file run side by side."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    started = {
        name: subprocess.Popen(
            [sys.executable, "-m", "rewriter", *map(str, args)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=cwd,
            env=env,
        )
        for name, (args, cwd) in runs.items()
    }
    results = {}
    for name, process in started.items():
        stdout, stderr = process.communicate(timeout=300)
        results[name] = subprocess.CompletedProcess(
            process.args, process.returncode, stdout, stderr
        )
    return results


def snapshot(folder: Path) -> dict[str, tuple[bytes, int, int]]:
    """Every file below ``folder``: bytes, mode, owner."""
    found = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file() and not path.is_symlink():
            st = path.stat()
            found[str(path.relative_to(folder))] = (path.read_bytes(), st.st_mode, st.st_uid)
    return found


def one_error(result: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ") and "Traceback" not in result.stderr
    return lines[0]


def weighted(folder: Path, name: str, location: str, *, cumprod: bool = True) -> Path:
    """y = CumProd(x * w, 1) (or x * w without CumProd) with w in external data."""
    w = np.random.default_rng(len(name)).uniform(0.9, 1.1, (2, 1024)).astype(np.float32)
    nodes = [helper.make_node("Mul", ["x", "w"], ["xw" if cumprod else "y"])]
    initializers = [numpy_helper.from_array(w, "w")]
    if cumprod:
        nodes.append(helper.make_node("CumProd", ["xw", "axis"], ["y"], name="scan"))
        initializers.append(helper.make_tensor("axis", TensorProto.INT64, [], [1]))
    graph = helper.make_graph(
        nodes,
        name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 1024])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 1024])],
        initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26)], ir_version=10)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    onnx.save(model, path, save_as_external_data=True, location=location, size_threshold=0)
    return path


X = np.random.default_rng(7).uniform(0.9, 1.1, (2, 1024)).astype(np.float32)


def run(path: Path) -> np.ndarray:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return np.asarray(session.run(None, {"x": X})[0])


@pytest.fixture
def shared_tmp() -> Iterator[Path]:
    """A world-writable folder nobody can reach (pytest's tmp_path is root-only)."""
    if SETPRIV is None:
        pytest.skip("setpriv is not available: cannot run as nobody")
    if os.geteuid() != 0:
        pytest.skip("not root: cannot switch to nobody or chown to another user")
    folder = Path(tempfile.mkdtemp(prefix="cumprod-safety-"))
    folder.chmod(0o777)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# -- modes and owners ---------------------------------------------------------------------------


def test_in_place_keeps_mode_and_owner_of_model_and_data(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("not root: cannot chown to another user")
    source = weighted(tmp_path, "m.onnx", "m.bin")
    for path in (source, tmp_path / "m.bin"):
        os.chown(path, NOBODY, NOBODY)
        path.chmod(0o600)
    result = run_cli(source, "--in-place")  # in process: modes and owners, not the process
    assert result.returncode == 0, result.stderr
    (data,) = tmp_path.glob("m.onnx.*.data")
    assert f"kept {tmp_path / 'm.bin'}" in result.stderr  # the replaced model's: kept
    for path in (source, data):
        st = path.stat()
        assert (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid) == (0o600, NOBODY, NOBODY), path


def test_an_existing_output_keeps_its_mode_a_new_one_takes_the_inputs(tmp_path: Path) -> None:
    source = weighted(tmp_path / "in", "m.onnx", "m.bin")
    source.chmod(0o600)
    result = cli(source, "-o", tmp_path / "new.onnx")
    assert result.returncode == 0, result.stderr
    written = [p for p in tmp_path.iterdir() if p.is_file()]
    assert len(written) == 2 and all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in written)

    existing = tmp_path / "old.onnx"
    existing.write_bytes(b"an older output")
    existing.chmod(0o640)
    assert cli(source, "-o", existing, "--strategy", "loop").returncode == 0  # bitwise native
    assert stat.S_IMODE(existing.stat().st_mode) == 0o640
    np.testing.assert_array_equal(run(existing), run(source))


def test_an_owner_that_cannot_be_kept_is_refused(shared_tmp: Path) -> None:
    source = Path(shutil.copy(EXAMPLE, shared_tmp / "m.onnx"))
    source.chmod(0o644)
    target = shared_tmp / "out.onnx"
    target.write_bytes(b"root's file")
    target.chmod(0o666)
    before = snapshot(shared_tmp)
    result = cli(source, "-o", target, user=NOBODY)
    assert result.returncode == 2
    assert "cannot keep the owner" in one_error(result)
    assert snapshot(shared_tmp) == before
    assert not [p for p in shared_tmp.iterdir() if p.name.startswith(".cumprod-staging-")]


def test_report_that_cannot_be_written_is_refused_before_any_work(shared_tmp: Path) -> None:
    source = Path(shutil.copy(EXAMPLE, shared_tmp / "m.onnx"))
    source.chmod(0o644)
    locked = shared_tmp / "locked"
    locked.mkdir(mode=0o755)  # root's, not writable by nobody
    result = cli(source, "-o", shared_tmp / "out.onnx", "--report", locked / "r.json", user=NOBODY)
    assert result.returncode == 2
    assert "not writable" in one_error(result)
    assert sorted(p.name for p in shared_tmp.iterdir()) == ["locked", "m.onnx"]


# -- outputs that would destroy an input ------------------------------------------------------


REFUSALS = {
    "-o the input": (["m.onnx", "-o", "m.onnx"], "refusing to write over the input"),
    "-o an alias of the input": (["m.onnx", "-o", "sub/../m.onnx"], "over the input"),
    "-o a symlink to the input": (["m.onnx", "-o", "link.onnx"], "over the input"),
    "-o a hard link to the input": (["m.onnx", "-o", "hard.onnx"], "over the input"),
    "folder -o the same folder": (["models", "-o", "models/"], "over the input"),
    "-o the input's data file": (["m.onnx", "-o", "m.bin"], "the external data of the input"),
    "--report the input": (["m.onnx", "-o", "o.onnx", "--report", "m.onnx"], "is an input"),
    "--report the input's data": (["m.onnx", "-o", "o.onnx", "--report", "m.bin"], "data file"),
    "--report an output": (["m.onnx", "-o", "o.onnx", "--report", "o.onnx"], "model output"),
    "--report a folder": (["m.onnx", "-o", "o.onnx", "--report", "sub"], "is a folder"),
    "--report under a file": (
        ["m.onnx", "-o", "o.onnx", "--report", "m.bin/logs/r.json"],
        "m.bin is not a folder",
    ),
    "two inputs, one output": (
        ["models/a.onnx", "sub/a.onnx", "-o", "out/"],
        "several inputs would be written there (models/a.onnx and sub/a.onnx)",
    ),
    "empty INPUT": (["", "--in-place"], "INPUT is an empty string"),
}


def _refusal_folder(folder: Path) -> None:
    weighted(folder, "m.onnx", "m.bin")
    (folder / "sub").mkdir()
    (folder / "link.onnx").symlink_to("m.onnx")
    os.link(folder / "m.onnx", folder / "hard.onnx")
    shutil.copy(EXAMPLE, folder / "sub" / "a.onnx")
    (folder / "models").mkdir()
    shutil.copy(EXAMPLE, folder / "models" / "a.onnx")


# per case: its folder, the folder's files before the run, the run
Runs = dict[str, tuple[Path, dict[str, tuple[bytes, int, int]], subprocess.CompletedProcess[str]]]


def _run_each_in_its_folder(
    factory: pytest.TempPathFactory,
    prefix: str,
    make: Callable[[Path], None],
    cases: dict[str, list[str]],
) -> Runs:
    """The command line's arguments of every case run at once, each in a folder of its own
    that ``make`` fills."""
    folders, before = {}, {}
    for i, case in enumerate(cases):
        folders[case] = factory.mktemp(f"{prefix}{i}")
        make(folders[case])
        before[case] = snapshot(folders[case])
    results = cli_many({case: (args, folders[case]) for case, args in cases.items()})
    return {case: (folders[case], before[case], results[case]) for case in cases}


@pytest.fixture(scope="module")
def refusals(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    """Every case of REFUSALS run at once, each in its own folder."""
    cases = {case: args for case, (args, *_) in REFUSALS.items()}
    return _run_each_in_its_folder(tmp_path_factory, "refusal", _refusal_folder, cases)


@pytest.mark.parametrize("case", list(REFUSALS))
def test_refused_exit_2_one_line_nothing_written(
    refusals: Runs,
    case: str,
) -> None:
    folder, before, result = refusals[case]
    message = REFUSALS[case][1]
    assert result.returncode == 2, result.stdout + result.stderr
    if case == "empty INPUT":  # a usage error: argparse's two lines
        assert message in result.stderr and "Traceback" not in result.stderr
    else:
        assert message in one_error(result)
    assert snapshot(folder) == before
    assert not (folder / "out").exists()


def test_o_with_a_trailing_slash_is_a_folder(tmp_path: Path) -> None:
    source = Path(shutil.copy(EXAMPLE, tmp_path / "m.onnx"))
    result = cli(source, "-o", f"{tmp_path / 'newdir'}/")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "newdir" / "m.onnx").is_file()


# -- external data files ----------------------------------------------------------------------


def test_copies_take_fresh_data_names_and_clobber_nothing(tmp_path: Path) -> None:
    """Two models without CumProd, each with its own weights.bin, into an output folder that
    already holds another model's weights.bin."""
    a = weighted(tmp_path / "in1", "a.onnx", "weights.bin", cumprod=False)
    b = weighted(tmp_path / "in2", "b.onnx", "weights.bin", cumprod=False)
    other = weighted(tmp_path / "out", "other.onnx", "weights.bin", cumprod=False)
    expected = {p.name: run(p) for p in (a, b, other)}
    other_data = (tmp_path / "out" / "weights.bin").read_bytes()
    result = cli(a, b, "-o", tmp_path / "out")
    assert result.returncode == 0, result.stderr
    assert "no CumProd, copied to" in result.stdout
    assert (tmp_path / "out" / "weights.bin").read_bytes() == other_data
    for name, values in expected.items():
        np.testing.assert_array_equal(run(tmp_path / "out" / name), values)
    names = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert len(names) == 6 and sum(n.endswith(".data") for n in names) == 2, names


@pytest.mark.parametrize("other", ["b.onnx", "b.ONNX"])
def test_a_replaced_data_file_is_never_removed(tmp_path: Path, other: str) -> None:
    """Found by reviews from outside: ``--in-place`` deleted weights.bin that b.ONNX still
    read (only ``*.onnx`` was looked at), and a data file the tool wrote that a backup copy
    (``a.onnx.bak``) or a model in another folder still read. The replaced model's data files
    stay; those no ``.onnx`` file (any case) in the folder reads any more are named."""
    a = weighted(tmp_path, "a.onnx", "shared.bin")
    b = weighted(tmp_path, other, "shared.bin")  # same weights (same name length), same file
    shared = (tmp_path / "shared.bin").read_bytes()
    expected = run(b)
    result = cli(a, "--in-place")
    assert result.returncode == 0 and "kept" not in result.stderr, result.stderr
    assert (tmp_path / "shared.bin").read_bytes() == shared  # b still needs it
    np.testing.assert_array_equal(run(b), expected)
    np.testing.assert_allclose(run(a), expected, rtol=1e-5)
    result = cli(b, "--in-place")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "shared.bin").read_bytes() == shared  # nobody here reads it: named
    assert f"kept {tmp_path / 'shared.bin'}" in result.stderr, result.stderr
    c = weighted(tmp_path / "c", "c.onnx", "c.bin")
    out = tmp_path / "out.onnx"
    assert cli(c, "-o", out).returncode == 0
    (ours,) = tmp_path.glob("out.onnx.*.data")
    shutil.copy(out, tmp_path / "out.onnx.bak")  # a backup reading the tool's own data file
    result = cli(c, "-o", out)
    assert result.returncode == 0, result.stderr
    assert f"kept {ours}" in result.stderr, result.stderr
    assert ours.exists() and len(list(tmp_path.glob("out.onnx.*.data"))) == 2
    for model in (out, tmp_path / "out.onnx.bak"):
        np.testing.assert_allclose(run(model), run(c), rtol=1e-5)


OTHERS_DATA = {
    "-o its data file": (["in/m.onnx", "-o", "w.bin"], "w.bin", ""),
    "-o a hard link to it": (["in/m.onnx", "-o", "hard.bin"], "hard.bin", " (%s/w.bin)"),
    "-o a symbolic link to it": (["in/m.onnx", "-o", "link.bin"], "link.bin", " (%s/w.bin)"),
    "-o a .onnx data file of B.ONNX": (["in/m.onnx", "-o", "data.onnx"], "data.onnx", ""),
    "--report its data file": (
        ["in/m.onnx", "-o", "out.onnx", "--report", "w.bin"],
        "--report w.bin",
        "",
    ),
}


def _others_data_folder(folder: Path) -> None:
    weighted(folder / "in", "m.onnx", "m.bin")
    weighted(folder, "other.onnx", "w.bin", cumprod=False)  # not an input of the run
    weighted(folder, "B.ONNX", "data.onnx", cumprod=False)  # any case; any data file name
    os.link(folder / "w.bin", folder / "hard.bin")
    (folder / "link.bin").symlink_to("w.bin")
    (folder / "broken.onnx").write_bytes(b"not a model")  # skipped, not a reason to refuse
    (folder / "free.bin").write_bytes(b"read by no model")


@pytest.fixture(scope="module")
def others_data(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    """Every case of OTHERS_DATA, and -o onto a data file no model reads, run at once."""
    cases = {case: args for case, (args, _, _) in OTHERS_DATA.items()}
    cases["-o a file no model reads"] = ["in/m.onnx", "-o", "free.bin"]
    return _run_each_in_its_folder(tmp_path_factory, "others", _others_data_folder, cases)


@pytest.mark.parametrize("case", list(OTHERS_DATA))
def test_another_models_data_file_is_never_written_over(
    others_data: Runs,
    case: str,
) -> None:
    """Noticed in an earlier session (left open): ``-o`` (or ``--report``) naming the external
    data file of a model that is not an input of the run replaced it, and that model lost its
    weights. Refused (also through a hard or symbolic link): exit 2, one line naming the
    output and the model, the model and its data byte for byte as they were."""
    folder, before, result = others_data[case]
    _, shown, alias = OTHERS_DATA[case]
    owner = "B.ONNX" if case.endswith("B.ONNX") else "other.onnx"
    assert result.returncode == 2, result.stdout + result.stderr
    assert one_error(result) == (
        f"error: {shown}: "
        + ("is" if shown.startswith("--report") else "refusing to write over")
        + f" the external data of the model {folder / owner}"
        + (alias % folder if alias else "")
        + "; nothing written"
    )
    assert snapshot(folder) == before
    assert not (folder / "out.onnx").exists()
    np.testing.assert_array_equal(run(folder / "other.onnx"), X * _w_of("other.onnx"))


def _w_of(name: str) -> np.ndarray:
    """The weights :func:`weighted` gives the model ``name``."""
    return np.random.default_rng(len(name)).uniform(0.9, 1.1, (2, 1024)).astype(np.float32)


def test_a_file_no_model_reads_may_be_written_over(
    others_data: Runs,
) -> None:
    """The refusal above is not for any existing file: one no model of the folder reads is
    replaced (a model that cannot be read is skipped), and the others' data is kept."""
    folder, before, result = others_data["-o a file no model reads"]
    assert result.returncode == 0, result.stderr
    assert (folder / "free.bin").read_bytes() != before["free.bin"][0]
    after = snapshot(folder)
    assert {name: after[name] for name in ("w.bin", "data.onnx", "other.onnx", "B.ONNX")} == {
        name: before[name] for name in ("w.bin", "data.onnx", "other.onnx", "B.ONNX")
    }


def test_a_device_or_fifo_is_never_replaced(tmp_path: Path) -> None:
    """Found by a review from outside: ``-o`` onto a device node or FIFO replaced it with a
    regular file (as root, ``-o /dev/null`` turned the machine's /dev/null into a file).
    Refused, one line; ``--report`` to such a file writes into it (``/dev/stdout``)."""
    source = Path(shutil.copy(EXAMPLE, tmp_path / "m.onnx"))
    fifo = tmp_path / "out.onnx"
    os.mkfifo(fifo)
    result = cli(source, "-o", fifo)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == (
        f"error: {fifo}: is not a regular file (a device, FIFO or socket); nothing written"
    )
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    result = cli(source, "-o", tmp_path / "ok.onnx", "--report", "/dev/stdout", "-q")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["files"][0]["status"] == "rewritten"
    with socket.socket(socket.AF_UNIX) as server:  # a socket is refused before any write
        server.bind(str(tmp_path / "sock"))
        result = cli(source, "-o", tmp_path / "no.onnx", "--report", tmp_path / "sock")
    assert result.returncode == 2
    assert "is a socket or block device; nothing written" in result.stderr
    assert not (tmp_path / "no.onnx").exists()


def test_new_data_files_keep_the_inputs_data_permissions(tmp_path: Path) -> None:
    """Found by reviews from outside: a 0600 data file (private weights) beside a 0644
    model was copied / rewritten as 0644 (also over an existing 0644 output without
    external data): a new data file has no permission the input's data file lacks."""
    for cumprod in (True, False):  # rewritten, copied
        folder = tmp_path / f"in{int(cumprod)}"
        source = weighted(folder, "m.onnx", "m.bin", cumprod=cumprod)
        os.chmod(folder / "m.bin", 0o600)
        os.chmod(source, 0o644)
        out = tmp_path / f"out{int(cumprod)}"
        assert cli(source, "-o", f"{out}/").returncode == 0
        (data,) = out.glob("m.onnx.*.data")
        assert stat.S_IMODE(data.stat().st_mode) == 0o600
        assert stat.S_IMODE((out / "m.onnx").stat().st_mode) == 0o644
    existing = tmp_path / "existing.onnx"
    shutil.copy(EXAMPLE, existing)
    os.chmod(existing, 0o644)
    assert cli(tmp_path / "in1" / "m.onnx", "-o", existing).returncode == 0
    (data,) = tmp_path.glob("existing.onnx.*.data")
    assert stat.S_IMODE(data.stat().st_mode) == 0o600


FAIL_COMMIT = """
import os, sys
real = os.replace
def replace(src, dst, *args, **kwargs):
    if str(dst).endswith(".onnx"):
        raise PermissionError(13, "Permission denied (simulated)")
    return real(src, dst, *args, **kwargs)
os.replace = replace
from rewriter.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_the_models_rename_is_the_commit_point(tmp_path: Path) -> None:
    """The data file goes in first under a fresh name: when the model's rename fails, the old
    output (model and data) is untouched and nothing new is left behind."""
    source = weighted(tmp_path / "in", "m.onnx", "m.bin")
    out = tmp_path / "out" / "m.onnx"
    assert cli(source, "-o", out).returncode == 0
    before, values = snapshot(out.parent), run(out)
    result = cli(source, "-o", out, "--strategy", "loop", code=FAIL_COMMIT)
    assert result.returncode == 2 and "cannot write" in one_error(result)
    assert snapshot(out.parent) == before
    np.testing.assert_array_equal(run(out), values)
    assert cli(source, "-o", out, "--strategy", "loop").returncode == 0
    after = snapshot(out.parent)
    # a fresh data name; the old one kept (never removed), the model changed
    assert len(after) == 3 and set(before) - {"m.onnx"} < set(after)
    assert after["m.onnx"] != before["m.onnx"]


# -- interruptions ----------------------------------------------------------------------------


SLOW_SAVE = """
import sys, time
from pathlib import Path
import onnx_ir as ir
real = ir.save
def slow(model, path, **kwargs):
    real(model, path, **kwargs)
    Path(sys.argv[-1]).write_text("staged")
    time.sleep(60)
ir.save = slow
from rewriter.cli import main
sys.exit(main(sys.argv[1:-1]))
"""


@pytest.mark.parametrize("sig,code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_cleans_up_and_exits(tmp_path: Path, sig: signal.Signals, code: int) -> None:
    source = weighted(tmp_path / "in", "m.onnx", "m.bin")
    marker = tmp_path / "staged"
    out = tmp_path / "out"
    process = subprocess.Popen(
        [sys.executable, "-c", SLOW_SAVE, source, "-o", out / "m.onnx", marker],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not marker.exists() and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.05)
    assert marker.exists(), process.communicate()
    assert any(p.name.startswith(".cumprod-staging-") for p in out.iterdir())
    process.send_signal(sig)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == code, stderr
    assert "Traceback" not in stderr and f"interrupted ({sig.name})" in stderr
    assert list(out.iterdir()) == []


# ``python -m rewriter ARGS`` (runpy, as -m runs it), with an import of the module named
# first that writes the marker file named second and then waits: a SIGINT sent once the
# marker exists arrives while the command's modules load, at a known place, every time.
# The child first gives SIGINT the handler Python installs when started from a terminal: a
# runner started in the background by a script inherits an ignored SIGINT, and a child that
# kept it would never see the signal.
BLOCKED_IMPORT = """
import runpy, signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)
from pathlib import Path
marker, blocked = Path(sys.argv.pop(1)), sys.argv.pop(1)
class Block:
    def find_spec(self, name, path=None, target=None):
        if name == blocked:
            marker.write_text(name)
            time.sleep(60)
        return None
sys.meta_path.insert(0, Block())
runpy.run_module("rewriter", run_name="__main__", alter_sys=True)
"""


def _interrupt_importing(blocked: str, folder: Path) -> subprocess.CompletedProcess[str]:
    source = Path(shutil.copy(EXAMPLE, folder / "m.onnx"))
    marker = folder / "importing"
    command = [sys.executable, "-c", BLOCKED_IMPORT, str(marker), blocked, str(source)]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    process = subprocess.Popen(
        [*command, "-o", str(folder / "out.onnx")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    deadline = time.monotonic() + 60
    while not marker.exists() and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.02)
    assert marker.exists(), process.communicate()
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=60)
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


def test_a_sigint_while_the_command_loads_exits_130_without_a_traceback(tmp_path: Path) -> None:
    """Noticed in an earlier session (left open): Ctrl-C during the start-up imports printed
    Python's KeyboardInterrupt traceback, while one later exits 130 with one line."""
    result = _interrupt_importing("rewriter.cli", tmp_path)
    assert result.returncode == 130, result.stderr
    assert result.stderr == "interrupted (SIGINT): stopped before reading any file\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["importing", "m.onnx"]


def test_a_sigint_while_the_package_loads_exits_130_without_a_traceback(tmp_path: Path) -> None:
    """``python -m rewriter`` imports the package before its __main__: the package's names
    load on first use (rewriter/__init__.py), so onnx is imported under the guard too."""
    result = _interrupt_importing("onnx", tmp_path)
    assert result.returncode == 130 and "Traceback" not in result.stderr, result.stderr


def test_leftover_staging_is_skipped_and_reported(tmp_path: Path) -> None:
    models = tmp_path / "models"
    models.mkdir()
    shutil.copy(EXAMPLE, models / "a.onnx")
    leftover = models / ".cumprod-staging-k1ll3d"
    leftover.mkdir()
    shutil.copy(EXAMPLE, leftover / "a.onnx")
    result = cli(models, "-o", tmp_path / "out")
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in (tmp_path / "out").rglob("*")) == ["a.onnx"]
    assert f"warning: {leftover}: staging folder left by an interrupted run" in result.stderr
    assert "1 file(s): 1 rewritten" in result.stdout


# -- messages -----------------------------------------------------------------------------------


def _external(folder: Path, name: str, **entries: str) -> Path:
    """A CumProd model whose initializer w has the given external_data entries."""
    path = weighted(folder, name, "w.bin")
    model = onnx.load(path, load_external_data=False)
    tensor = model.graph.initializer[0]
    del tensor.external_data[:]
    for key, value in entries.items():
        tensor.external_data.add(key=key, value=value)
    onnx.save(model, path)
    return path


def _odd_models(folder: Path) -> dict[str, tuple[Path, str]]:
    dup = cumprod_model(TensorProto.FLOAT, [2, 3], 1)
    dup.graph.output.append(dup.graph.output[0])
    sparse = cumprod_model(TensorProto.FLOAT, [2, 3], 1)
    value = helper.make_sparse_tensor(
        helper.make_tensor("v", TensorProto.FLOAT, [1], [2.0]),
        helper.make_tensor("i", TensorProto.INT64, [1], [0]),
        [2, 3],
    )
    sparse.graph.node.insert(0, helper.make_node("Constant", [], ["c"], sparse_value=value))
    attr = cumprod_model(TensorProto.FLOAT, [2, 3], 1)
    attr.graph.node[0].attribute.append(helper.make_attribute("exclusive", 1.5))
    onnx.save(attr, folder / "attr.onnx")
    onnx.save(dup, folder / "dup.onnx")
    onnx.save(sparse, folder / "sparse.onnx")
    (folder / "short.bin").write_bytes(b"\0" * 100)
    return {
        "negative offset": (
            _external(folder, "neg.onnx", location="w.bin", offset="-8", length="8192"),
            "tensor 'w': external data offset '-8' is not a whole number >= 0",
        ),
        "duplicated output": (folder / "dup.onnx", "graph 'main' lists the output 'y' twice"),
        "attribute of the wrong type": (folder / "attr.onnx", "node 'cumprod'"),
        "sparse_value Constant": (folder / "sparse.onnx", "sparse tensor attribute"),
        "buffer too short": (
            _external(folder, "short.onnx", location="short.bin"),
            "external data file 'short.bin' is too short for tensor 'w' (needs 8192 bytes, "
            "has 100)",
        ),
        "absolute location": (
            _external(folder, "abs.onnx", location=str(folder / "w.bin")),
            "is an absolute path",
        ),
        "location outside the folder": (
            _external(folder, "up.onnx", location="../w.bin"),
            "leaves the model's folder",
        ),
    }


ODD_CASES = [
    "negative offset",
    "duplicated output",
    "attribute of the wrong type",
    "sparse_value Constant",
    "buffer too short",
    "absolute location",
    "location outside the folder",
]


@pytest.fixture(scope="module")
def odd_results(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[
    Path,
    dict[str, tuple[bytes, int, int]],
    dict[str, tuple[Path, str]],
    dict[str, subprocess.CompletedProcess[str]],
]:
    folder = tmp_path_factory.mktemp("odd")
    models = _odd_models(folder)
    before = snapshot(folder)
    runs = {
        case: ([models[case][0], "-o", folder / "out" / f"{i}.onnx"], folder)
        for i, case in enumerate(ODD_CASES)
    }
    return folder, before, models, cli_many(runs)


@pytest.mark.parametrize("case", ODD_CASES)
def test_odd_models_name_the_real_problem(
    odd_results: tuple[
        Path,
        dict[str, tuple[bytes, int, int]],
        dict[str, tuple[Path, str]],
        dict[str, subprocess.CompletedProcess[str]],
    ],
    case: str,
) -> None:
    folder, before, models, results = odd_results
    source, message = models[case]
    result = results[case]
    assert result.returncode == 2
    line = one_error(result)
    assert line.startswith(f"error: {source}: ") and message in line, line
    assert "not a readable ONNX model" not in line
    assert snapshot(folder) == before
    assert "1 file(s): 1 failed; 0 CumProd node(s) rewritten" in result.stdout


def test_a_failed_write_is_not_counted_as_rewritten(tmp_path: Path) -> None:
    source = shutil.copy(EXAMPLE, tmp_path / "m.onnx")
    (tmp_path / "blocker").write_text("a file where a folder should be")
    result = cli(source, "-o", tmp_path / "blocker" / "out.onnx")
    assert result.returncode == 2 and "cannot write" in one_error(result)
    assert "1 file(s): 1 failed; 0 CumProd node(s) rewritten (none)" in result.stdout


def test_no_onnxruntime_log_lines_in_our_output(tmp_path: Path) -> None:
    """An unused initializer: onnxruntime logs a coloured warning for it by default."""
    model = cumprod_model(TensorProto.FLOAT, [2, 5], 1)
    model.graph.initializer.append(helper.make_tensor("unused", TensorProto.FLOAT, [1], [1.0]))
    onnx.save(model, tmp_path / "m.onnx")
    result = cli(tmp_path / "m.onnx", "-o", tmp_path / "o.onnx", "--verify")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stderr == ""
    assert "\x1b[" not in result.stdout and ":onnxruntime:" not in result.stdout


@pytest.mark.parametrize("listing", [True, False], ids=["list", "rewrite"])
def test_a_closed_stdout_stops_quietly(tmp_path: Path, listing: bool) -> None:
    """``cumprod-rewriter --list model.onnx | head -1``: the reader went away. Exit 141
    (128 + SIGPIPE) without a traceback, and no staging folder left behind."""
    models = tmp_path / "models"
    models.mkdir()
    for name in ("a.onnx", "b.onnx"):
        shutil.copy(EXAMPLE, models / name)
    read_end, write_end = os.pipe()
    os.close(read_end)  # every write to stdout now fails with EPIPE
    options = ["--list"] if listing else ["-o", str(tmp_path / "out")]
    try:
        result = subprocess.run(
            [sys.executable, "-m", "rewriter", str(models), *options],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=300,
            check=False,
        )
    finally:
        os.close(write_end)
    assert result.returncode == 141, result.stderr
    assert "Traceback" not in result.stderr and "BrokenPipeError" not in result.stderr
    assert not list(tmp_path.rglob(".cumprod-staging-*"))
    for written in (tmp_path / "out").glob("*.onnx"):  # whole files only
        onnx.checker.check_model(onnx.load(written), full_check=True)
