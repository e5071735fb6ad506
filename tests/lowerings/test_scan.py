"""``scan`` on the first axis (issue 13): the Scan runs over x itself, with no (o, n, i) view
and no Reshape back (``rewriter.lowerings.scan.build_first_axis``, called by
``rewriter.lowerings.lower`` when the axis is statically 0).

References: onnxruntime's native CumProd (integers bit for bit; float32 / float64 bit for bit
too, since the Scan multiplies in the sequential kernel's order) and onnx.reference (numpy:
integers in x's own type with wraparound; floats against a float64 / longdouble product
within the bound of ``tests/bounds.py``, float16 / bfloat16 multiplied in float32 and
rounded once). Every element type, exclusive / reverse, ranks 1-4, static and symbolic dims,
an empty first axis (static and at run time) and empty other dims, target opsets 11 / 13 /
18 / 26, every target that has Scan (those with onnxruntime's table take the direct form,
the others keep the view, where it was not measured faster), test targets without If (the
ones slab) and whose Scan ignores directions (the flip), a run-time axis on a target that
selects among the axes, and special values. No timings.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx
import onnx_ir as ir
import pytest

import rewriter
from rewriter.targets import TARGETS
from tests.helpers import (
    ALL_TYPES,
    BF16,
    F16,
    F32,
    F64,
    FLOATS,
    I32,
    I64,
    INTS,
    TYPE_NAMES,
    U32,
    U64,
    all_nodes,
    check_result,
    cumprod_model,
    feed,
    np_dtype,
    op_types,
    random_data,
    reference,
    run_ort,
    sprinkle_specials,
)

ATTRIBUTES = [(0, 0), (1, 0), (0, 1), (1, 1)]
STATIC_SHAPES = [(7,), (9, 3), (5, 2, 3), (4, 3, 2, 2)]  # ranks 1-4
SCAN_TARGETS = [name for name, t in TARGETS.items() if "Scan" not in t.missing_ops]
NO_IF, NO_DIRECTIONS = "test-no-if", "test-no-scan-directions"
SELECT = "test-axis-select"


@pytest.fixture
def quirky_targets(monkeypatch: pytest.MonkeyPatch) -> None:
    """Targets like ``spec`` (onnxruntime's table, so the direct form) without If (tract has
    none, but keeps the view), whose Scan ignores directions (as IREE's does, which has no
    Scan) and that select a run-time axis among the static ones (as tract does): the ones
    slab, the flip and the select's axis-0 candidate of the direct form run."""
    spec = TARGETS["spec"]
    for name, changes in (
        (NO_IF, {"missing_ops": frozenset({"If"})}),
        (NO_DIRECTIONS, {"scan_directions": False}),
        (SELECT, {"runtime_view": False}),
    ):
        monkeypatch.setitem(TARGETS, name, dataclasses.replace(spec, name=name, **changes))


def _lowered(model: onnx.ModelProto, **options: object) -> onnx.ModelProto:
    out = rewriter.decompose_cumprod(model, **{"strategy": "scan", **options})  # type: ignore[arg-type]
    assert isinstance(out, onnx.ModelProto)
    assert "CumProd" not in op_types(out) and "Scan" in op_types(out)
    return out


def _x_values(model: onnx.ModelProto) -> set[str]:
    """x and the values that are x in another type (the Casts of x into the compute type)."""
    names = {"x", "x_bf16"}
    for node in all_nodes(model):
        if node.op_type == "Cast" and node.input[0] in names:
            names.add(node.output[0])
    return names


def _assert_direct(model: onnx.ModelProto) -> None:
    """Each Scan reads x itself (or its compute Cast; through the Pad of the ones slab or the
    flip where the form needs them), and nothing reshapes x or a Scan's output: no view."""
    nodes = all_nodes(model)
    xs = _x_values(model)
    producers = {out: node for node in nodes for out in node.output}
    scans = [n for n in nodes if n.op_type == "Scan"]
    assert scans
    for scan in scans:
        source = scan.input[-1]
        while source not in xs and producers[source].op_type in ("Pad", "Slice"):
            source = producers[source].input[0]
        assert source in xs, f"the Scan reads {producers[source].op_type}, not x"
    reshaped = [n for n in nodes if n.op_type == "Reshape" and n.input[0] in xs]
    assert not reshaped, "x is reshaped into a view"
    scan_outputs = {n.output[1] for n in scans}
    assert not [n for n in nodes if n.op_type == "Reshape" and n.input[0] in scan_outputs]
    assert "Transpose" not in op_types(model)


def _assert_view(model: onnx.ModelProto) -> None:
    """x goes through the (o, n, i) view: a Reshape of x (targets that keep it)."""
    xs = _x_values(model)
    assert [n for n in all_nodes(model) if n.op_type == "Reshape" and n.input[0] in xs]


def _assert_form(model: onnx.ModelProto, target: str) -> None:
    if TARGETS[target].auto == "onnxruntime":
        _assert_direct(model)
    else:
        _assert_view(model)


def _check(
    elem_type: int,
    model: onnx.ModelProto,
    lowered: onnx.ModelProto,
    x: np.ndarray,
    *,
    ex: int,
    rev: int,
) -> None:
    """Integers: equal to native and to numpy's wrapping product. float32 / float64: bit for
    bit native's (same order of products) and within the bound of the float64 reference.
    float16 / bfloat16: within their bound (multiplied in float32, rounded once)."""
    (y,) = run_ort(lowered, {"x": feed(elem_type, x)})
    if elem_type == BF16:
        y = y.astype(np_dtype(BF16))
    assert y.shape == x.shape and y.dtype == x.dtype
    if elem_type in INTS:
        np.testing.assert_array_equal(y, reference(x, 0, ex, rev))
    else:
        problem = check_result(elem_type, "scan", y, x, 0, exclusive=ex, reverse=rev)
        assert problem is None, problem
    if elem_type not in (F16, BF16):
        (want,) = run_ort(model, {"x": x})
        nan = np.isnan(want) if elem_type in FLOATS else np.zeros(want.shape, bool)
        np.testing.assert_array_equal(np.isnan(y) if elem_type in FLOATS else nan, nan)
        # bit for bit (signs of zeros too) where the result is a number
        np.testing.assert_array_equal(y[~nan].view(np.uint8), want[~nan].view(np.uint8))


@pytest.mark.parametrize("elem_type", ALL_TYPES, ids=[TYPE_NAMES[t] for t in ALL_TYPES])
@pytest.mark.parametrize("shape", STATIC_SHAPES, ids=lambda s: f"rank{len(s)}")
@pytest.mark.parametrize(("ex", "rev"), ATTRIBUTES)
def test_every_type_rank_and_attribute_pair(
    elem_type: int, shape: tuple[int, ...], ex: int, rev: int
) -> None:
    """Random factors with special values sprinkled in (0, -0.0, +-inf, NaN for floats; 0, -1,
    the extremes and 2^(bits/2) for integers, which wrap)."""
    rng = np.random.default_rng(abs(hash((elem_type, shape, ex, rev))) % 2**32)
    x = sprinkle_specials(elem_type, random_data(elem_type, shape, rng), rng, 0.05)
    model = cumprod_model(elem_type, list(shape), 0, exclusive=ex, reverse=rev)
    lowered = _lowered(model)
    _assert_direct(lowered)
    _check(elem_type, model, lowered, x, ex=ex, rev=rev)


@pytest.mark.parametrize("elem_type", [I32, U32, U64, F32, F64], ids=TYPE_NAMES.get)
def test_integers_wrap_and_float_specials_along_a_long_axis(elem_type: int) -> None:
    """600 steps: integer products wrap many times over; float products hit 0, -0.0, inf and
    NaN and keep numpy's signs."""
    rng = np.random.default_rng(11)
    x = sprinkle_specials(elem_type, random_data(elem_type, (600, 3), rng), rng, 0.004)
    if elem_type in INTS:
        x[::5] = np.array(3, np_dtype(elem_type))
    for ex, rev in ATTRIBUTES:
        model = cumprod_model(elem_type, [600, 3], 0, exclusive=ex, reverse=rev)
        _check(elem_type, model, _lowered(model), x, ex=ex, rev=rev)


# symbolic dims: (declared dims, run-time shapes), empty first axis and empty other dims
SYMBOLIC = [
    (("n",), [(1,), (6,), (0,)]),
    (("n", 3), [(5, 3), (1, 3), (0, 3)]),
    ((4, "m"), [(4, 2), (4, 0)]),
    (("n", "m", 2), [(3, 2, 2), (0, 5, 2), (3, 0, 2)]),
    (("n", 2, "k", 3), [(4, 2, 1, 3), (0, 2, 3, 3), (2, 2, 0, 3)]),
]


@pytest.mark.usefixtures("quirky_targets")
@pytest.mark.parametrize("elem_type", [I64, U32, F32, BF16], ids=TYPE_NAMES.get)
@pytest.mark.parametrize(("dims", "shapes"), SYMBOLIC, ids=str)
@pytest.mark.parametrize("target", ["onnxruntime", NO_IF])
def test_symbolic_dims(elem_type: int, dims: tuple, shapes: list, target: str) -> None:
    """onnxruntime guards n = 0 with an If; without If a slab of ones is scanned first and
    sliced off (no control flow but the Scan)."""
    for ex, rev in ATTRIBUTES:
        model = cumprod_model(elem_type, list(dims), 0, exclusive=ex, reverse=rev)
        lowered = _lowered(model, target=target)
        _assert_direct(lowered)
        kinds = set(op_types(lowered))
        if isinstance(dims[0], str):
            assert ("If" in kinds) == (target == "onnxruntime")
            assert ("Pad" in kinds) == (target == NO_IF)
        else:
            assert not kinds & {"If", "Pad"}
        for shape in shapes:
            rng = np.random.default_rng(len(shape) + sum(shape))
            x = sprinkle_specials(elem_type, random_data(elem_type, shape, rng), rng, 0.05)
            _check(elem_type, model, lowered, x, ex=ex, rev=rev)


def test_empty_first_axis_static() -> None:
    """A static 0 first dim: x itself (no Scan at all)."""
    for ex, rev in ATTRIBUTES:
        model = cumprod_model(F32, [0, 4], 0, exclusive=ex, reverse=rev)
        lowered = rewriter.decompose_cumprod(model, strategy="scan")
        assert not {"Scan", "Reshape"} & set(op_types(lowered))
        (y,) = run_ort(lowered, {"x": np.zeros((0, 4), np.float32)})
        assert y.shape == (0, 4)


@pytest.mark.usefixtures("quirky_targets")
@pytest.mark.parametrize("opset", [11, 13, 18, 26])
@pytest.mark.parametrize("target", [*SCAN_TARGETS, NO_IF])
def test_target_opsets_on_every_target_with_scan(opset: int, target: str) -> None:
    """Static and symbolic dims, ranks 2 and 3, at each target opset: the direct form on
    targets with onnxruntime's table, the view elsewhere. Targets without If refuse symbolic
    dims below opset 14 (the view's guard, documented), the rest run."""
    rng = np.random.default_rng(opset)
    for elem_type, dims, shapes in (
        (I32, (6, 2, 3), [(6, 2, 3)]),
        (F32, (6, 5), [(6, 5)]),
        (I64, ("n", "m"), [(7, 2), (0, 2), (3, 0)]),
        (F64, ("n", 2, 2), [(5, 2, 2), (0, 2, 2)]),
    ):
        for ex, rev in ATTRIBUTES:
            model = cumprod_model(elem_type, list(dims), 0, exclusive=ex, reverse=rev)
            symbolic = any(isinstance(d, str) for d in dims)
            if opset < 14 and symbolic and "If" in TARGETS[target].missing_ops:
                with pytest.raises(rewriter.StrategyError, match="below opset 14"):
                    _lowered(model, target=target, target_opset=opset)
                continue
            lowered = _lowered(model, target=target, target_opset=opset)
            assert lowered.opset_import[0].version == opset
            onnx.checker.check_model(lowered, full_check=True)
            _assert_form(lowered, target)
            for shape in shapes:
                x = random_data(elem_type, shape, rng)
                _check(elem_type, model, lowered, x, ex=ex, rev=rev)


@pytest.mark.usefixtures("quirky_targets")
@pytest.mark.parametrize("dims", [(5, 3), ("n", 2, 2), (4,)], ids=str)
def test_reverse_where_scan_ignores_directions(dims: tuple) -> None:
    """Reverse flips x and the result along axis 0 (Slice with step -1)."""
    rng = np.random.default_rng(4)
    for ex in (0, 1):
        model = cumprod_model(I64, list(dims), 0, exclusive=ex, reverse=1)
        lowered = _lowered(model, target=NO_DIRECTIONS)
        _assert_direct(lowered)
        scans = [n for n in all_nodes(lowered) if n.op_type == "Scan"]
        assert all(a.name not in ("scan_input_directions",) for n in scans for a in n.attribute)
        assert "Slice" in op_types(lowered)
        for n in (1, 6):
            shape = tuple(n if isinstance(d, str) else d for d in dims)
            x = random_data(I64, shape, rng)
            _check(I64, model, lowered, x, ex=ex, rev=1)


def test_auto_picks_the_direct_scan_on_the_first_axis() -> None:
    """onnxruntime's table (scan for a first axis up to 512): the direct form, any rank.
    tract's (scan on other axes up to 512) keeps the view (not faster there)."""
    rng = np.random.default_rng(2)
    for target, dims in (
        ("onnxruntime", (512, 4)),
        ("onnxruntime", (8, 3, 5, 2)),
        ("tract", (300, 6)),
        ("tract", (20, 3, 2)),
    ):
        model = cumprod_model(F32, list(dims), 0, exclusive=1, reverse=1)
        lowered = rewriter.decompose_cumprod(model, target=target)
        assert "Scan" in op_types(lowered)
        _assert_form(lowered, target)
        x = random_data(F32, dims, rng)
        _check(F32, model, lowered, x, ex=1, rev=1)


def test_other_axes_keep_the_view() -> None:
    """Only a static axis 0 takes the direct form: a unit first dim before the axis still goes
    through the view (its Reshape), and so does the last axis."""
    for dims, axis in (((1, 6, 3), 1), ((4, 6), 1)):
        model = cumprod_model(F32, list(dims), axis)
        kinds = op_types(_lowered(model))
        assert "Reshape" in kinds


@pytest.mark.usefixtures("quirky_targets")
@pytest.mark.parametrize("target", ["onnxruntime", "tract", SELECT])
def test_run_time_axis(target: str) -> None:
    """The axis as a graph input: onnxruntime computes the view at run time (no direct form);
    tract and the select test target compute every axis and Gather one, the latter's axis-0
    candidate in the direct form (a Scan over x itself). Right for each axis value."""
    model = cumprod_model(I64, [5, 4, 3], 0, exclusive=1, axis_form="input")
    lowered = _lowered(model, target=target)
    scanned = {n.input[-1] for n in all_nodes(lowered) if n.op_type == "Scan"}
    assert ("x" in scanned) == (target == SELECT)
    x = random_data(I64, (5, 4, 3), np.random.default_rng(8))
    for axis in (0, 1, 2, -3, -1):
        (y,) = run_ort(lowered, {"x": x, "axis": np.array(axis, np.int64)})
        np.testing.assert_array_equal(y, reference(x, axis % 3, 1, 0))


def test_unsigned_on_onnxruntime_and_spec() -> None:
    """uint32 is multiplied as int64 on onnxruntime (Mod 2^32 before the Cast back), in its
    own type on ``spec``: both wrap as numpy does."""
    x = np.full((40, 2), 0xFFFF_FFFB, np.uint32)
    x[:, 1] = np.arange(1, 41, dtype=np.uint32) * 0x10001
    model = cumprod_model(U32, [40, 2], 0, exclusive=1)
    for target, casts in (("onnxruntime", True), ("spec", False)):
        lowered = _lowered(model, target=target)
        assert ("Cast" in op_types(lowered)) == casts
        _assert_direct(lowered)
        _check(U32, model, lowered, x, ex=1, rev=0)


def test_float_types_are_exact_for_exact_products() -> None:
    """Powers of two: every prefix product is exact in each float type, so all of them must
    equal numpy's exactly (float16 / bfloat16 too)."""
    for elem_type in FLOATS:
        x = np.exp2(np.random.default_rng(3).integers(-2, 3, (30, 3))).astype(np_dtype(elem_type))
        for ex, rev in ATTRIBUTES:
            model = cumprod_model(elem_type, [30, 3], 0, exclusive=ex, reverse=rev)
            (y,) = run_ort(_lowered(model), {"x": feed(elem_type, x)})
            want = reference(x.astype(np.float64), 0, ex, rev)
            np.testing.assert_array_equal(y.astype(np.float64), want)


@pytest.mark.parametrize("elem_type", [I64, F64], ids=TYPE_NAMES.get)
def test_type_generic_direct_form(elem_type: int) -> None:
    """The element type unknown (``dtype=None``): the ones come from CastLike (opset 15 and
    later; refused below, as the view's are), and the Scan multiplies in x's own type."""
    from rewriter.lowerings import Builder, NameSource, scan
    from rewriter.site import ScanSpec

    spec = ScanSpec(None, True, True, ("n", 3), 0)
    x = ir.Value(name="x", type=ir.TensorType(ir.DataType(elem_type)), shape=ir.Shape(["n", 3]))
    b = Builder(26, NameSource(["x"]), "t")
    y = scan.build_first_axis(b, x, spec, dtype=None, target=TARGETS["onnxruntime"])
    assert y is not None and "CastLike" in [n.op_type for n in b.nodes]
    y.name, y.type, y.shape = "y", x.type, x.shape
    graph = ir.Graph([x], [y], nodes=b.nodes, opset_imports={"": 26}, name="g")
    lowered = ir.to_proto(ir.Model(graph, ir_version=11))
    rng = np.random.default_rng(6)
    for n in (0, 1, 9):
        data = random_data(elem_type, (n, 3), rng)
        (got,) = run_ort(lowered, {"x": data})
        if elem_type in INTS:
            np.testing.assert_array_equal(got, reference(data, 0, 1, 1))
        else:
            problem = check_result(elem_type, "scan", got, data, 0, exclusive=1, reverse=1)
            assert problem is None, problem
    with pytest.raises(ValueError, match="CastLike"):
        scan.build_first_axis(
            Builder(14, NameSource(["x"]), "t"), x, spec, dtype=None, target=TARGETS["spec"]
        )
