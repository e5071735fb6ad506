"""``rewriter.lowerings.loop``: the sequential running product carried through an ONNX Loop,
on every type with exclusive and reverse, symbolic dims and an axis fed at run time, against
onnx.reference (integers bit-exact) and onnxruntime's native CumProd (float32 / float64 bit
for bit); and the targets without Loop refuse it."""

from __future__ import annotations

import numpy as np
import pytest

import rewriter
from rewriter.targets import TARGETS
from tests.helpers import (
    ALL_TYPES,
    F32,
    I32,
    TYPE_NAMES,
    check_every_type,
    cumprod_model,
    lower,
    native,
    run_ort,
)


@pytest.mark.parametrize("elem", ALL_TYPES, ids=TYPE_NAMES.get)
def test_every_type_exclusive_and_reverse(elem: int) -> None:
    check_every_type(elem, "loop", [((4, 11, 3), 1)], native_bits=True)


def test_symbolic_dims_and_an_axis_fed_at_run_time() -> None:
    """One graph for every rank-2 shape and axis: bit for bit as the native kernel."""
    model = cumprod_model(I32, ("A", "B"), 0, exclusive=1, reverse=1, axis_form="input")
    lowered, used = lower(model, "loop")
    assert used == ["loop"]
    x = np.arange(-7, 8, dtype=np.int32).reshape(3, 5) | 1
    for axis in (0, 1, -1, -2):
        feeds = {"x": x, "axis": np.array(axis, np.int64)}
        np.testing.assert_array_equal(run_ort(lowered, feeds)[0], native(model, feeds)[0])


@pytest.mark.parametrize("target", [t for t in TARGETS if "Loop" in TARGETS[t].missing_ops])
def test_a_target_without_loop_refuses_it(target: str) -> None:
    with pytest.raises(rewriter.StrategyError, match=f"'loop' needs Loop, which {target} lacks"):
        lower(cumprod_model(F32, (2, 5), 1), "loop", target=target)
