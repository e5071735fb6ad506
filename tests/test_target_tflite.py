"""The two TFLite (onnx2tf) quirk flags, checked without TFLite: the graph shapes they promise
and the values on onnxruntime. The real conversion runs in tests/test_runtimes_iree_tflite.py.

- ``constant_ones`` false: the exclusive scan's ones are ``Cast(Equal(c, c))`` with
  ``c = Less(s, s)`` of a slice, never an Expand of a constant (onnx2tf folds that over static
  shapes into a graph constant and then fails: "Output tensors of a Functional model must be
  the output of a TensorFlow Layer"). 1 whatever c is, NaN and infinities included.
- ``symbolic_rank3`` false: with a symbolic dim, ``doubling`` and ``chain`` (opset 18+) run on
  the 2-D view (outer, n * inner), and no rank-3 tensor is made (onnx2tf re-lays out rank 3-5
  tensors channel-last and then pads / slices / splits the wrong axis when dims are symbolic).
"""

from __future__ import annotations

import zlib

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from onnx.reference import ReferenceEvaluator
from onnx.reference.op_run import OpRun

import rewriter
from rewriter.targets import TARGETS
from tests.helpers import (
    F16,
    F32,
    F64,
    I32,
    I64,
    TYPE_NAMES,
    U32,
    U64,
    check_result,
    cumprod_model,
    feed,
    op_types,
    random_data,
    reference,
    run_ort,
    sprinkle_specials,
)

TYPES = (F16, F32, F64, I32, I64, U32, U64)  # onnx2tf has no bfloat16


def lower(model: onnx.ModelProto, target: str, **options: object) -> tuple[onnx.ModelProto, str]:
    rewrite = rewriter.DecomposeCumProdPass(target=target, **options)  # type: ignore[arg-type]
    ir_model = ir.serde.deserialize_model(model)
    rewrite(ir_model)
    (plan,) = rewrite.plans
    return ir.serde.serialize_model(ir_model), plan.lowering.name


def _constants(model: onnx.ModelProto) -> set[str]:
    names = {init.name for init in model.graph.initializer}
    return names | {n.output[0] for n in model.graph.node if n.op_type == "Constant"}


def _intermediate_ranks(model: onnx.ModelProto) -> dict[str, int]:
    """Rank of every value shape inference finds, graph inputs and outputs left out."""
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    ends = {v.name for v in (*model.graph.input, *model.graph.output)}
    return {
        v.name: len(v.type.tensor_type.shape.dim)
        for v in inferred.graph.value_info
        if v.name not in ends and v.type.tensor_type.HasField("shape")
    }


def _run_checked(
    model: onnx.ModelProto,
    elem: int,
    lowering: str,
    shape: tuple[int, ...],
    axis: int,
    *,
    ex: int,
    rev: int,
) -> None:
    rng = np.random.default_rng(zlib.crc32(repr((elem, shape, axis, ex, rev)).encode()))
    x = sprinkle_specials(elem, random_data(elem, shape, rng), rng, 0.15)
    (y,) = run_ort(model, {"x": feed(elem, x)})
    problem = check_result(elem, lowering, y, x, axis, exclusive=ex, reverse=rev)
    assert problem is None, f"{TYPE_NAMES[elem]} {shape} axis {axis} ex{ex} rev{rev}: {problem}"


# (dims, axis, feeds' shapes, the lowering auto picks on tflite)
CASES = [
    ((5,), 0, [(5,)], "chain"),
    ((3, 40), 1, [(3, 40)], "doubling"),  # n > 16 (radix is wrong on TFLite: refused)
    (("N",), 0, [(5,), (1,), (0,), (8,)], "doubling"),
    (("A", "N"), 0, [(3, 4), (0, 4), (3, 0)], "doubling"),
    (("A", "B", "N"), 1, [(2, 7, 4), (2, 1, 3)], "doubling"),
    (("A", "B", "C", "D"), 2, [(2, 3, 4, 5)], "doubling"),
    (("B", 5), 1, [(6, 5), (0, 5)], "doubling"),  # a symbolic batch, a static length
    ((2, "T", 4), 0, [(2, 6, 4)], "doubling"),
    (("B", 6, 4), 1, [(3, 6, 4)], "doubling"),
]


@pytest.mark.parametrize("elem", TYPES, ids=lambda t: TYPE_NAMES[t])
@pytest.mark.parametrize(("dims", "axis", "shapes", "picked"), CASES, ids=str)
def test_tflite_output_is_exact_with_special_values(
    elem: int, dims: tuple, axis: int, shapes: list, picked: str
) -> None:
    """Every attribute combination, on onnxruntime, with 0, -0, +-inf, NaN (integers: the
    extremes) sprinkled in: the data-dependent ones and the 2-D view change no value."""
    for ex in (0, 1):
        for rev in (0, 1):
            model = cumprod_model(elem, dims, axis, exclusive=ex, reverse=rev)
            lowered, used = lower(model, "tflite", max_length=8)
            assert used == picked
            for shape in shapes:
                _run_checked(lowered, elem, used, shape, axis, ex=ex, rev=rev)


def test_a_length_above_the_bound_fails_on_the_2d_view_too() -> None:
    model = cumprod_model(F32, ("A", "N", "C"), 1, exclusive=1)
    lowered, used = lower(model, "tflite", max_length=8)
    assert used == "doubling"
    _run_checked(lowered, F32, used, (2, 8, 3), 1, ex=1, rev=0)
    with pytest.raises(Exception, match=r"(?i)reshape"):
        run_ort(lowered, {"x": np.ones((2, 9, 3), np.float32)})


@pytest.mark.parametrize("dims", [(5,), (3, 12), (2, 3, 4)], ids=str)
def test_tflite_ones_are_data_dependent_elsewhere_an_expand(dims: tuple) -> None:
    """Static dims, exclusive: no Expand of a constant on tflite (onnx2tf would fold it);
    the other targets keep their Expand (graphs unchanged there)."""
    model = cumprod_model(F32, dims, len(dims) - 1, exclusive=1, reverse=1)
    lowered, used = lower(model, "tflite")
    constants = _constants(lowered)
    assert not [n for n in lowered.graph.node if n.op_type == "Expand" and n.input[0] in constants]
    assert "Less" in op_types(lowered)
    for target in TARGETS:
        if TARGETS[target].constant_ones:
            other, _ = lower(model, target, strategy=used)
            assert "Expand" in op_types(other) and "Less" not in op_types(other), target


class Less(OpRun):  # onnx.reference takes a new op by its class name
    """``Less`` as TFLite's float64 kernel gave it: true for some ``Less(v, v)`` where v is
    not finite (there ``Not(Less(x, x))`` made zeros of the exclusive ones)."""

    op_domain = ""

    def _run(self, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray]:
        special = ~np.isfinite(a) if a.dtype.kind == "f" else np.zeros(a.shape, bool)
        return (np.less(a, b) | special,)


@pytest.mark.parametrize("elem", [F32, F64], ids=lambda t: TYPE_NAMES[t])
@pytest.mark.parametrize(("dims", "axis"), [((5,), 0), ((2, 5), 1), ((2, 4, 3), 1)], ids=str)
def test_tflite_exclusive_ones_do_not_depend_on_what_less_says(
    elem: int, dims: tuple, axis: int
) -> None:
    """The data-dependent ones are 1 whatever ``Less(x, x)`` gives: run in onnx.reference with
    a Less true where x is NaN or infinite (TFLite's float64 one was), x starting and ending
    with such values, the result is still the exclusive product numpy gives."""
    dtype = np.float32 if elem == F32 else np.float64
    x = np.linspace(0.5, 1.5, int(np.prod(dims)), dtype=dtype).reshape(dims)
    x = np.moveaxis(x, axis, 0)  # a view: the scanned axis first
    x[0], x[-1] = np.nan, -np.inf
    x[1] = np.inf
    x = np.ascontiguousarray(np.moveaxis(x, 0, axis))
    for rev in (0, 1):
        lowered, _ = lower(cumprod_model(elem, dims, axis, exclusive=1, reverse=rev), "tflite")
        assert "Less" in op_types(lowered)
        quirky = ReferenceEvaluator(lowered, new_ops=[Less])
        assert any(isinstance(node, Less) for node in quirky.rt_nodes_)
        np.testing.assert_array_equal(
            quirky.run(None, {"x": x})[0], reference(x, axis, 1, rev), err_msg=f"rev{rev}"
        )


@pytest.mark.parametrize(
    ("dims", "axis"),
    [(("N",), 0), (("A", "N"), 0), (("A", "B", "N"), 1), (("A", "B", "C", "D"), 2), (("B", 5), 1)],
    ids=str,
)
@pytest.mark.parametrize(("ex", "rev"), [(0, 0), (1, 1)])
@pytest.mark.parametrize("elem", [I64, F16], ids=lambda t: TYPE_NAMES[t])
def test_tflite_symbolic_dims_make_no_rank_3_tensor(
    elem: int, dims: tuple, axis: int, ex: int, rev: int
) -> None:
    """float16 too: its compute Cast to float32 comes after the 2-D Reshape (onnx2tf gets a
    rank-3 / rank-4 float16 input cast to float32 with symbolic dims wrong)."""
    model = cumprod_model(elem, dims, axis, exclusive=ex, reverse=rev)
    lowered, _ = lower(model, "tflite", max_length=8)
    ranks = _intermediate_ranks(lowered)
    outputs = {v.name for v in lowered.graph.output}
    wide = {name for name, rank in ranks.items() if rank > 2}  # the result before its cast back
    takers = [n for n in lowered.graph.node if wide & set(n.input)]
    assert all(n.op_type == "Cast" and n.output[0] in outputs for n in takers), ranks
    # the other targets keep the 3-D view
    if len(dims) != 2 or axis != 1:
        other, _ = lower(model, "iree", max_length=8)
        assert 3 in _intermediate_ranks(other).values()


def test_a_3d_view_with_symbolic_dims_is_refused_and_auto_takes_the_2d_one() -> None:
    """Split before opset 18 takes sizes, so chain takes the 2-D view there only where the
    dims after the axis are static (sizes [inner] * n); else it would keep the 3-D view,
    which onnx2tf re-lays out wrongly with a symbolic dim: refused; auto takes doubling (2-D
    view)."""
    model = cumprod_model(I32, ("B", 5, "C"), 1, exclusive=1)
    with pytest.raises(rewriter.StrategyError, match="2-D view"):
        lower(model, "tflite", target_opset=17, strategy="chain")
    for strategy in ("scan", "logsum"):
        with pytest.raises(rewriter.StrategyError):
            lower(model, "tflite", strategy=strategy, max_length=8)
    lowered, used = lower(model, "tflite", target_opset=17)
    assert used == "doubling"
    assert 3 not in _intermediate_ranks(lowered).values()
    _run_checked(lowered, I32, used, (4, 5, 3), 1, ex=1, rev=0)
    for dims in (("B", 5, 3), (4, 5, 3)):  # inner static: the 2-D view at opset 17 too
        lowered, used = lower(
            cumprod_model(I32, dims, 1, exclusive=1), "tflite", target_opset=17, strategy="chain"
        )
        assert 3 not in _intermediate_ranks(lowered).values()
        _run_checked(lowered, I32, used, (4, 5, 3), 1, ex=1, rev=0)


@pytest.mark.parametrize(
    ("dims", "axis", "opset"),
    [((4, 4), 0, None), ((4, 4, 1), 0, 13), ((4, 2, 2), 0, 11), ((20, 4, 5), 0, None)],
    ids=str,
)
def test_tflite_static_dims_make_no_rank_3_tensor(dims: tuple, axis: int, opset: int) -> None:
    """Found by a review from outside: onnx2tf swapped the last two dims of a static 3-D view
    whose n equals inner (the first axis of (4, 4), (4, 4, 1), (4, 2, 2), (20, 4, 5): views
    (1, 4, 4) and (1, 20, 20)) and gave the CumProd of x transposed, silently. Static dims take
    the 2-D view too (tests/test_runtimes_iree_tflite.py runs these on TFLite)."""
    model = cumprod_model(I32, dims, axis)
    lowered, used = lower(model, "tflite", target_opset=opset)
    assert used in ("chain", "doubling")
    assert 3 not in _intermediate_ranks(lowered).values()
    _run_checked(lowered, I32, used, dims, axis, ex=0, rev=0)


def test_run_time_axis_over_symbolic_dims_in_float16() -> None:
    """The Gather-select over the axes shares x's compute Cast between the axes' 2-D views:
    it must stay (only a Cast made just before one view moves after its Reshape)."""
    model = cumprod_model(F16, ("A", "B", "C"), 1, exclusive=1, axis_form="input")
    lowered, used = lower(model, "tflite", max_length=8)
    assert used == "doubling"
    rng = np.random.default_rng(5)
    x = sprinkle_specials(F16, random_data(F16, (2, 5, 3), rng), rng, 0.15)
    for axis in range(-3, 3):
        (y,) = run_ort(lowered, {"x": x, "axis": np.array(axis, np.int64)})
        problem = check_result(F16, used, y, x, axis, exclusive=1, reverse=0)
        assert problem is None, f"axis {axis}: {problem}"
