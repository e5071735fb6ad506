"""The lowerings added for speed (issue 13): ``tiled``.

References come from numpy only: integers must match numpy's wrapping cumprod bit for bit,
floats must stay within k - 1 ulps of the exact product (k the number of factors of the
output element), the bound written out here rather than taken from the code under test.
Every branch of ``tiled`` is reached: empty axes, n up to one block (the plain Scan), block
lengths 16 / 32 / 64 / 128 with and without padding, block totals scanned by no, one and two
radix levels (r = 8, and r = 16 past 512 blocks off the last axis), exclusive / reverse, and
outer / inner / length known only at run time. No timings.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import rewriter
from rewriter.lowerings import tiled

_NP = {
    TensorProto.FLOAT: np.float32,
    TensorProto.DOUBLE: np.float64,
    TensorProto.INT32: np.int32,
    TensorProto.INT64: np.int64,
    TensorProto.UINT32: np.uint32,
    TensorProto.UINT64: np.uint64,
}
# Float bound: k - 1 roundings of relative size 2^-p each, in ulps of the result, with room
# for the second-order term (k is far below 2^20 here).
_SLACK = 1 + 2.0**-20


def _model(
    elem_type: int, dims: list[int | str], axis: int, exclusive: int, reverse: int
) -> onnx.ModelProto:
    node = helper.make_node(
        "CumProd", ["x", "axis"], ["y"], exclusive=exclusive, reverse=reverse, name="cumprod"
    )
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", elem_type, dims)],
        [helper.make_tensor_value_info("y", elem_type, dims)],
        [helper.make_tensor("axis", TensorProto.INT64, [], [axis])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26)])


def _run(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.log_severity_level = 3
    session = ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    return session.run(None, {"x": x})[0]


def _lowered(model: onnx.ModelProto, **kwargs: object) -> onnx.ModelProto:
    out = rewriter.decompose_cumprod(model, strategy="tiled", **kwargs)  # type: ignore[arg-type]
    assert isinstance(out, onnx.ModelProto)
    assert all(n.op_type != "CumProd" for n in out.graph.node)
    return out


def _numpy_cumprod(x: np.ndarray, axis: int, exclusive: int, reverse: int) -> np.ndarray:
    """numpy's cumprod in x's own type (integers wrap), with the CumProd attributes."""
    xx = np.flip(x, axis) if reverse else x
    y = np.cumprod(xx, axis=axis, dtype=x.dtype)
    if exclusive and x.shape[axis] > 0:
        ones = np.ones_like(np.take(y, [0], axis=axis))
        y = np.concatenate([ones, np.take(y, range(x.shape[axis] - 1), axis=axis)], axis=axis)
    return np.flip(y, axis) if reverse else y


def _factors(shape: tuple[int, ...], axis: int, exclusive: int, reverse: int) -> np.ndarray:
    """k: how many inputs each output multiplies."""
    n = shape[axis]
    k = np.arange(n)
    k = (n - k) if reverse else (k + 1)
    if exclusive:
        k = k - 1
    view = [1] * len(shape)
    view[axis] = n
    return np.broadcast_to(k.reshape(view), shape)


def _ints(elem_type: int, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Odd factors in [-7, 7] (signed) or [1, 15] (unsigned): long products wrap, and none
    turns to 0 (even factors would make every output past a few dozen positions 0, hiding a
    wrong carry behind it)."""
    dtype = _NP[elem_type]
    odd = 2 * rng.integers(0, 8 if np.issubdtype(dtype, np.unsignedinteger) else 4, shape) + 1
    if np.issubdtype(dtype, np.unsignedinteger):
        return odd.astype(dtype)
    return (odd * rng.choice([-1, 1], shape)).astype(dtype)


def _floats(elem_type: int, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """|x| in [2^-s, 2^s] with s small enough that no running product leaves the normal
    range, signs random."""
    n = max(shape)
    spread = min(1.0, 20.0 / np.sqrt(n))
    x = np.exp2(rng.uniform(-spread, spread, shape)) * rng.choice([-1.0, 1.0], shape)
    return x.astype(_NP[elem_type])


def _check_floats(y: np.ndarray, x: np.ndarray, axis: int, exclusive: int, reverse: int) -> None:
    assert y.shape == x.shape and y.dtype == x.dtype
    if x.size == 0:
        return
    exact_type = np.longdouble if x.dtype == np.float64 else np.float64
    if x.dtype == np.float64:
        assert np.finfo(np.longdouble).nmant >= 63, "needs an 80-bit long double reference"
    exact = _numpy_cumprod(x.astype(exact_type), axis, exclusive, reverse)
    ulp = np.spacing(np.abs(exact.astype(x.dtype))).astype(exact_type)
    errors = (np.abs(y.astype(exact_type) - exact) / ulp).astype(np.float64)
    k = _factors(x.shape, axis, exclusive, reverse)
    bound = np.maximum(k - 1, 0) * _SLACK
    worst = np.unravel_index(np.argmax(errors - bound), errors.shape)
    assert np.all(errors <= bound), (
        f"{errors[worst]} ulps at {worst}, bound {bound[worst]} (k = {k[worst]})"
    )


@pytest.mark.parametrize(
    ("n", "block", "levels"),
    [
        (16, 16, None),  # one block: the plain Scan
        (17, 16, []),  # two blocks, padded, totals by one chain
        (256, 16, [8]),  # one radix level, no padding
        (1000, 32, [8]),  # padded 1024
        (4000, 64, [8]),
        (4097, 128, [8]),
        (70001, 128, [16, 16]),  # 547 blocks off the last axis: r = 16
    ],
)
def test_block_plan(n: int, block: int, levels: list[int] | None) -> None:
    """The lengths below reach every branch: the block length and the radix levels of the
    block totals they get."""
    assert tiled.block_length(n) == block
    if levels is not None:
        from rewriter.lowerings import radix

        assert radix.radix_levels(-(-n // block), last_axis=False) == levels


_SHAPES = [
    # (shape, axis): the first, a middle and the last axis; every branch length above.
    ((16, 3), 0),
    ((2, 17, 3), 1),
    ((256, 5), 0),
    ((3, 1000, 2), 1),
    ((2, 4000), 1),
    ((4097, 2), 0),
    ((70001, 2), 0),
    ((3, 1, 4), 1),
    ((4, 0, 3), 1),
]


@pytest.mark.parametrize(
    "elem_type",
    [TensorProto.INT32, TensorProto.INT64, TensorProto.UINT32, TensorProto.UINT64],
    ids=TensorProto.DataType.Name,
)
@pytest.mark.parametrize(("shape", "axis"), _SHAPES)
@pytest.mark.parametrize(("exclusive", "reverse"), [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_integers_bit_exact(
    elem_type: int, shape: tuple[int, ...], axis: int, exclusive: int, reverse: int
) -> None:
    rng = np.random.default_rng(hash((elem_type, shape, exclusive, reverse)) % 2**32)
    x = _ints(elem_type, shape, rng)
    model = _lowered(_model(elem_type, list(shape), axis, exclusive, reverse))
    y = _run(model, x)
    expected = _numpy_cumprod(x, axis, exclusive, reverse)
    assert y.dtype == expected.dtype
    np.testing.assert_array_equal(y, expected)


def test_integers_wrap_around() -> None:
    """Products far past 2^63 (3^4096): still numpy's wrapped values."""
    x = np.full((4096, 2), 3, np.int64)
    x[::7] = -5
    model = _lowered(_model(TensorProto.INT64, [4096, 2], 0, 0, 0))
    expected = _numpy_cumprod(x, 0, 0, 0)
    assert np.abs(expected.astype(np.float64)).max() < 2.0**63  # it did wrap
    np.testing.assert_array_equal(_run(model, x), expected)


@pytest.mark.parametrize(
    "elem_type", [TensorProto.FLOAT, TensorProto.DOUBLE], ids=TensorProto.DataType.Name
)
@pytest.mark.parametrize(("shape", "axis"), _SHAPES)
@pytest.mark.parametrize(("exclusive", "reverse"), [(0, 0), (1, 1)])
def test_floats_within_k_minus_1_ulps(
    elem_type: int, shape: tuple[int, ...], axis: int, exclusive: int, reverse: int
) -> None:
    rng = np.random.default_rng(hash((elem_type, shape, exclusive, reverse)) % 2**32)
    x = _floats(elem_type, shape, rng)
    model = _lowered(_model(elem_type, list(shape), axis, exclusive, reverse))
    _check_floats(_run(model, x), x, axis, exclusive, reverse)


@pytest.mark.parametrize(("exclusive", "reverse"), [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_run_time_outer_and_inner(exclusive: int, reverse: int) -> None:
    """Static length, outer and inner known only at run time (symbolic dims)."""
    rng = np.random.default_rng(7)
    x = _ints(TensorProto.INT64, (3, 1000, 2), rng)
    model = _lowered(_model(TensorProto.INT64, ["a", 1000, "b"], 1, exclusive, reverse))
    np.testing.assert_array_equal(_run(model, x), _numpy_cumprod(x, 1, exclusive, reverse))
    xf = _floats(TensorProto.FLOAT, (2, 1000, 5), rng)
    model = _lowered(_model(TensorProto.FLOAT, ["a", 1000, "b"], 1, exclusive, reverse))
    _check_floats(_run(model, xf), xf, 1, exclusive, reverse)


@pytest.mark.parametrize("n", [1, 16, 300, 1000])
def test_run_time_length_under_a_bound(n: int) -> None:
    """A symbolic length: padded to ``max_length`` (1000), one model for every n up to it."""
    model = _lowered(_model(TensorProto.INT64, [2, "n"], 1, 1, 1), max_length=1000)
    x = _ints(TensorProto.INT64, (2, n), np.random.default_rng(n))
    np.testing.assert_array_equal(_run(model, x), _numpy_cumprod(x, 1, 1, 1))


def test_run_time_length_over_the_bound_fails() -> None:
    model = _lowered(_model(TensorProto.INT64, [2, "n"], 1, 0, 0), max_length=100)
    with pytest.raises(Exception):  # noqa: B017 (onnxruntime's own error type)
        _run(model, np.ones((2, 101), np.int64))


def test_refused_without_scan() -> None:
    """Targets without Scan get a clear refusal."""
    model = _model(TensorProto.INT64, [4, 100], 1, 0, 0)
    with pytest.raises(rewriter.StrategyError, match="Scan"):
        rewriter.decompose_cumprod(model, strategy="tiled", target="tinygrad")


@pytest.mark.parametrize("last_axis", [True, False])
def test_pads_exactly_off_the_powers_of_the_radix(last_axis: bool) -> None:
    """``radix.pads`` (auto's onnxruntime and tract tables key on it): False exactly for
    n = r^k * q with q <= r; radix takes r = 8 on the last axis, off it 8 up to 512 and 16
    above; carry r = 4 on the last axis, else 16 (their levels' docstrings)."""
    from rewriter.lowerings import carry, radix

    radix_r = (lambda n: 8) if last_axis else (lambda n: 8 if n <= 512 else 16)
    carry_r = (lambda n: 4) if last_axis else (lambda n: 16)
    for levels_of, r_of in (
        (radix.radix_levels, radix_r),
        (carry.carry_levels, carry_r),
    ):
        for n in range(1, 70_000):
            r, m = r_of(n), n
            while m > r and m % r == 0:
                m //= r
            assert radix.pads(n, levels_of(n, last_axis)) == (m > r), (levels_of, n)
