"""``auto``: one table per target, rows of (where, how long, how large) -> lowering.

A row matches on the (o, n, i) view's axis position (``first``: o = 1, ``last``: i = 1,
``middle``, ``unknown``: i not static, ``run-time axis``: n the longest dim, to which x is
padded, ``run-time length``: n = None), the compute type or its item size, a range of n, the
slab (elements per position), the tensor's bytes, the direction, whether ``carry``'s levels
pad n, the row count o and the size of ``cached``'s pieces. The first row that matches and
whose lowering the target accepts (:func:`rewriter.lowerings.refusal`) wins; every table
ends in rows that match everything. Each row has its one-line reason and its results file
(``scripts/results/``); tests/lowerings/test_auto.py iterates the same rows. Every lowering
named is exact for integers and within the sequential kernel's k - 1 ulps for floats: the
tables decide speed and compile time, never correctness.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import onnx_ir as ir

from rewriter.lowerings import cached, tree
from rewriter.site import ScanSpec
from rewriter.targets import Target

__all__ = ["POSITIONS", "TABLES", "Facts", "Row", "facts_of", "pick"]

FIRST, LAST, MIDDLE, UNKNOWN = "first", "last", "middle", "unknown"
RUN_TIME_AXIS, RUN_TIME_LENGTH = "run-time axis", "run-time length"
POSITIONS = (FIRST, LAST, MIDDLE, UNKNOWN, RUN_TIME_AXIS, RUN_TIME_LENGTH)
STATIC = frozenset({FIRST, LAST, MIDDLE, UNKNOWN})
ANY = frozenset(POSITIONS)
_MIB = 1 << 20
_F, _L, _M = frozenset({FIRST}), frozenset({LAST}), frozenset({MIDDLE})
_FM, _MU, _FLM = _F | _M, _M | {UNKNOWN}, _F | _L | _M
_RTL = frozenset({RUN_TIME_LENGTH})
_RT = _RTL | {RUN_TIME_AXIS}
_F32, _I32 = ir.DataType.FLOAT, ir.DataType.INT32


@dataclasses.dataclass(frozen=True)
class Facts:
    """What a row can match on, for one CumProd on one target."""

    position: str
    n: int | None  # the static length, the padded one for a run-time axis, or None
    compute: ir.DataType | None  # the type the exact lowerings compute in
    slab: int  # elements per position: i on a first axis, o * i elsewhere (0: not static)
    nbytes: int  # the tensor's size in the compute type (0 where not static)
    reverse: bool
    rows: int  # o (1 where not static)
    static_dims: bool
    carry_pads: bool  # whether carry's levels pad n (a Pad and a Slice per level)
    piece_bytes: int = 0  # bytes of one of cached's pieces (0: x does not cut)

    @property
    def itemsize(self) -> int:
        return int(self.compute.itemsize) if self.compute is not None else 4


@dataclasses.dataclass(frozen=True)
class Row:
    """Where every condition holds (those left at their defaults match anything), use
    ``lowering``."""

    lowering: str
    reason: str
    evidence: str = ""
    at: frozenset[str] = ANY
    n: tuple[int, int | None] = (0, None)  # inclusive; n = None matches only (0, None)
    itemsize: int | None = None
    dtype: ir.DataType | None = None
    slab: int = 0  # at least
    over_bytes: int = 0  # more than
    under_bytes: int = 0  # at most (0: no limit)
    direction: str | None = None  # "forward" or "reverse"
    pads: bool | None = None
    rows: int = 0  # at least
    static_dims: bool | None = None
    piece_up_to: int = 0  # cached's pieces exist and take at most this many bytes

    def matches(self, f: Facts) -> bool:
        lo, hi = self.n
        in_range = (lo, hi) == (0, None) if f.n is None else lo <= f.n and (hi is None or f.n <= hi)
        return (
            f.position in self.at
            and in_range
            and self.itemsize in (None, f.itemsize)
            and self.dtype in (None, f.compute)
            and f.slab >= self.slab
            and (not self.over_bytes or f.nbytes > self.over_bytes)
            and (not self.under_bytes or 0 < f.nbytes <= self.under_bytes)
            and self.direction in (None, "reverse" if f.reverse else "forward")
            and self.pads in (None, f.carry_pads)
            and f.rows >= self.rows
            and self.static_dims in (None, f.static_dims)
            and (not self.piece_up_to or 0 < f.piece_bytes <= self.piece_up_to)
        )


# fmt: off
# -- onnxruntime (and spec): scripts/bench.py, one intra-op thread ----------------------------
_ORT, _HELD = "bench-2026-12-05-round29.md", "bench-2026-12-01-first-heldout.md"
_CACHED = "against-2026-12-06-without-cached.md"  # auto with cached against without
_COMPILE = "compile-2026-12-06-summary.md"  # load / compile + first run against CumSum
_4M, _16M = 4 * _MIB, 16 * _MIB
_4MIB, _16MIB = _4M - 1, _16M - 1  # "over" these: 4 MiB or more, 16 MiB or more
ONNXRUNTIME = (
    Row("dynamic", "an If on n: scan to 512, a padded blocked scan beyond", _ORT, at=_RT),
    Row("chain", "n <= 1: x itself, or ones", at=STATIC, n=(0, 1)),
    Row("scan", "a Scan over x's own slabs: no view, no Transpose", _ORT, at=_F, n=(2, 512)),
    Row("scan", "a Scan step (~1 us) costs less than carry's passes on large slabs", _HELD, at=_F,
        itemsize=4, slab=1000, over_bytes=_4M, direction="forward"),
    Row("scan", "in reverse Scan steps cost more: twice the slab", _HELD, at=_F, itemsize=4,
        slab=2000, over_bytes=_4M),
    Row("scan", "8-byte slabs move slower through carry's Split / Concat", _HELD, at=_F,
        itemsize=8, slab=400, over_bytes=_4M, direction="forward"),
    Row("scan", "8-byte in reverse: twice the slab", _HELD, at=_F, itemsize=8, slab=800,
        over_bytes=_4M),
    Row("cached", "carry on chunks in cache", _CACHED, at=_F, over_bytes=_4MIB, piece_up_to=_16M),
    Row("carry", "log levels of unrolled blocks beat n Scan steps on small slabs", _ORT, at=_F),
    Row("scan", "short last axes: fewer steps than carry nodes", _ORT, at=_L, n=(2, 63),
        itemsize=4),
    Row("scan", "short last axes, 8-byte", _ORT, at=_L, n=(2, 7), itemsize=8),
    Row("scan", "carry's padded levels cost a Pad and a Slice each",
        "bench-2026-11-30-round5-lengths.md", at=_L, n=(2, 128), pads=True),
    Row("scan", "float32 trees take float64 carries, slower than a Scan here",
        "bench-wide-carries-2026-12-04.md", at=_L, n=(2, 256), dtype=_F32),
    Row("cached", "carry in tiles of rows that stay in cache", _CACHED, at=_L, over_bytes=_4MIB,
        rows=2, piece_up_to=_16M),
    Row("cached", "one row in chunks from 16 MiB", _CACHED, at=_L, over_bytes=_16MIB,
        piece_up_to=_16M),
    Row("carry", "r = 4 blocks on single elements: the fastest exact route measured",
        "bench-2026-11-30-last-carry.md", at=_L),
    Row("radix", "under 1 MiB a chain's session costs more than its run", _COMPILE, at=_M,
        n=(17, 512), itemsize=4, under_bytes=_MIB),
    Row("chain", "one Mul per position, no Transpose: fastest to 512", _ORT, at=_MU, n=(2, 512)),
    Row("chain", "on large slabs the chain's per-node cost pays off to its limit",
        "bench-2026-12-01-middle-heldout.md", at=_M, n=(513, 1024), slab=2048),
    Row("cached", "carry in tiles of rows that stay in cache", _CACHED, at=_M, over_bytes=_4MIB,
        piece_up_to=_16M),
    Row("carry", "log levels of unrolled blocks", _ORT, at=_MU),
)
# -- every target without a table of its own (portable), and the others' last rows ---------
STATIC_RULES = (
    Row("chain", "short: n - 1 Muls, no loop", at=STATIC | {RUN_TIME_AXIS}, n=(0, 16)),
    Row("radix", "no control flow, log levels", at=STATIC | {RUN_TIME_AXIS}),
    Row("scan", "one graph for every length, where the target has Scan", at=_RTL),
    Row("doubling", "no control flow, over a length bounded by max_length", at=_RTL),
)
# -- the runtimes' own: scripts/bench_runtime.py --runtime NAME, against its own CumSum -------
OPENVINO = (
    Row("doubling", "OpenVINO's Scan and Loop are 10-67x its CumSum on the last axis",
        "bench-runtime-openvino-2026-12-05-round29.md", at=_L, n=(2, None)),
    Row("carry", "int32: chain / radix compiled 2.0-4.6x CumSum's time, carry 1.4-1.7x",
        _COMPILE, at=_FM, n=(256, None), dtype=_I32),
    Row("blocked", "float32: compiled 1.4-1.9x CumSum's time (trees 2.2-4.2x), 1.4-2.4x slower",
        "compile-openvino-float32-2026-12-06-quiet-summary.md", at=_FM, n=(256, 1024),
        dtype=_F32, under_bytes=_MIB),
    Row("chain", "0.31-0.92x radix's time; its compile time grows with its nodes",
        "bench-runtime-openvino-2026-12-01-chain.md", at=_FM, n=(2, 512)),
    *STATIC_RULES,
)
TINYGRAD = (
    Row("masked", "middle 256: one tile compiled 1.05-1.07x CumSum's time, carry 1.92-2.24x",
        "compile-tinygrad-2026-12-06-middle256-quiet-summary.md", at=_M, n=(256, 256),
        itemsize=4, under_bytes=_MIB),
    Row("masked", "carry's unrolled tree compiled > 4.3x CumSum's time, masked 0.95-1.21x",
        "compile-tinygrad-masked-2026-12-06.md", at=_F | _L, n=(1024, 8192), itemsize=4,
        under_bytes=_MIB),
    Row("masked", "middle axes: carry compiled 4.2-4.4x CumSum's time, masked 0.92-1.16x",
        "compile-tinygrad-2026-12-06-middle.md", at=_M, n=(1024, 8192), itemsize=4,
        under_bytes=_MIB),
    Row("carry", "0.36-1.10x radix's time (median 0.96x)",
        "bench-runtime-tinygrad-2026-12-05-round29.md", at=_FLM, n=(17, None)),
    Row("carry", "padded to max_length: doubling compiled 5-10x longer",
        "tinygrad-run-time-length-2026-12-01.md", at=_RTL),
    *STATIC_RULES,
)
_TR, _FEW = "bench-runtime-tract-2026-12-05-round29.md", "few rows: n Scan steps cost more"
TRACT = (
    Row("radix", _FEW, _TR, at=_L, n=(8193, None), dtype=_F32),
    Row("carry", _FEW, _TR, at=_L, n=(8193, None)),
    Row("carry", "tract's Scan is slow at powers of two from 1024; carry pads nothing there",
        "bench-runtime-tract-2026-12-01-int32-last-2e20.md", at=_L, n=(1024, None), pads=False),
    Row("scan", "padded levels cost tract a Pad and a Slice each", _TR, at=_L, n=(2, None)),
    Row("scan", "slices of x are views: any n on large slabs", _TR, at=_F, n=(2, None),
        dtype=_F32, slab=1500),
    Row("scan", "float32 first and middle axes to 512", _TR, at=_FM, n=(2, 512), dtype=_F32),
    Row("scan", "where carry pads, Scan to 1024", _TR, at=_FM, n=(2, 1024), dtype=_F32, pads=True),
    Row("carry", "float32 beyond", _TR, at=_FM, n=(2, None), dtype=_F32),
    Row("scan", "slices of x are views: any n on large slabs", _TR, at=_F, n=(2, None), slab=900),
    Row("scan", "0.62-1.04x radix's time at 1000 and 1024", _TR, at=_FM, n=(2, 1024)),
    Row("radix", "beyond 1024", _TR, at=_FM, n=(2, None)),
    *STATIC_RULES,
)
_IREE = "bench-runtime-iree-2026-12-05-round29.md"
IREE = (
    Row("doubling", "1.3-6.8x its CumSum against chain / radix's 2.2-7.9x", _IREE, at=_L,
        n=(2, None), itemsize=4),
    Row("chain", "8-byte short rows; one row's chain past 32 bindings refused", _IREE, at=_L,
        n=(2, 32), itemsize=8),
    Row("chain", "0.15-0.72x radix's time; compiles within 2x CumSum's to n = 32", _COMPILE,
        at=_M, n=(2, 32)),
    Row("chain", "compiles within 2x CumSum's to n = 64, first axis", _COMPILE, at=_F, n=(2, 64)),
    Row("doubling", "compiles in 1.0-1.7x CumSum's time (chain 2.2-7.7x, carry 2.3-2.9x)",
        _COMPILE, at=_FM, n=(2, None), itemsize=4),
    Row("chain", "8-byte (compile not measured): 0.15-0.72x radix's time",
        "bench-runtime-iree-2026-12-01-probe.md", at=_FM, n=(2, 256)),
    *STATIC_RULES,
)
MNN = (  # MNN 3.6, --compile 1, float32, N = 65536, a loaded machine
    Row("doubling", "radix ran 2.7-118x MNN's CumSum, doubling 0.23-11.5x",
        "bench-runtime-mnn-2026-12-06-auto.md", at=STATIC, n=(17, None)),
    *STATIC_RULES,
)
NCNN = (  # ncnn via pnnx: which lowerings load and run right, float32
    Row("chain", "the one lowering ncnn loads and runs right at every static length tried",
        "ncnn-lowerings-2026-12-06.md", at=STATIC, n=(0, 1024)),
    *STATIC_RULES,
)
TFLITE = (
    Row("chain", "short static axes", at=STATIC | {RUN_TIME_AXIS}, n=(0, 16), static_dims=True),
    Row("doubling", "onnx2tf converts it on any view; radix's padded blocks came out wrong"),
)
TABLES: dict[str, tuple[Row, ...]] = {
    "onnxruntime": ONNXRUNTIME, "static": STATIC_RULES, "openvino": OPENVINO,
    "tinygrad": TINYGRAD, "tract": TRACT, "iree": IREE, "tflite": TFLITE, "mnn": MNN,
    "ncnn": NCNN,
}
# fmt: on


def facts_of(spec: ScanSpec, compute: ir.DataType | None, target: Target) -> Facts:
    """The facts the rows match on, for ``spec`` computed in ``compute`` on ``target``."""
    o, n, i = spec.outer, spec.length, spec.inner
    if n is None:
        n = spec.max_length if spec.static_dims else None
        position = RUN_TIME_AXIS if n is not None else RUN_TIME_LENGTH
    else:
        position = LAST if i == 1 else FIRST if o == 1 else UNKNOWN if i is None else MIDDLE
    itemsize = int(compute.itemsize) if compute is not None else 4
    static = o is not None and n is not None and i is not None
    piece = cached.pieces((o, n, i), itemsize, target) if static else None  # type: ignore[arg-type]
    return Facts(
        position=position,
        n=n,
        compute=compute,
        slab=(i or 0) if position == FIRST else (o or 0) * (i or 0),
        nbytes=o * n * i * itemsize if static else 0,  # type: ignore[operator]
        reverse=spec.reverse,
        rows=o if o is not None else 1,
        static_dims=spec.static_dims,
        carry_pads=bool(
            n and n > 1 and tree.pads(n, tree.carry_levels(n, target, position == LAST))
        ),
        piece_bytes=0 if piece is None else itemsize * math.prod(piece[0]),
    )


def pick(
    spec: ScanSpec, target: Target, compute: ir.DataType | None, refusal: Callable[..., str | None]
) -> tuple[str, list[tuple[str, str]]]:
    """``(lowering, refusals)``: the first matching row of the target's table whose lowering
    ``refusal`` accepts, and the ``(lowering, reason)`` of each matching row refused before
    it; lowering "" where every matching row is refused."""
    refused: list[tuple[str, str]] = []
    facts = facts_of(spec, compute, target)
    for row in (row for row in TABLES[target.auto] if row.matches(facts)):
        reason = refusal(row.lowering)
        if reason is None:
            return row.lowering, refused
        refused.append((row.lowering, reason))
    assert refused, f"table {target.auto!r} has no row for {spec}"
    return "", refused
