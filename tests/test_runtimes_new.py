"""CumProd lowered for MNN, Apache TVM and ncnn (``target=NAME``), run on that runtime, compared
with numpy: zero silent wrong results.

The matrix is tests/test_runtimes.py's (every element type x all four (exclusive, reverse) x
static dims / symbolic dims / a run-time axis x ranks 1-4, one model per (type, form, rank)
holding one CumProd per attribute pair), each model run twice: on random data and on data
with special values sprinkled in (0, -0, +-inf, NaN, +-1; integers: 0, -1, the extremes and
2^(bits/2)). The rule every cell is held to: each output either matches the reference
(integers bit-exact, floats within the bound of the lowering the node got) or its node
carries the target's warning, naming the node and the runtime. A lowering the target refuses
(one line, :data:`Runtime.refusals`) is the expected outcome where listed, and a failure
elsewhere; so is a model the runtime fails to load or run.

:func:`test_limit_still_shows` keeps the warnings honest: each of a target's limits must still
break at least one cell of its types, or the runtime computes them now and the limit (and the
warning) should go.

Each runtime lives in its own environment (scripts/runtimes/NAME.sh, tests/runtime_harness.py);
a missing one skips, except on CI (CI=true), where it fails. ncnn is the opt-in tier
CUMPROD_NCNN=1 (pnnx needs torch: scripts/runtimes/ncnn.sh installs its CPU build, 1.1 GB).
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import os
import re
import subprocess
import sys
import sysconfig
import zlib
from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from onnx import TensorProto, numpy_helper

import rewriter
from rewriter.targets import target_named
from rewriter.verify import compare
from tests import runtime_harness
from tests.helpers import ALL_TYPES, INTS, TYPE_NAMES, cumprod_model, run_ort, sprinkle_specials
from tests.test_runtimes import (
    ATTRS,
    CASES,
    MAX_LENGTH,
    Case,
    build_model,
    case_name,
    factor_counts,
    feeds_for,
    float_bound,
    input_data,
    node_specs,
    output_name,
    reference,
)

SPECIAL_RATE = 0.3
INPUTS = ("random", "special", "small")  # small: integers whose every product fits in 2^24


@dataclasses.dataclass(frozen=True)
class Runtime:
    """A runtime of this matrix: the target it is lowered for, how many runner processes
    run at once, the environment variable that opts in to it (None: always), and the cells
    the target refuses to lower: (element type or None for all, form or None, rank or None,
    a regular expression the refusal must match)."""

    name: str
    target: str
    shards: int = 1
    opt_in: str | None = None
    refusals: tuple[tuple[int | None, str | None, int | None, str], ...] = ()
    # cells the runtime fails on loudly (not silently), as measured: (type, form, rank, why);
    # a strict xfail, so the day they run the entry must go
    known_failures: tuple[tuple[int, str, int, str], ...] = ()

    def expected_refusal(self, case: Case) -> str | None:
        for elem_type, form, rank, pattern in self.refusals:
            if elem_type not in (None, case[0]) or form not in (None, case[1]):
                continue
            if rank in (None, case[2]):
                return pattern
        return None


RUNTIMES = {
    "mnn": Runtime("mnn", "mnn", shards=2),
    "tvm": Runtime(
        "tvm",
        "tvm",
        shards=2,
        refusals=((None, "symbolic", None, "tvm's importer cannot compute with symbolic dims"),),
    ),
    "ncnn": Runtime(
        "ncnn",
        "ncnn",
        opt_in="CUMPROD_NCNN",
        refusals=(
            # every dim symbolic: a length known only at run time takes a bounded lowering,
            # and every one of those builds a Pad, Less, Where or Cast
            (None, "symbolic", None, r"\('doubling' here\) fails to load on ncnn"),
            (TensorProto.FLOAT, "input", None, "ncnn cannot take a run-time axis"),
            *(
                (t, None, None, f"ncnn computes only float, not {TYPE_NAMES[t]}")
                for t in ALL_TYPES
                if t != TensorProto.FLOAT
            ),
        ),
        known_failures=(
            (
                TensorProto.FLOAT,
                "static",
                1,
                "ncnn 1.0.20261020: 'layer pnnx.Expression not exists' at load: pnnx 20261020 "
                "folds an exclusive chain's one-element ones slab (outer and inner 1) into an "
                "expression ncnn has no layer for (test_ncnn_single_row_exclusive_fails_loudly)",
            ),
        ),
    ),
    "tflite": Runtime(
        "tflite",
        "tflite",
        shards=2,
        opt_in="CUMPROD_TFLITE",
        known_failures=(
            (
                TensorProto.INT32,
                "symbolic",
                2,
                "LiteRT 2.1.2: 'Given shapes, [3,5] and [3,10], are not broadcastable' (MUL) "
                "on onnx2tf 2.6.9's output of doubling's 2-D view",
            ),
        ),
    ),
}


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@dataclasses.dataclass
class Lowered:
    model: object | None
    error: str
    lowerings: dict[str, str]
    warnings: list[str]

    def warned(self, node: str, target: str) -> bool:
        return any(f"'{node}'" in m and f"(target {target})" in m for m in self.warnings)


def lower(runtime: Runtime, case: Case) -> Lowered:
    capture = _Capture()
    logger = logging.getLogger("rewriter")
    logger.addHandler(capture)
    try:
        rewrite = rewriter.DecomposeCumProdPass(
            target=runtime.target, max_length=MAX_LENGTH if case[1] == "symbolic" else None
        )
        model = ir.serde.deserialize_model(build_model(case))
        rewrite(model)
        lowerings = {p.site.name: p.lowering.name for p in rewrite.plans}
        return Lowered(ir.serde.serialize_model(model), "", lowerings, capture.messages)
    except (ValueError, rewriter.CumProdError) as exc:
        return Lowered(None, f"{type(exc).__name__}: {exc}", {}, capture.messages)
    finally:
        logger.removeHandler(capture)


def case_inputs(case: Case) -> dict[str, np.ndarray]:
    """Random data and the same with special values; for integer types also small values
    (|x| <= 3, every product of the matrix's at most 6 factors below 2^24), on which a
    runtime whose integer limit is warned must still be exact: the lowering itself is
    checked there."""
    x = input_data(case)
    rng = np.random.default_rng(zlib.crc32(f"{case_name(case)}-special".encode()))
    inputs = {"random": x, "special": sprinkle_specials(case[0], x, rng, SPECIAL_RATE)}
    if case[0] in INTS:
        inputs["small"] = input_data(case, in_int32=True)
    return inputs


@dataclasses.dataclass
class Run:
    lowered: dict[Case, Lowered]
    inputs: dict[Case, dict[str, np.ndarray]]
    results: dict[str, runtime_harness.Result]


def run_key(case: Case, data: str) -> str:
    return f"{case_name(case)}-{data}"


def run_all(runtime: Runtime, folder: Path) -> Run:
    """Lower every case for the runtime, run both inputs of each, ``shards`` runners at once."""
    import concurrent.futures

    lowered = {case: lower(runtime, case) for case in CASES}
    inputs = {case: case_inputs(case) for case in CASES}
    shards: list[dict[str, runtime_harness.Case]] = [{} for _ in range(runtime.shards)]
    lowered_cases = [case for case in CASES if lowered[case].model is not None]
    for k, case in enumerate(lowered_cases):  # a model's runs in one runner: compiled once
        for data in inputs[case]:
            feeds = feeds_for(case, inputs[case][data])
            shards[k % runtime.shards][run_key(case, data)] = (lowered[case].model, feeds)  # type: ignore[assignment]
    results: dict[str, runtime_harness.Result] = {}
    with concurrent.futures.ThreadPoolExecutor(runtime.shards) as pool:
        futures = [
            pool.submit(runtime_harness.run_cases, runtime.name, cases, folder / f"shard{i}")
            for i, cases in enumerate(shards)
            if cases
        ]
        for future in futures:
            results.update(future.result())
    return Run(lowered, inputs, results)


_RUNS: dict[str, Run] = {}


def _run_for(name: str, tmp_path_factory: pytest.TempPathFactory) -> Run:
    runtime = RUNTIMES[name]
    if runtime.opt_in and os.environ.get(runtime.opt_in) != "1":
        pytest.skip(
            f"{name} is an opt-in tier: set {runtime.opt_in}=1 "
            f"(scripts/runtimes/{name}.sh installs it)"
        )
    runtime_harness.require(name)
    if name not in _RUNS:
        _RUNS[name] = run_all(runtime, tmp_path_factory.mktemp(name))
    return _RUNS[name]


def _mismatch(run: Run, case: Case, data: str, node: tuple[int, int, int, int]) -> str | None:
    """Why the output of ``node`` (a :func:`node_specs` entry) in the case's run on ``data``
    is wrong (None: it is right)."""
    node_index, axis, ex, rev = node
    elem_type, _, rank = case
    outputs = run.results[run_key(case, data)]
    assert not isinstance(outputs, str)
    names = [output_name(i, e, r) for i, _, e, r in node_specs(rank)]
    name = output_name(node_index, ex, rev)
    got = outputs[names.index(name)]
    x = run.inputs[case][data]
    want = reference(x, axis, ex, rev)
    dtype = ir.DataType(elem_type)
    bound: float | np.ndarray = 0.0
    if elem_type not in INTS:
        k = factor_counts(x.shape, axis % rank, ex, rev)
        bound = float_bound(elem_type, run.lowered[case].lowerings[f"cp_{name}"], k)
        got = got.astype(dtype.numpy())
    result = compare(got, want, dtype, bound)
    return None if result.ok else result.detail


def _params() -> list[object]:
    params = []
    for rt, case, (ex, rev) in itertools.product(RUNTIMES, CASES, ATTRS):
        known = [why for *cell, why in RUNTIMES[rt].known_failures if tuple(cell) == case]
        marks = [pytest.mark.xfail(strict=True, reason=known[0])] if known else []
        test_id = f"{rt}-{case_name(case)}-ex{ex}-rev{rev}"
        params.append(pytest.param(rt, case, ex, rev, id=test_id, marks=marks))
    return params


@pytest.mark.parametrize(("runtime", "case", "ex", "rev"), _params())
def test_cumprod_on_runtime(
    runtime: str, case: Case, ex: int, rev: int, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Right, or warned for that node, or the target's listed refusal: never silently wrong."""
    run = _run_for(runtime, tmp_path_factory)
    rt = RUNTIMES[runtime]
    lowered = run.lowered[case]
    expected = rt.expected_refusal(case)
    if expected is not None:
        assert lowered.model is None, f"{runtime}: lowered a case listed as refused ({expected})"
        assert re.search(expected, lowered.error), lowered.error
        return
    assert lowered.model is not None, f"lowering for target {rt.target!r} failed: {lowered.error}"
    problems = []
    every_node_warned = all(lowered.warned(node, rt.target) for node in lowered.lowerings)
    for data in run.inputs[case]:
        result = run.results[run_key(case, data)]
        if isinstance(result, str):
            if not every_node_warned:  # a runtime that refuses a warned type is not silent
                problems.append(f"{data}: {runtime} could not run it: {result}")
            continue
        for i, axis, e, r in node_specs(case[2]):
            if (e, r) != (ex, rev):
                continue
            node = f"cp_{output_name(i, e, r)}"
            wrong = _mismatch(run, case, data, (i, axis, e, r))
            if wrong is not None and data == "small":
                problems.append(f"small integers: wrong at {node}, axis {axis}: {wrong}")
            elif wrong is not None and not lowered.warned(node, rt.target):
                problems.append(
                    f"{data}: SILENT wrong result at {node} ({lowered.lowerings.get(node)}), "
                    f"axis {axis}: {wrong}"
                )
    assert not problems, "\n".join(problems)


LIMITS = [
    pytest.param(rt, k, id=f"{rt}-limit{k}")
    for rt in RUNTIMES
    for k in range(len(target_named(RUNTIMES[rt].target).limits))
]


@pytest.mark.parametrize(("runtime", "index"), LIMITS)
def test_limit_still_shows(
    runtime: str, index: int, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Every node of a limit's types is warned (once, naming the runtime), and at least one
    of them is wrong on the runtime: when none is, the runtime computes them now and the
    limit should go."""
    run = _run_for(runtime, tmp_path_factory)
    rt = RUNTIMES[runtime]
    limit = target_named(rt.target).limits[index]
    wrong = 0
    cells = [
        c for c in CASES if ir.DataType(c[0]) in limit.types and run.lowered[c].model is not None
    ]
    assert cells, f"no case of {sorted(t.name for t in limit.types)} lowered for {runtime}"
    for case in cells:
        lowered = run.lowered[case]
        for node in lowered.lowerings:
            said = [m for m in lowered.warnings if f"'{node}'" in m and limit.message in m]
            assert len(said) == 1, f"{case_name(case)} {node}: {lowered.warnings}"
        for data in run.inputs[case]:
            if isinstance(run.results[run_key(case, data)], str):
                wrong += 1  # refused at run time: the limit shows
                continue
            for i, axis, e, r in node_specs(case[2]):
                wrong += _mismatch(run, case, data, (i, axis, e, r)) is not None
    assert wrong, f"{runtime}: every cell of {limit.message!r} is right now: drop the limit"


def test_types_are_named() -> None:
    """The matrix covers every element type (the ids name them)."""
    assert {TYPE_NAMES[c[0]] for c in CASES} == set(TYPE_NAMES.values())
    assert TensorProto.BFLOAT16 in {c[0] for c in CASES}


@pytest.mark.parametrize(("ex", "rev"), ATTRS)
def test_mnn_shifts_pad_first_and_stay_exact(ex: int, rev: int) -> None:
    """On MNN (whose Slice does not clamp an end below -dim, and whose Pad of an empty tensor
    gives 0) ``doubling`` over a length known only at run time shifts by a Pad first: no
    Slice bound is a negative constant, and onnxruntime gives numpy's wrapping products for
    every length up to the bound, 0 and the bound too."""
    model = cumprod_model(TensorProto.INT32, ("a", "n"), 1, exclusive=ex, reverse=rev)
    lowered = rewriter.decompose_cumprod(model, target="mnn", max_length=8)
    assert isinstance(lowered, onnx.ModelProto)
    constants = {t.name: numpy_helper.to_array(t) for t in lowered.graph.initializer}
    for node in lowered.graph.node:
        if node.op_type == "Constant":
            constants[node.output[0]] = numpy_helper.to_array(node.attribute[0].t)
    for node in lowered.graph.node:
        if node.op_type == "Slice" and node.input[2] in constants:
            assert (constants[node.input[2]] >= 0).all(), node
    rng = np.random.default_rng(ex * 2 + rev)
    for n in (0, 1, 2, 5, 8):
        x = rng.integers(-(2**31), 2**31, (3, n), dtype=np.int64).astype(np.int32) | 1
        (got,) = run_ort(lowered, {"x": x})
        want = reference(x, 1, ex, rev) if n else x  # an empty x: y is empty too
        np.testing.assert_array_equal(got, want, err_msg=f"n = {n}")


def test_tvm_output_has_no_bool_equal() -> None:
    """TVM 0.27 fails LLVM verification on Equal over bool tensors (what ``ones_like``
    builds where ``constant_ones`` is false): the tvm target's outputs have none."""
    checked = 0
    for case in CASES:
        lowered = lower(RUNTIMES["tvm"], case)
        if lowered.model is None:
            continue
        model = onnx.shape_inference.infer_shapes(lowered.model)  # type: ignore[arg-type]
        types = {v.name: v.type.tensor_type.elem_type for v in model.graph.value_info}
        types.update({v.name: v.type.tensor_type.elem_type for v in model.graph.input})
        for node in model.graph.node:
            if node.op_type == "Equal":
                assert types.get(node.input[0]) != TensorProto.BOOL, case_name(case)
        checked += 1
    assert checked


NCNN_REFUSED = [  # (elem_type, dims, axis form, strategy, what the refusal says)
    (TensorProto.INT32, (3, 5), "initializer", "auto", "ncnn computes only float, not int32"),
    (TensorProto.DOUBLE, (3, 5), "initializer", "auto", "not double"),
    (TensorProto.FLOAT, ("a", "b"), "initializer", "chain", "cannot compute with symbolic dims"),
    (TensorProto.FLOAT, (3, 5), "input", "auto", "cannot take a run-time axis"),
    (
        TensorProto.FLOAT,
        (3, 1025),  # past chain's 1024: auto has nothing else ncnn loads
        "initializer",
        "auto",
        "('radix' here) fails to load on ncnn",
    ),
    (TensorProto.FLOAT, (3, 5), "initializer", "doubling", "no layer for the Pad with a value"),
]


@pytest.mark.parametrize(("elem_type", "dims", "form", "strategy", "said"), NCNN_REFUSED)
def test_ncnn_refuses_what_it_cannot_compute(
    elem_type: int, dims: tuple[int | str, ...], form: str, strategy: str, said: str
) -> None:
    """ncnn (through pnnx; its matrix runs in the opt-in tier CUMPROD_NCNN=1) computes float32
    only, has no Pad with a value, Less, Where or Cast: anything else is refused, one line."""
    model = cumprod_model(elem_type, dims, 1, exclusive=1, axis_form=form)
    with pytest.raises(rewriter.CumProdError, match=re.escape(said)):
        rewriter.decompose_cumprod(model, target="ncnn", strategy=strategy, max_length=8)


def test_ncnn_gets_a_static_float32_chain_at_ir_13() -> None:
    """What pnnx converted and ncnn ran right: a float32 chain over static dims (Split, Mul,
    Concat, Reshape, Slice), in a file of IR version 13 (pnnx refuses 14), numbers right."""
    model = cumprod_model(TensorProto.FLOAT, (3, 5), 1, exclusive=1, reverse=1)
    model.ir_version = 14
    lowered = rewriter.decompose_cumprod(model, target="ncnn")
    assert isinstance(lowered, onnx.ModelProto)
    assert lowered.ir_version == 13
    ops = {n.op_type for n in lowered.graph.node}
    assert not ops & {"Pad", "Less", "Where", "Cast", "Loop", "Scan", "If", "CumProd"}, ops
    x = np.random.default_rng(0).uniform(0.5, 2, (3, 5)).astype(np.float32)
    (got,) = run_ort(lowered, {"x": x})
    want = reference(x.astype(np.float64), 1, 1, 1)
    np.testing.assert_allclose(got, want, rtol=4 * np.finfo(np.float32).eps)


TVM_SYMBOLIC = {  # name: (dims, shape fed, axis, refused: what the refusal says, or "")
    "batch, static length": (("B", 5), (3, 5), 1, ""),
    "batch, length, static inner": (("B", 4, 3), (2, 4, 3), 1, ""),
    "symbolic inner beside a static dim": ((2, "T", 4), (2, 6, 4), 0, "symbolic dims"),
    "two symbolic dims before the axis": (("B", "C", 4, 5), (2, 3, 4, 5), 3, "symbolic dims"),
    "length past chain's 16 (radix)": (("B", 20), (3, 20), 1, "not 'radix' here"),
}


def test_tvm_symbolic_dims_run_or_are_refused(tmp_path: Path) -> None:
    """TVM 0.27's importer fails on arithmetic over symbolic dims: the tvm target lowers a
    CumProd with one only where nothing but a Reshape reads them (a chain over a static
    length, one symbolic dim each side), which runs right there, and refuses the rest."""
    runtime_harness.require("tvm")
    cases: dict[str, runtime_harness.Case] = {}
    for name, (dims, shape, axis, refused) in TVM_SYMBOLIC.items():
        model = cumprod_model(TensorProto.FLOAT, dims, axis, exclusive=1, reverse=1)
        if refused:
            with pytest.raises(rewriter.CumProdError, match=re.escape(refused)):
                rewriter.decompose_cumprod(model, target="tvm")
            continue
        x = np.random.default_rng(len(cases)).uniform(0.5, 2, shape).astype(np.float32)
        cases[name] = (rewriter.decompose_cumprod(model, target="tvm"), {"x": x})  # type: ignore[assignment]
    results = runtime_harness.run_cases("tvm", cases, tmp_path)
    for name, (_, feeds) in cases.items():
        got, axis = results[name], TVM_SYMBOLIC[name][2]
        assert not isinstance(got, str), f"{name}: {got}"
        want = reference(feeds["x"].astype(np.float64), axis, 1, 1)
        np.testing.assert_allclose(got[0], want, rtol=8 * np.finfo(np.float32).eps, err_msg=name)


# -- --verify on the target's own runtime ---------------------------------------------------
# The runtime's environment has MNN / TVM and not the rewriter's own dependencies (onnx_ir,
# onnxscript, onnxruntime): the child runs the command line with that environment's Python,
# this checkout first on its path and this environment's site-packages last (both are the same
# Python; numpy and onnx are pinned alike), as a user with the runtime and the tool installed
# side by side would.
WITH_SITE = "import site, sys; site.addsitedir(sys.argv.pop(1))\n"
CLI = "from rewriter.cli import main; sys.exit(main(sys.argv[1:]))"


def in_env(
    runtime: str, program: str, *args: object, tmp_path: Path
) -> subprocess.CompletedProcess[str]:
    """``python -c PROGRAM ARGS`` in ``runtime``'s environment, as described above."""
    python = runtime_harness.require(runtime)
    version = subprocess.run(
        [str(python), "-c", "import sys; print(*sys.version_info[:2])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert version == [str(v) for v in sys.version_info[:2]], f"{runtime}: Python {version}"
    env = {**os.environ, "PYTHONPATH": str(runtime_harness.ROOT)}
    return subprocess.run(
        [str(python), "-c", WITH_SITE + program, sysconfig.get_paths()["purelib"], *map(str, args)],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
        cwd=tmp_path,
        env=env,
    )


@pytest.mark.parametrize("runtime", ["mnn", "tvm"])
def test_cli_verify_runs_on_the_target_runtime(runtime: str, tmp_path: Path) -> None:
    """``--target NAME --verify`` where NAME's runtime is installed runs the rewritten model
    there (the summary names it), and a right rewrite verifies: exit 0, every check ok."""
    onnx.save(cumprod_model(TensorProto.FLOAT, (3, 5), 1, exclusive=1), tmp_path / "m.onnx")
    args = ("m.onnx", "-o", "out.onnx", "--target", runtime, "--verify")
    done = in_env(runtime, CLI, *args, tmp_path=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"rewritten model run on {runtime}, original on onnxruntime" in done.stdout
    checks = [line for line in done.stdout.splitlines() if line.strip().startswith("verify y")]
    assert checks and all(line.endswith("[ok]") for line in checks), done.stdout
    assert (tmp_path / "out.onnx").exists()


def test_cli_verify_on_mnn_finds_its_int32_limit(tmp_path: Path) -> None:
    """An int32 CumProd whose products pass 2^24 is warned for mnn (MNN multiplies int32 in
    float32); ``--verify`` on MNN sees the wrong values (exit 1, a MISMATCH, nothing
    written), where the same rewrite on onnxruntime (MNN not installed there) verifies."""
    onnx.save(cumprod_model(TensorProto.INT32, (3, 24), 1), tmp_path / "m.onnx")
    args = ("m.onnx", "-o", "out.onnx", "--target", "mnn", "--verify")
    done = in_env("mnn", CLI, *args, tmp_path=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "rewritten model run on mnn" in done.stdout
    assert "verify y (int32)" in done.stdout and "[MISMATCH]" in done.stdout, done.stdout
    assert "multiplies int32 in float32" in done.stderr and "(target mnn)" in done.stderr
    assert not (tmp_path / "out.onnx").exists()
    here = subprocess.run(
        [sys.executable, "-m", "rewriter", *args],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(runtime_harness.ROOT)},
    )
    assert here.returncode == 0, here.stdout + here.stderr
    assert "run on onnxruntime (mnn is not installed here)" in here.stdout


VERIFY = """
from rewriter.verify import verify_model
result = verify_model(sys.argv[1], sys.argv[2], bound_ulps=0.0, target="tvm")
print(result.runtime)
for check in result.mismatches():
    print("MISMATCH", check.name, check.detail)
"""


def test_verify_on_tvm_finds_a_wrong_rewrite(tmp_path: Path) -> None:
    """TVM computed every case of its matrix right, so no tvm rewrite gives a mismatch to see;
    a wrong one does: an inclusive scan's rewrite checked against the exclusive original, run
    on TVM, is a mismatch, and the right one is not."""
    exclusive = cumprod_model(TensorProto.INT32, (3, 6), 1, exclusive=1)
    inclusive = cumprod_model(TensorProto.INT32, (3, 6), 1)
    onnx.save(exclusive, tmp_path / "original.onnx")
    for name, model in (("wrong", inclusive), ("right", exclusive)):
        rewritten = rewriter.decompose_cumprod(model, target="tvm")
        assert isinstance(rewritten, onnx.ModelProto)
        onnx.save(rewritten, tmp_path / f"{name}.onnx")
    for name, mismatched in (("wrong", True), ("right", False)):
        done = in_env("tvm", VERIFY, "original.onnx", f"{name}.onnx", tmp_path=tmp_path)
        assert done.returncode == 0, done.stdout + done.stderr
        lines = done.stdout.splitlines()
        assert lines[0] == "tvm", done.stdout
        assert any(line.startswith("MISMATCH y") for line in lines) == mismatched, done.stdout


NCNN_ROWS = {  # name: (shape, axis, exclusive, what ncnn does: "" right, else the error)
    "(6,) inclusive": ((6,), 0, 0, ""),
    "(6,) exclusive": ((6,), 0, 1, "no layer pnnx.Expression in ncnn"),
    "(1, 6) exclusive": ((1, 6), 1, 1, "no layer pnnx.Expression in ncnn"),
    "(2, 6) exclusive": ((2, 6), 1, 1, ""),
}


def test_ncnn_single_row_exclusive_fails_loudly(tmp_path: Path) -> None:
    """On ncnn an exclusive chain over a tensor with one row (every dim but the axis 1)
    fails to load: pnnx folds its one-element ones slab into a ``pnnx.Expression``, which
    ncnn has no layer for. Loud, not wrong; the same scan inclusive, or over two rows, runs
    right."""
    if os.environ.get("CUMPROD_NCNN") != "1":
        pytest.skip("ncnn is an opt-in tier: set CUMPROD_NCNN=1 (scripts/runtimes/ncnn.sh)")
    cases: dict[str, runtime_harness.Case] = {}
    for name, (shape, axis, ex, _) in NCNN_ROWS.items():
        model = cumprod_model(TensorProto.FLOAT, shape, axis, exclusive=ex)
        x = np.random.default_rng(len(cases)).uniform(-2, 2, shape).astype(np.float32)
        cases[name] = (rewriter.decompose_cumprod(model, target="ncnn"), {"x": x})  # type: ignore[assignment]
    results = runtime_harness.run_cases("ncnn", cases, tmp_path)
    for name, (_, feeds) in cases.items():
        _, axis, ex, error = NCNN_ROWS[name]
        got = results[name]
        if error:
            assert isinstance(got, str) and error in got, f"{name}: {got}"
            continue
        assert not isinstance(got, str), f"{name}: {got}"
        want = reference(feeds["x"].astype(np.float64), axis, ex, 0)
        np.testing.assert_allclose(got[0], want, rtol=8 * np.finfo(np.float32).eps, err_msg=name)


MNN_LONG = {  # name: (shape, axis): static lengths past 16, where auto takes doubling on mnn
    "last 40": ((3, 40), 1),
    "first 300": ((300, 2), 0),
    "middle 64": ((2, 64, 3), 1),
}


def test_mnn_long_static_axes_take_doubling_and_stay_exact(tmp_path: Path) -> None:
    """Past a length of 16 ``auto`` takes ``doubling`` on mnn (its table: radix ran up to
    118x MNN's CumSum); on MNN it is within doubling's float32 bound for every (exclusive,
    reverse) pair, and exact on int32 values whose products stay inside 2^24."""
    cases: dict[str, runtime_harness.Case] = {}
    expected: dict[str, tuple[np.ndarray, int, int, int, int]] = {}
    for (name, (shape, axis)), (ex, rev), elem_type in itertools.product(
        MNN_LONG.items(), ATTRS, (TensorProto.FLOAT, TensorProto.INT32)
    ):
        model = cumprod_model(elem_type, shape, axis, exclusive=ex, reverse=rev)
        lowered = rewriter.DecomposeCumProdPass(target="mnn")
        ir_model = ir.serde.deserialize_model(model)
        lowered(ir_model)
        assert [p.lowering.name for p in lowered.plans] == ["doubling"], name
        rng = np.random.default_rng(zlib.crc32(f"{name}-{ex}-{rev}-{elem_type}".encode()))
        if elem_type == TensorProto.FLOAT:
            x = (rng.choice([-1.0, 1.0], shape) * 2 ** rng.uniform(-0.1, 0.1, shape)).astype(
                np.float32
            )
        else:  # at most 23 factors of 2 (or -1, 1) in a product: inside 2^24
            x = np.ones(shape, np.int32) * rng.choice([-1, 1], shape).astype(np.int32)
            x[tuple(rng.integers(0, d, 23) for d in shape)] = 2
        key = f"{name}-ex{ex}-rev{rev}-{TYPE_NAMES[elem_type]}"
        cases[key] = (ir.serde.serialize_model(ir_model), {"x": x})
        expected[key] = (x, axis, ex, rev, elem_type)
    results = runtime_harness.run_cases("mnn", cases, tmp_path)
    problems = []
    for key, (x, axis, ex, rev, elem_type) in expected.items():
        got = results[key]
        if isinstance(got, str):
            problems.append(f"{key}: {got}")
            continue
        want = reference(x, axis, ex, rev)
        bound: float | np.ndarray = 0.0
        if elem_type == TensorProto.FLOAT:
            k = factor_counts(x.shape, axis, ex, rev)
            bound = float_bound(elem_type, "doubling", k)
        result = compare(got[0], want, ir.DataType(elem_type), bound)
        if not result.ok:
            problems.append(f"{key}: {result.detail}")
    assert not problems, "\n".join(problems)
