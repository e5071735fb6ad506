"""Rewritten models run on a runtime without CumProd: onnxruntime 1.20.1 (max opset 21,
IR 10; no Mul/Less/Where/CumSum for uint32/uint64, next to nothing for bfloat16), in the
second environment scripts/test.sh creates (.venv-ort120), and in onnx.reference.

One cell per distinct graph: each lowering x axis form x target opset 21, 18 and 11 (types
and attributes rotating, so each meets every lowering), the branch-length cells of
test_branches at opset 21, nested If / Loop / function models, the onnx conformance cases
and empty tensors. Models are built in the module's fixtures (nothing at import time), and
the results compared here against the contract (tests/bounds.py); tests/legacy_runner.py
only runs them there. All slow tier (conftest.py): a missing environment fails on CI."""

from __future__ import annotations

import zlib
from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from onnx import TensorProto
from onnx.reference import ReferenceEvaluator

import rewriter
from tests.helpers import (
    ALL_TYPES,
    TYPE_NAMES,
    LegacyBatch,
    check_result,
    conformance_cases,
    cumprod_model,
    feed,
    lower_or_refused,
    ort_strategies,
    random_data,
    run_ort,
    strategies_for,
)
from tests.test_nesting import FUNCTION_MODEL, IF_MODEL, LOOP_MODEL, NESTED_MODEL

OPSETS = [21, 18, 11]
SHAPE = (3, 4, 5)
AXIS_FORMS = {"initializer": 1, "constant": -1, "input": -2}  # form -> axis used with it


ATTRS = [(0, 0), (1, 1), (1, 0), (0, 1)]


def _grid() -> list[tuple]:
    """Each lowering x axis form x opset once, types and attributes rotating. ``auto`` and,
    on a static length, ``dynamic`` emit another strategy's graph (test_branches): they run
    only with the run-time axis, where ``auto`` is ``dynamic``, so only ``dynamic`` runs."""
    cells, k = [], 0
    for strategy in ort_strategies():
        if strategy == "auto":
            continue
        types = [t for t in ALL_TYPES if strategy in strategies_for(t)]
        for form in AXIS_FORMS:
            if strategy == "dynamic" and form != "input":
                continue
            for opset in OPSETS:
                elem_type = types[k % len(types)]
                if elem_type == TensorProto.BFLOAT16 and opset < 13:
                    elem_type = types[(k + 1) % len(types)]  # no bfloat16 before opset 13
                exclusive, reverse = ATTRS[k % len(ATTRS)]
                cells.append((elem_type, exclusive, reverse, form, strategy, opset))
                k += 1
    return cells


GRID = _grid()


def _case_id(case: tuple) -> str:
    elem_type, ex, rev, form, strategy, opset = case
    return f"{TYPE_NAMES[elem_type]}-ex{ex}-rev{rev}-{form}-{strategy}-opset{opset}"


def _lower(model: onnx.ModelProto, strategy: str, opset: int) -> tuple[onnx.ModelProto, list[str]]:
    bound = 64 if strategy == "doubling" else None  # as tests.helpers.lower_or_refused
    rewrite = rewriter.DecomposeCumProdPass(strategy, target_opset=opset, max_length=bound)
    ir_model = ir.serde.deserialize_model(model)
    rewrite(ir_model)
    proto = ir.serde.serialize_model(ir_model)
    assert [o.version for o in proto.opset_import if o.domain == ""] == [opset]
    assert (
        proto.ir_version
        == onnx.helper.find_min_ir_version_for([onnx.helper.make_opsetid("", opset)])
        or proto.functions
    )
    onnx.checker.check_model(proto, full_check=True)
    return proto, [plan.lowering.name for plan in rewrite.plans]


def _grid_case(case: tuple) -> tuple[onnx.ModelProto, dict[str, np.ndarray], object]:
    elem_type, ex, rev, form, strategy, opset = case
    axis = AXIS_FORMS[form]
    model = cumprod_model(elem_type, SHAPE, axis, exclusive=ex, reverse=rev, axis_form=form)
    lowered, used = _lower(model, strategy, opset)
    seed = zlib.crc32(_case_id(case).encode())
    x = random_data(elem_type, SHAPE, np.random.default_rng(seed))
    feeds = {"x": feed(elem_type, x)}
    if form == "input":
        feeds["axis"] = np.array(axis, np.int64)

    def check(outputs: list[np.ndarray]) -> None:
        y = outputs[0]
        if elem_type == TensorProto.BFLOAT16:
            y = y.astype(x.dtype)
        problem = check_result(elem_type, used[0], y, x, axis, exclusive=ex, reverse=rev)
        assert problem is None, f"{_case_id(case)}: {problem}"

    return lowered, feeds, check


@pytest.fixture(scope="module")
def grid_run(tmp_path_factory: pytest.TempPathFactory) -> LegacyBatch:
    batch = LegacyBatch(tmp_path_factory.mktemp("legacy_grid"))
    for case in GRID:
        model, feeds, check = _grid_case(case)
        batch.add(_case_id(case), model, feeds, check)
    batch.run()
    return batch


@pytest.mark.parametrize("case", GRID, ids=_case_id)
def test_grid_on_onnxruntime_1_20(grid_run: LegacyBatch, case: tuple) -> None:
    name = _case_id(case)
    grid_run.cases[name](grid_run.outputs(name))  # type: ignore[operator]


@pytest.mark.parametrize("case", GRID, ids=_case_id)
def test_grid_on_current_onnxruntime(case: tuple) -> None:
    """The same models at opsets 21, 18, 11 on the onnxruntime of the main environment."""
    model, feeds, check = _grid_case(case)
    check(run_ort(model, feeds))  # type: ignore[operator]


REFERENCE_GRID = [c for c in GRID if c[5] in (21, 11) and c[3] != "constant"]


def _reversed_scan(model: onnx.ModelProto) -> bool:
    """Whether the model has a Scan running backwards (anywhere)."""
    found = []

    def walk(nodes: list[onnx.NodeProto]) -> None:
        for node in nodes:
            for attr in node.attribute:
                if attr.name == "scan_input_directions" and 1 in attr.ints:
                    found.append(node)
                if attr.type == onnx.AttributeProto.GRAPH:
                    walk(list(attr.g.node))

    walk(list(model.graph.node))
    for function in model.functions:
        walk(list(function.node))
    return bool(found)


@pytest.mark.parametrize("case", REFERENCE_GRID, ids=_case_id)
def test_grid_in_onnx_reference(case: tuple) -> None:
    model, feeds, check = _grid_case(case)
    _check_in_reference(model, feeds, check)


def _check_in_reference(
    model: onnx.ModelProto, feeds: dict[str, np.ndarray], check: object
) -> None:
    if _reversed_scan(model):
        # onnx.reference's Scan only runs forwards: a known gap of the reference, not ours.
        with pytest.raises(RuntimeError, match="not implemented for other output input_direction"):
            ReferenceEvaluator(model).run(None, feeds)
        return
    check(ReferenceEvaluator(model).run(None, feeds))  # type: ignore[operator]


def test_bfloat16_below_opset_13_is_one_clear_error() -> None:
    model = cumprod_model(TensorProto.BFLOAT16, SHAPE, 1)
    with pytest.raises(
        rewriter.OpsetError, match=r"Cast-9 does not allow x_bf16: tensor\(bfloat16\)"
    ):
        rewriter.decompose_cumprod(model, target_opset=11)


# -- branch lengths, nested models, the conformance cases, empty tensors ----------------------

NESTED = {"if": IF_MODEL, "loop": LOOP_MODEL, "function": FUNCTION_MODEL, "nested": NESTED_MODEL}
NESTED_FEEDS = {
    "if": lambda rng: {"x": rng.uniform(0.5, 2, (2, 5)).astype(np.float32), "cond": np.array(True)},
    "loop": lambda rng: {
        "x": rng.integers(-50, 50, (3, 4)).astype(np.int64),
        "trips": np.array(3, np.int64),
    },
    "function": lambda rng: {
        "a": rng.uniform(-2, 2, (2, 3)).astype(np.float32),
        "b": rng.uniform(-2, 2, (4, 2)).astype(np.float32),
        "n": rng.integers(-9, 9, 5).astype(np.int64),
    },
    "nested": lambda rng: {
        "x": rng.uniform(0.5, 1.5, (3, 6)),
        "cond": np.array(True),
        "ax": np.array(-1, np.int64),
    },
}
# Two lowerings per nested model (traversal is the point; the lowerings run in the grid).
NESTED_STRATEGIES = {
    "if": ("auto", "logsum"),
    "loop": ("auto", "radix"),
    "function": ("scan", "doubling"),
    "nested": ("auto", "loop"),
}


def _close(expected: list[np.ndarray], name: str) -> object:
    """Integers equal; floats within 8 ulps of onnx.reference's sequential product (every
    scan here has <= 6 factors: the contract's k - 1 <= 5 ulps plus the reference's own)."""

    def check(outputs: list[np.ndarray]) -> None:
        assert len(outputs) == len(expected)
        for got, want in zip(outputs, expected):
            if np.issubdtype(want.dtype, np.integer):
                np.testing.assert_array_equal(got, want, err_msg=name)
            else:
                eps = np.finfo(want.dtype).eps
                np.testing.assert_allclose(got, want, rtol=8 * eps, err_msg=name)

    return check


def _branch_cases() -> list[tuple[str, onnx.ModelProto, dict[str, np.ndarray], object]]:
    """test_branches' static-length cells, lowered at opset 21."""
    from tests.lowerings.test_branches import STATIC, _static_id

    cases = []
    for cell in STATIC:
        strategy, elem_type, shape, axis, ex, rev, _ = cell
        if strategy == "logsum32":  # test_branches' name for logsum on a target without float64
            continue
        model = cumprod_model(elem_type, shape, axis, exclusive=ex, reverse=rev)
        lowered, used = _lower(model, strategy, 21)
        x = random_data(
            elem_type, shape, np.random.default_rng(zlib.crc32(_static_id(cell).encode()))
        )

        def check(outputs: list[np.ndarray], x=x, cell=cell, used=used) -> None:
            _, elem_type, _, axis, ex, rev, _ = cell
            y = outputs[0].astype(x.dtype) if elem_type == TensorProto.BFLOAT16 else outputs[0]
            problem = check_result(elem_type, used[0], y, x, axis, exclusive=ex, reverse=rev)
            assert problem is None, f"{_static_id(cell)}: {problem}"

        cases.append((f"branch-{_static_id(cell)}", lowered, {"x": feed(elem_type, x)}, check))
    return cases


def _extra_cases() -> list[tuple[str, onnx.ModelProto, dict[str, np.ndarray], object]]:
    cases = _branch_cases()
    rng = np.random.default_rng(7)
    conformance = conformance_cases()
    lowerings = [s for s in ort_strategies() if s not in ("auto", "dynamic")]
    for k, opset in enumerate(OPSETS):
        for name, text in NESTED.items():
            model = onnx.parser.parse_model(text)
            feeds = NESTED_FEEDS[name](rng)
            expected = ReferenceEvaluator(model).run(None, feeds)
            for strategy in NESTED_STRATEGIES[name]:
                if lower_or_refused(model, strategy) is None:
                    continue  # a documented refusal (asserted): logsum on ints, chain on N
                lowered, _ = _lower(model, strategy, opset)
                label = f"{name}-{strategy}-opset{opset}"
                cases.append((label, lowered, feeds, _close(expected, label)))
        for j, case in enumerate(conformance):
            strategy = lowerings[(j + 3 * k) % len(lowerings)]  # rotating
            if lower_or_refused(case.model, strategy) is None:
                strategy = "loop"
            lowered, _ = _lower(case.model, strategy, opset)
            for d, (inputs, outputs) in enumerate(case.data_sets):
                feeds = {i.name: v for i, v in zip(case.model.graph.input, inputs)}
                label = f"{case.name}-{d}-{strategy}-opset{opset}"
                cases.append((label, lowered, feeds, _close(list(outputs), label)))
        for j, elem_type in enumerate((TensorProto.FLOAT, TensorProto.INT64, TensorProto.UINT32)):
            for strategy in strategies_for(elem_type):
                if strategy == "auto" or (j + k + len(strategy)) % 2:
                    continue  # half of them per opset, rotating
                model = cumprod_model(elem_type, ["N", "M"], 0, exclusive=1, reverse=1)
                if lower_or_refused(model, strategy) is None:
                    continue  # chain: the length is not static (asserted)
                lowered, _ = _lower(model, strategy, opset)
                for shape in ((0, 0), (0, 3), (2, 0)):
                    x = np.ones(
                        shape, dtype=np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem_type))
                    )
                    size = f"{shape[0]}x{shape[1]}"
                    label = f"empty-{TYPE_NAMES[elem_type]}-{size}-{strategy}-opset{opset}"
                    cases.append((label, lowered, {"x": x}, _close([x], label)))
    return cases


@pytest.fixture(scope="module")
def extra_cases() -> dict[str, tuple]:
    return {c[0]: c for c in _extra_cases()}


@pytest.fixture(scope="module")
def extra_run(
    extra_cases: dict[str, tuple], tmp_path_factory: pytest.TempPathFactory
) -> LegacyBatch:
    batch = LegacyBatch(tmp_path_factory.mktemp("legacy_extra"))
    for name, model, feeds, check in extra_cases.values():
        batch.add(name, model, feeds, check)
    batch.run()
    return batch


def test_extra_cases_on_onnxruntime_1_20(extra_run: LegacyBatch) -> None:
    """Branch lengths, nested models, conformance and empty tensors: every case's failure
    is listed (one test: the cases are built in the fixture, not at import time)."""
    failures = []
    for name, check in extra_run.cases.items():
        try:
            check(extra_run.outputs(name))  # type: ignore[operator]
        except (AssertionError, pytest.fail.Exception) as error:
            failures.append(f"{name}: {str(error).strip().splitlines()[0]}")
    assert not failures, f"{len(failures)} case(s) failed:\n" + "\n".join(failures)


def test_extra_cases_in_onnx_reference(extra_cases: dict[str, tuple]) -> None:
    """The same cases in onnx.reference (its Loop cannot run zero iterations with scan
    outputs, np.vstack of nothing: the empty cases run on onnxruntime only; the long branch
    cells are left to onnxruntime for time)."""
    failures = []
    for name, (_, model, feeds, check) in extra_cases.items():
        if name.startswith(("empty-", "branch-")):
            continue
        try:
            _check_in_reference(model, feeds, check)
        except AssertionError as error:
            failures.append(f"{name}: {str(error).strip().splitlines()[0]}")
    assert not failures, f"{len(failures)} case(s) failed:\n" + "\n".join(failures)


def test_logsum_zeros_on_onnxruntime_1_20(tmp_path: Path) -> None:
    """onnxruntime 1.20.1's vectorised float64 Exp(-inf) is 5.6e-309, not 0: logsum masks
    zeros explicitly, so a zero factor gives exactly 0 (with numpy's sign) there too."""
    model = cumprod_model(TensorProto.DOUBLE, (2, 16), 1, exclusive=0, reverse=1)
    lowered, _ = _lower(model, "logsum", 21)
    x = np.tile(np.array([2.0, -3.0, 0.0, 5.0, -0.0, 1.5, 0.5, 2.0]), (2, 2))
    batch = LegacyBatch(tmp_path)
    batch.add("logsum_zeros", lowered, {"x": x})
    batch.run()
    (y,) = batch.outputs("logsum_zeros")
    expected = np.flip(np.cumprod(np.flip(x, 1), axis=1), 1)
    zeros = expected == 0
    assert zeros.any()
    np.testing.assert_array_equal(y[zeros], expected[zeros])
    np.testing.assert_array_equal(np.signbit(y[zeros]), np.signbit(expected[zeros]))
    np.testing.assert_allclose(y[~zeros], expected[~zeros], rtol=2.0**-48)
