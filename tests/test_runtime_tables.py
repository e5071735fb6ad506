"""``auto``'s per-runtime tables, run on the real runtimes: every branch at lengths past the
short axes of tests/test_runtimes*.py (whose n <= 6 reach only the ``chain`` / ``doubling``
rows).

For each runtime and element type, one model holds a CumProd per (shape, axis, exclusive,
reverse) below, lowered with ``decompose_cumprod(model, target=RUNTIME)`` (``auto``), run on
the runtime and compared with numpy: integers bit-exact (odd full-range values, so products
wrap and never turn to zero, which would hide a wrong factor), floats within the accuracy
contract (tests/bounds.py) for the lowering each node got, with 0, -0.0, ±inf and NaN
sprinkled in. The shapes take each side of every threshold of rewriter/lowerings/auto.csv's
``openvino``, ``tract``, ``iree`` and ``static`` tables: last axis n = 17, 65, 512, 600, 1024,
8193; first axis n = 17, 65, 600, 1025; a middle axis n = 17, 256, 600.

tinygrad runs four of the shapes (it compiles every kernel): one per position past n = 16,
where it takes carry, and the middle n = 256, where it takes masked as one tile.
Runtime limits are not run here (they are warned and tested in tests/test_runtimes.py):
OpenVINO's int64 / uint64 / float64, tract's bfloat16.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import os
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
from tests import bounds, runtime_harness
from tests.helpers import (
    ALL_TYPES,
    INTS,
    TYPE_NAMES,
    cumprod_model,
    functions_model,
    np_dtype,
    random_data,
    scan_body_model,
    sprinkle_specials,
)

RUNTIMES = ("openvino", "tract", "iree", "tinygrad")
# (shape, axis): both sides of every threshold of the per-runtime tables
SHAPES: list[tuple[tuple[int, ...], int]] = [
    ((2, 17), 1),
    ((2, 65), -1),
    ((2, 512), 1),
    ((2, 600), 1),
    ((1, 8193), 1),
    ((17, 3), 0),
    ((65, 3), 0),
    ((600, 2), -2),
    ((2, 17, 3), 1),
    ((2, 600, 2), 1),
    ((1025, 2), 0),
    ((2, 256, 2), 1),
    ((1, 1024), 1),  # OpenVINO float32: blocked on the last axis
]
ATTRS = [(0, 0), (1, 0), (0, 1), (1, 1)]  # (exclusive, reverse)
SHARDS = {"iree": 2}  # runner processes per runtime (default 1)
LIMITED = {
    ("openvino", TensorProto.INT64),
    ("openvino", TensorProto.UINT64),
    ("openvino", TensorProto.DOUBLE),
    ("tract", TensorProto.BFLOAT16),
}
CASES = [
    (rt, t)
    for rt in RUNTIMES
    for t in ALL_TYPES
    if (rt, t) not in LIMITED and runtime_harness.runs_type(rt, t)
]

Node = tuple[int, int, int, int]  # shape index, axis, exclusive, reverse
# tinygrad compiles every kernel with clang (about 8 s per 4-node model here): past n = 16
# its table takes carry, and masked at a middle n = 256 (one tile) and from 1024 (blocks:
# tests/lowerings/test_masked.py), so one shape per position and the middle 256. IREE
# leaves the middle 256 out: its 8-byte chain there (255 Muls) compiles for seconds, and its
# middle rows are taken on each side at n = 17 and 600; (1, 1024) meets no threshold of its
# table (the last axis's rows are taken at n = 17-8193 already).
SHAPES_ON = {
    "tinygrad": (((2, 65), -1), ((65, 3), 0), ((2, 17, 3), 1), ((2, 256, 2), 1)),
    "iree": tuple(s for s in SHAPES if s not in (((2, 256, 2), 1), ((1, 1024), 1))),
}


# IREE compiles a 44-node model in 40-60 s: without CUMPROD_FULL=1 (CI), each type's model
# holds two of the four (exclusive, reverse) pairs per shape, alternating with the shape and
# the type, so each type keeps every shape (every table row it reaches) and every pair, and
# each (shape, pair) runs for some type. CUMPROD_FULL=1 runs all four everywhere.
THIN_ATTRS = frozenset({"iree"})


def nodes_for(runtime: str, elem_type: int) -> list[Node]:
    shapes = [SHAPES.index(shape) for shape in SHAPES_ON.get(runtime, SHAPES)]
    thin = runtime in THIN_ATTRS and not runtime_harness.FULL
    t = ALL_TYPES.index(elem_type)
    return [
        (s, SHAPES[s][1], ex, rev)
        for s in shapes
        for a, (ex, rev) in enumerate(ATTRS)
        if not thin or (t + s + a) % 2 == 0
    ]


def _name(node: Node) -> str:
    s, _, ex, rev = node
    return f"y{s}_ex{ex}_rev{rev}"


def build_model(elem_type: int, runtime: str) -> onnx.ModelProto:
    """x_s -> CumProd per node; bfloat16 goes in and out as float32 (Cast inside)."""
    io = TensorProto.FLOAT if elem_type == TensorProto.BFLOAT16 else elem_type
    nodes, inputs, outputs, inits = [], [], [], []
    for s in sorted({node[0] for node in nodes_for(runtime, elem_type)}):
        shape, axis = SHAPES[s]
        inputs.append(helper.make_tensor_value_info(f"x{s}", io, list(shape)))
        inits.append(helper.make_tensor(f"axis{s}", TensorProto.INT64, [], [axis]))
        x = f"x{s}"
        if elem_type == TensorProto.BFLOAT16:
            nodes.append(helper.make_node("Cast", [x], [f"{x}_bf16"], to=elem_type))
            x = f"{x}_bf16"
    for node in nodes_for(runtime, elem_type):
        s, _, ex, rev = node
        y = _name(node)
        x = f"x{s}_bf16" if elem_type == TensorProto.BFLOAT16 else f"x{s}"
        out = f"{y}_bf16" if elem_type == TensorProto.BFLOAT16 else y
        attrs = {k: v for k, v in (("exclusive", ex), ("reverse", rev)) if v}
        nodes.append(helper.make_node("CumProd", [x, f"axis{s}"], [out], name=f"cp_{y}", **attrs))
        if elem_type == TensorProto.BFLOAT16:
            nodes.append(helper.make_node("Cast", [out], [y], to=TensorProto.FLOAT))
        outputs.append(helper.make_tensor_value_info(y, io, list(SHAPES[s][0])))
    graph = helper.make_graph(nodes, f"tables_{TYPE_NAMES[elem_type]}", inputs, outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26)])


def input_data(elem_type: int, s: int) -> np.ndarray:
    shape, _ = SHAPES[s]
    rng = np.random.default_rng(zlib.crc32(f"{TYPE_NAMES[elem_type]}-{s}".encode()))
    dtype = np_dtype(elem_type)
    if elem_type in INTS:
        info = np.iinfo(dtype)
        x = rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)
        return x | dtype.type(1)  # odd: no product is ever zero
    spread = 4.0 / np.sqrt(max(shape))  # no prefix product leaves the normal range
    x = np.exp2(rng.uniform(-spread, spread, size=shape)) * rng.choice([-1.0, 1.0], size=shape)
    x = x.astype(np_dtype(elem_type))
    return sprinkle_specials(elem_type, x, rng, rate=0.5 / max(shape))


def reference(x: np.ndarray, axis: int, exclusive: int, reverse: int) -> np.ndarray:
    """numpy's cumprod, integers wrapping in their type, floats in longdouble."""
    wide = x if x.dtype.kind in "iu" else x.astype(np.longdouble)
    if reverse:
        wide = np.flip(wide, axis)
    if exclusive:
        ones = np.ones_like(np.take(wide, [0], axis=axis))
        rest = np.take(wide, np.arange(wide.shape[axis] - 1), axis=axis)
        wide = np.concatenate([ones, rest], axis)
    with np.errstate(over="ignore"):
        y = np.cumprod(wide, axis=axis, dtype=wide.dtype)
    return np.flip(y, axis) if reverse else y


class Lowered:
    def __init__(self, runtime: str, elem_type: int) -> None:
        rewrite = rewriter.DecomposeCumProdPass(target=runtime)
        model = ir.serde.deserialize_model(build_model(elem_type, runtime))
        rewrite(model)
        self.model = ir.serde.serialize_model(model)
        self.lowerings = {p.site.name: p.lowering.name for p in rewrite.plans}


@pytest.fixture(scope="module")
def results(
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, dict[str, runtime_harness.Result]]:
    root = tmp_path_factory.mktemp("tables")
    work: dict[str, dict[str, runtime_harness.Case]] = {}
    for runtime, elem_type in CASES:
        if runtime_harness.python_for(runtime) is None:
            continue
        shapes = sorted({node[0] for node in nodes_for(runtime, elem_type)})
        feeds = {f"x{s}": input_data(elem_type, s) for s in shapes}
        if elem_type == TensorProto.BFLOAT16:
            feeds = {k: v.astype(np.float32) for k, v in feeds.items()}
        model = lowered_for(runtime, elem_type).model
        work.setdefault(runtime, {})[TYPE_NAMES[elem_type]] = (model, feeds)
    # IREE compiles each model for 25-50 s on about 1.3 cores: two runner processes
    shards = [
        (rt, {name: cases[name] for name in list(cases)[i :: SHARDS.get(rt, 1)]}, i)
        for rt, cases in work.items()
        for i in range(min(SHARDS.get(rt, 1), len(cases)))
    ]
    with ThreadPoolExecutor(max_workers=len(shards) or 1) as pool:
        futures = [
            (rt, pool.submit(runtime_harness.run_cases, rt, part, root / f"{rt}{i}"))
            for rt, part, i in shards
        ]
        results: dict[str, dict[str, runtime_harness.Result]] = {}
        for rt, future in futures:
            results.setdefault(rt, {}).update(future.result())
        return results


@functools.cache
def lowered_for(runtime: str, elem_type: int) -> Lowered:
    return Lowered(runtime, elem_type)


def test_the_tables_reach_every_lowering_they_name() -> None:
    """The shapes above take every lowering each runtime's table picks (so a table row the
    shapes miss shows here, not as an untested branch)."""
    used = {rt: set() for rt in RUNTIMES}
    for runtime, elem_type in CASES:
        used[runtime] |= set(lowered_for(runtime, elem_type).lowerings.values())
    assert used == {
        "openvino": {"doubling", "chain", "radix", "carry", "blocked"},  # carry: int32 from
        # n = 256, blocked: float32 first / middle n = 256-1024, last 1024-8192
        "tract": {"scan", "radix", "carry"},  # chain for n <= 1 only
        "iree": {"doubling", "chain", "radix"},
        "tinygrad": {"carry", "masked"},  # n <= 16 (chain): tests/test_runtimes.py
    }


@pytest.mark.parametrize(
    ("runtime", "elem_type"),
    [pytest.param(rt, t, id=f"{rt}-{TYPE_NAMES[t]}") for rt, t in CASES],
)
def test_auto_on_runtime(
    results: dict[str, dict[str, runtime_harness.Result]], runtime: str, elem_type: int
) -> None:
    runtime_harness.require(runtime)
    got = results[runtime][TYPE_NAMES[elem_type]]
    assert not isinstance(got, str), f"{runtime} could not run the model: {got}"
    lowered = lowered_for(runtime, elem_type)
    failures = []
    for node, out in zip(nodes_for(runtime, elem_type), got, strict=True):
        s, axis, ex, rev = node
        x = input_data(elem_type, s)
        want = reference(x, axis, ex, rev)
        lowering = lowered.lowerings[f"cp_{_name(node)}"]
        if elem_type in INTS:
            problem = bounds.check(out, want, x.dtype)
        else:
            name = bounds.type_name(TYPE_NAMES[elem_type])
            actual = out.astype(ml_dtypes.bfloat16) if elem_type == TensorProto.BFLOAT16 else out
            k = bounds.factor_counts(x.shape, axis, bool(ex), bool(rev))
            problem = bounds.check(actual, want, name, bounds.ulp_bound(lowering, name, k))
        if problem:
            failures.append(f"{SHAPES[s]} axis {axis} ex={ex} rev={rev} ({lowering}): {problem}")
    assert not failures, "\n".join(failures)


# -- every strategy below opset 14 on OpenVINO ---------------------------------------------------

# (dims, axis, axis fed at run time): a symbolic length (with and without a Transpose in the
# Loop lowering), a run-time axis over static dims, and a static length beside a symbolic dim
LOW_OPSET_FORMS: list[tuple[list[int | str], int, bool]] = [
    (["a", "n"], 1, False),
    (["n", "a"], 0, False),
    ([3, 7], 1, True),
    (["a", 7], 1, False),
]
LOW_OPSET_STRATEGIES = ("loop", "scan", "dynamic", "chain", "blocked", "radix", "doubling")


@dataclasses.dataclass
class LowOpsetCase:
    dims: list[int | str]
    axis: int
    fed: bool
    strategy: str
    opset: int
    exclusive: int
    reverse: int
    feeds: dict[str, np.ndarray]
    model: onnx.ModelProto | None = None
    refusal: str = ""

    @property
    def length_known(self) -> bool:
        return not self.fed and isinstance(self.dims[self.axis], int)


def _low_opset_cases(
    target: str,
    strategies: tuple[str, ...],
    opsets: tuple[int, ...],
    elem_types: tuple[int, ...] = (TensorProto.FLOAT,),
) -> dict[str, LowOpsetCase]:
    cases: dict[str, LowOpsetCase] = {}
    rng = np.random.default_rng(13)
    for (dims, axis, fed), strategy, opset, (ex, rev), elem_type in itertools.product(
        LOW_OPSET_FORMS, strategies, opsets, ATTRS, elem_types
    ):
        inputs = [helper.make_tensor_value_info("x", elem_type, dims)]
        inits = []
        if fed:
            inputs.append(helper.make_tensor_value_info("axis", TensorProto.INT64, []))
        else:
            inits.append(helper.make_tensor("axis", TensorProto.INT64, [], [axis]))
        attrs = {k: v for k, v in (("exclusive", ex), ("reverse", rev)) if v}
        node = helper.make_node("CumProd", ["x", "axis"], ["y"], **attrs)
        out = helper.make_tensor_value_info("y", elem_type, dims)
        graph = helper.make_graph([node], "low_opset", inputs, [out], inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26)])
        shape = (7, 3) if axis == 0 else (3, 7)
        if elem_type in INTS:
            x = rng.integers(-3, 4, shape).astype(np_dtype(elem_type))
        else:
            x = rng.uniform(0.5, 1.5, shape).astype(np_dtype(elem_type))
        feeds = {"x": x}
        if fed:
            feeds["axis"] = np.array(axis, np.int64)
        case = LowOpsetCase(dims, axis, fed, strategy, opset, ex, rev, feeds)
        try:
            case.model = rewriter.decompose_cumprod(
                model, strategy=strategy, target=target, target_opset=opset, max_length=16
            )
        except (rewriter.StrategyError, rewriter.OpsetError) as exc:
            case.refusal = str(exc)
        form = "x".join(map(str, dims)) + ("-fed" if fed else "")
        name = f"{form}-{strategy}-opset{opset}-ex{ex}-rev{rev}-{TYPE_NAMES[elem_type]}"
        cases[name] = case
    return cases


def _run_low_opset(runtime: str, cases: dict[str, LowOpsetCase], tmp_path: Path) -> list[str]:
    """Runs the cases that were lowered on ``runtime``: what differs from numpy."""
    runnable = {name: (c.model, c.feeds) for name, c in cases.items() if c.model is not None}
    results = runtime_harness.run_cases(runtime, runnable, tmp_path)  # type: ignore[arg-type]
    failures = []
    for name, got in results.items():
        c = cases[name]
        x = c.feeds["x"]
        want = reference(x, c.axis, c.exclusive, c.reverse)
        if isinstance(got, str):
            failures.append(f"{name}: {got}")
            continue
        k = bounds.factor_counts(x.shape, c.axis, bool(c.exclusive), bool(c.reverse))
        dtype = bounds.type_name(x.dtype)
        bound = 0.0 if x.dtype.kind in "iu" else bounds.ulp_bound("loop", dtype, k)
        problem = bounds.check(got[0], want, x.dtype, bound)
        if problem:
            failures.append(f"{name}: {problem}")
    return failures


def test_every_strategy_below_opset_14_on_openvino(tmp_path: Path) -> None:
    """OpenVINO 2026.4 returns uninitialised memory for the ``loop`` lowering of an
    exclusive scan over a length known only at run time below opset 14: that is refused
    (Target.loop_exclusive_min_opset). If is not used there (two If-guarded Scans in one
    model went wrong), so ``dynamic`` and, below opset 14, a view of x with symbolic dims
    (guarded by an If there) are refused too; everything else runs right there."""
    runtime_harness.require("openvino")
    cases = _low_opset_cases("openvino", LOW_OPSET_STRATEGIES, (11, 13, 14))
    refused = {name for name, case in cases.items() if case.refusal}
    assert refused == {
        name
        for name, c in cases.items()
        if (c.strategy == "loop" and c.exclusive and not c.length_known and c.opset < 14)
        or c.strategy == "dynamic"
        or (c.opset < 14 and not all(isinstance(d, int) for d in c.dims))
    }
    assert all("openvino" in cases[name].refusal for name in refused)
    failures = _run_low_opset("openvino", cases, tmp_path)
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("runtime", ["openvino", "tract", "iree", "tinygrad"])
def test_auto_below_opset_14_on_runtime(runtime: str, tmp_path: Path) -> None:
    """``target_opset`` 11 and 13 (a view of possibly-empty x is guarded by an If there):
    right on the runtime, or refused where it has no If (tract; IREE does not legalize
    that If; OpenVINO's is not used) or does not import the opset (IREE below 13)."""
    runtime_harness.require(runtime)
    types = (
        (TensorProto.FLOAT,) if runtime == "tinygrad" else (TensorProto.FLOAT, TensorProto.INT64)
    )
    cases = _low_opset_cases(runtime, ("auto",), (11, 13), types)
    target = rewriter.TARGETS[runtime]
    for name, c in cases.items():
        below_import = c.opset < target.min_opset
        no_if = "If" in target.missing_ops and not all(isinstance(d, int) for d in c.dims)
        assert bool(c.refusal) == (below_import or no_if), (name, c.refusal)
    failures = _run_low_opset(runtime, cases, tmp_path)
    assert not failures, "\n".join(failures)


def test_iree_exclusive_8_byte_run_time_length_alone_in_its_model(tmp_path: Path) -> None:
    """IREE 3.13 did not compile the exclusive ``doubling`` of an 8-byte type over a length
    known only at run time when it shifted the products at the end ("'stream.yield' op used
    resource not listed in explicit captures"; the matrices above passed because their models
    hold other CumProds too): it shifts the input first. Nor, with the axis a run-time input,
    the Pad that shifted the input (found by a review from outside): IREE shifts by a Concat
    with ones (``Target.pad_shifts``). One CumProd per model."""
    runtime_harness.require("iree")
    cases: dict[str, runtime_harness.Case] = {}
    wants = {}
    for elem_type, rev, axis_input in itertools.product(
        (TensorProto.INT64, TensorProto.DOUBLE), (0, 1), (False, True)
    ):
        shape: list[int | str] = ["a", "n"]
        inputs = [helper.make_tensor_value_info("x", elem_type, shape)]
        axis = [helper.make_tensor("axis", TensorProto.INT64, [], [1])]
        if axis_input:  # x[3, n]: the lowering along axis 0 has a static length
            shape = [3, "n"]
            inputs = [
                helper.make_tensor_value_info("x", elem_type, shape),
                helper.make_tensor_value_info("axis", TensorProto.INT64, []),
            ]
            axis = []
        graph = helper.make_graph(
            [helper.make_node("CumProd", ["x", "axis"], ["y"], exclusive=1, reverse=rev)],
            "alone",
            inputs,
            [helper.make_tensor_value_info("y", elem_type, shape)],
            axis,
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26)])
        lowered = rewriter.decompose_cumprod(model, target="iree", max_length=8)
        x = random_data(elem_type, (3, 7), np.random.default_rng(rev))  # odd integers
        name = f"{TYPE_NAMES[elem_type]}-{'axis-input-' if axis_input else ''}rev{rev}"
        feeds = {"x": x, "axis": np.array(-1, np.int64)} if axis_input else {"x": x}
        cases[name] = (lowered, feeds)
        wants[name] = [(x, 1, 1, rev, "doubling")]
    failures = _failures_on("iree", cases, wants, tmp_path)
    assert not failures, "\n".join(failures)


Want = tuple[np.ndarray, int, int, int, str]  # x, axis, exclusive, reverse, lowering


def test_iree_run_time_length_output_shapes_under_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """IREE 3.13's local-task driver gave wrong output shapes now and then (a rank-1 output
    of 5 elements as (3,): 12 runs in 4,500 of this model, 3 processes on 2 cores; the
    CI run of 38c50f2 failed on it) when the lowering's final Reshape took the length
    guard ``n + 1 - (n < bound + 1)``, a value IREE computes on the device and reads back.
    IREE checks no Reshape, so the guard is left out there (``view.guarded_length``): each
    of 3 runner processes at once runs the compiled model 2,000 times, every run the same
    and right."""
    runtime_harness.require("iree")
    monkeypatch.setenv("CUMPROD_IREE_REPEAT", "2000")
    nodes, inputs, outputs, inits = [], [], [], []
    feeds, wants = {}, []
    rng = np.random.default_rng(21)
    shapes = {1: (5,), 2: (3, 4), 3: (2, 3, 4), 4: (2, 3, 4, 5)}
    keys = [  # the cases of tests/test_runtimes_iree_tflite.py, where CI met it
        (rank, axis, ex, rev)
        for rank, axis in ((1, 0), (2, 0), (2, -1), (3, 1), (3, -1), (4, 0), (4, 2))
        for ex, rev in itertools.product((0, 1), (0, 1))
    ]
    for k, (rank, axis, ex, rev) in enumerate(keys):
        dims: list[int | str] = [f"d{k}_{j}" for j in range(rank)]
        node, x_info, y_info, axis_init = _one_cumprod(
            TensorProto.UINT32, dims, axis, str(k), (ex, rev)
        )
        nodes.append(node)
        inputs.append(x_info)
        outputs.append(y_info)
        inits.append(axis_init)
        x = random_data(TensorProto.UINT32, shapes[rank], rng)
        feeds[f"x{k}"] = x
        wants.append((x, axis, ex, rev, "doubling"))
    graph = helper.make_graph(nodes, "many", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26)])
    lowered = rewriter.decompose_cumprod(model, target="iree", max_length=8)
    with ThreadPoolExecutor(3) as pool:
        case, want = {"many": (lowered, feeds)}, {"many": wants}
        runs = [pool.submit(_failures_on, "iree", case, want, tmp_path / f"p{i}") for i in range(3)]
        failures = [failure for run in runs for failure in run.result()]
    assert not failures, "\n".join(failures)


def _failures_on(
    runtime: str,
    cases: dict[str, runtime_harness.Case],
    wants: dict[str, list[Want]],
    tmp_path: Path,
) -> list[str]:
    """Each case run on ``runtime``: its outputs against the reference of each ``Want``
    (integers exact, floats within the lowering's bound)."""
    failures = []
    for name, got in runtime_harness.run_cases(runtime, cases, tmp_path).items():
        if isinstance(got, str):
            failures.append(f"{name}: {got}")
            continue
        for out, (x, axis, ex, rev, lowering) in zip(got, wants[name]):
            k = bounds.factor_counts(x.shape, axis, bool(ex), bool(rev))
            float_bound = bounds.ulp_bound(lowering, bounds.type_name(x.dtype), k)
            bound = 0.0 if x.dtype.kind in "iu" else float_bound
            problem = bounds.check(out, reference(x, axis, ex, rev), x.dtype, bound)
            if problem:
                failures.append(f"{name}: {problem}")
    return failures


def _one_cumprod(
    elem_type: int,
    dims: list[int | str],
    axis: int,
    suffix: str = "",
    attrs: tuple[int, int] | None = None,
) -> tuple:
    """(node, x's info, y's info, the axis initializer); ``attrs``: (exclusive, reverse),
    written even when 0."""
    x, y = f"x{suffix}", f"y{suffix}"
    node = helper.make_node("CumProd", [x, f"axis{suffix}"], [y])
    if attrs is not None:
        node.attribute.extend(
            [
                helper.make_attribute("exclusive", attrs[0]),
                helper.make_attribute("reverse", attrs[1]),
            ]
        )
    return (
        node,
        helper.make_tensor_value_info(x, elem_type, dims),
        helper.make_tensor_value_info(y, elem_type, dims),
        helper.make_tensor(f"axis{suffix}", TensorProto.INT64, [], [axis]),
    )


def test_openvino_two_scans_over_symbolic_lengths_in_one_model(tmp_path: Path) -> None:
    """Found by a review from outside: with two CumProds over symbolic lengths in one model,
    each lowered to a Scan inside an If (n = 0 or not), OpenVINO 2026.4.1 returned garbage for
    one of them on the first inference after compiling (uint32 [a] gave [3580413152, 21858,
    0, ...] for [3, 3, 6, ...]), while each alone was right. OpenVINO's Scans are guarded by
    a slab of ones instead (If is not used there)."""
    runtime_harness.require("openvino")
    rng = np.random.default_rng(5)
    pairs = {
        "uint32-a+float32-3xb": ((TensorProto.UINT32, ["a"], 0), (TensorProto.FLOAT, [3, "b"], 1)),
        "int32-axa+float16-bx2": (
            (TensorProto.INT32, [2, "a"], 1),
            (TensorProto.FLOAT16, ["b", 2], 0),
        ),
    }
    cases: dict[str, runtime_harness.Case] = {}
    wants: dict[str, list[Want]] = {}
    for name, specs in pairs.items():
        parts = [_one_cumprod(t, d, a, str(k)) for k, (t, d, a) in enumerate(specs)]
        graph = helper.make_graph(
            [p[0] for p in parts],
            "two",
            [p[1] for p in parts],
            [p[2] for p in parts],
            [p[3] for p in parts],
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26)])
        lowered = rewriter.decompose_cumprod(model, target="openvino")
        feeds = {}
        for k, (elem_type, dims, _axis) in enumerate(specs):
            shape = tuple(33 if isinstance(d, str) else d for d in dims)
            feeds[f"x{k}"] = random_data(elem_type, shape, rng)
        cases[name] = (lowered, feeds)
        wants[name] = [(feeds[f"x{k}"], a, 0, 0, "scan") for k, (_, _, a) in enumerate(specs)]
    failures = _failures_on("openvino", cases, wants, tmp_path)
    assert not failures, "\n".join(failures)


def test_iree_8_byte_chain_over_one_row(tmp_path: Path) -> None:
    """Found by a review from outside: IREE 3.13 compiled an 8-byte ``chain`` over a single
    row of n = 33-64 into one dispatch of n bindings and then refused to load it ("binding
    count 33 > 32"); two rows ran. A single row takes ``radix`` past n = 32 there."""
    runtime_harness.require("iree")
    cases: dict[str, runtime_harness.Case] = {}
    wants = {}
    rng = np.random.default_rng(6)
    for elem_type, (dims, axis) in itertools.product(
        (TensorProto.INT64, TensorProto.DOUBLE), (([1, 33], 1), ([64], 0), ([1, 64, 1], 1))
    ):
        node, x_info, y_info, axis_init = _one_cumprod(elem_type, list(dims), axis)
        graph = helper.make_graph([node], "row", [x_info], [y_info], [axis_init])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26)])
        name = f"{TYPE_NAMES[elem_type]}-{'x'.join(map(str, dims))}"
        x = random_data(elem_type, tuple(dims), rng)
        cases[name] = (rewriter.decompose_cumprod(model, target="iree"), {"x": x})
        wants[name] = [(x, axis, 0, 0, "radix")]
    failures = _failures_on("iree", cases, wants, tmp_path)
    assert not failures, "\n".join(failures)


def test_iree_8_byte_padded_trees_on_two_inputs(tmp_path: Path) -> None:
    """Found by a review from outside: IREE 3.13 did not compile a model whose two inputs
    each had an 8-byte ``radix`` or ``carry`` padded with ones by a Pad ("'stream.yield' op
    used resource not listed in explicit captures"; one such CumProd per model compiled).
    There the padding is ones Concat-ed after x (``View.pad_ones_after``), as the shifts of
    ``doubling`` are. One model per type and shape, a CumProd per input, each tree named
    (``auto`` takes radix on both shapes)."""
    runtime_harness.require("iree")
    cases: dict[str, runtime_harness.Case] = {}
    wants = {}
    rng = np.random.default_rng(8)
    for elem_type, (dims, axis, lowering) in itertools.product(
        (TensorProto.INT64, TensorProto.UINT64, TensorProto.DOUBLE),
        (([2, 65], 1, "radix"), ([2, 257, 3], 1, "carry")),
    ):
        nodes, inputs, outputs, inits = [], [], [], []
        for k, (ex, rev) in enumerate(((0, 0), (1, 1))):
            node, x_info, y_info, axis_init = _one_cumprod(
                elem_type, list(dims), axis, str(k), (ex, rev)
            )
            nodes.append(node)
            inputs.append(x_info)
            outputs.append(y_info)
            inits.append(axis_init)
        graph = helper.make_graph(nodes, "two", inputs, outputs, inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26)])
        rewrite = rewriter.DecomposeCumProdPass(target="iree", strategy=lowering)
        ir_model = ir.serde.deserialize_model(model)
        rewrite(ir_model)
        assert {p.lowering.name for p in rewrite.plans} == {lowering}
        lowered = ir.serde.serialize_model(ir_model)
        assert "Pad" not in {n.op_type for n in lowered.graph.node}
        name = f"{TYPE_NAMES[elem_type]}-{'x'.join(map(str, dims))}"
        xs = [random_data(elem_type, tuple(dims), rng) for _ in range(2)]
        cases[name] = (lowered, {f"x{k}": x for k, x in enumerate(xs)})
        wants[name] = [(xs[0], axis, 0, 0, lowering), (xs[1], axis, 1, 1, lowering)]
    failures = _failures_on("iree", cases, wants, tmp_path)
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("runtime", ["iree", "openvino", "tract"])
def test_length_1_with_symbolic_dims(runtime: str, tmp_path: Path) -> None:
    """Found by a review from outside: along an axis of static length 1 with the other dims
    symbolic, the view Reshape(x, (o, 1, 1)) and the Reshape back made IREE 3.13 fail at run
    time ("mismatching contracting dimension"), whatever the lowering. A scan of length 1 is
    x itself (exclusive: ones), built without a view. Over static dims IREE's importer folded
    the exclusive ones, Expand(1, Shape(x)), into a uint32 / uint64 graph output it could not
    compile (found by the next review): integers take x - x + 1. (Not uint64 on OpenVINO,
    which holds it in 32 bits: a limit tested in tests/test_runtimes.py.)"""
    runtime_harness.require(runtime)
    cases: dict[str, runtime_harness.Case] = {}
    wants: dict[str, list[Want]] = {}
    rng = np.random.default_rng(7)
    shapes = (
        (["a", "b", 1], -1, (3, 4, 1)),
        (["a", 1], 1, (5, 1)),
        (["a", 1, "c"], 1, (2, 1, 3)),
        ([3, 1], -1, (3, 1)),
    )
    types = [TensorProto.FLOAT, TensorProto.INT32]
    types += [TensorProto.UINT64] * (runtime != "openvino")
    for elem_type in types:
        # one model per type (an IREE compile takes seconds), a CumProd per shape and
        # attributes, each on its own input with its own symbolic dims
        nodes, inputs, outputs, inits, feeds = [], [], [], [], {}
        name = TYPE_NAMES[elem_type]
        wants[name] = []
        for k, ((dims, axis, concrete), (ex, rev)) in enumerate(
            itertools.product(shapes, ((0, 0), (1, 1), (1, 0)))
        ):
            own = [f"{d}{k}" if isinstance(d, str) else d for d in dims]
            node, x_info, y_info, axis_init = _one_cumprod(elem_type, own, axis, str(k))
            node.attribute.extend([helper.make_attribute("exclusive", ex)])
            node.attribute.extend([helper.make_attribute("reverse", rev)])
            nodes.append(node)
            inputs.append(x_info)
            outputs.append(y_info)
            inits.append(axis_init)
            feeds[x_info.name] = random_data(elem_type, concrete, rng)
            wants[name].append((feeds[x_info.name], axis, ex, rev, "chain"))
        graph = helper.make_graph(nodes, "length_1", inputs, outputs, inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26)])
        cases[name] = (rewriter.decompose_cumprod(model, target=runtime), feeds)
    failures = _failures_on(runtime, cases, wants, tmp_path)
    assert not failures, "\n".join(failures)


def test_openvino_cumprod_in_a_scan_body(tmp_path: Path) -> None:
    """Found by a review from outside: a CumProd in a Scan body got a nested Scan, which
    OpenVINO 2026.4 failed to convert ("Check 'ov::as_type_ptr<op::v0::TensorIterator>
    (node)'"). The openvino target takes no Scan there (Target.scan_in_scan)."""
    runtime_harness.require("openvino")
    cases: dict[str, runtime_harness.Case] = {}
    wants = {}
    rng = np.random.default_rng(8)
    for elem_type, dims, axis, ex in itertools.product(
        (TensorProto.FLOAT, TensorProto.INT32),
        (("a", "b", "c"), (2, 3, 5)),
        (0, 1),
        (0, 1),
    ):
        model = scan_body_model(elem_type, dims, axis, exclusive=ex)
        name = f"{TYPE_NAMES[elem_type]}-{'x'.join(map(str, dims))}-axis{axis}-ex{ex}"
        x = random_data(elem_type, (2, 3, 5), rng)
        lowered = rewriter.decompose_cumprod(model, target="openvino", max_length=8)
        cases[name] = (lowered, {"x": x})
        lowering = "doubling" if isinstance(dims[0], str) else "chain"
        wants[name] = [(x, axis + 1, ex, 0, lowering)]
    failures = _failures_on("openvino", cases, wants, tmp_path)
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("runtime", [*RUNTIMES, "tflite"])
def test_model_local_functions_on_runtime(runtime: str, tmp_path: Path) -> None:
    """None of these runtimes loads a call to a model-local function ("No conversion rule
    found for operations: local.F", "Unimplemented(F)", ...): the target inlines them
    (Target.local_functions). tests/helpers.functions_model: attributes by reference through
    two calls, one function called with float32 and int32, one without CumProd."""
    if runtime == "tflite" and os.environ.get("CUMPROD_TFLITE") != "1":
        pytest.skip("tflite is the opt-in heavy tier: set CUMPROD_TFLITE=1")
    runtime_harness.require(runtime)
    model, outputs = functions_model()
    rng = np.random.default_rng(12)
    a = (np.exp2(rng.integers(-2, 3, (3, 5))) * rng.choice([-1, 1], (3, 5))).astype(np.float32)
    b = random_data(TensorProto.INT32, (3, 5), rng)
    inputs = {"a": a, "b": b, "abs_a": np.abs(a)}
    lowered = rewriter.decompose_cumprod(model, target=runtime)
    wants = {"functions": [(inputs[x], 1, ex, rev, "chain") for x, ex, rev in outputs]}
    failures = _failures_on(runtime, {"functions": (lowered, {"a": a, "b": b})}, wants, tmp_path)
    assert not failures, "\n".join(failures)


def test_tract_empty_x_with_a_run_time_axis(tmp_path: Path) -> None:
    """Found by a review: x of dims (b, 0, 3) with the axis a graph input: tract failed to
    load the select over the axes ("declutter ... Concat: Trying to substitute a 3,b,0,3 by
    2,b,0,3"). x has no element whatever the axis: y is x."""
    runtime_harness.require("tract")
    cases: dict[str, runtime_harness.Case] = {}
    wants: dict[str, list[Want]] = {}
    for elem_type, dims, (ex, rev) in itertools.product(
        (TensorProto.FLOAT, TensorProto.UINT64),
        (["b", 0, 3], [2, 0, "c", 1, 2]),
        ((0, 0), (1, 1)),
    ):
        node = helper.make_node("CumProd", ["x", "axis"], ["y"], exclusive=ex, reverse=rev)
        graph = helper.make_graph(
            [node],
            "empty",
            [
                helper.make_tensor_value_info("x", elem_type, dims),
                helper.make_tensor_value_info("axis", TensorProto.INT64, []),
            ],
            [helper.make_tensor_value_info("y", elem_type, dims)],
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26)])
        concrete = tuple(d if isinstance(d, int) else 2 for d in dims)
        x = np.ones(concrete, np_dtype(elem_type))
        name = f"{TYPE_NAMES[elem_type]}-{'x'.join(map(str, dims))}-ex{ex}rev{rev}"
        cases[name] = (
            rewriter.decompose_cumprod(model, target="tract"),
            {"x": x, "axis": np.array(-1, np.int64)},
        )
        wants[name] = [(x, -1, ex, rev, "chain")]
    failures = _failures_on("tract", cases, wants, tmp_path)
    assert not failures, "\n".join(failures)


def test_tinygrad_run_time_length_takes_carry_and_a_longer_input_fails(tmp_path: Path) -> None:
    """tinygrad: a length known only at run time takes carry padded to max_length (doubling
    took 5-12x longer to compile, scripts/bench_tinygrad_run_time_length.py); an input
    longer than the bound fails there (a Reshape that does not fit), not a wrong result."""
    runtime_harness.require("tinygrad")
    cases: dict[str, runtime_harness.Case] = {}
    wants = {}
    rng = np.random.default_rng(13)
    for dims, axis, fits, longer in (
        ([3, "n"], 1, (3, 13), (3, 20)),
        (["n", 3], 0, (13, 3), (20, 3)),
    ):
        node, x_info, y_info, axis_init = _one_cumprod(TensorProto.INT32, dims, axis)
        graph = helper.make_graph([node], "one", [x_info], [y_info], [axis_init])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26)])
        (plan,) = rewriter.decompose.plan_cumprods(
            ir.serde.deserialize_model(model),
            target=rewriter.TARGETS["tinygrad"],
            max_length=16,
        )
        assert plan.lowering.name == "carry"
        lowered = rewriter.decompose_cumprod(model, target="tinygrad", max_length=16)
        x = random_data(TensorProto.INT32, fits, rng)
        cases[f"fits-{axis}"] = (lowered, {"x": x})
        wants[f"fits-{axis}"] = [(x, axis, 0, 0, "carry")]
        cases[f"longer-{axis}"] = (lowered, {"x": random_data(TensorProto.INT32, longer, rng)})
    results = runtime_harness.run_cases("tinygrad", cases, tmp_path)
    for axis in (0, 1):
        assert isinstance(results[f"longer-{axis}"], str), "a longer input ran"
        assert "reshape" in results[f"longer-{axis}"].lower()
    failures = _failures_on(
        "tinygrad",
        {k: v for k, v in cases.items() if k.startswith("fits")},
        wants,
        tmp_path / "fits",
    )
    assert not failures, "\n".join(failures)


def test_openvino_quirks_logsum_refused_loop_guarded(tmp_path: Path) -> None:
    """Found by a review from outside, on OpenVINO 2026.4 (forced strategies auto never
    picks there): ``logsum`` (float32 there) gave inf for NaN (OpenVINO's Exp(NaN) is
    +inf): refused on the openvino target. ``loop`` gave shape (0, 0, 0) for an empty
    middle axis of run-time length (the zero-iteration Loop's stacked output, which the
    Reshape after it left as it was): there the Loop now runs over a slab of ones first
    (Target.loop_empty_length). The graphs built for the ``spec`` target still show both
    quirks on OpenVINO (when OpenVINO fixes them this fails: lift the refusal and the
    guard)."""
    runtime_harness.require("openvino")
    nan_x = np.array([[2, np.nan, 3, 0.5, 1], [np.inf, 2, np.nan, 1, 1]], np.float32)
    nan_model = cumprod_model(TensorProto.FLOAT, (2, 5), 1)
    with pytest.raises(
        rewriter.StrategyError, match="'logsum' computes wrong values on openvino: its Exp"
    ):
        rewriter.decompose_cumprod(nan_model, strategy="logsum", target="openvino")
    rng = np.random.default_rng(18)
    cases: dict[str, runtime_harness.Case] = {
        "logsum_spec": (
            rewriter.decompose_cumprod(nan_model, strategy="logsum", target="spec"),
            {"x": nan_x},
        ),
        "nan_auto": (rewriter.decompose_cumprod(nan_model, target="openvino"), {"x": nan_x}),
    }
    wants: dict[str, tuple[np.ndarray, int, int]] = {}
    for ex, rev in ATTRS:
        model = cumprod_model(TensorProto.FLOAT, ("p", "q", "r"), 1, exclusive=ex, reverse=rev)
        spec = rewriter.decompose_cumprod(model, strategy="loop", target="spec")
        lowered = rewriter.decompose_cumprod(model, strategy="loop", target="openvino")
        for shape in ((3, 0, 4), (1, 0, 1), (3, 5, 4)):
            x = rng.uniform(0.5, 1.5, shape).astype(np.float32)
            name = f"loop_ex{ex}_rev{rev}_{'x'.join(map(str, shape))}"
            cases[name] = (lowered, {"x": x})
            wants[name] = (x, ex, rev)
            if shape == (3, 0, 4) and not ex and not rev:
                cases["loop_spec"] = (spec, {"x": x})
    got = runtime_harness.run_cases("openvino", cases, tmp_path)
    assert not any(isinstance(r, str) for r in got.values()), got
    assert np.isinf(got["logsum_spec"][0][0, 1]), got["logsum_spec"]
    assert got["loop_spec"][0].shape == (0, 0, 0), got["loop_spec"][0].shape
    np.testing.assert_array_equal(got["nan_auto"][0], np.cumprod(nan_x, axis=1))
    for name, (x, ex, rev) in wants.items():
        assert got[name][0].shape == x.shape, (name, got[name][0].shape)
        if x.size == 0:
            continue
        k = bounds.factor_counts(x.shape, 1, bool(ex), bool(rev))
        bound = bounds.ulp_bound("loop", "float32", k)
        problem = bounds.check(got[name][0], reference(x, 1, ex, rev), x.dtype, bound)
        assert problem is None, f"{name}: {problem}"
