"""Every lowering at the lengths where its code branches, one cell per distinct graph.

Each cell lowers one model, runs it on onnxruntime and holds the result to the contract
(tests/bounds.py): integers bit-exact, floats within the stated ulps of the true product.
Where a lowering's code branches on the length (rewriter/lowerings/*.py), the cells sit on
both sides of the branch:

- chain: n = 1, 2, 17, 1024 (MAX_LENGTH; 1025 is refused: tests/lowerings/test_chain.py);
  Split's three forms (opsets 11, 13, 18+)
- scan / loop: the scanned axis first (a Reshape instead of Transpose) or not; n = 1
- blocked (block_sizes): n = 2 (one block), 3 (padded), 255 / 256 / 257 (B = 16: m = 16
  chained, m = 17 scanned), 8192 (one level, B = 64) and 8193 (two levels of 16)
- radix (radix_levels): r = 8 on the last axis at 8 / 9 / 64 / 65 / 513; on other axes
  r = 8 up to 512 and 16 above: 512 / 513, 4096 / 4097
- dynamic: static 513 / 1025 (blocks of 32, one and two levels); a symbolic length fed
  0, 1, 512, 513, 1024, 1025, 2049 through one graph (its If and the run-time padding)
- doubling: 1 (no step), 2, 4 / 5 (2^k +- 1), 1025; a run-time length up to its bound,
  and past it (a run-time failure, not a wrong result); its blocked form (OpenVINO, IREE):
  tests/lowerings/test_doubling.py
- the view: static, rank-3 axis-1 (no Reshape), symbolic outer dims, run-time axis (every
  axis, negative too), unknown rank; empty axes and empty outer dims at opsets 11, 13, 14
  and 26 (below 14 the If around the lowering)
- lengths known only at run time for the static-length lowerings (padded to max_length)
- aliases (graphs that are identical to another strategy's) asserted identical once
  instead of run again (auto's tables: tests/lowerings/test_auto.py).
"""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from onnx import TensorProto, helper

import rewriter
from rewriter.targets import TARGETS
from tests.helpers import (
    BF16,
    F16,
    F32,
    F64,
    I32,
    I64,
    INTS,
    TYPE_NAMES,
    U32,
    U64,
    check_result,
    cumprod_model,
    declared_refusal,
    feed,
    io_type,
    lower,
    np_dtype,
    op_types,
    ort_strategies,
    random_data,
    refuses_broadly,
    rng_for,
    run_checked,
    session,
)


def _pair_id(value: object) -> str:
    return TYPE_NAMES.get(value, str(value)) if isinstance(value, int) else str(value)


# -- static lengths: each lowering on both sides of each branch --------------------------------

# (strategy, elem_type, shape, axis, exclusive, reverse, opset or None)
STATIC = [
    # chain: one slice, two, 17, MAX_LENGTH; Split with num_outputs (18+), input (13), attr (11)
    ("chain", F32, (3, 1), 1, 0, 0, None),
    ("chain", I64, (2, 2, 3), 1, 1, 1, None),
    ("chain", U32, (17, 2), 0, 0, 1, None),
    ("chain", I32, (2, 1024), 1, 1, 0, None),
    ("chain", F16, (3, 5, 2), 1, 1, 1, 13),
    ("chain", I64, (4, 6), 1, 0, 1, 11),
    # scan: first axis (Reshape to the front), middle (Transpose), one step
    ("scan", F32, (7, 3), 0, 1, 1, None),
    ("scan", I64, (2, 7, 3), 1, 0, 1, None),
    ("scan", U64, (3, 1), 1, 1, 0, None),
    ("scan", BF16, (4, 9), 1, 0, 0, None),
    # loop: as scan; and below opset 14
    ("loop", F32, (7, 3), 0, 1, 1, None),
    ("loop", I32, (2, 7, 3), 1, 1, 0, None),
    ("loop", F64, (3, 1), 1, 0, 1, None),
    ("loop", U32, (5, 6), 1, 0, 0, None),
    ("loop", I64, (3, 4), 1, 1, 1, 11),
    # blocked: block_sizes(n) and the prefix level (chained up to 16 blocks, scanned above)
    ("blocked", I64, (3, 2), 1, 1, 1, None),  # n = B = 2: one block
    ("blocked", I32, (4, 3), 1, 0, 1, None),  # B = 2, padded to 4
    ("blocked", F32, (2, 255), 1, 0, 1, None),  # B = 16, m = 16, padded
    ("blocked", I32, (256, 2), 0, 1, 0, None),  # B = 16, m = 16, no padding
    ("blocked", F16, (2, 257), 1, 0, 0, None),  # B = 16, m = 17: prefix Scan
    ("blocked", U64, (2, 257, 2), 1, 1, 1, 13),
    ("blocked", F64, (8192, 2), 0, 1, 1, None),  # one level, B = 64, m = 128
    ("blocked", I64, (2, 8193), 1, 0, 1, None),  # two levels of 16: 513, then 33 blocks
    ("blocked", F32, (8193,), 0, 1, 0, None),
    # radix: r = 8 on the last axis
    ("radix", I64, (3, 8), 1, 1, 1, None),  # no level
    ("radix", F32, (2, 9), 1, 0, 1, None),  # one level, padded
    ("radix", U32, (2, 64), 1, 1, 0, None),  # one level, 8 blocks
    ("radix", I32, (65,), 0, 0, 0, None),  # two levels
    ("radix", F64, (2, 513), 1, 1, 1, None),  # three levels of 8
    ("radix", I64, (2, 9), 1, 1, 0, 11),
    # radix: other axes, r = 8 up to 512, 16 above
    ("radix", F16, (2, 512, 2), 1, 0, 0, None),  # [8, 8]
    ("radix", I64, (513, 3), 0, 1, 1, None),  # [16, 16]
    ("radix", U64, (4096, 2), 0, 0, 1, None),  # [16, 16], exact
    ("radix", BF16, (2, 4097, 2), 1, 1, 0, None),  # [16, 16, 16]
    # dynamic with a static length: blocks of 32 above 512 (below it is scan: an alias)
    ("dynamic", I64, (2, 513), 1, 1, 1, None),  # 17 blocks
    ("dynamic", F32, (1025, 2), 0, 0, 1, None),  # 33 blocks: a second level
    # doubling: K = ceil(log2 n) steps
    ("doubling", F32, (3, 1), 1, 0, 0, None),  # no step
    ("doubling", I32, (2, 2), 1, 1, 1, None),
    ("doubling", U32, (4, 3), 0, 1, 0, None),
    ("doubling", I64, (2, 5, 2), 1, 0, 1, None),
    ("doubling", F16, (2, 1025), 1, 1, 1, None),
    ("doubling", I64, (3, 7), 1, 1, 1, 11),
    # logsum (logsum32: in float32, on portable): no length branch; long, short, every float
    ("logsum", F32, (3, 2000), 1, 1, 1, None),
    ("logsum", F64, (4, 6), 1, 0, 0, None),
    ("logsum", F16, (2, 40, 3), 1, 0, 1, None),
    ("logsum", BF16, (5, 7), 0, 1, 0, 13),
    ("logsum32", F32, (3, 2000), 1, 0, 1, None),
    ("logsum32", F16, (2, 9), 1, 1, 1, None),
    ("logsum32", BF16, (3, 6), 0, 0, 0, None),
]


def _static_id(cell: tuple) -> str:
    strategy, elem, shape, axis, ex, rev, opset = cell
    dims = "x".join(map(str, shape))
    return f"{strategy}-{TYPE_NAMES[elem]}-{dims}-ax{axis}-ex{ex}rev{rev}-opset{opset or 26}"


@pytest.mark.parametrize("cell", STATIC, ids=_static_id)
def test_static_length(cell: tuple) -> None:
    strategy, elem, shape, axis, ex, rev, opset = cell
    model = cumprod_model(elem, shape, axis, exclusive=ex, reverse=rev)
    lowered, used = lower(model, strategy, opset=opset)
    assert used == [strategy]
    run = session(lowered)
    run_checked(run, elem, strategy, shape, axis, ex=ex, rev=rev, key=_static_id(cell))


def test_radix_and_blocked_build_their_levels() -> None:
    """The cells above reach the levels they are meant to: count the in-block scans."""
    counts = {}
    for strategy, shape, axis in (
        ("radix", (2, 8), 1),
        ("radix", (2, 9), 1),
        ("radix", (2, 513), 1),
        ("radix", (513, 3), 0),
        ("blocked", (2, 256), 1),
        ("blocked", (2, 257), 1),
        ("blocked", (2, 8193), 1),
    ):
        lowered, _ = lower(cumprod_model(F32, shape, axis), strategy)
        kinds = op_types(lowered)
        counts[(strategy, shape)] = (kinds.count("Split"), kinds.count("Scan"), kinds.count("Pad"))
    assert counts[("radix", (2, 8))] == (1, 0, 0)  # one chain, no level
    assert counts[("radix", (2, 9))] == (2, 0, 1)  # one level: in-block chain + prefix chain
    assert counts[("radix", (2, 513))] == (4, 0, 3)  # three levels of 8, each padded
    assert counts[("radix", (513, 3))] == (3, 0, 2)  # two levels of 16
    assert counts[("blocked", (2, 256))] == (1, 1, 0)  # in-block Scan, 16 blocks chained
    assert counts[("blocked", (2, 257))] == (0, 2, 1)  # 17 blocks: the prefix is a Scan
    assert counts[("blocked", (2, 8193))] == (0, 3, 2)  # two levels and a final Scan


def test_radix_and_blocked_levels_follow_the_target(monkeypatch: pytest.MonkeyPatch) -> None:
    """``Target.radix_r`` and ``Target.blocked_one_level_up_to`` decide the levels: with
    r = 8 up to 1024 (16 beyond, as before) radix scans (513, 3) in three padded levels of 8,
    not two of 16; with one level of blocks only up to 256, blocked scans (2, 257) in two
    levels of 8 (a chained top), not one of 8 under a Scanned top. The values stay exact."""
    target = dataclasses.replace(
        TARGETS["onnxruntime"], radix_r=(8, 1024, 16), blocked_one_level_up_to=256
    )
    monkeypatch.setitem(TARGETS, "onnxruntime", target)
    rng = np.random.default_rng(52)
    for strategy, shape, axis, counts in (
        ("radix", (513, 3), 0, (4, 0, 3)),
        ("blocked", (2, 257), 1, (1, 2, 2)),
    ):
        model = cumprod_model(I32, shape, axis)
        lowered, _ = lower(model, strategy)
        kinds = op_types(lowered)
        assert (kinds.count("Split"), kinds.count("Scan"), kinds.count("Pad")) == counts
        x = random_data(I32, shape, rng)
        y = session(lowered)({"x": x})[0]
        np.testing.assert_array_equal(y, np.cumprod(x, axis=axis, dtype=np.int32))


# -- lengths known only at run time ---------------------------------------------------------


def _symbolic_cases() -> list[tuple]:
    """(strategy, elem_type, dims, axis, exclusive, reverse, max_length, lengths, too long)."""
    dyn = (0, 1, 512, 513, 1024, 1025, 2049)
    return [
        ("dynamic", F32, ("N", 3), 0, 0, 0, None, dyn, None),
        ("dynamic", I64, (2, "N"), 1, 1, 1, None, dyn, None),
        ("dynamic", U32, ("B", "N", 2), 1, 1, 0, None, (0, 5, 600), None),
        ("scan", F32, ("N", 3), 0, 1, 1, None, (0, 1, 5), None),
        ("scan", U64, (2, "N"), 1, 0, 1, None, (0, 1, 6), None),
        ("loop", I32, (2, "N"), 1, 1, 1, None, (0, 1, 5), None),
        ("loop", F16, ("N", 2), 0, 1, 0, None, (0, 1, 5), None),
        ("doubling", I64, ("N", 2), 0, 1, 1, 64, (0, 1, 63, 64), 65),
        ("doubling", F32, (2, "N"), 1, 0, 0, 5, (1, 4, 5), 6),
        ("chain", I64, (3, "N"), 1, 1, 1, 40, (0, 1, 39, 40), 41),
        ("blocked", F64, (3, "N"), 1, 0, 1, 300, (1, 17, 300), 301),
        ("radix", U32, ("N", 2), 0, 1, 0, 100, (1, 9, 100), 101),
        ("logsum", F32, ("N", 3), 0, 1, 1, None, (0, 1, 700), None),
        ("logsum32", BF16, (2, "N"), 1, 0, 1, None, (1, 30), None),
    ]


SYMBOLIC = _symbolic_cases()


@pytest.mark.parametrize("case", SYMBOLIC, ids=lambda c: f"{c[0]}-{TYPE_NAMES[c[1]]}-{c[2]}")
def test_length_known_at_run_time(case: tuple) -> None:
    """One graph for every length: both sides of each run-time branch; a length past the
    bound of a padded lowering fails at run time instead of giving a wrong result."""
    strategy, elem, dims, axis, ex, rev, bound, lengths, too_long = case
    model = cumprod_model(elem, dims, axis, exclusive=ex, reverse=rev)
    lowered, used = lower(model, strategy, max_length=bound)
    assert used == [strategy]
    run = session(lowered)
    for n in lengths:
        shape = tuple(n if d == "N" else (2 if isinstance(d, str) else d) for d in dims)
        run_checked(run, elem, strategy, shape, axis, ex=ex, rev=rev, key=case[:3])
    if too_long is not None:
        shape = tuple(too_long if d == "N" else (2 if isinstance(d, str) else d) for d in dims)
        x = feed(elem, random_data(elem, shape, rng_for("long", case[:3])))
        with pytest.raises(Exception, match=r"(?i)reshape|shape|size|dimension"):
            run({"x": x})


def test_dynamic_is_the_sequential_scan_up_to_512() -> None:
    """``dynamic`` runs the plain Scan up to n = 512 inclusive (its docstring: bitwise the
    sequential kernel there), the blocked tree beyond. float32 products of factors near 1
    round differently in a tree, so onnxruntime's native CumProd tells the branches apart
    (found by mutation: ``Less(n, 512)`` for ``Less(n, 513)`` stayed within the bound)."""
    model = cumprod_model(F32, (3, "N"), 1)
    lowered, used = lower(model, "dynamic")
    assert used == ["dynamic"]
    run, native = session(lowered), session(model)
    rng = rng_for("dynamic threshold")
    for n in (511, 512):
        x = rng.uniform(0.9, 1.1, (3, n)).astype(np.float32)
        np.testing.assert_array_equal(run({"x": x})[0], native({"x": x})[0], err_msg=f"n={n}")
    x = rng.uniform(0.9, 1.1, (3, 513)).astype(np.float32)
    assert not np.array_equal(run({"x": x})[0], native({"x": x})[0])  # the tree: 513 tells


# -- the view: run-time axis, unknown rank, empty tensors ----------------------------------

RUNTIME_AXIS = [
    ("loop", I64),
    ("scan", F32),
    ("dynamic", U32),
    ("doubling", F16),
    ("chain", I32),
    ("blocked", F64),
    ("radix", U64),
    ("logsum", F32),
    ("logsum32", F16),
]


@pytest.mark.parametrize(("strategy", "elem"), RUNTIME_AXIS, ids=_pair_id)
def test_run_time_axis_every_axis(strategy: str, elem: int) -> None:
    """The axis a graph input: every axis of a rank-3 x, negative ones too, through one
    graph (the view's run-time normalisation; static-length lowerings padded to the
    largest dim)."""
    shape = (3, 5, 4)
    model = cumprod_model(elem, shape, 0, exclusive=1, reverse=0, axis_form="input")
    lowered, used = lower(model, strategy)
    assert used == [strategy]
    run = session(lowered)
    for axis in range(-3, 3):
        run_checked(run, elem, strategy, shape, axis, ex=1, rev=0, axis_input=True, key=strategy)
    model = cumprod_model(elem, shape, 0, exclusive=0, reverse=1, axis_form="input")
    run = session(lower(model, strategy)[0])
    for axis in (-1, 1, -3):
        run_checked(run, elem, strategy, shape, axis, ex=0, rev=1, axis_input=True, key=strategy)


def test_run_time_axis_out_of_range_fails_like_the_native_op() -> None:
    model = cumprod_model(F32, (2, 3), 0, axis_form="input")
    run = session(lower(model, "scan")[0])
    x = np.ones((2, 3), np.float32)
    for bad in (2, -3):
        with pytest.raises(Exception, match=r"(?i)indices|out of|range|bounds"):
            run({"x": x, "axis": np.array(bad, np.int64)})


@pytest.mark.parametrize("target", ["onnxruntime", "tract"])
def test_run_time_axis_of_unknown_rank_is_rank_checked_like_the_native_op(target: str) -> None:
    """Found by a review: an axis whose shape is not known (here Reshape(a, s), s an input)
    fed as [[1]] was taken as 1, where the native op fails (it takes a 0-D axis or a 1-D one
    of one element). Both view forms: a run-time view (onnxruntime), a select over the axes
    (tract)."""
    nodes = [
        helper.make_node("Reshape", ["a", "s"], ["axis"]),
        helper.make_node("CumProd", ["x", "axis"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4]),
            helper.make_tensor_value_info("a", TensorProto.INT64, [1]),
            helper.make_tensor_value_info("s", TensorProto.INT64, ["k"]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26)])
    native, run = session(model), session(rewriter.decompose_cumprod(model, target=target))
    x = np.arange(1, 13, dtype=np.float32).reshape(3, 4)
    for axis, dims in itertools.product((1, -2), ([], [1])):
        feeds = {"x": x, "a": np.array([axis]), "s": np.array(dims, np.int64)}
        np.testing.assert_array_equal(run(feeds)[0], native(feeds)[0])
    feeds = {"x": x, "a": np.array([1]), "s": np.array([1, 1], np.int64)}
    with pytest.raises(Exception, match=r"(?i)axis tensor must be"):
        native(feeds)
    with pytest.raises(Exception, match=r"(?i)indices|out of|range|bounds"):
        run(feeds)


def _unknown_rank_model(
    elem: int, axis: int, ex: int, rev: int, allowzero: int = 1
) -> onnx.ModelProto:
    """y = Flatten-to-1-D(CumProd(Reshape(x, shape))): the shape is an input of symbolic
    length, so the CumProd's input has an unknown rank."""
    io = io_type(elem)
    zero = {"allowzero": 1} if allowzero else {}  # Reshape-14's; absent below 14
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["xr"], **zero)]
    x = "xr"
    if elem == BF16:
        nodes.append(helper.make_node("Cast", ["xr"], ["xb"], to=elem))
        x = "xb"
    attrs = {"exclusive": ex, "reverse": rev}
    nodes.append(helper.make_node("CumProd", [x, "axis"], ["yr"], **attrs))
    y = "yr"
    if elem == BF16:
        nodes.append(helper.make_node("Cast", ["yr"], ["yf"], to=io))
        y = "yf"
    nodes.append(helper.make_node("Reshape", [y, "flat"], ["y"], **zero))
    graph = helper.make_graph(
        nodes,
        "main",
        [
            helper.make_tensor_value_info("x", io, ["T"]),
            helper.make_tensor_value_info("shape", TensorProto.INT64, ["r"]),
        ],
        [helper.make_tensor_value_info("y", io, ["T"])],
        [
            helper.make_tensor("axis", TensorProto.INT64, [], [axis]),
            helper.make_tensor("flat", TensorProto.INT64, [1], [-1]),
        ],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26)])


UNKNOWN_RANK = [
    ("loop", I64, None, 26),
    ("scan", F32, None, 26),
    ("dynamic", U32, None, 26),
    ("logsum", F64, None, 26),
    ("doubling", I32, 16, 26),
    ("radix", BF16, 16, 26),
    ("scan", I64, None, 13),
]


@pytest.mark.parametrize(("strategy", "elem", "bound", "opset"), UNKNOWN_RANK)
def test_unknown_rank(strategy: str, elem: int, bound: int | None, opset: int) -> None:
    """x of unknown rank: the view from Shape(Shape(x)) at run time; ranks 1 to 3 through
    one graph; below opset 14 an empty x goes around the Reshapes."""
    for axis, ex, rev in ((-1, 1, 1), (0, 0, 1)):
        model = _unknown_rank_model(elem, axis, ex, rev, allowzero=int(opset >= 14))
        target_opset = opset if opset != 26 else None
        lowered, used = lower(model, strategy, max_length=bound, opset=target_opset)
        assert used == [strategy]
        run = session(lowered)
        for shape in ((7,), (3, 5), (2, 3, 4), (2, 0, 3))[: 4 if opset >= 14 else 3]:
            x = random_data(elem, shape, rng_for(strategy, shape, axis))
            feeds = {"x": feed(elem, x).reshape(-1), "shape": np.array(shape, np.int64)}
            (y,) = run(feeds)
            y = y.reshape(shape)
            if elem == BF16:
                y = y.astype(np_dtype(elem))
            problem = check_result(elem, strategy, y, x, axis, exclusive=ex, reverse=rev)
            assert problem is None, f"{shape} axis {axis} ex{ex} rev{rev}: {problem}"


EMPTY_STRATEGIES = [
    ("loop", I64),
    ("scan", U32),
    ("dynamic", I32),
    ("doubling", U64),
    ("chain", F32),
    ("blocked", I64),
    ("radix", F64),
    ("logsum", F32),
]


@pytest.mark.parametrize("opset", [11, 13, 14, 26])
@pytest.mark.parametrize(("strategy", "elem"), EMPTY_STRATEGIES, ids=_pair_id)
def test_empty_axes_and_empty_outer_dims(strategy: str, elem: int, opset: int) -> None:
    """Dims known only at run time that turn out 0: the scanned axis, the dims before it
    and after it. Below opset 14 a Reshape would copy a 0 dim: the If around the lowering."""
    if elem == F16 and opset < 13:
        elem = F32
    bound = 8 if strategy in ("doubling", "chain", "blocked", "radix") else None
    target_opset = None if opset == 26 else opset
    # a run-time length (axis 0 of [N, M]) and a static length with run-time outer dims
    for dims, axis, shapes in (
        (("N", "M"), 0, ((0, 0), (0, 3), (2, 0), (5, 3))),
        (("N", 5, "M"), 1, ((0, 5, 2), (2, 5, 0), (3, 5, 2))),
    ):
        model = cumprod_model(elem, dims, axis, exclusive=1, reverse=1)
        lowered, used = lower(model, strategy, opset=target_opset, max_length=bound)
        assert used == [strategy]
        run = session(lowered)
        for shape in shapes:
            run_checked(run, elem, strategy, shape, axis, ex=1, rev=1, key=(strategy, dims))


def test_statically_empty_tensors_are_their_own_result() -> None:
    for strategy in ("loop", "scan", "chain", "radix", "doubling", "logsum"):
        for shape, axis in (((0, 3), 0), ((2, 0), 0), ((2, 0, 3), -1)):
            model = cumprod_model(F32, shape, axis, exclusive=1)
            lowered, _ = lower(model, strategy)
            (y,) = session(lowered)({"x": np.ones(shape, np.float32)})
            assert y.shape == shape


@pytest.mark.parametrize("target", ["onnxruntime", "tract", "portable"])
@pytest.mark.parametrize("elem", [F16, BF16, U32])
def test_statically_empty_x_is_one_identity(target: str, elem: int) -> None:
    """x with a static 0 among its dims is y = x, whatever the axis (a run-time one here) and
    the type it would be computed in: one Identity, no Cast left unused (found by a review)."""
    model = cumprod_model(elem, (2, 0, 3), 1, exclusive=1, axis_form="input")
    lowered = rewriter.decompose_cumprod(model, target=target)
    assert op_types(lowered).count("Identity") == 1
    assert op_types(lowered).count("Cast") == op_types(model).count("Cast")  # (bfloat16's I/O)
    x = np.ones((2, 0, 3), np_dtype(io_type(elem)))
    (y,) = session(lowered)({"x": x, "axis": np.array(-1, np.int64)})
    assert y.shape == (2, 0, 3) and y.dtype == x.dtype


# -- run-time length past the bound; compute types ------------------------------------------


def test_uint32_products_wrap_through_int64_on_onnxruntime() -> None:
    """onnxruntime multiplies uint32 as int64: the low 32 bits must come back (Mod 2^32 before
    the Cast), for products far past 2^32; `spec` keeps uint32 (no Cast at all)."""
    model = cumprod_model(U32, (2, 40), 1, exclusive=1)
    x = np.full((2, 40), 0xFFFF_FFFB, np.uint32)  # -5 mod 2^32: products alternate in sign
    x[1] = np.arange(1, 41, dtype=np.uint32) * 0x10001
    want = np.cumprod(np.concatenate([np.ones((2, 1), np.uint64), x[:, :-1]], 1), 1)
    for target, casts in (("onnxruntime", True), ("spec", False)):
        lowered, _ = lower(model, "scan", target=target)
        assert ("Cast" in op_types(lowered)) == casts
        (y,) = session(lowered)({"x": x})
        np.testing.assert_array_equal(y, want.astype(np.uint32))


# -- test-only targets for the flags no shipped target exercises ----------------------------


@pytest.fixture
def quirky_targets(monkeypatch: pytest.MonkeyPatch) -> None:
    """`iree` ignores Scan directions but has no Scan, `tract` cannot Slice backwards over a
    symbolic dim but has no Loop: these register the flags on targets that keep Scan / Loop,
    so the code that honours them runs."""
    spec = TARGETS["spec"]
    for name, changes in (
        ("test-no-scan-directions", {"scan_directions": False}),
        ("test-no-negative-slice", {"slice_negative_step": False}),
    ):
        monkeypatch.setitem(TARGETS, name, dataclasses.replace(spec, name=name, **changes))


@pytest.mark.usefixtures("quirky_targets")
@pytest.mark.parametrize(
    ("target", "strategy", "dims"),
    [
        ("test-no-scan-directions", "scan", (3, 6, 2)),
        ("test-no-scan-directions", "scan", (2, "N")),
        ("test-no-scan-directions", "blocked", (2, 300)),
        ("test-no-scan-directions", "dynamic", ("N", 2)),
        ("test-no-negative-slice", "loop", (2, "N")),
    ],
)
def test_reverse_without_scan_directions_or_negative_slices(
    target: str, strategy: str, dims: tuple
) -> None:
    axis = 1 if dims[1] != 2 else 0
    for ex in (0, 1):
        model = cumprod_model(I64, dims, axis, exclusive=ex, reverse=1)
        lowered, _ = lower(model, strategy, target=target)
        kinds = op_types(lowered)
        if target == "test-no-scan-directions":
            assert "Scan" in kinds
        else:
            assert "ReverseSequence" in kinds
        run = session(lowered)
        for n in (1, 7, 600):
            shape = tuple(n if isinstance(d, str) else d for d in dims)
            run_checked(run, I64, strategy, shape, axis, ex=ex, rev=1, key=(target, strategy))
            if not any(isinstance(d, str) for d in dims):
                break


# -- aliases: graphs that are another strategy's, asserted identical once ----------------------


def _graph_bytes(model: onnx.ModelProto) -> bytes:
    return model.graph.SerializeToString() + b"".join(
        f.SerializeToString() for f in model.functions
    )


def test_aliases_emit_identical_graphs() -> None:
    """Cells that would build these graphs again are left out of the tables above."""
    # dynamic with a static length up to 512 is scan
    model = cumprod_model(F32, (3, 512), 1, exclusive=1, reverse=1)
    assert _graph_bytes(lower(model, "dynamic")[0]) == _graph_bytes(lower(model, "scan")[0])
    # auto is the lowering it picks, for each table
    for elem, dims, axis, target in (
        (F32, (2, 17), 1, "onnxruntime"),
        (I64, (2, 17, 2), 1, "onnxruntime"),
        (F32, (2, 8), 1, "onnxruntime"),
        (F32, (2, 40), 1, "tinygrad"),
        (F32, ("N", 4), 0, "onnxruntime"),
    ):
        model = cumprod_model(elem, dims, axis)
        auto, (picked,) = lower(model, "auto", target=target)
        assert _graph_bytes(auto) == _graph_bytes(lower(model, picked, target=target)[0])
    # targets only change what differs: the same static float32 graph on each of them
    model = cumprod_model(F32, (2, 40), 1, reverse=1)
    for strategy in ("chain", "radix", "doubling", "logsum"):
        # tflite builds its ones from the data (Target.constant_ones): test_target_tflite.py;
        # a tree's float32 carries are float64 where the target computes float64, their block
        # totals a ReduceProd on onnxruntime and products of the slices elsewhere (wide.py)
        kinds: dict[tuple[bool, bool], list[str]] = {}
        for t, target in TARGETS.items():
            if refuses_broadly(t):  # ncnn refuses radix / doubling / logsum
                continue
            if target.constant_ones and (strategy != "logsum" or target.float64):
                kinds.setdefault((target.float64, target.auto == "onnxruntime"), []).append(t)
        for kind, takers in kinds.items():
            graphs = {_graph_bytes(lower(model, strategy, target=t)[0]) for t in takers}
            assert len(graphs) == 1, (strategy, kind)
        if strategy != "logsum":  # refused where float64 is computed in float32
            three = {
                _graph_bytes(lower(model, strategy, target=t)[0])
                for t in ("onnxruntime", "tract", "openvino")
            }
            assert len(three) == (3 if strategy == "radix" else 1), strategy
    # onnxruntime and spec differ only for uint32 / uint64
    for elem in (F16, BF16, F32, F64, I32, I64):
        model = cumprod_model(elem, (3, 5), 1)
        ort_graph = _graph_bytes(lower(model, "scan", target="onnxruntime")[0])
        assert ort_graph == _graph_bytes(lower(model, "scan", target="spec")[0])


# -- every target's output runs on onnxruntime -----------------------------------------------


@pytest.mark.parametrize("target", list(TARGETS))
def test_every_target_output_runs(target: str) -> None:
    """auto for each target: a static short and long axis, a length known only at run time
    (with a bound where the target needs one), a run-time axis (tract, IREE, TFLite, portable:
    a Gather-select over the axes);
    run on onnxruntime, which has every op any target may emit."""
    missing = TARGETS[target].missing_ops
    for elem, dims, axis, ex, rev, form, lengths in (
        (F32, (3, 20), 1, 1, 1, "initializer", (20,)),
        (U32, (300, 2), 0, 0, 1, "initializer", (300,)),
        (I64, ("N", 3), 0, 1, 0, "initializer", (0, 1, 50)),
        (BF16, (3, 4, 5), 0, 0, 0, "input", (None,)),
    ):
        model = cumprod_model(elem, dims, axis, exclusive=ex, reverse=rev, axis_form=form)
        try:
            lowered, (used,) = lower(model, "auto", target=target, max_length=64)
        except rewriter.StrategyError as exc:  # what tvm / ncnn refuse, as data
            assert declared_refusal(target, exc), exc
            continue
        assert not missing & set(op_types(lowered)), (target, used)
        if form == "input" and not TARGETS[target].runtime_view:  # a Gather-select over axes
            assert "Gather" in op_types(lowered) and "If" not in op_types(lowered)
        run = session(lowered)
        for n in lengths:
            shape = tuple(n if isinstance(d, str) else d for d in dims)
            runtime_axis = form == "input"
            for a in range(-3, 3) if runtime_axis else (axis,):
                run_checked(
                    run, elem, used, shape, a, ex=ex, rev=rev, axis_input=runtime_axis, key=target
                )


def test_integer_and_float_types_on_every_lowering() -> None:
    """One small cell per (lowering, type) not covered above, so each of the eight types
    meets each lowering that takes it at least once."""
    seen = {(s, e) for s, e, *_ in STATIC} | {(c[0], c[1]) for c in SYMBOLIC}
    seen |= set(RUNTIME_AXIS) | set(EMPTY_STRATEGIES)
    for strategy in ort_strategies()[1:]:
        for elem in (F16, BF16, F32, F64, I32, I64, U32, U64):
            if (strategy, elem) in seen:
                continue
            if strategy == "logsum" and elem in INTS:
                continue
            shape = (3, 6)
            model = cumprod_model(elem, shape, 1, exclusive=1, reverse=1)
            lowered, _ = lower(model, strategy)
            run_checked(session(lowered), elem, strategy, shape, 1, ex=1, rev=1, key=strategy)


@pytest.mark.parametrize("strategy", ["chain", "doubling", "radix", "carry"])
def test_run_time_axis_select_with_symbolic_dims_and_a_bound(strategy: str) -> None:
    """The select over the axes (IREE takes only ``doubling`` over a length known only at run
    time, Target.padded_lowerings, so the others are built for portable; tract refuses these
    lowerings there, Target.bounded_lengths) with a dim known only at run time: a lowering
    that needs a bound gets the user's max_length in every candidate (it was dropped: an
    assertion failed)."""
    model = cumprod_model(F32, ("N", 3), 0, exclusive=1, axis_form="input")
    target = "iree" if strategy == "doubling" else "portable"
    lowered, used = lower(model, strategy, target=target, max_length=8)
    assert used == [strategy]
    run = session(lowered)
    for n, axis in ((5, 0), (8, 0), (4, 1), (2, -1)):
        run_checked(run, F32, strategy, (n, 3), axis, ex=1, rev=0, axis_input=True, key=strategy)


# -- the code's own stated bounds (used by --verify) are no looser than the contract ------------


@pytest.mark.parametrize("lowering", [*(s for s in rewriter.STRATEGIES if s != "auto"), "logsum32"])
def test_stated_bounds_are_no_looser_than_the_contract(lowering: str) -> None:
    """Each lowering's ``max_ulps`` (what `--verify` holds a rewrite to) is at most the
    contract's figure (tests/bounds.py), up to a 2^-16 relative slack for the second-order
    rounding terms the code may add. A loosened bound in the code fails here; the accuracy
    tests never read it."""
    from rewriter.lowerings import LOWERINGS, specialised
    from tests.bounds import ulp_bound

    k = np.array([1, 2, 3, 17, 1000, 8193])
    for elem in (F16, BF16, F32, F64):
        if lowering == "logsum32" and elem == F64:
            continue  # refused: float32 cannot hold it
        if lowering == "logsum32":  # logsum where the target has no float64
            stated = specialised(LOWERINGS["logsum"], TARGETS["portable"]).max_ulps(
                ir.DataType(elem), k
            )
        else:
            stated = LOWERINGS[lowering].max_ulps(ir.DataType(elem), k)
        contract = ulp_bound(lowering, np_dtype(elem), k)
        assert np.all(stated <= contract * (1 + 2.0**-16)), (lowering, TYPE_NAMES[elem])


@pytest.mark.parametrize("target", [t for t in TARGETS if "If" in TARGETS[t].missing_ops])
@pytest.mark.parametrize("strategy", ["auto", "doubling", "radix", "logsum"])
def test_a_target_without_if_gets_no_if_for_a_run_time_axis(target: str, strategy: str) -> None:
    """A target that lacks If (portable) and cannot take a shape from a run-time axis: the
    lowering must either avoid If or be refused with a StrategyError; an If in the output is
    a model the target cannot run (a bug: the If over the axes is emitted regardless)."""
    model = cumprod_model(F32, (3, 4), 0, axis_form="input")
    try:
        lowered, _ = lower(model, strategy, target=target)
    except rewriter.StrategyError:
        return
    assert "If" not in op_types(lowered)


@pytest.mark.parametrize(
    "target", [t for t in TARGETS if not TARGETS[t].runtime_view and TARGETS[t].axis_input]
)
def test_run_time_axis_keeps_the_sign_of_zero(target: str) -> None:
    """Where a target cannot take a shape from a run-time axis, the lowering at each axis is
    selected at run time; -0.0 must come out as -0.0 (onnxruntime's Where turns a selected
    -0.0 into +0.0, so selecting with Where loses it when the output runs there)."""
    model = cumprod_model(F32, (2, 3), 0, axis_form="input")
    run = session(lower(model, "auto", target=target, max_length=8)[0])
    x = np.array([[-0.0, 2.0, -0.0], [1.0, -0.0, 0.5]], np.float32)
    for axis in (0, 1, -1):
        (y,) = run({"x": x, "axis": np.array(axis, np.int64)})
        want = np.cumprod(x, axis=axis)
        assert np.array_equal(np.signbit(y), np.signbit(want)), (axis, y, want)
