"""``rewriter.lowerings.chain``: the running product unrolled for short static axes, on every
type with exclusive and reverse, against onnx.reference (integers bit-exact, wraparound
included) and onnxruntime's native CumProd (float32 / float64 bit for bit: the same
multiplications in the same order); and what it refuses."""

from __future__ import annotations

import pytest

import rewriter
from tests.helpers import (
    ALL_TYPES,
    F32,
    TYPE_NAMES,
    check_every_type,
    cumprod_model,
    lower,
)


@pytest.mark.parametrize("elem", ALL_TYPES, ids=TYPE_NAMES.get)
def test_every_type_exclusive_and_reverse(elem: int) -> None:
    check_every_type(elem, "chain", [((3, 9, 2), 1)], native_bits=True)


def test_chain_refuses_more_than_its_maximum() -> None:
    model = cumprod_model(F32, (2, 1025), 1)
    with pytest.raises(
        rewriter.StrategyError, match="unrolls at most 1024 steps, the axis has 1025"
    ):
        lower(model, "chain")


def test_a_length_known_only_at_run_time_needs_a_bound() -> None:
    model = cumprod_model(F32, (2, "N"), 1)
    with pytest.raises(
        rewriter.StrategyError, match="'chain' needs the length of the scanned axis to be static"
    ):
        lower(model, "chain")
    with pytest.raises(
        rewriter.StrategyError, match="unrolls at most 1024 steps, the axis has 2000"
    ):
        lower(model, "chain", max_length=2000)
