"""``auto``: one table per target, rows of (where, how long, how large) -> lowering.

The tables are data, in ``auto.csv`` beside this module: per row the table (``Target.auto``
names a target's), the lowering, the conditions it matches on (``when``), a one-line reason
and the results file behind it (``scripts/results/``). A row ``@static`` stands for the rows
of table ``static``, the portable one. The first row that matches and whose lowering the
target accepts (:func:`rewriter.lowerings.refusal`) wins; every table ends in rows that match
everything. tests/lowerings/test_auto.py iterates the same rows. Every lowering named is
exact for integers and within the sequential kernel's k - 1 ulps for floats: the tables
decide speed and compile time, never correctness.

``when``: conditions separated by spaces, all of which hold (none: any case), on the
(o, n, i) view of x in the compute type:

- positions joined by ``|``: ``first`` (o = 1), ``last`` (i = 1), ``middle``, ``unknown``
  (i not static), ``static`` (those four), ``run-time-axis`` (n: the longest dim, x padded
  to it), ``run-time-length`` (n neither static nor bounded);
- ``n=A..B``, ``n=A``, ``n>=A``, ``n<=B``, inclusive (a run-time length matches no range);
- ``4-byte`` / ``8-byte``, or a type (``float32``, ``int32``): the compute type;
- ``slab>=S``: elements per position (i on a first axis, o * i elsewhere); ``rows>=R``: o;
- ``bytes>X``, ``bytes>=X``, ``bytes<=X``: the tensor's size (``K``, ``M``: KiB, MiB);
- ``forward`` / ``reverse``; ``pads`` / ``no-pads`` (whether carry's levels pad n);
  ``static-dims`` / ``run-time-dims``; ``pieces<=X``: ``cached``'s pieces take at most X.
"""

from __future__ import annotations

import csv
import dataclasses
import importlib.resources
import math
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import onnx_ir as ir

from rewriter.lowerings import cached, tree
from rewriter.site import ScanSpec
from rewriter.targets import Target

__all__ = ["POSITIONS", "TABLES", "Facts", "Row", "facts_of", "parse_when", "pick"]

FIRST, LAST, MIDDLE, UNKNOWN = "first", "last", "middle", "unknown"
RUN_TIME_AXIS, RUN_TIME_LENGTH = "run-time axis", "run-time length"
POSITIONS = (FIRST, LAST, MIDDLE, UNKNOWN, RUN_TIME_AXIS, RUN_TIME_LENGTH)
STATIC = frozenset({FIRST, LAST, MIDDLE, UNKNOWN})
ANY = frozenset(POSITIONS)


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
_POSITIONS = {
    **{p: frozenset({p}) for p in (FIRST, LAST, MIDDLE, UNKNOWN)}, "static": STATIC,
    "run-time-axis": frozenset({RUN_TIME_AXIS}), "run-time-length": frozenset({RUN_TIME_LENGTH}),
}
_TYPES = ("float16", "float32", "float64", "int32", "int64", "uint32", "uint64")
_WORDS: dict[str, tuple[str, Any]] = {
    "4-byte": ("itemsize", 4), "8-byte": ("itemsize", 8),
    "forward": ("direction", "forward"), "reverse": ("direction", "reverse"),
    "pads": ("pads", True), "no-pads": ("pads", False),
    "static-dims": ("static_dims", True), "run-time-dims": ("static_dims", False),
    **{name: ("dtype", ir.DataType.from_numpy(np.dtype(name))) for name in _TYPES},
}
_BOUND = re.compile(r"(n|slab|bytes|rows|pieces)(>=|<=|>|=)([1-9]\d*)([KM]?)(?:\.\.(\d+))?")
_BOUNDS: dict[tuple[str, str], tuple[str, Callable[[int], Any]]] = {
    ("n", ">="): ("n", lambda v: (v, None)), ("n", "<="): ("n", lambda v: (0, v)),
    ("slab", ">="): ("slab", lambda v: v), ("rows", ">="): ("rows", lambda v: v),
    ("bytes", ">"): ("over_bytes", lambda v: v), ("bytes", ">="): ("over_bytes", lambda v: v - 1),
    ("bytes", "<="): ("under_bytes", lambda v: v), ("pieces", "<="): ("piece_up_to", lambda v: v),
}
# fmt: on


def _condition(word: str) -> tuple[str, Any]:
    """The :class:`Row` field one condition word sets, and its value."""
    bound = _BOUND.fullmatch(word)
    if bound:
        key, op, value, unit, hi = bound.groups()
        v = int(value) << {"": 0, "K": 10, "M": 20}[unit]
        if (key, op) == ("n", "=") and (hi is None or int(hi) >= v):
            return "n", (v, int(hi) if hi else v)
        if (key, op) in _BOUNDS and hi is None:
            field, convert = _BOUNDS[key, op]
            return field, convert(v)
    elif word in _WORDS:
        return _WORDS[word]
    elif all(p in _POSITIONS for p in word.split("|")):
        return "at", frozenset().union(*(_POSITIONS[p] for p in word.split("|")))
    raise ValueError(f"cannot read the condition {word!r}")


def parse_when(when: str) -> dict[str, Any]:
    """The :class:`Row` fields that ``when`` sets (the conditions listed above), each once."""
    fields: dict[str, Any] = {}
    for field, value in map(_condition, when.split()):
        if field in fields:
            raise ValueError(f"two conditions on {field} in {when!r}")
        fields[field] = value
    return fields


def _load() -> dict[str, tuple[Row, ...]]:
    """auto.csv's tables, each ``@static`` row replaced by table ``static``'s rows."""
    text = importlib.resources.files("rewriter.lowerings").joinpath("auto.csv").read_text("utf-8")
    tables: dict[str, list[Row | None]] = {}
    reader = csv.DictReader(text.splitlines(), strict=True)
    for record in reader:
        try:
            if None in record or None in record.values():
                raise ValueError(f"not the columns {reader.fieldnames}")
            fields = parse_when(record["when"])
        except ValueError as error:
            raise ValueError(f"auto.csv line {reader.line_num}: {error}") from None
        static = record["lowering"] == "@static" and not fields
        row = (
            None
            if static
            else Row(record["lowering"], record["reason"], record["evidence"], **fields)
        )
        tables.setdefault(record["table"], []).append(row)
    static_rows = tuple(row for row in tables["static"] if row is not None)
    return {
        name: tuple(r for row in rows for r in (static_rows if row is None else (row,)))
        for name, rows in tables.items()
    }


TABLES: dict[str, tuple[Row, ...]] = _load()


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
