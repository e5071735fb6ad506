"""Inputs for a model's runs: sizes for its symbolic dims, and random, special (0, -0.0, ±inf,
NaN, subnormals), extreme, odd and overflowing values per element type."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import onnx
import onnx_ir as ir

from rewriter.verify.analysis import cumprod_axis_inputs, index_inputs
from rewriter.verify.compare import PRECISION

__all__ = ["DEFAULT_DIM", "FEED_LIMIT", "UNNAMED_SIZES", "random_inputs", "symbolic_sizes"]

DEFAULT_DIM = 3


# Unnamed dims of the graph inputs are fed the sizes after the named ones' largest, by turns
# over this many (so that two of them differ, and a bound can know the largest).
UNNAMED_SIZES = 4


FEED_LIMIT = 1 << 27  # elements of one whole-model input (512 MiB of float32)


@dataclasses.dataclass(frozen=True)
class _Spec:
    name: str
    dtype: ir.DataType
    shape: tuple[int | str | None, ...] | None
    sequence: bool


def _type_spec(name: str, type_proto: onnx.TypeProto) -> _Spec:
    which = type_proto.WhichOneof("value")
    sequence = False
    if which == "sequence_type":
        type_proto = type_proto.sequence_type.elem_type
        which = type_proto.WhichOneof("value")
        sequence = True
    if which != "tensor_type":
        raise ValueError(f"graph input '{name}' has a type --verify cannot feed ({which})")
    tensor = type_proto.tensor_type
    if not tensor.elem_type:
        raise ValueError(f"graph input '{name}' has no element type")
    shape = None
    if tensor.HasField("shape"):
        shape = tuple(
            d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
            for d in tensor.shape.dim
        )
    return _Spec(name, ir.DataType(tensor.elem_type), shape, sequence)


def _input_specs(model: onnx.ModelProto) -> list[_Spec]:
    initializers = {t.name for t in model.graph.initializer}
    return [_type_spec(v.name, v.type) for v in model.graph.input if v.name not in initializers]


def _input_dim_names(model: onnx.ModelProto | ir.Model) -> list[str]:
    if isinstance(model, ir.Model):
        initializers = set(model.graph.initializers)
        shapes = [v.shape for v in model.graph.inputs if v.name not in initializers]
        dims = [getattr(d, "value", None) for shape in shapes if shape is not None for d in shape]
    else:
        dims = [d for spec in _input_specs(model) for d in spec.shape or ()]
    return [d for d in dims if isinstance(d, str) and d]


def symbolic_sizes(
    model: onnx.ModelProto | ir.Model, dims: Mapping[str, int] | None = None
) -> dict[str, int]:
    """A size for every named symbolic dim of the graph inputs: ``dims[name]`` when given,
    else :data:`DEFAULT_DIM`, :data:`DEFAULT_DIM` + 1, ... in order of appearance, so that
    two dims of one size cannot hide a rewrite that swaps them."""
    sizes = dict(dims or {})
    following = DEFAULT_DIM
    for d in _input_dim_names(model):
        if d not in sizes:
            while following in sizes.values():
                following += 1
            sizes[d] = following
    return sizes


def _concrete(
    shape: tuple[int | str | None, ...] | None,
    dims: Mapping[str, int],
    unnamed: Iterator[int] | None = None,
) -> tuple[int, ...]:
    """The sizes fed for ``shape``: a named dim ``dims[name]`` (else :data:`DEFAULT_DIM`),
    an unnamed one the next of ``unnamed`` (a size of its own, so that ``[?, ?]`` is not
    square), else :data:`DEFAULT_DIM`."""
    if shape is None:
        return (DEFAULT_DIM,)
    return tuple(
        d
        if isinstance(d, int)
        else dims.get(d, DEFAULT_DIM)
        if d
        else next(unnamed)
        if unnamed is not None
        else DEFAULT_DIM
        for d in shape
    )


def _np_type(dtype: ir.DataType) -> np.dtype:
    return np.dtype(dtype.numpy())


def _sprinkle(
    data: np.ndarray,
    once: np.ndarray,
    pool: np.ndarray,
    rng: np.random.Generator,
    rate: float,
) -> np.ndarray:
    """Put each value of ``once`` exactly once (when there is room) at random places of
    ``data``, and values of ``pool`` at about ``rate`` of the other places."""
    flat = data.reshape(-1).copy()
    order = rng.permutation(flat.size)
    first = order[: len(once)]
    flat[first] = once[: len(first)]
    rest = order[len(once) :]
    chosen = rest[rng.random(rest.size) < rate]
    flat[chosen] = rng.choice(pool, chosen.size)
    return np.asarray(flat.reshape(data.shape))


# Special float values whose products with ±1 and each other are exact (or a special):
# 0, -0.0, ±inf, NaN, ±2, 0.5. Subnormals are placed apart (see _subnormal), since the
# product of two underflows to 0 in the type, which a lowering in the log domain need not
# reproduce when an infinity follows.
_SPECIALS = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 2.0, 0.5, -2.0])


def _subnormal(dtype: ir.DataType) -> float:
    _, emin = PRECISION[dtype]
    return float(2.0 ** (emin - 3))


def _special_floats(
    dtype: ir.DataType, rng: np.random.Generator, shape: tuple[int, ...]
) -> np.ndarray:
    """±1 with each special value (0, -0.0, ±inf, NaN, ±2, 0.5) at least once where there
    is room (NaN first, the others in a random order: a small input gets NaN and a few
    others; ``finite special`` and ``overflow`` bring the zeros and infinities), one
    subnormal, and about a third of the places special."""
    sub = _subnormal(dtype)
    others = [v for v in _SPECIALS if not np.isnan(v)]
    once = np.array([np.nan, *rng.permutation([*others, rng.choice([-sub, sub])])])
    return _sprinkle(rng.choice([-1.0, 1.0], shape), once, _SPECIALS, rng, 0.3)


def _finite_special_floats(
    dtype: ir.DataType, rng: np.random.Generator, shape: tuple[int, ...]
) -> np.ndarray:
    """±1 with 0, -0.0, ±2 and subnormals and no inf or NaN (which, in the ``special``
    feed, turn most results NaN and hide a lost sign of zero or a flushed subnormal).
    Magnitudes never fall after a subnormal, so every product is exact in any order."""
    sub = _subnormal(dtype)
    once = rng.permutation(np.array([0.0, -0.0, sub, -sub, -2.0]))
    pool = np.array([0.0, -0.0, 2.0, -2.0])
    return _sprinkle(rng.choice([-1.0, 1.0], shape), once, pool, rng, 0.25)


def _range_floats(
    dtype: ir.DataType, rng: np.random.Generator, shape: tuple[int, ...], kind: str
) -> np.ndarray:
    """Powers of two of either sign whose products leave the type's range within three
    factors: ``overflow`` magnitudes 2^(emax/3 + 1) .. 2^(emax/2 + 2), ``underflow`` their
    inverses (signed zeros). All on one side of 1, so the running product only grows (or
    shrinks) and every order of multiplication gives the same exact product, or inf, or
    zero."""
    _, emin = PRECISION[dtype]
    emax = 1 - emin  # for these types
    exponents = rng.integers(emax // 3 + 1, emax // 2 + 2, shape, endpoint=True)
    sign = rng.choice([-1.0, 1.0], shape)
    return np.asarray(sign * np.exp2(exponents if kind == "overflow" else -exponents))


def _extreme_floats(
    dtype: ir.DataType, rng: np.random.Generator, shape: tuple[int, ...]
) -> np.ndarray:
    """Magnitudes 2^4 to 2^12 (products pass 1000 at once and overflow for good)."""
    return np.asarray(np.exp2(rng.uniform(4, 12, shape)) * rng.choice([-1.0, 1.0], shape))


def _ints(
    dtype: ir.DataType, rng: np.random.Generator, shape: tuple[int, ...], kind: str
) -> np.ndarray:
    np_type = _np_type(dtype)
    info = np.iinfo(np_type)
    if kind in ("extreme", "odd"):  # the whole range: products wrap around
        whole = rng.integers(info.min, info.max, shape, dtype=np_type, endpoint=True)
        # odd: a product never 0 modulo 2^k, so a long axis's late positions are seen too
        return np.asarray(whole | np.array(1, np_type) if kind == "odd" else whole)
    if kind in ("special", "finite special"):
        values = [np.array([0, 1, 2], np_type), np.array([info.max, info.min], np_type)]
        if info.min < 0:
            values.append(np.array([-1], np_type))
        pool = np.concatenate(values)
        return _sprinkle(rng.integers(0, 4, shape).astype(np_type), pool, pool, rng, 0.3)
    return rng.integers(0, 4, shape).astype(np_type)


def _in_range_spread(emin: int, n: int) -> float:
    """s such that the product of n factors of magnitude 2^U(-s, s) stays in a range of
    smallest normal exponent ``emin``: 1, or less so that s * sqrt(n) stays under a quarter
    of |emin| (the log2 of the running product is a random walk of n steps in [-s, s])."""
    return float(min(1.0, -emin / (4 * np.sqrt(max(n, 1)) + 1)))


def _random_spread(dtype: ir.DataType, shape: tuple[int, ...]) -> float:
    """s of the random floats sign * 2^U(-s, s): 1, less along a long dim, so that a running
    product along it stays in the normal range of the type the lowerings multiply in (float32
    for float16 / bfloat16; :func:`_in_range_spread` of the longest dim). Where it leaves
    the range for a while, a product tree and the sequential kernel give inf and a finite
    value at the same position, as the README allows at the range's edge, and --verify
    would refuse a right rewrite (float32 along 65536 positions with s = 1 did)."""
    _, emin = PRECISION[dtype]
    emin = min(emin, PRECISION[ir.DataType.FLOAT][1])  # float16 is multiplied in float32
    return _in_range_spread(emin, max(shape, default=1))


def _tensor(
    dtype: ir.DataType,
    shape: tuple[int, ...],
    rng: np.random.Generator,
    kind: str,
    safe: int | None,
) -> np.ndarray:
    np_type = _np_type(dtype)
    if safe is not None:
        return np.full(shape, safe).astype(np_type)
    if dtype == ir.DataType.BOOL:
        return np.asarray(rng.random(shape) < 0.5)  # a 0-D comparison gives a numpy scalar
    if dtype in PRECISION:
        if kind == "special":
            data = _special_floats(dtype, rng, shape)
        elif kind == "finite special":
            data = _finite_special_floats(dtype, rng, shape)
        elif kind == "extreme":
            data = _extreme_floats(dtype, rng, shape)
        elif kind in ("overflow", "underflow"):
            data = _range_floats(dtype, rng, shape, kind)
        else:
            spread = _random_spread(dtype, shape)
            data = np.exp2(rng.uniform(-spread, spread, shape)) * rng.choice([-1.0, 1.0], shape)
        with np.errstate(over="ignore"):
            return np.asarray(data).astype(np_type)
    if np.issubdtype(np_type, np.integer):
        return _ints(dtype, rng, shape, kind)
    raise ValueError(f"--verify cannot make {dtype.name.lower()} inputs")


def random_inputs(
    model: onnx.ModelProto,
    rng: np.random.Generator,
    dims: Mapping[str, int] | None = None,
    kind: str = "random",
    richer: bool = False,
    *,
    last_axis: bool = False,
) -> dict[str, Any]:
    """Feeds for every graph input that is not an initializer.

    ``kind``: ``random`` (floats sign * 2^U(-1, 1), less along dims past about 1000
    positions: :func:`_random_spread`; integers 0..3), ``special`` (floats
    ±1 mixed with 0, -0.0, ±inf, NaN, subnormals, ±2, 0.5; integers 0, ±1, 2, the type's
    extremes), ``finite special`` (the same floats without inf and NaN), ``extreme``
    (floats of magnitude 2^4..2^12, integers over the whole range), ``odd`` (integers over
    the whole range, odd: products wrap but never reach 0; floats as ``random``), ``overflow`` /
    ``underflow`` (floats: powers of two whose products leave the range within a few
    factors; integers as ``random``). An input used as an index, axis, count, shape or
    divisor (see :func:`index_inputs`) always gets its safe value (``richer``: a Loop trip
    count 3); one used only as a CumProd's axis gets -1 with ``last_axis``
    (:func:`cumprod_axis_inputs`). Booleans: random. A sequence input gets two tensors.
    Symbolic dims take ``dims[name]``, else :data:`DEFAULT_DIM`; with ``richer``, each
    unnamed dim a size of its own after those of ``dims``.
    """
    dims = dims or {}
    safe = index_inputs(model, richer)
    if last_axis:
        safe.update(dict.fromkeys(cumprod_axis_inputs(model), -1))
    unnamed = None
    if richer:
        top = max([DEFAULT_DIM, *dims.values()])
        unnamed = itertools.cycle(range(top + 1, top + 1 + UNNAMED_SIZES))
    feeds: dict[str, Any] = {}
    for spec in _input_specs(model):
        shape = _concrete(spec.shape, dims, unnamed)
        size = int(np.prod(shape, dtype=object))
        if size > FEED_LIMIT:
            raise ValueError(
                f"--verify: graph input '{spec.name}' would have shape {shape} ({size} "
                f"elements, at most {FEED_LIMIT}): give smaller --dim sizes"
            )
        value = safe.get(spec.name)
        if spec.sequence:
            feeds[spec.name] = [_tensor(spec.dtype, shape, rng, kind, value) for _ in range(2)]
        else:
            feeds[spec.name] = _tensor(spec.dtype, shape, rng, kind, value)
    return feeds
