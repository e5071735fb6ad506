"""CumProd lowered for a real runtime (``target=NAME``), run on that runtime, compared with numpy.

The runtimes without CumProd that install here: OpenVINO, tract and tinygrad (IREE and TFLite:
tests/test_runtimes_iree_tflite.py). Each runs in its own environment (scripts/runtimes/NAME.sh,
tests/runtime_harness.py); a missing one skips these tests, or fails them on CI.

The matrix, per runtime: every element type x all four (exclusive, reverse) x three axis forms
(static shape + constant axis, symbolic dims + constant axis, static shape + run-time axis fed as
a graph input) x ranks 1-4 (first, middle and last axes, negative ones too). One model per
(type, form, rank) holds the four CumProd nodes (one per attribute pair) as four outputs: a
runtime compiles each model once. Integers are compared bit-exactly with numpy's wrapping
``cumprod`` on full-range random inputs; floats with a float64 (longdouble for float64) product,
within the bounds written below for the lowering each node got.

Runtime limits (not ours; the tool warns, naming the node and the runtime): OpenVINO's CPU plugin
keeps int64 / uint64 in 32 bits (every op, even a pass-through, so products or inputs past 2^31
are wrong) and computes float64 in float32; tract has no bfloat16 at all. Those cells check the
warning and what the runtime does instead (OpenVINO: exact while every value fits in int32,
float64 within a float32-level bound; tract: refuses the model), and keep the full check as a
strict xfail: it starts passing, and so fails here, the day the runtime computes them.
"""

from __future__ import annotations

import itertools
import logging
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import ml_dtypes
import numpy as np
import onnx
import onnx_ir as ir
import pytest
from onnx import TensorProto, helper

import rewriter
from rewriter.verify import compare
from tests import bounds, runtime_harness
from tests.helpers import (
    ALL_TYPES,
    INTS,
    TYPE_NAMES,
    cumprod_in_if_model,
    np_dtype,
    random_data,
)

RUNTIMES = ("openvino", "tract", "tinygrad")
SHAPES = {1: (6,), 2: (3, 5), 3: (2, 3, 4), 4: (2, 3, 2, 3)}
# one axis per rank: rank 2 its first as -2, rank 3 the middle one, rank 4 its last as -1;
# tinygrad's cost is per node, and two axes per rank took it past two minutes
AXES = {1: (0,), 2: (-2,), 3: (1,), 4: (-1,)}
ATTRS = [(0, 0), (1, 0), (0, 1), (1, 1)]  # (exclusive, reverse)
FORMS = ("static", "symbolic", "input")
MAX_LENGTH = 16  # the bound passed for symbolic dims (no runtime here has a Loop-free
# lowering for a length known only at run time without one)

# -- float bounds, in ulps of the element type, for an element that is the product of k inputs --
# Every lowering except the log/exp ones multiplies the k factors with k - 1 roundings, in the
# element type or a wider one (float16 / bfloat16: in float32, then rounded once).
MULTIPLY_ULPS = lambda k: np.maximum(k - 1, 0)  # noqa: E731 - float32 / float64: the contract
# float16 / bfloat16: a float32 product rounded once, bounds.ulp_bound (the README's bound)
# logsum: Exp(CumSum(Log|x|)) with the sign from a count of negatives, in float64
LOGSUM_F64_ULPS = lambda k: 1490.0 * k + 2.0  # noqa: E731 - float64 data
# logsum computed in float32 (targets without float64)
LOGSUM_F32_ULPS = lambda k: 178.0 * k + 2.0  # noqa: E731 - float32 data
LOG_EXP_LOWERINGS = {"logsum"}
EXACT_LOWERINGS = {
    "scan",
    "loop",
    "chain",
    "blocked",
    "radix",
    "doubling",
    "dynamic",
    "carry",
}

# What the runtimes themselves cannot compute (measured: docs/runtime-probe.md). The tool warns
# once per node, naming it and the runtime; the full check of such a cell is a strict xfail.
LIMITS = {
    ("openvino", TensorProto.INT64): "OpenVINO's CPU plugin keeps int64 in 32 bits",
    ("openvino", TensorProto.UINT64): "OpenVINO's CPU plugin keeps uint64 in 32 bits",
    ("openvino", TensorProto.DOUBLE): "OpenVINO computes float64 in float32",
    ("tract", TensorProto.BFLOAT16): "tract has no bfloat16 (a Cast to it fails at load)",
}
OPENVINO_32BIT_INTS = (TensorProto.INT64, TensorProto.UINT64)
# Limits of one axis form (warned for every form): (runtime, type, form) -> the bound its
# cells are held to instead, in ulps. OpenVINO's Cast to bfloat16 truncates in a model with a
# symbolic dim (found by a review from outside): the float32 product's one rounding, up to 1 ulp.
# (openvino, bfloat16, symbolic) was one: OpenVINO's Cast to bfloat16 truncates where shapes
# are dynamic; with this rewrite every such cell came out within the strict bound, so the
# entry went (the target still warns, the cells are held to the README's bound).
FORM_LIMITS: dict[tuple[str, int, str], float] = {}


class RuntimeRefused(Exception):
    """The runtime could not load or run a model (its error message)."""


def float_bound(elem_type: int, lowering: str, k: np.ndarray) -> np.ndarray:
    """The bound a node lowered with ``lowering`` is held to (the table above)."""
    k = k.astype(np.float64)
    if lowering not in LOG_EXP_LOWERINGS | EXACT_LOWERINGS:
        raise KeyError(f"no bound written in this test for lowering {lowering!r}")
    if elem_type in (TensorProto.FLOAT16, TensorProto.BFLOAT16):
        return bounds.ulp_bound(lowering, TYPE_NAMES[elem_type], k)
    if lowering in EXACT_LOWERINGS:
        return MULTIPLY_ULPS(k)
    return LOGSUM_F64_ULPS(k) if elem_type == TensorProto.DOUBLE else np.ones_like(k)


def float32_level_bound(lowering: str, k: np.ndarray) -> np.ndarray:
    """float64 computed in float32 (OpenVINO): the float32 bound plus half an ulp per input
    rounded to float32 on the way in, in float32 ulps."""
    k = k.astype(np.float64)
    base = LOGSUM_F32_ULPS(k) if lowering in LOG_EXP_LOWERINGS else MULTIPLY_ULPS(k)
    return base + 0.5 * k


def factor_counts(shape: tuple[int, ...], axis: int, exclusive: int, reverse: int) -> np.ndarray:
    """How many inputs each output element multiplies."""
    n = shape[axis]
    k = np.arange(n) + (0 if exclusive else 1)
    if reverse:
        k = k[::-1]
    view = [1] * len(shape)
    view[axis] = n
    return np.broadcast_to(k.reshape(view), shape)


def numpy_cumprod(x: np.ndarray, axis: int, exclusive: int, reverse: int) -> np.ndarray:
    """CumProd by numpy in x's dtype: integers wrap (two's complement), floats round per step."""
    if reverse:
        x = np.flip(x, axis)
    if exclusive:
        ones = np.ones_like(np.take(x, [0], axis=axis))
        x = np.concatenate([ones, np.take(x, np.arange(x.shape[axis] - 1), axis=axis)], axis)
    with np.errstate(over="ignore"):
        y = np.cumprod(x, axis=axis, dtype=x.dtype)
    return np.flip(y, axis) if reverse else y


def reference(x: np.ndarray, axis: int, exclusive: int, reverse: int) -> np.ndarray:
    if np.issubdtype(x.dtype, np.integer):
        return numpy_cumprod(x, axis, exclusive, reverse)
    wide = np.longdouble if x.dtype == np.float64 else np.float64
    return numpy_cumprod(x.astype(wide), axis, exclusive, reverse)


# -- the models ----------------------------------------------------------------------------------

Case = tuple[int, str, int]  # (elem_type, form, rank)
CASES: list[Case] = [(t, f, r) for t in ALL_TYPES for f in FORMS for r in SHAPES]


def case_name(case: Case) -> str:
    elem_type, form, rank = case
    return f"{TYPE_NAMES[elem_type]}-{form}-rank{rank}"


def output_name(axis_index: int, exclusive: int, reverse: int) -> str:
    return f"y_a{axis_index}_ex{exclusive}_rev{reverse}"


def node_specs(rank: int) -> list[tuple[int, int, int, int]]:
    """(axis index, axis, exclusive, reverse) of each CumProd in a rank's model."""
    return [(i, axis, ex, rev) for i, axis in enumerate(AXES[rank]) for ex, rev in ATTRS]


def build_model(case: Case) -> onnx.ModelProto:
    """x -> one CumProd node per (axis, exclusive, reverse); bfloat16 models take and give
    float32 (Cast inside)."""
    elem_type, form, rank = case
    io = TensorProto.FLOAT if elem_type == TensorProto.BFLOAT16 else elem_type
    shape = SHAPES[rank]
    dims: list[int | str] = [f"d{i}" for i in range(rank)] if form == "symbolic" else list(shape)
    inputs = [helper.make_tensor_value_info("x", io, dims)]
    nodes, initializers, outputs = [], [], []
    x = "x"
    if elem_type == TensorProto.BFLOAT16:
        nodes.append(helper.make_node("Cast", ["x"], ["x_bf16"], to=elem_type))
        x = "x_bf16"
    for i, axis, ex, rev in node_specs(rank):
        axis_name = f"axis{i}"
        if form == "input":
            if not any(i.name == axis_name for i in inputs):
                inputs.append(helper.make_tensor_value_info(axis_name, TensorProto.INT64, []))
        elif not any(t.name == axis_name for t in initializers):
            initializers.append(helper.make_tensor(axis_name, TensorProto.INT64, [], [axis]))
        y = output_name(i, ex, rev)
        attrs = {k: v for k, v in (("exclusive", ex), ("reverse", rev)) if v}
        cp_out = f"{y}_bf16" if elem_type == TensorProto.BFLOAT16 else y
        nodes.append(helper.make_node("CumProd", [x, axis_name], [cp_out], name=f"cp_{y}", **attrs))
        if elem_type == TensorProto.BFLOAT16:
            nodes.append(helper.make_node("Cast", [cp_out], [y], to=TensorProto.FLOAT))
        outputs.append(helper.make_tensor_value_info(y, io, dims))
    graph = helper.make_graph(nodes, case_name(case), inputs, outputs, initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26)])


def input_data(case: Case, *, in_int32: bool = False) -> np.ndarray:
    """Integers: ``random_data``'s (odd, so no product is 0); ``in_int32``: values whose
    every product here stays inside int32. Floats: sign * 2^U(-1, 1)."""
    elem_type, _, rank = case
    rng = np.random.default_rng(zlib.crc32(f"{case_name(case)}-{in_int32}".encode()))
    dtype = np_dtype(elem_type)
    if in_int32:
        low = 0 if elem_type in (TensorProto.UINT32, TensorProto.UINT64) else -3
        return rng.integers(low, 4, SHAPES[rank]).astype(dtype)
    return random_data(elem_type, SHAPES[rank], rng)


def feeds_for(case: Case, x: np.ndarray) -> dict[str, np.ndarray]:
    elem_type, form, rank = case
    feeds = {"x": x.astype(np.float32) if elem_type == TensorProto.BFLOAT16 else x}
    if form == "input":
        for i, axis in enumerate(AXES[rank]):
            feeds[f"axis{i}"] = np.array(axis, np.int64)
    return feeds


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


class Lowered:
    """One case lowered for one runtime: the model, each node's lowering, the warnings."""

    def __init__(self, runtime: str, case: Case) -> None:
        self.runtime, self.case = runtime, case
        self.model: onnx.ModelProto | None = None
        self.error = ""
        self.lowerings: dict[str, str] = {}
        capture = _Capture()
        logger = logging.getLogger("rewriter")
        logger.addHandler(capture)
        try:
            rewrite = rewriter.DecomposeCumProdPass(
                target=runtime, max_length=MAX_LENGTH if case[1] == "symbolic" else None
            )
            ir_model = ir.serde.deserialize_model(build_model(case))
            rewrite(ir_model)
            self.model = ir.serde.serialize_model(ir_model)
            self.lowerings = {p.site.name: p.lowering.name for p in rewrite.plans}
        except Exception as exc:  # noqa: BLE001 - reported by every test of the case
            self.error = f"{type(exc).__name__}: {exc}"
        finally:
            logger.removeHandler(capture)
        self.warnings = capture.messages


# -- running everything once ---------------------------------------------------------------------


class Runs:
    def __init__(self) -> None:
        self.lowered: dict[tuple[str, Case], Lowered] = {}
        self.inputs: dict[str, np.ndarray] = {}
        self.results: dict[str, dict[str, runtime_harness.Result]] = {}


def _key(case: Case, in_int32: bool = False) -> str:
    return case_name(case) + ("-in-int32" if in_int32 else "")


def run_all(root: Path, runtimes: tuple[str, ...] = RUNTIMES) -> Runs:
    """Lower every case for every installed runtime and run them, the runtimes in parallel."""
    done = Runs()
    for case in CASES:
        done.inputs[_key(case)] = input_data(case)
        if case[0] in OPENVINO_32BIT_INTS:
            done.inputs[_key(case, True)] = input_data(case, in_int32=True)
    root.mkdir(parents=True, exist_ok=True)
    futures = {}
    # tinygrad first: the slowest runtime starts while the others are being lowered
    order = sorted(runtimes, key=lambda rt: rt != "tinygrad")
    with ThreadPoolExecutor(max_workers=len(runtimes) or 1) as pool:
        for runtime in order:
            if runtime_harness.python_for(runtime) is None:
                continue
            cases = {}
            for case in CASES:
                if not runtime_harness.runs_type(runtime, case[0]):
                    continue
                lowered = done.lowered[runtime, case] = Lowered(runtime, case)
                if lowered.model is None:
                    continue
                keys = [_key(case)]
                if runtime == "openvino" and case[0] in OPENVINO_32BIT_INTS:
                    keys.append(_key(case, True))
                for key in keys:
                    cases[key] = (lowered.model, feeds_for(case, done.inputs[key]))
            futures[runtime] = pool.submit(runtime_harness.run_cases, runtime, cases, root)
        for runtime, future in futures.items():
            done.results[runtime] = future.result()
    return done


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    return run_all(tmp_path_factory.mktemp("runtimes"))


def _outputs(runs: Runs, runtime: str, case: Case, key: str) -> list[np.ndarray]:
    runtime_harness.require(runtime)
    lowered = runs.lowered[runtime, case]
    if lowered.model is None:
        pytest.fail(f"lowering for target {runtime!r} failed: {lowered.error}")
    result = runs.results[runtime][key]
    if isinstance(result, str):
        raise RuntimeRefused(f"{runtime} could not run {key}: {result}")
    return result


def _check(
    runs: Runs,
    runtime: str,
    case: Case,
    ex: int,
    rev: int,
    *,
    in_int32: bool = False,
    float32_level: bool = False,
    strict_narrow: bool = False,
) -> None:
    """Every output of the (exclusive, reverse) pair against numpy (AssertionError if not);
    a cell of :data:`FORM_LIMITS` within its bound there, unless ``strict_narrow``."""
    elem_type, _, rank = case
    key = _key(case, in_int32)
    outputs = _outputs(runs, runtime, case, key)
    lowered = runs.lowered[runtime, case]
    x = runs.inputs[key]
    names = [output_name(i, e, r) for i, _, e, r in node_specs(rank)]
    for i, axis, e, r in node_specs(rank):
        if (e, r) != (ex, rev):
            continue
        name = output_name(i, e, r)
        got = outputs[names.index(name)]
        want = reference(x, axis, e, r)
        dtype = ir.DataType(elem_type)
        if elem_type in INTS:
            bound: float | np.ndarray = 0.0
        else:
            k = factor_counts(x.shape, axis % rank, e, r)
            lowering = lowered.lowerings[f"cp_{name}"]
            if float32_level:
                dtype, got = ir.DataType.FLOAT, got.astype(np.float32)
                bound = float32_level_bound(lowering, k)
            else:
                bound = float_bound(elem_type, lowering, k)
                if not strict_narrow:
                    bound = FORM_LIMITS.get((runtime, elem_type, case[1]), bound)
            if elem_type == TensorProto.BFLOAT16:
                got = got.astype(ml_dtypes.bfloat16)
        result = compare(got, want, dtype, bound)
        assert result.ok, (
            f"{runtime} {key} axis {axis} exclusive={e} reverse={r} "
            f"({lowered.lowerings.get(f'cp_{name}')}): {result.detail}"
        )


def _params() -> list[object]:
    params = []
    for runtime, case, (ex, rev) in itertools.product(RUNTIMES, CASES, ATTRS):
        if not runtime_harness.runs_type(runtime, case[0]):
            continue
        test_id = f"{runtime}-{case_name(case)}-ex{ex}-rev{rev}"
        marks = []
        reason = LIMITS.get((runtime, case[0]))
        if reason and (runtime, *case[:2]) not in FORM_LIMITS:
            raises = RuntimeRefused if case[0] == TensorProto.BFLOAT16 else AssertionError
            marks.append(pytest.mark.xfail(strict=True, raises=raises, reason=reason))
        params.append(pytest.param(runtime, case, ex, rev, id=test_id, marks=marks))
    return params


@pytest.mark.parametrize(("runtime", "case", "ex", "rev"), _params())
def test_cumprod_on_runtime(runs: Runs, runtime: str, case: Case, ex: int, rev: int) -> None:
    _check(runs, runtime, case, ex, rev)


LIMITED = [
    pytest.param(rt, case, id=f"{rt}-{case_name(case)}")
    for rt in RUNTIMES
    for case in CASES
    if (rt, case[0]) in LIMITS and runtime_harness.runs_type(rt, case[0])
]


def _one_warning_per_node(lowered: Lowered, runtime: str) -> None:
    for node in lowered.lowerings:
        named = [m for m in lowered.warnings if f"'{node}'" in m and runtime in m]
        assert len(named) == 1, f"warnings for {node}: {lowered.warnings}"


@pytest.mark.parametrize(("runtime", "case"), LIMITED)
def test_runtime_limit_is_warned_and_bounded(runs: Runs, runtime: str, case: Case) -> None:
    """Where the runtime cannot be exact: one warning per node naming it and the runtime, and
    the runtime does what was measured: OpenVINO exact while every value fits in int32, float64
    right to float32 precision; tract refuses bfloat16."""
    runtime_harness.require(runtime)
    lowered = runs.lowered[runtime, case]
    if lowered.model is None:
        pytest.fail(f"lowering for target {runtime!r} failed: {lowered.error}")
    _one_warning_per_node(lowered, runtime)
    elem_type = case[0]
    if elem_type == TensorProto.BFLOAT16:
        result = runs.results[runtime][_key(case)]
        assert isinstance(result, str), "tract ran a bfloat16 model: update LIMITS"
        assert "Bfloat16" in result, result
        return
    for ex, rev in ATTRS:
        if elem_type == TensorProto.DOUBLE:
            _check(runs, runtime, case, ex, rev, float32_level=True)
        else:
            _check(runs, runtime, case, ex, rev, in_int32=True)


@pytest.mark.parametrize(("runtime", "elem_type", "form"), list(FORM_LIMITS))
def test_form_limit_still_shows(runs: Runs, runtime: str, elem_type: int, form: str) -> None:
    """A limit of :data:`FORM_LIMITS` is the runtime's: its cells are warned (one line per
    node) and at least one breaks the README's bound there; when none does, the runtime
    rounds right again and the entry (and the target's warning) should go."""
    runtime_harness.require(runtime)
    over = 0
    for case in [c for c in CASES if c[:2] == (elem_type, form)]:
        _one_warning_per_node(runs.lowered[runtime, case], runtime)
        for ex, rev in ATTRS:
            try:
                _check(runs, runtime, case, ex, rev, strict_narrow=True)
            except AssertionError:
                over += 1
    assert over, f"{runtime} {TYPE_NAMES[elem_type]} {form}: every cell within the bound now"


def test_tinygrad_scans_empty_inputs_over_symbolic_dims(tmp_path: Path) -> None:
    """tinygrad's If runs both branches: below opset 14 the "empty or not" If's lowered
    branch failed on an empty x (found by a review from outside), so that target is now
    refused there (tests/test_targets.py); at the target's lowest opset without that If and
    at the model's own, empty inputs come back empty and a non-empty one is right."""
    model = helper.make_model(
        helper.make_graph(
            [helper.make_node("CumProd", ["x", "axis"], ["y"], exclusive=1, reverse=1)],
            "empty",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["a", "b"])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["a", "b"])],
            [helper.make_tensor("axis", TensorProto.INT64, [], [0])],
        ),
        opset_imports=[helper.make_opsetid("", 26)],
    )
    feeds = {
        "rows0": np.ones((0, 3), np.float32),
        "cols0": np.ones((3, 0), np.float32),
        "full": np.array([[2, 3], [5, 7], [0.5, -1]], np.float32),
    }
    cases: dict[str, runtime_harness.Case] = {}
    for opset in (14, 26):
        lowered = rewriter.decompose_cumprod(
            model, target="tinygrad", target_opset=opset, max_length=8
        )
        for name, x in feeds.items():
            cases[f"{name}-{opset}"] = (lowered, {"x": x})
    results = runtime_harness.run_cases("tinygrad", cases, tmp_path)
    for key, (_, feed) in cases.items():
        result = results[key]
        assert not isinstance(result, str), f"{key}: {result}"
        x = feed["x"]
        expected = np.flip(np.cumprod(np.flip(x, 0), axis=0), 0)  # reverse, then exclusive:
        expected = np.concatenate([expected[1:], np.ones_like(x[:1])], axis=0)
        np.testing.assert_array_equal(result[0], expected, err_msg=key)


def test_tract_in_an_if_branch_warns_where_it_fails(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """tract resolves no symbolic dim of the model inside an If branch: a CumProd there whose
    length is known only at run time fails at run time (README, the tract target), and the
    rewrite says so for that node alone; a static length (other dims symbolic or not) runs
    right and is not warned about; onnxruntime resolves them (no warning). When tract starts
    resolving them, the failing forms' assert says the warning can go."""
    x = np.random.default_rng(0).uniform(0.5, 1.5, (6, 8)).astype(np.float32)
    forms = {  # name: (dims, axis, whether the scanned length is known only at run time)
        "static": ([6, 8], 1, False),
        "symbolic rows, static length": (["N", 8], 1, False),
        "symbolic length": (["N", 8], 0, True),
        "every dim symbolic": (["N", "M"], 1, True),
    }
    cases: dict[str, runtime_harness.Case] = {}
    for name, (dims, axis, _) in forms.items():
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="rewriter"):
            lowered = rewriter.decompose_cumprod(cumprod_in_if_model(dims, axis), target="tract")
        warned = [r.getMessage() for r in caplog.records if "If branch" in r.getMessage()]
        assert len(warned) == forms[name][2], (name, warned)
        assert all("CumProd 'scan'" in w and "(target tract)" in w for w in warned), warned
        cases[name] = (lowered, {"x": x, "c": np.array(True)})
    results = runtime_harness.run_cases("tract", cases, tmp_path)
    for name, (_, axis, fails) in forms.items():
        result = results[name]
        if fails:
            assert isinstance(result, str) and "Undetermined symbol" in result, (name, result)
        else:
            assert not isinstance(result, str), (name, result)
            expected = np.cumprod(x.astype(np.float64), axis=axis)
            np.testing.assert_allclose(result[0], expected, rtol=1e-5, err_msg=name)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="rewriter"):
        rewriter.decompose_cumprod(cumprod_in_if_model(["N", 8], 0), target="onnxruntime")
    assert not [r for r in caplog.records if "If branch" in r.getMessage()]


def test_a_converter_that_fails_or_hangs_is_one_runtime_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """rewriter.runtimes runs each converter / compiler in a child process: a nonzero exit names
    the first line with an error marker, a file it did not write fails too, and a hang is cut
    at the timeout its variable sets."""
    import sys

    from rewriter.runtimes import _run_tool

    shout = "import sys; print('step 1'); print('Error: op X not supported'); sys.exit(3)"
    with pytest.raises(RuntimeError, match=r"^tool: exit 3: Error: op X not supported$"):
        _run_tool("tool", [sys.executable, "-c", shout], "CUMPROD_T", ("error",))
    quiet = "print('done')"
    with pytest.raises(RuntimeError, match=r"^tool: exit 0: done$"):
        _run_tool("tool", [sys.executable, "-c", quiet], "CUMPROD_T", (), done=tmp_path / "x")
    monkeypatch.setenv("CUMPROD_T", "1")
    with pytest.raises(RuntimeError, match=r"^tool timed out after 1 s$"):
        _run_tool("tool", [sys.executable, "-c", "import time; time.sleep(30)"], "CUMPROD_T", ())
    assert _run_tool("tool", [sys.executable, "-c", quiet], "CUMPROD_T", ()).stdout == "done\n"
