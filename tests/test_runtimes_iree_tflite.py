"""The rewritten CumProd on two runtimes that have none: IREE (llvm-cpu) and TFLite (onnx2tf).

For each runtime, every element type x all four (exclusive, reverse) x three axis forms
(static dims + constant axis, symbolic dims + constant axis, static dims + run-time axis) x
ranks 1-4 (two axes for ranks 2-4) is lowered with ``decompose_cumprod(model, target=RT)``,
run on the runtime and compared with numpy here: integers bit-exact (full-range random
inputs, so products wrap), floats with ``rewriter.verify.compare`` within FLOAT_ULPS.

The 28 cases of one (type, axis form) go into one model with 28 outputs, so IREE compiles 24
models, not 672. A model that fails as a whole (lowering, conversion, compilation) is split:
each of its cases then runs alone, so every case gets its own verdict (CUMPROD_RUNTIME_SPLIT=0
turns that off). Each runtime runs in its own environment (scripts/runtimes/RT.sh creates
``.venv-RT``), through tests/runtime_harness.py and tests/runtimes/run_RT.py. TFLite (onnx2tf
2.6.9, flatbuffer_direct, LiteRT) is the opt-in tier: it runs only with CUMPROD_TFLITE=1. A
missing environment skips, except on CI (CI=true), where it fails. Facts behind the choices:
docs/runtime-probe-iree-tflite.md.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import itertools
import os
import time
import zlib
from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from onnx import TensorProto, helper

import rewriter
from rewriter.verify import compare, factor_counts
from tests import runtime_harness
from tests.helpers import (
    ALL_TYPES,
    INTS,
    TYPE_NAMES,
    feed,
    io_type,
    random_data,
    reference,
    sprinkle_specials,
    wide_reference,
)


# Float bound, in ulps of the output type, for an output that multiplies k inputs: a product
# of k factors has k - 1 roundings in whatever order (sequential or tree), plus one for the
# final cast when it is computed in a wider type (float16 / bfloat16). Every lowering a
# target may choose for these short axes is held to it (logsum's log/exp would not be).
def FLOAT_ULPS(k: np.ndarray) -> np.ndarray:
    return (np.maximum(k, 1) - 1) + 1


SHAPES = {1: (5,), 2: (3, 4), 3: (2, 3, 4), 4: (2, 3, 4, 5)}  # distinct sizes (TFLite layout)
AXES = {1: [0], 2: [0, -1], 3: [1, -1], 4: [0, 2]}
ATTRS = list(itertools.product([0, 1], [0, 1]))  # (exclusive, reverse)
FORMS = ("static", "symbolic", "runtime_axis")
CASES = [(rank, axis, ex, rev) for rank in SHAPES for axis in AXES[rank] for ex, rev in ATTRS]
MAX_LENGTH = 8  # the bound a user declares for a symbolic scanned dim (here <= 5)

Case = tuple[int, int, int, int]  # rank, axis, exclusive, reverse
Key = tuple[int, str, Case]  # element type, axis form, case


@dataclasses.dataclass(frozen=True)
class Runtime:
    name: str
    shards: int  # runner processes at once (each compiles / converts on one core)
    opt_in: str | None = None  # an environment variable that must be "1"
    # element types the runtime cannot take at all, whatever the lowering: the reason
    unsupported: tuple[tuple[int, str], ...] = ()


RUNTIMES = {
    "iree": Runtime("iree", 2),
    "tflite": Runtime(
        "tflite",
        2,
        opt_in="CUMPROD_TFLITE",
        # the tflite target's limits (warned per node; tests/test_runtimes_new.py holds these
        # types to "right, or warned" on the same runtime)
        unsupported=(
            (TensorProto.BFLOAT16, "onnx2tf 2.6 has no bfloat16 (NotImplementedError: 16)"),
            (TensorProto.INT64, "onnx2tf 2.6's flatbuffer_direct computes int64 in int32"),
            (TensorProto.UINT64, "onnx2tf 2.6's flatbuffer_direct computes int64 in int32"),
            (TensorProto.DOUBLE, "LiteRT has no float64 Concatenation or Pad"),
        ),
    ),
}

# How the models are lowered: decompose_cumprod(model, target=RT), with max_length for
# symbolic dims. CUMPROD_RUNTIME_LOWERING ("strategy=chain,target=spec") overrides it, to try
# a lowering on a runtime by hand.
_OVERRIDE = os.environ.get("CUMPROD_RUNTIME_LOWERING", "")
SPLIT = os.environ.get("CUMPROD_RUNTIME_SPLIT", "1") != "0"


def lower_options(runtime: str, form: str) -> dict[str, object]:
    if _OVERRIDE:
        pairs = (item.split("=", 1) for item in _OVERRIDE.split(","))
        return {k: int(v) if v.isdigit() else v for k, v in pairs}
    if form == "symbolic":
        return {"target": runtime, "max_length": MAX_LENGTH}
    return {"target": runtime}


def case_id(key: Key) -> str:
    elem_type, form, (rank, axis, ex, rev) = key
    return f"{TYPE_NAMES[elem_type]}-{form}-r{rank}-ax{axis}-ex{ex}-rev{rev}"


def case_input(key: Key) -> np.ndarray:
    """The x of a case: the same whichever model the case is in."""
    elem_type, _, (rank, _, _, _) = key
    rng = np.random.default_rng(zlib.crc32(case_id(key).encode()))
    return random_data(elem_type, SHAPES[rank], rng)


def build_model(elem_type: int, form: str, cases: list[Case]) -> onnx.ModelProto:
    """CumProd(x_k, axis_k) -> y_k for every case; bfloat16 goes in and out as float32."""
    nodes, inputs, outputs, inits = [], [], [], []
    for k, (rank, axis, ex, rev) in enumerate(cases):
        shape = list(SHAPES[rank])
        dims = [f"x{k}_d{j}" for j in range(rank)] if form == "symbolic" else shape
        inputs.append(helper.make_tensor_value_info(f"x{k}", io_type(elem_type), dims))
        axis_tensor = helper.make_tensor(f"axis{k}", TensorProto.INT64, [], [axis])
        if form == "runtime_axis":
            inputs.append(helper.make_tensor_value_info(f"axis{k}", TensorProto.INT64, []))
        else:
            inits.append(axis_tensor)
        x, y = f"x{k}", f"y{k}"
        if elem_type == TensorProto.BFLOAT16:
            nodes.append(helper.make_node("Cast", [x], [f"x{k}_bf16"], to=elem_type))
            x, y = f"x{k}_bf16", f"y{k}_bf16"
        attrs = {n: v for n, v in (("exclusive", ex), ("reverse", rev)) if v}
        nodes.append(helper.make_node("CumProd", [x, f"axis{k}"], [y], name=f"cumprod{k}", **attrs))
        if elem_type == TensorProto.BFLOAT16:
            nodes.append(helper.make_node("Cast", [y], [f"y{k}"], to=TensorProto.FLOAT))
        outputs.append(helper.make_tensor_value_info(f"y{k}", io_type(elem_type), dims))
    graph = helper.make_graph(nodes, "main", inputs, outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26)])


@dataclasses.dataclass
class Model:
    """Some cases of one (type, form) in one model: output k is ``keys[k]``."""

    name: str
    keys: list[Key]
    model: onnx.ModelProto | None  # None when the lowering raised
    feeds: dict[str, np.ndarray]
    error: str = ""


def make_model(runtime: str, name: str, keys: list[Key]) -> Model:
    elem_type, form = keys[0][0], keys[0][1]
    feeds: dict[str, np.ndarray] = {}
    for k, key in enumerate(keys):
        feeds[f"x{k}"] = feed(elem_type, case_input(key))
        if form == "runtime_axis":
            feeds[f"axis{k}"] = np.array(key[2][1], np.int64)
    original = build_model(elem_type, form, [key[2] for key in keys])
    try:
        lowered = rewriter.decompose_cumprod(original, **lower_options(runtime, form))
    except (ValueError, rewriter.CumProdError) as error:
        return Model(name, keys, None, feeds, f"lowering failed: {type(error).__name__}: {error}")
    assert isinstance(lowered, onnx.ModelProto)
    return Model(name, keys, lowered, feeds)


@dataclasses.dataclass
class Run:
    """Per case: its output, or why there is none (a str); and how long the runs took."""

    results: dict[Key, np.ndarray | str]
    seconds: float
    models: int


def _run_models(rt: Runtime, models: list[Model], folder: Path) -> dict[Key, np.ndarray | str]:
    """Run the lowered models (``rt.shards`` runner processes at once): per case results."""
    results: dict[Key, np.ndarray | str] = {}
    shards: list[dict[str, runtime_harness.Case]] = [{} for _ in range(rt.shards)]
    for i, model in enumerate(m for m in models if m.model is not None):
        shards[i % rt.shards][model.name] = (model.model, model.feeds)
    with concurrent.futures.ThreadPoolExecutor(rt.shards) as pool:
        futures = [
            pool.submit(
                runtime_harness.run_cases,
                rt.name,
                cases,
                folder / f"shard{i}",
                timeout=600 + 60 * len(cases),  # for the whole runner process
            )
            for i, cases in enumerate(shards)
            if cases
        ]
        outputs: dict[str, list[np.ndarray] | str] = {}
        for future in futures:
            outputs.update(future.result())
    for model in models:
        got = outputs.get(model.name, model.error)
        for k, key in enumerate(model.keys):
            results[key] = got if isinstance(got, str) else got[k]
    return results


def run_all(rt: Runtime, folder: Path) -> Run:
    """One model per (type, form); the cases of a model that failed as a whole, alone."""
    start = time.perf_counter()
    groups = [
        make_model(
            rt.name,
            f"{TYPE_NAMES[elem_type]}-{form}",
            [
                (elem_type, form, case)
                for case in CASES
                if in_matrix(rt.name, elem_type, form, case)
            ],
        )
        for elem_type in ALL_TYPES
        if not any(t == elem_type for t, _ in rt.unsupported)
        and runtime_harness.runs_type(rt.name, elem_type)
        for form in FORMS
    ]
    results = _run_models(rt, groups, folder / "groups")
    count = len(groups)
    if SPLIT:
        failed = [m for m in groups if isinstance(results[m.keys[0]], str)]
        singles = [make_model(rt.name, case_id(key), [key]) for m in failed for key in m.keys]
        results.update(_run_models(rt, singles, folder / "singles"))
        count += len(singles)
    return Run(results, time.perf_counter() - start, count)


_RUNS: dict[str, Run] = {}  # one run per runtime per session, made by its first test

# IREE compiles a 28-output model in 20-40 s: without CUMPROD_FULL=1 (CI), each (type, form)
# model holds a third of the cases, case k where (type's index + form's index + k) % 3 == 0.
# Every (rank, axis) is 4 consecutive cases and the attribute pairs cycle with period 4, so
# each (type, form) model keeps every rank, axis and (exclusive, reverse) pair, and each
# (form, case) is run for some type. CUMPROD_FULL=1 runs every case.
THIN = 3


def in_matrix(runtime: str, elem_type: int, form: str, case: Case) -> bool:
    """Whether the matrix runs ``case`` of (``elem_type``, ``form``) on ``runtime``."""
    if not runtime_harness.runs_type(runtime, elem_type):
        return False
    if runtime_harness.FULL or runtime not in runtime_harness.SLOW_COMPILE:
        return True
    types = [t for t in ALL_TYPES if runtime_harness.runs_type(runtime, t)]
    index = types.index(elem_type) + FORMS.index(form) + CASES.index(case)
    return index % THIN == 0


def _run_for(runtime: str, tmp_path_factory: pytest.TempPathFactory) -> Run:
    rt = RUNTIMES[runtime]
    if rt.opt_in and os.environ.get(rt.opt_in) != "1":
        pytest.skip(
            f"{runtime} is the opt-in heavy tier: set {rt.opt_in}=1 "
            f"(scripts/runtimes/{runtime}.sh installs it)"
        )
    runtime_harness.require(runtime)  # skips, or fails on CI, when the environment is missing
    if runtime not in _RUNS:
        _RUNS[runtime] = run_all(rt, tmp_path_factory.mktemp(runtime))
    return _RUNS[runtime]


MATRIX = [
    (runtime, (elem_type, form, case))
    for runtime in RUNTIMES
    for elem_type in ALL_TYPES
    for form in FORMS
    for case in CASES
    if in_matrix(runtime, elem_type, form, case)
]


@pytest.mark.parametrize(
    ("runtime", "key"), MATRIX, ids=[f"{rt}-{case_id(key)}" for rt, key in MATRIX]
)
def test_cumprod_on_runtime(
    runtime: str, key: Key, tmp_path_factory: pytest.TempPathFactory
) -> None:
    elem_type, _, (rank, axis, ex, rev) = key
    for unsupported, reason in RUNTIMES[runtime].unsupported:
        if unsupported == elem_type:
            pytest.skip(f"{runtime}: {reason}")
    got = _run_for(runtime, tmp_path_factory).results[key]
    if isinstance(got, str):
        pytest.fail(f"{runtime}: {case_id(key)}: {got}")
    x = case_input(key)
    dtype = ir.DataType(elem_type)
    if elem_type in INTS:
        result = compare(got, reference(x, axis, ex, rev), dtype)
    else:
        # bfloat16 models give float32; onnx2tf gives float16 outputs as float32 (computed in
        # float32): rounded to the type here, as the user of the result would
        got = got.astype(dtype.numpy())
        bound = FLOAT_ULPS(factor_counts(x.shape, axis % rank, bool(ex), bool(rev)))
        result = compare(got, wide_reference(x, axis, ex, rev), dtype, bound)
    assert result.ok, f"{runtime}: {case_id(key)}: {result.detail}"


# TFLite only: what the matrix (short axes, random data, every dim symbolic) does not reach.
# Per group one model, every type onnx2tf takes x the group's cases, inputs with 0, -0, +-inf,
# NaN (integers: the extremes) sprinkled in: (dims, the shape fed, axis, exclusive, reverse).
TFLITE_EXTRA = {
    "static-chain": [  # the exclusive ones over static dims (Cast(Equal(c, c)))
        ((2, 5), (2, 5), 1, 1, 0),
        ((4, 2, 3), (4, 2, 3), 0, 1, 1),
    ],
    "batch-chain": [  # a symbolic batch, a static length: doubling on the 2-D view
        (("B", 5), (3, 5), 1, 1, 1),
        ((2, "T", 4), (2, 6, 4), 0, 1, 0),
    ],
    "symbolic-doubling": [  # doubling on the 2-D view
        (("A", "N", "C"), (2, 6, 3), 1, 1, 0),
        (("N", "C"), (7, 3), 0, 0, 1),
    ],
    # onnx2tf swapped the last two dims of a static 3-D view (1, n, n) (an outside review):
    # the first axis where n equals the product of the other dims, chain and doubling
    "static-square": [
        ((4, 4), (4, 4), 0, 0, 0),
        ((4, 4, 1), (4, 4, 1), 0, 1, 0),
        ((4, 2, 2), (4, 2, 2), 0, 0, 1),
        ((20, 4, 5), (20, 4, 5), 0, 1, 1),
    ],
    "static-long": [  # n > 16: auto's doubling (radix is wrong on TFLite: refused there)
        ((3, 20), (3, 20), 1, 1, 1),
        ((20, 3), (20, 3), 0, 0, 0),
        ((2, 40, 3), (2, 40, 3), 1, 1, 0),
    ],
}


@pytest.mark.parametrize("group", list(TFLITE_EXTRA))
def test_tflite_special_values_long_axes_and_a_symbolic_batch(group: str, tmp_path: Path) -> None:
    rt = RUNTIMES["tflite"]
    if rt.opt_in and os.environ.get(rt.opt_in) != "1":
        pytest.skip(f"tflite is the opt-in heavy tier: set {rt.opt_in}=1")
    runtime_harness.require("tflite")
    skipped = {t for t, _ in rt.unsupported}
    nodes, inputs, outputs, inits = [], [], [], []
    feeds: dict[str, np.ndarray] = {}
    expected: list[tuple[str, int, np.ndarray, int, int, int]] = []
    for elem_type in (t for t in ALL_TYPES if t not in skipped):
        for dims, shape, axis, ex, rev in TFLITE_EXTRA[group]:
            k = len(expected)
            rng = np.random.default_rng(zlib.crc32(f"{group}-{k}".encode()))
            x = sprinkle_specials(elem_type, random_data(elem_type, shape, rng), rng, 0.2)
            inputs.append(helper.make_tensor_value_info(f"x{k}", elem_type, list(dims)))
            outputs.append(helper.make_tensor_value_info(f"y{k}", elem_type, list(dims)))
            inits.append(helper.make_tensor(f"axis{k}", TensorProto.INT64, [], [axis]))
            attrs = {n: v for n, v in (("exclusive", ex), ("reverse", rev)) if v}
            nodes.append(helper.make_node("CumProd", [f"x{k}", f"axis{k}"], [f"y{k}"], **attrs))
            feeds[f"x{k}"] = x
            expected.append((f"{TYPE_NAMES[elem_type]}-{dims}", elem_type, x, axis, ex, rev))
    graph = helper.make_graph(nodes, "main", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26)])
    lowered = rewriter.decompose_cumprod(model, target="tflite", max_length=8)
    assert isinstance(lowered, onnx.ModelProto)
    keys: list[Key] = [(0, group, (0, k, 0, 0)) for k in range(len(expected))]
    results = _run_models(rt, [Model(group, keys, lowered, feeds)], tmp_path)
    problems = []
    for key, (name, elem_type, x, axis, ex, rev) in zip(keys, expected):
        got = results[key]
        if isinstance(got, str):
            problems.append(f"{name}: {got}")
            continue
        dtype = ir.DataType(elem_type)
        if elem_type in INTS:
            result = compare(got, reference(x, axis, ex, rev), dtype)
        else:
            bound = FLOAT_ULPS(factor_counts(x.shape, axis, bool(ex), bool(rev)))
            got = got.astype(dtype.numpy())
            result = compare(got, wide_reference(x, axis, ex, rev), dtype, bound)
        if not result.ok:
            problems.append(f"{name} ex{ex} rev{rev}: {result.detail}")
    assert not problems, "\n".join(problems)
