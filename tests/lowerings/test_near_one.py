"""``rewriter.lowerings.near_one``: the float32 block totals in offset form (1 + E) that
stay accurate on factors near 1 where the target computes no float64: taken only where every
factor of a block is within 1 / (8r) of 1, and where the offsets lose their precision or meet
0, -0.0, inf or NaN the plain float32 totals stand. References: onnx.reference (the
contract's bound, tests/bounds.py). Their accuracy against the native kernel near 1:
tests/lowerings/test_tree_accuracy.py."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, numpy_helper

import rewriter
from tests.helpers import check_result, cumprod_model, reference, run_ort


def _near_one_with_swings(rows: int, n: int) -> np.ndarray:
    """float32 factors near 1 with, in every row, special values and pairs whose offsets
    from 1 lose everything (2^-70 then 3 * 2^70: the offset sum is 0, the product 3)."""
    rng = np.random.default_rng(7)
    x = 1 + rng.normal(0, 1e-4, (rows, n))
    for row in range(rows):
        at = rng.choice(n - 1, size=6, replace=False)
        x[row, at[0]], x[row, at[0] + 1] = 2.0**-70, 3 * 2.0**70
        x[row, at[1]], x[row, at[1] + 1] = 2.0**70, 2.0**-70 / 3
        x[row, at[2:]] = rng.choice([0.0, -0.0, np.inf, -np.inf, np.nan, -1.0], size=4)
    x[0] = 1 + rng.normal(0, 1e-4, n)  # one row of plain factors near 1
    x[1, 200] = 2.0**-70  # one swing alone: the offsets lose the next factors
    x[1, 201] = 3 * 2.0**70
    return x.astype(np.float32)


@pytest.mark.parametrize(
    ("strategy", "target", "axis"),
    [
        ("carry", "portable", 1),
        ("radix", "portable", 1),
        ("doubling", "portable", 1),
        ("doubling", "onnxruntime", 1),
        ("blocked", "openvino", 1),
        ("doubling", "tflite", 1),  # the 2-D view, a factor one column
        ("doubling", "tflite", 0),  # the 2-D view, a factor 6 columns
        ("doubling", "portable", "run-time 1"),  # plain: the offset windows
        ("doubling", "tflite", "run-time 0"),
    ],
)
@pytest.mark.parametrize("attrs", [(0, 0), (1, 1)], ids=["inclusive", "exclusive-reverse"])
def test_offset_totals_keep_special_values_and_swings(
    strategy: str, target: str, axis: int | str, attrs: tuple[int, int]
) -> None:
    """Where the offset totals lose their precision (a partial product near 0 or out of
    range) or meet 0, -0.0, inf or NaN, the plain float32 totals stand: every element within
    the contract's bound of onnx.reference, zeros signed and NaNs where it puts them. "run-time
    k": the axis k's length known only at run time (plain doubling, max_length 2048)."""
    run_time = isinstance(axis, str)
    axis = int(str(axis).split()[-1])
    x = _near_one_with_swings(6, 1500)
    x = x if axis == 1 else np.ascontiguousarray(x.T)
    dims: list[int | str] = list(x.shape)
    if run_time:
        dims[axis] = "N"
    model = cumprod_model(TensorProto.FLOAT, dims, axis, exclusive=attrs[0], reverse=attrs[1])
    lowered = rewriter.decompose_cumprod(
        model, strategy=strategy, target=target, max_length=2048 if run_time else None
    )
    got = run_ort(lowered, {"x": x})[0]
    problem = check_result(
        TensorProto.FLOAT, strategy, got, x, axis, exclusive=attrs[0], reverse=attrs[1]
    )
    assert problem is None, problem
    expected = reference(x, axis, *attrs)
    zeros = expected == 0
    assert np.array_equal(np.signbit(got[zeros]), np.signbit(expected[zeros]))


def _offset_limits(model: onnx.ModelProto) -> set[float]:
    """The constants the offset totals' check compares the factors' distance from 1 with
    (``Less(distance, limit)``), in every graph of ``model``."""
    constants: dict[str, np.ndarray] = {}
    limits: set[float] = set()

    def walk(graph: onnx.GraphProto) -> None:
        constants.update({t.name: numpy_helper.to_array(t) for t in graph.initializer})
        for node in graph.node:
            if node.op_type == "Constant":
                constants[node.output[0]] = numpy_helper.to_array(node.attribute[0].t)
        for node in graph.node:
            for attribute in node.attribute:
                if attribute.type == onnx.AttributeProto.GRAPH:
                    walk(attribute.g)
            if node.op_type == "Less" and node.input[1] in constants:
                limits.add(float(constants[node.input[1]]))

    walk(model.graph)
    return limits


@pytest.mark.parametrize(
    ("strategy", "dims", "axis", "r"),
    [
        ("doubling", (4, 4096), 1, 32),  # blocks of 32 positions
        ("carry", (4, 4096), 1, 4),  # the last axis: r = 4
        ("carry", (4096, 4), 0, 16),  # other axes: r = 16
    ],
)
def test_the_offset_totals_take_factors_within_one_eighth_r_of_1(
    strategy: str, dims: tuple[int, int], axis: int, r: int
) -> None:
    """near_one's accuracy bound holds where every factor of a block of r is within 1 / (8r)
    of 1 (the partial products then stay within [0.88, 1.14]); the check compares with
    exactly that, on a target that computes float64 in float32 (OpenVINO)."""
    model = cumprod_model(TensorProto.FLOAT, list(dims), axis)
    lowered = rewriter.decompose_cumprod(model, strategy=strategy, target="openvino")
    assert isinstance(lowered, onnx.ModelProto)
    assert _offset_limits(lowered) == {float(np.float32(1 / (8 * r)))}
