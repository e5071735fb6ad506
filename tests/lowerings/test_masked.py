"""``masked`` (rewriter/lowerings/masked.py): the masked-ReduceProd blocked scan.

References come from outside the code under test: numpy in float64 / longdouble and exact
integer products (``tests.helpers.reference``), onnxruntime's native CumProd. The target is
refused on onnxruntime (its integer ReduceProd saturates, its Where turns -0.0 into +0.0:
both facts tested here), so the float graphs lowered for tinygrad run on onnxruntime with
every special value but zeros; every type tinygrad gets, -0.0 and wraparound included, runs
on the real tinygrad (slow tier).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from onnx import TensorProto

import rewriter
from rewriter.lowerings import masked
from rewriter.site import ScanSpec
from tests import runtime_harness
from tests.helpers import (
    ALL_TYPES,
    FLOATS,
    INTS,
    check_result,
    cumprod_model,
    feed,
    float32_ulps,
    random_data,
    reference,
    run_ort,
    sprinkle_specials,
    swinging,
    wide_reference,
)

B = rewriter.TARGETS["tinygrad"].masked_block  # the same on every target
# (shape, axis): one tile (n <= B), two levels with padding, three levels, first / middle /
# last, and an n of exactly B and B + 1
SHAPES = [
    ((5, 7), 1),
    ((3, B), 1),
    ((2, B + 1), 1),
    ((300, 4), 0),
    ((2, 200, 3), 1),
    ((2, 4500), 1),
]
ATTRS = [(0, 0), (1, 0), (0, 1), (1, 1)]


def _lowered(elem: int, shape: tuple[int, ...], axis: int, attrs: tuple[int, int], target: str):
    model = cumprod_model(elem, shape, axis, exclusive=attrs[0], reverse=attrs[1])
    lowered = rewriter.decompose_cumprod(model, strategy="masked", target=target)
    return model, lowered


def _ops(model: onnx.ModelProto) -> set[str]:
    return {n.op_type for n in model.graph.node}


@pytest.mark.parametrize("attrs", ATTRS, ids=["incl", "excl", "rev", "excl-rev"])
@pytest.mark.parametrize(("shape", "axis"), SHAPES, ids=[f"{s}-{a}" for s, a in SHAPES])
@pytest.mark.parametrize("elem", [TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16])
def test_floats_on_onnxruntime_within_the_contract(
    elem: int, shape: tuple[int, ...], axis: int, attrs: tuple[int, int]
) -> None:
    """Random factors and +-inf, NaN (zeros on tinygrad, below: onnxruntime's Where loses a
    product's -0.0 on the carries' level): within the sequential kernel's bound of the
    float64 (longdouble) product, infinities and NaNs as numpy."""
    rng = np.random.default_rng(len(shape) * 1000 + shape[axis] + 7 * sum(attrs))
    x = sprinkle_specials(elem, random_data(elem, shape, rng), rng, 0.01)
    x[x == 0] = 1  # no zeros: onnxruntime's Where turns -0.0 into +0.0 (tested below)
    _, lowered = _lowered(elem, shape, axis, attrs, "tinygrad")
    assert "ReduceProd" in _ops(lowered) and "CumProd" not in _ops(lowered)
    got = run_ort(lowered, {"x": feed(elem, x)})[0]
    problem = check_result(elem, "masked", got, x, axis, exclusive=attrs[0], reverse=attrs[1])
    assert problem is None, problem


@pytest.mark.parametrize("attrs", [(0, 0), (1, 1)], ids=["incl", "excl-rev"])
@pytest.mark.parametrize(
    ("shape", "axis"), [((4096, 3), 0), ((4, 4096, 3), 1), ((3, 4096), 1)], ids=str
)
def test_swinging_prefixes_as_native(
    shape: tuple[int, ...], axis: int, attrs: tuple[int, int]
) -> None:
    """float32 prefixes that swing by 2^+-70 (a block's own products would reach 2^140 in
    float32): computed in float64, every element as onnxruntime's native kernel."""
    x = swinging(shape, axis)
    if attrs[1]:
        x = np.ascontiguousarray(np.flip(x, axis))
    model, lowered = _lowered(TensorProto.FLOAT, shape, axis, attrs, "tinygrad")
    native = run_ort(model, {"x": x})[0]
    assert np.isfinite(native).all() and (native != 0).all()
    np.testing.assert_array_equal(run_ort(lowered, {"x": x})[0], native)


def test_factors_near_one_as_accurate_as_native() -> None:
    """float32 x = 1 + N(0, 1e-4), n = 4000: worst and mean error within the native kernel's
    (a float32 tree whose blocks start at 1 piles up a bias here)."""
    shape = (4, 4000)
    x = (1 + np.random.default_rng(1).normal(0, 1e-4, shape)).astype(np.float32)
    model, lowered = _lowered(TensorProto.FLOAT, shape, 1, (0, 0), "tinygrad")
    exact = wide_reference(x, 1, 0, 0)
    mine = float32_ulps(run_ort(lowered, {"x": x})[0], exact)
    theirs = float32_ulps(run_ort(model, {"x": x})[0], exact)
    assert mine.max() <= theirs.max() and mine.mean() <= theirs.mean(), (mine.max(), theirs.max())


def test_levels_and_tile() -> None:
    """n = 4500: three levels (4500 -> 71 blocks -> 2), each one ReduceProd over a Where
    tile, and one ReduceProd for the block totals of the exclusive middle level; no Loop,
    Scan or If."""
    _, lowered = _lowered(TensorProto.FLOAT, (2, 4500), 1, (0, 0), "tinygrad")
    ops = [n.op_type for n in lowered.graph.node]
    assert ops.count("ReduceProd") == 4 and ops.count("Where") == 3, ops
    assert not {"Loop", "Scan", "If"} & set(ops)


@pytest.mark.parametrize("elem", ALL_TYPES)
def test_refused_on_onnxruntime(elem: int) -> None:
    """onnxruntime: integers (ReduceProd saturates) and floats (Where loses -0.0) refused,
    and never auto's pick."""
    model = cumprod_model(elem, (4, 300), 1)
    with pytest.raises(rewriter.StrategyError, match="ReduceProd" if elem in INTS else "-0.0"):
        rewriter.decompose_cumprod(model, strategy="masked", target="onnxruntime")


def _one_node(op: str, inputs: list[onnx.ValueInfoProto], **attrs: object) -> onnx.ModelProto:
    names = [i.name for i in inputs]
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node(op, names, ["y"], **attrs)],
        "g",
        inputs,
        [onnx.helper.make_tensor_value_info("y", inputs[-1].type.tensor_type.elem_type, None)],
    )
    return onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)])


def test_onnxruntime_facts_behind_the_refusals() -> None:
    """The two facts, on lone nodes: an int32 ReduceProd over a middle axis is not the
    product modulo 2^32, and a broadcasting Where returns a selected -0.0 as +0.0. If this
    starts failing, the runtime changed (the Target fields say what it does)."""
    x = np.full((8, 64, 4), 3, np.int32)
    info = onnx.helper.make_tensor_value_info
    reduce = _one_node("ReduceProd", [info("x", TensorProto.INT32, x.shape)], axes=[1], keepdims=0)
    assert not np.array_equal(run_ort(reduce, {"x": x})[0], np.prod(x, axis=1, dtype=np.int32))
    assert not rewriter.TARGETS["onnxruntime"].reduce_prod_wraps
    where = _one_node(
        "Where",
        [
            info("c", TensorProto.BOOL, (1, 64, 64, 1)),
            info("x", TensorProto.FLOAT, (4, 1, 64, 1)),
            info("one", TensorProto.FLOAT, ()),
        ],
    )
    c = np.ones((1, 64, 64, 1), bool)
    y = run_ort(
        where,
        {"c": c, "x": np.full((4, 1, 64, 1), -0.0, np.float32), "one": np.ones((), np.float32)},
    )[0]
    assert not np.signbit(y).all()
    assert not rewriter.TARGETS["onnxruntime"].where_keeps_negative_zero


@pytest.mark.parametrize(
    "elem", [TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16, TensorProto.DOUBLE]
)
def test_float32_refused_without_float64(elem: int) -> None:
    """masked multiplies float32 (float16, bfloat16) in float64: refused on a target that
    computes none; float64 itself is multiplied in its own type."""
    no_f64 = dataclasses.replace(rewriter.TARGETS["tinygrad"], float64=False)
    spec = ScanSpec(dtype=ir.DataType(elem), exclusive=False, reverse=False, dims=(4, 300), axis=1)
    reason = masked.unsupported(spec, no_f64)
    if elem == TensorProto.DOUBLE:
        assert reason is None
    else:
        assert reason is not None and "float64" in reason


def test_needs_a_static_or_bounded_length() -> None:
    model = cumprod_model(TensorProto.FLOAT, (4, "N"), 1)
    with pytest.raises(rewriter.StrategyError, match="static"):
        rewriter.decompose_cumprod(model, strategy="masked", target="tinygrad")


def _tinygrad_cases() -> dict[str, tuple[onnx.ModelProto, dict[str, np.ndarray], tuple]]:
    """Every type tinygrad gets, on one tile, two and three levels, each axis position and
    every direction; integers wrap at once (full-range odd factors) and carry zeros and
    the extremes; floats carry 0, -0.0, +-inf, NaN; float32 also the swinging prefixes and
    a length known only at run time (padded to max_length)."""
    cases = {}
    rng = np.random.default_rng(52)
    grid = [((3, 70), 1, (0, 0)), ((130, 3), 0, (1, 0)), ((2, 200, 3), 1, (0, 1))]
    grid.append(((2, 4500), 1, (1, 1)))
    for elem in ALL_TYPES:
        for shape, axis, attrs in grid:
            if elem in FLOATS and shape == (2, 4500) and elem != TensorProto.FLOAT:
                continue  # the three-level case once, in float32 and the integers
            x = sprinkle_specials(elem, random_data(elem, shape, rng), rng, 0.02)
            _, lowered = _lowered(elem, shape, axis, attrs, "tinygrad")
            name = f"{TensorProto.DataType.Name(elem).lower()}-{shape[axis]}-axis{axis}-{attrs}"
            cases[name] = (lowered, {"x": feed(elem, x)}, (elem, x, axis, attrs))
    for axis, shape in ((0, (4096, 3)), (1, (3, 4096))):
        x = swinging(shape, axis)
        _, lowered = _lowered(TensorProto.FLOAT, shape, axis, (0, 0), "tinygrad")
        cases[f"swing-axis{axis}"] = (lowered, {"x": x}, (TensorProto.FLOAT, x, axis, (0, 0)))
    model = cumprod_model(TensorProto.INT32, (3, "N"), 1, exclusive=1)
    lowered = rewriter.decompose_cumprod(
        model, strategy="masked", target="tinygrad", max_length=300
    )
    x = random_data(TensorProto.INT32, (3, 250), rng)
    cases["int32-run-time-250-of-300"] = (lowered, {"x": x}, (TensorProto.INT32, x, 1, (1, 0)))
    return cases


@pytest.mark.slow
def test_every_type_on_tinygrad(tmp_path: Path) -> None:
    """On the real tinygrad: integers bit-exact (wraparound: its ReduceProd wraps, which
    ``Target.reduce_prod_wraps`` states), floats within the contract with special values as
    numpy gives them, float32's swinging prefixes as the sequential product."""
    cases = _tinygrad_cases()
    results = runtime_harness.run_cases(
        "tinygrad", {k: (m, f) for k, (m, f, _) in cases.items()}, tmp_path
    )
    problems = {}
    for name, (_, _, (elem, x, axis, attrs)) in cases.items():
        got = results[name]
        if isinstance(got, str):
            problems[name] = got
            continue
        y = got[0]
        if name.startswith("swing"):
            expected = reference(x, axis, *attrs)  # numpy's float32 sequential product
            if not np.array_equal(y, expected):
                problems[name] = "differs from the sequential product"
            continue
        problem = check_result(elem, "masked", y, x, axis, exclusive=attrs[0], reverse=attrs[1])
        if problem is not None:
            problems[name] = problem
    assert not problems, problems


def _auto_pick(elem: int, dims: tuple[int, ...], axis: int, target: str) -> str:
    model = cumprod_model(elem, dims, axis)
    lowered = rewriter.decompose_cumprod(model, target=target)
    ops = _ops(lowered)
    return "masked" if "Where" in ops and "ReduceProd" in ops else "other"


@pytest.mark.parametrize(
    ("elem", "dims", "axis", "want"),
    [
        (TensorProto.FLOAT, (2, 1023), 1, "other"),  # n from 1024
        (TensorProto.FLOAT, (2, 1024), 1, "masked"),
        (TensorProto.INT32, (2, 8192), 1, "masked"),
        (TensorProto.INT32, (2, 8193), 1, "other"),  # to 8192
        (TensorProto.FLOAT, (1024, 3), 0, "masked"),
        (TensorProto.FLOAT, (64, 4096), 1, "masked"),  # 1 MiB
        (TensorProto.FLOAT, (65, 4096), 1, "other"),  # past 1 MiB: not measured
        (TensorProto.UINT32, (4, 2048), 1, "masked"),
        (TensorProto.INT64, (4, 2048), 1, "other"),  # 8-byte: not measured
        (TensorProto.FLOAT, (2, 1023, 2), 1, "other"),  # a middle axis: from 1024 too
        (TensorProto.FLOAT, (2, 1024, 2), 1, "masked"),
    ],
)
def test_auto_takes_masked_on_tinygrad_within_its_row(
    elem: int, dims: tuple[int, ...], axis: int, want: str
) -> None:
    """Both sides of the tinygrad row's conditions; no other target's auto takes it."""
    assert _auto_pick(elem, dims, axis, "tinygrad") == want
    for target in ("onnxruntime", "openvino", "iree", "tract", "portable"):
        assert _auto_pick(elem, dims, axis, target) == "other", target


@pytest.mark.parametrize("attrs", ATTRS, ids=["incl", "excl", "rev", "excl-rev"])
def test_one_tile_up_to_the_target_s_length(
    monkeypatch: pytest.MonkeyPatch, attrs: tuple[int, int]
) -> None:
    """``Target.masked_one_tile_up_to`` decides: n = 256 past B = 64 takes blocks (two
    ReduceProds) without it, one tile (one ReduceProd) with it at 256 and no longer at 255;
    each graph within the sequential kernel's bound of the float64 product."""
    shape, axis = (2, 256, 3), 1
    tinygrad = rewriter.TARGETS["tinygrad"]
    assert tinygrad.masked_block < 256
    x = random_data(TensorProto.FLOAT, shape, np.random.default_rng(256 + 7 * sum(attrs)))
    reduces = {}
    for up_to in (0, 255, 256):
        target = dataclasses.replace(tinygrad, masked_one_tile_up_to=up_to)
        monkeypatch.setitem(rewriter.TARGETS, "tinygrad", target)
        _, lowered = _lowered(TensorProto.FLOAT, shape, axis, attrs, "tinygrad")
        reduces[up_to] = sum(n.op_type == "ReduceProd" for n in lowered.graph.node)
        got = run_ort(lowered, {"x": x})[0]
        problem = check_result(
            TensorProto.FLOAT, "masked", got, x, axis, exclusive=attrs[0], reverse=attrs[1]
        )
        assert problem is None, (up_to, problem)
    assert reduces[256] == 1
    assert reduces[0] == reduces[255] > 1


@pytest.mark.parametrize("n", [257, 4500, 8192])
def test_one_tile_is_for_x_s_own_length(monkeypatch: pytest.MonkeyPatch, n: int) -> None:
    """Past ``Target.masked_one_tile_up_to`` the graph is the one without it: the block totals'
    levels keep blocks of ``masked_block`` (measured so, compile-tinygrad-masked-2026-12-06.md),
    however few the blocks."""
    tinygrad = rewriter.TARGETS["tinygrad"]
    assert 0 < tinygrad.masked_one_tile_up_to < n
    graphs = []
    for up_to in (tinygrad.masked_one_tile_up_to, 0):
        target = dataclasses.replace(tinygrad, masked_one_tile_up_to=up_to)
        monkeypatch.setitem(rewriter.TARGETS, "tinygrad", target)
        _, lowered = _lowered(TensorProto.FLOAT, (2, n), 1, (0, 0), "tinygrad")
        graphs.append([(node.op_type, list(node.input)) for node in lowered.graph.node])
    assert graphs[0] == graphs[1]
