"""``rewriter.lowerings.doubling``: the log-depth scan with no control flow, on every type with
exclusive and reverse (static lengths and lengths known at run time up to ``max_length``),
its blocked form on the targets that take it from a length on, against onnx.reference
(integers bit-exact, floats within the contract's bound, tests/bounds.py); and what it
refuses. Its float32 accuracy near 1: tests/lowerings/test_near_one.py and
tests/lowerings/test_tree_accuracy.py."""

from __future__ import annotations

import pytest

import rewriter
from tests.helpers import (
    ALL_TYPES,
    BF16,
    F16,
    F32,
    F64,
    I32,
    I64,
    TYPE_NAMES,
    U32,
    check_every_type,
    cumprod_model,
    lower,
    op_types,
    run_checked,
    session,
)


@pytest.mark.parametrize("elem", ALL_TYPES, ids=TYPE_NAMES.get)
def test_every_type_exclusive_and_reverse(elem: int) -> None:
    """n = 37 (not a power of two: the last step's shift is partial), static and known only
    at run time (one graph up to max_length = 64)."""
    check_every_type(elem, "doubling", [((3, 37), 1), ((3, "N"), 1, {"max_length": 64})])


def test_a_length_known_only_at_run_time_needs_a_bound() -> None:
    with pytest.raises(rewriter.StrategyError, match="'doubling' needs a bound on the length"):
        lower(cumprod_model(F32, (2, "N"), 1), "doubling")


# doubling's blocked form (doubling.BLOCKED_FROM: OpenVINO from n = 2000, IREE from 128; B =
# 32): the first length of each target, padded and unpadded blocks, 257 blocks, inner > 1
# (first and middle axes), a symbolic outer dim; run here on onnxruntime (the graphs are the
# targets'), on the runtimes themselves in tests/test_runtime_tables.py
BLOCKED_DOUBLING = [
    ("openvino", F32, (2, 2048), 1, 1, 1),  # m = 64, nothing padded
    ("openvino", I32, (3, 2000), 1, 1, 0),  # m = 63, padded
    ("openvino", F16, (2, 8193), 1, 0, 1),  # m = 257 (the carries take 9 steps)
    ("openvino", F32, ("B", 2100), 1, 0, 0),  # outer known only at run time
    ("iree", I64, (129, 2), 0, 1, 1),  # first axis, inner 2, padded
    ("iree", U32, (2, 128, 3), 1, 0, 0),  # middle axis, m = 4
    ("iree", F64, (2, 1000), 1, 0, 1),
    ("iree", BF16, (2, 300), 1, 1, 1),
]


def _blocked_id(cell: tuple) -> str:
    target, elem, shape, axis, ex, rev = cell
    return f"{target}-{TYPE_NAMES[elem]}-{'x'.join(map(str, shape))}-ax{axis}-ex{ex}rev{rev}"


@pytest.mark.parametrize("cell", BLOCKED_DOUBLING, ids=_blocked_id)
def test_doubling_blocked(cell: tuple) -> None:
    target, elem, dims, axis, ex, rev = cell
    lowered, used = lower(
        cumprod_model(elem, dims, axis, exclusive=ex, reverse=rev), "doubling", target=target
    )
    assert used == ["doubling"]
    shape = tuple(5 if isinstance(d, str) else d for d in dims)
    run_checked(session(lowered), elem, "doubling", shape, axis, ex=ex, rev=rev, key=cell)


def test_doubling_blocks_from_its_length_on_its_targets() -> None:
    """Blocked: log2(32) in-block Muls, ceil(log2 m) for the carries and one to put them in;
    plain: ceil(log2 n). int32 blocks from the target's length (speed), and on no other
    target; float32 beyond 64 on every target, on the 2-D view too (tflite), with the
    accurate totals: 5 Muls more, of the offsets' pairs."""
    muls = {}
    for elem, target, n in (
        (I32, "openvino", 1999),
        (I32, "openvino", 2000),
        (I32, "iree", 127),
        (I32, "iree", 128),
        (I32, "tflite", 4096),
        (I32, "onnxruntime", 4096),
        (F32, "onnxruntime", 64),
        (F32, "onnxruntime", 65),
        (F32, "openvino", 1999),
        (F32, "tflite", 64),
        (F32, "tflite", 4096),
    ):
        lowered, _ = lower(cumprod_model(elem, (2, n), 1), "doubling", target=target)
        muls[(elem, target, n)] = op_types(lowered).count("Mul")
    assert muls == {
        (I32, "openvino", 1999): 11,
        (I32, "openvino", 2000): 5 + 6 + 1,  # m = 63
        (I32, "iree", 127): 7,
        (I32, "iree", 128): 5 + 2 + 1,  # m = 4
        (I32, "tflite", 4096): 12,
        (I32, "onnxruntime", 4096): 12,
        (F32, "onnxruntime", 64): 6,
        (F32, "onnxruntime", 65): 5 + 2 + 1 + 5,  # m = 3
        (F32, "openvino", 1999): 5 + 6 + 1 + 5,  # m = 63
        (F32, "tflite", 64): 6,
        (F32, "tflite", 4096): 5 + 7 + 1 + 5,  # m = 128, on the 2-D view
    }
