"""The rewritten CumProd on two runtimes that have none: IREE (llvm-cpu) and TFLite (onnx2tf).

For each runtime, every element type x all four (exclusive, reverse) x three axis forms
(static dims + constant axis, symbolic dims + constant axis, static dims + run-time axis) x
ranks 1-4 (two axes for ranks 2-4) is lowered with ``decompose_cumprod(model, target=RT)``,
run on the runtime and compared with numpy here: integers bit-exact (full-range random
inputs, so products wrap), floats with ``rewriter.verify.compare`` within FLOAT_ULPS.

The cases of one (type, axis form) go into one model with many outputs, so IREE compiles 24
models, not 672. Each runtime runs in its own environment (scripts/runtimes/RT.sh creates
``.venv-RT``), through tests/runtimes/run_RT.py (CASE.onnx + CASE.in.npz -> CASE.out.npz or
CASE.err.txt). TFLite is the opt-in heavy tier: it runs only with CUMPROD_TFLITE=1.
A missing environment skips, except on CI (CI=true), where it fails.
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


@dataclasses.dataclass(frozen=True)
class Runtime:
    name: str
    shards: int  # runner processes at once (IREE compiles on one core each)
    opt_in: str | None = None  # an environment variable that must be "1"
    # element types the runtime cannot take at all, whatever the lowering: the reason
    unsupported: tuple[tuple[int, str], ...] = ()


RUNTIMES = {
    "iree": Runtime("iree", 2),
    "tflite": Runtime(
        "tflite",
        2,
        opt_in="CUMPROD_TFLITE",
        unsupported=(
            (TensorProto.BFLOAT16, "onnx2tf 1.29 has no bfloat16 (KeyError: 16 on any Cast)"),
        ),
    ),
}

# How the models are lowered: decompose_cumprod(model, target=RT). CUMPROD_RUNTIME_LOWERING
# ("strategy=chain,target=spec") overrides it, to try a lowering on a runtime by hand.
_OVERRIDE = os.environ.get("CUMPROD_RUNTIME_LOWERING", "")


def lower_options(runtime: str) -> dict[str, object]:
    if _OVERRIDE:
        pairs = (item.split("=", 1) for item in _OVERRIDE.split(","))
        return {k: int(v) if v.isdigit() else v for k, v in pairs}
    return {"target": runtime}


def _case_id(elem_type: int, form: str, case: tuple[int, int, int, int]) -> str:
    rank, axis, ex, rev = case
    return f"{TYPE_NAMES[elem_type]}-{form}-r{rank}-ax{axis}-ex{ex}-rev{rev}"


def _group_name(elem_type: int, form: str) -> str:
    return f"{TYPE_NAMES[elem_type]}-{form}"


@dataclasses.dataclass
class Group:
    """One model holding every case of a (type, form): output k is case k."""

    name: str
    model: onnx.ModelProto | None  # None when the lowering raised
    feeds: dict[str, np.ndarray]
    inputs: list[np.ndarray]  # x of each case (in its own type)
    error: str = ""


def build_group(elem_type: int, form: str) -> onnx.ModelProto:
    """CumProd(x_k, axis_k) -> y_k for every case; bfloat16 goes in and out as float32."""
    nodes, inputs, outputs, inits = [], [], [], []
    for k, (rank, axis, ex, rev) in enumerate(CASES):
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


def make_group(runtime: str, elem_type: int, form: str) -> Group:
    name = _group_name(elem_type, form)
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    feeds: dict[str, np.ndarray] = {}
    xs = []
    for k, (rank, axis, _, _) in enumerate(CASES):
        x = random_data(elem_type, SHAPES[rank], rng)
        xs.append(x)
        feeds[f"x{k}"] = feed(elem_type, x)
        if form == "runtime_axis":
            feeds[f"axis{k}"] = np.array(axis, np.int64)
    try:
        lowered = rewriter.decompose_cumprod(build_group(elem_type, form), **lower_options(runtime))
    except (ValueError, rewriter.CumProdError) as error:
        return Group(name, None, feeds, xs, f"{type(error).__name__}: {error}")
    assert isinstance(lowered, onnx.ModelProto)
    return Group(name, lowered, feeds, xs)


@dataclasses.dataclass
class Run:
    """The results of every group on one runtime: outputs, or the error (a str)."""

    groups: dict[str, Group]
    results: dict[str, list[np.ndarray] | str]
    seconds: float


def _skip_unless_opted_in(rt: Runtime) -> None:
    if rt.opt_in and os.environ.get(rt.opt_in) != "1":
        pytest.skip(
            f"{rt.name} is the opt-in heavy tier: set {rt.opt_in}=1 "
            f"(scripts/runtimes/{rt.name}.sh installs it)"
        )


def run_groups(rt: Runtime, folder: Path) -> Run:
    """Lower every group, run them on the runtime (``rt.shards`` runner processes at once)."""
    groups: dict[str, Group] = {}
    results: dict[str, list[np.ndarray] | str] = {}
    shards: list[dict[str, runtime_harness.Case]] = [{} for _ in range(rt.shards)]
    for elem_type in ALL_TYPES:
        if any(t == elem_type for t, _ in rt.unsupported):
            continue
        for form in FORMS:
            group = make_group(rt.name, elem_type, form)
            groups[group.name] = group
            if group.model is None:
                results[group.name] = f"lowering failed: {group.error}"
                continue
            shards[len(groups) % rt.shards][group.name] = (group.model, group.feeds)
    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(rt.shards) as pool:
        futures = [
            pool.submit(runtime_harness.run_cases, rt.name, cases, folder / f"shard{i}")
            for i, cases in enumerate(shards)
        ]
        for future in futures:
            results.update(future.result())
    return Run(groups, results, time.perf_counter() - start)


_RUNS: dict[str, Run] = {}  # one run per runtime per session, made by its first test


def _run_for(runtime: str, tmp_path_factory: pytest.TempPathFactory) -> Run:
    rt = RUNTIMES[runtime]
    _skip_unless_opted_in(rt)
    runtime_harness.require(runtime)  # skips, or fails on CI, when the environment is missing
    if runtime not in _RUNS:
        _RUNS[runtime] = run_groups(rt, tmp_path_factory.mktemp(runtime))
    return _RUNS[runtime]


MATRIX = [
    (runtime, elem_type, form, case)
    for runtime in RUNTIMES
    for elem_type in ALL_TYPES
    for form in FORMS
    for case in CASES
]


def _matrix_id(item: tuple) -> str:
    runtime, elem_type, form, case = item
    return f"{runtime}-{_case_id(elem_type, form, case)}"


@pytest.mark.parametrize("item", MATRIX, ids=_matrix_id)
def test_cumprod_on_runtime(item: tuple, tmp_path_factory: pytest.TempPathFactory) -> None:
    runtime, elem_type, form, case = item
    rt = RUNTIMES[runtime]
    for unsupported, reason in rt.unsupported:
        if unsupported == elem_type:
            pytest.skip(f"{runtime}: {reason}")
    run = _run_for(runtime, tmp_path_factory)
    name = _group_name(elem_type, form)
    outputs = run.results[name]
    if isinstance(outputs, str):
        pytest.fail(f"{runtime}, model {name}: {outputs}")
    k = CASES.index(case)
    rank, axis, ex, rev = case
    x = run.groups[name].inputs[k]
    got = outputs[k]
    dtype = ir.DataType(elem_type)
    if elem_type in INTS:
        result = compare(got, reference(x, axis, ex, rev), dtype)
    else:
        # bfloat16 models give float32; onnx2tf gives float16 outputs as float32 (computed in
        # float32): rounded to the type here, as the user of the result would
        got = got.astype(dtype.numpy())
        bound = FLOAT_ULPS(factor_counts(x.shape, axis % rank, bool(ex), bool(rev)))
        result = compare(got, wide_reference(x, axis, ex, rev), dtype, bound)
    assert result.ok, f"{runtime}: {_case_id(elem_type, form, case)}: {result.detail}"
