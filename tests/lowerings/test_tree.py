"""``carry`` (issue 13): radix's unrolled blocks with the block carries multiplied into the
slices before the Concat.

References: onnxruntime's native CumProd and onnx.reference (numpy) in x's own type for
integers (bit for bit, wraparound included); for floats a float64 / longdouble product, with
the bound written out here (k - 1 ulps; float16 / bfloat16: 0.5 + (k - 1) * 2^(p - 24)), not
read from the code under test. Every branch is reached: the plain chain (n <= 16), one, two
and three levels, with and without padding, the exclusive carry used alone, reverse, the
first / a middle / the last axis, outer and inner known only at run time, a length known
only at run time with a bound (padded, no control flow) and without one (``dynamic``),
empty axes, and the opsets whose Split and Reshape differ. No timings.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest

import rewriter
from rewriter.lowerings import tree as carry
from rewriter.targets import TARGETS
from tests import bounds
from tests.helpers import (
    BF16,
    F16,
    F32,
    F64,
    I32,
    I64,
    U32,
    U64,
    cumprod_model,
    feed,
    np_dtype,
    op_types,
    random_data,
    reference,
    run_ort,
    sprinkle_specials,
    wide_reference,
)

# (shape, axis): every level count, padded or not, on the first, a middle and the last axis;
# r = 16 off the last axis, r = 4 on narrow runs (carry.narrow: the last axis, and runs of at
# most 24 bytes in 2^21 elements or more).
SHAPES = [
    ((16, 3), 0),  # n <= r: the plain chain
    ((2, 17, 3), 1),  # one level, padded to 32, 2 blocks
    ((256, 5), 0),  # one level, 16 blocks, no padding
    ((3, 257, 2), 1),  # two levels, padded
    ((4097, 2), 0),  # three levels, first axis
    ((2, 4097), 1),  # last axis (r = 4): six levels, padded at each
    ((3, 4), 1),  # last axis, n <= r: the plain chain
    ((2, 5), 1),  # last axis, one level, padded to 8
    ((64,), 0),  # rank 1 (the last axis): two levels of 4, no padding
    ((2, 7, 1), 1),  # a middle axis whose inner size is 1: r = 4
    ((2, 524289, 2), 1),  # narrow runs (8 / 16 bytes) in 2^21 elements: r = 4, ten levels
    ((3, 1, 4), 1),  # n = 1
]
EMPTY = [((4, 0, 3), 1), ((0, 20, 3), 1), ((5, 40, 0), 1)]


def _lowered(model, **options):  # type: ignore[no-untyped-def]
    out = rewriter.decompose_cumprod(model, strategy="carry", **options)
    assert "CumProd" not in op_types(out)
    return out


def _native(model, x: np.ndarray) -> np.ndarray:  # type: ignore[no-untyped-def]
    return run_ort(model, {"x": x})[0]


def _bound(elem_type: int, shape: tuple[int, ...], axis: int, ex: int, rev: int) -> np.ndarray:
    """The sequential kernel's bound, in ulps of the output type: k - 1 (float32 / float64);
    0.5 + (k - 1) * 2^(p - 24) for float16 / bfloat16 (multiplied in float32, rounded once)."""
    k = bounds.factor_counts(shape, axis, bool(ex), bool(rev)).astype(np.float64)
    k1 = np.maximum(k - 1, 0)
    if elem_type == F16:
        return 0.5 + k1 * 2.0 ** (11 - 24)
    if elem_type == BF16:
        return 0.5 + k1 * 2.0 ** (8 - 24)
    return k1 * (1 + 2.0**-20)  # room for the second-order term (k is far below 2^20)


def _check_floats(
    elem_type: int, y: np.ndarray, x: np.ndarray, axis: int, *attributes: int
) -> None:
    ex, rev = attributes
    wide = wide_reference(x.astype(np.float32) if elem_type == BF16 else x, axis, ex, rev)
    problem = bounds.check(
        y.astype(np_dtype(elem_type)),
        wide,
        np_dtype(elem_type),
        _bound(elem_type, x.shape, axis, ex, rev),
    )
    assert problem is None, problem


@pytest.mark.parametrize(
    ("n", "last_axis", "levels"),
    [
        (1, False, []),
        (16, False, []),
        (17, False, [16]),
        (256, False, [16]),
        (257, False, [16, 16]),
        (4096, False, [16, 16]),
        (4097, False, [16, 16, 16]),
        (65536, False, [16, 16, 16]),
        (1, True, []),
        (4, True, []),
        (5, True, [4]),
        (16, True, [4]),
        (17, True, [4, 4]),
        (4097, True, [4, 4, 4, 4, 4, 4]),
        (65536, True, [4] * 7),
    ],
)
def test_levels(n: int, last_axis: bool, levels: list[int]) -> None:
    assert carry.carry_levels(n, TARGETS["onnxruntime"], narrow_runs=last_axis) == levels


def test_narrow_runs() -> None:
    """Runs of i elements are narrow (r = 4) at i = 1, or at most 24 bytes in the compute type
    in a tensor of 2^21 elements or more (``Target.narrow_runs``); symbolic
    dims or an unknown type are not."""
    f32, f64 = ir.DataType.FLOAT, ir.DataType.DOUBLE
    t = TARGETS["onnxruntime"]
    assert t.narrow_runs == (24, 1 << 21)
    big = 1 << 21
    assert carry.narrow((2, 5, 1), None, t) and carry.narrow((ir.Value(name="o"), 5, 1), f64, t)
    assert carry.narrow((1, big // 6 + 1, 6), f32, t)
    assert not carry.narrow((1, big // 7 + 1, 7), f32, t)
    assert carry.narrow((1, big // 3 + 1, 3), f64, t)
    assert not carry.narrow((1, big // 4, 4), f64, t)
    assert not carry.narrow((1, big // 6, 6), f32, t)  # 2^21 - 2 elements
    assert not carry.narrow((1, big, 2), None, t)
    assert not carry.narrow((ir.Value(name="o"), big, 2), f32, t)
    assert not carry.narrow((1, big, ir.Value(name="i")), f32, t)


@pytest.mark.parametrize(
    ("elem_type", "shape", "radix"),
    [
        (F32, (2, 1 << 18, 6), 4),
        (F64, (2, 1 << 18, 6), 16),
        (F32, (2, 1 << 18, 7), 16),
        (F32, (2, 64, 6), 16),  # too small
        (I64, (1 << 20, 3), 4),
    ],
)
def test_the_graph_splits_by_the_radix_of_its_runs(
    elem_type: int, shape: tuple[int, ...], radix: int
) -> None:
    """The first level's Split has r outputs: 4 on narrow runs, else 16."""
    model = cumprod_model(elem_type, list(shape), len(shape) - 2)
    splits = [n for n in _lowered(model).graph.node if n.op_type == "Split"]
    assert len(splits[0].output) == radix


@pytest.mark.parametrize("elem_type", [I32, I64], ids=["int32", "int64"])
@pytest.mark.parametrize(("shape", "axis"), SHAPES + EMPTY)
@pytest.mark.parametrize(("ex", "rev"), [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_integers_bit_exact_against_native(
    elem_type: int, shape: tuple[int, ...], axis: int, ex: int, rev: int
) -> None:
    """Full-range and small factors (half of them wrap at once), with zeros and the
    extremes sprinkled in: equal to onnxruntime's CumProd and to onnx.reference."""
    rng = np.random.default_rng(abs(hash((elem_type, shape, ex, rev))) % 2**32)
    x = sprinkle_specials(elem_type, random_data(elem_type, shape, rng), rng, 0.02)
    model = cumprod_model(elem_type, list(shape), axis, exclusive=ex, reverse=rev)
    y = run_ort(_lowered(model), {"x": x})[0]
    assert y.dtype == x.dtype and y.shape == x.shape
    np.testing.assert_array_equal(y, _native(model, x))
    np.testing.assert_array_equal(y, reference(x, axis, ex, rev))


@pytest.mark.parametrize("elem_type", [U32, U64], ids=["uint32", "uint64"])
@pytest.mark.parametrize(("ex", "rev"), [(0, 0), (1, 1)])
def test_unsigned_wrap_around(elem_type: int, ex: int, rev: int) -> None:
    """uint32 is multiplied as int64 on onnxruntime (the low 32 bits kept), uint64 wraps."""
    rng = np.random.default_rng(3)
    x = random_data(elem_type, (3, 300, 2), rng)
    model = cumprod_model(elem_type, [3, 300, 2], 1, exclusive=ex, reverse=rev)
    y = run_ort(_lowered(model), {"x": x})[0]
    np.testing.assert_array_equal(y, reference(x, 1, ex, rev))


def test_integer_products_wrap_far_past_the_range() -> None:
    """3^4096 with -5 every 7th position: numpy's wrapped values, across all three levels."""
    x = np.full((4096, 2), 3, np.int64)
    x[::7] = -5
    model = cumprod_model(I64, [4096, 2], 0)
    expected = reference(x, 0, 0, 0)
    assert np.abs(expected.astype(np.float64)).max() < 2.0**63  # it did wrap
    np.testing.assert_array_equal(run_ort(_lowered(model), {"x": x})[0], expected)


@pytest.mark.parametrize("elem_type", [F32, F64], ids=["float32", "float64"])
@pytest.mark.parametrize(("shape", "axis"), SHAPES + EMPTY)
@pytest.mark.parametrize(("ex", "rev"), [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_floats_within_k_minus_1_ulps(
    elem_type: int, shape: tuple[int, ...], axis: int, ex: int, rev: int
) -> None:
    rng = np.random.default_rng(abs(hash((elem_type, shape, ex, rev, "f"))) % 2**32)
    x = random_data(elem_type, shape, rng)
    model = cumprod_model(elem_type, list(shape), axis, exclusive=ex, reverse=rev)
    _check_floats(elem_type, run_ort(_lowered(model), {"x": x})[0], x, axis, ex, rev)


@pytest.mark.parametrize("elem_type", [F16, BF16], ids=["float16", "bfloat16"])
@pytest.mark.parametrize(("ex", "rev"), [(0, 0), (1, 1)])
def test_half_types_rounded_once(elem_type: int, ex: int, rev: int) -> None:
    rng = np.random.default_rng(5)
    x = random_data(elem_type, (2, 300, 3), rng)
    model = cumprod_model(elem_type, [2, 300, 3], 1, exclusive=ex, reverse=rev)
    y = run_ort(_lowered(model), {"x": feed(elem_type, x)})[0]
    _check_floats(elem_type, y, x, 1, ex, rev)


@pytest.mark.parametrize("elem_type", [F32, F64], ids=["float32", "float64"])
@pytest.mark.parametrize(("ex", "rev"), [(0, 0), (1, 1)])
@pytest.mark.parametrize("shape", [(3, 600, 2), (5, 600)], ids=["r16", "last-r4"])
def test_special_values_as_numpy(elem_type: int, ex: int, rev: int, shape: tuple[int, ...]) -> None:
    """0, -0.0, +-inf, NaN sprinkled in: exactly numpy's sequential product's (the signs of
    zeros and infinities too), elsewhere within the bound."""
    rng = np.random.default_rng(9)
    x = sprinkle_specials(elem_type, random_data(elem_type, shape, rng), rng, 0.003)
    model = cumprod_model(elem_type, list(shape), 1, exclusive=ex, reverse=rev)
    _check_floats(elem_type, run_ort(_lowered(model), {"x": x})[0], x, 1, ex, rev)


@pytest.mark.parametrize(("ex", "rev"), [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_run_time_outer_and_inner(ex: int, rev: int) -> None:
    """Static length, outer and inner known only at run time (symbolic dims)."""
    rng = np.random.default_rng(7)
    model = cumprod_model(I64, ["a", 1000, "b"], 1, exclusive=ex, reverse=rev)
    lowered = _lowered(model)
    for shape in ((3, 1000, 2), (1, 1000, 1), (0, 1000, 2)):
        x = random_data(I64, shape, rng)
        np.testing.assert_array_equal(run_ort(lowered, {"x": x})[0], reference(x, 1, ex, rev))
    xf = random_data(F32, (2, 1000, 5), rng)
    model = cumprod_model(F32, ["a", 1000, "b"], 1, exclusive=ex, reverse=rev)
    _check_floats(F32, run_ort(_lowered(model), {"x": xf})[0], xf, 1, ex, rev)


@pytest.mark.parametrize(("ex", "rev"), [(0, 0), (1, 1)])
def test_run_time_length_under_a_bound(ex: int, rev: int) -> None:
    """A symbolic length with a bound: padded to it, no control flow; one model for every n
    up to the bound (0 included); a longer n fails at run time."""
    model = cumprod_model(I64, [2, "n"], 1, exclusive=ex, reverse=rev)
    lowered = _lowered(model, max_length=300)
    assert not {"If", "Loop", "Scan"} & set(op_types(lowered))
    for n in (0, 1, 16, 17, 299, 300):
        x = random_data(I64, (2, n), np.random.default_rng(n))
        np.testing.assert_array_equal(run_ort(lowered, {"x": x})[0], reference(x, 1, ex, rev))
    with pytest.raises(Exception):  # noqa: B017 (onnxruntime's own error type)
        run_ort(lowered, {"x": np.ones((2, 301), np.int64)})


def test_run_time_length_without_a_bound_is_dynamic() -> None:
    """No bound: the length is decided at run time as ``dynamic`` does (Scan up to 512,
    blocked above), on both sides of that threshold."""
    model = cumprod_model(I64, [2, "n"], 1, exclusive=1)
    lowered = _lowered(model)
    assert "If" in op_types(lowered) and "Scan" in op_types(lowered)
    for n in (0, 5, 513, 2000):
        x = random_data(I64, (2, n), np.random.default_rng(n))
        np.testing.assert_array_equal(run_ort(lowered, {"x": x})[0], reference(x, 1, 1, 0))


def test_static_lengths_have_no_control_flow_and_no_transpose() -> None:
    model = cumprod_model(F32, [3, 5000, 2], 1, exclusive=1, reverse=1)
    kinds = set(op_types(_lowered(model)))
    assert not kinds & {"If", "Loop", "Scan", "Transpose"}
    assert {"Split", "Concat", "Mul"} <= kinds


def test_refused_without_if_or_scan_and_no_bound() -> None:
    """IREE and portable have no If or Scan: a length known only at run time needs a bound
    (the documented refusal); with one it runs (no control flow) on portable (IREE takes only
    doubling there, Target.padded_lowerings). tract, which cannot load the padding to the
    bound, refuses it either way (Target.bounded_lengths)."""
    model = cumprod_model(F32, [2, "n"], 1)
    for target in ("iree", "portable"):
        with pytest.raises(rewriter.StrategyError, match="needs the length of the scanned axis"):
            rewriter.decompose_cumprod(model, strategy="carry", target=target)
    with pytest.raises(rewriter.StrategyError, match="tract cannot load a Pad or Reshape"):
        rewriter.decompose_cumprod(model, strategy="carry", target="tract", max_length=40)
    lowered = rewriter.decompose_cumprod(model, strategy="carry", target="portable", max_length=40)
    x = random_data(F32, (2, 33), np.random.default_rng(1))
    _check_floats(F32, run_ort(lowered, {"x": x})[0], x, 1, 0, 0)


@pytest.mark.parametrize("opset", [11, 13, 18])
def test_older_opsets(opset: int) -> None:
    """Split's three forms (attribute, input, num_outputs) and Reshape before allowzero, with
    a symbolic dim that is 0 at run time (the If around the view below opset 14)."""
    model = cumprod_model(I32, ["a", 300, 3], 1, exclusive=1, reverse=1)
    lowered = _lowered(model, target_opset=opset)
    for shape in ((2, 300, 3), (0, 300, 3)):
        x = random_data(I32, shape, np.random.default_rng(opset))
        np.testing.assert_array_equal(run_ort(lowered, {"x": x})[0], reference(x, 1, 1, 1))
