"""Model builders, runners and references for the tests (references come from onnx.reference
and numpy, never from the code under test)."""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import io
import logging
import os
import subprocess
import sys
import types
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

import ml_dtypes
import numpy as np
import onnx
import onnx.parser
import onnx_ir as ir
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from rewriter.targets import TARGETS
from tests import bounds

Dim = int | str | None

# The element types CumProd takes, by their short names (the tests' one spelling of them).
F16, BF16, F32, F64 = (
    TensorProto.FLOAT16,
    TensorProto.BFLOAT16,
    TensorProto.FLOAT,
    TensorProto.DOUBLE,
)
I32, I64, U32, U64 = TensorProto.INT32, TensorProto.INT64, TensorProto.UINT32, TensorProto.UINT64
FLOATS = [BF16, F16, F32, F64]
INTS = [I32, I64, U32, U64]
ALL_TYPES = FLOATS + INTS
TYPE_NAMES = {t: TensorProto.DataType.Name(t).lower() for t in ALL_TYPES}


def load_script(path: Path, name: str) -> types.ModuleType:
    """The script at ``path`` imported as module ``name`` (registered in sys.modules, so its
    dataclasses and pickling find it): scripts/ is not a package."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def np_dtype(elem_type: int) -> np.dtype:
    if elem_type == TensorProto.BFLOAT16:
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(helper.tensor_dtype_to_np_dtype(elem_type))


def io_type(elem_type: int) -> int:
    """ORT's Python API cannot feed or fetch bfloat16: such models take and give float32."""
    return TensorProto.FLOAT if elem_type == TensorProto.BFLOAT16 else elem_type


def cumprod_model(
    elem_type: int,
    shape: Sequence[Dim],
    axis: int,
    *,
    exclusive: int = 0,
    reverse: int = 0,
    axis_form: str = "initializer",
    axis_type: int = TensorProto.INT64,
    opset: int = 26,
) -> onnx.ModelProto:
    """y = CumProd(x, axis). ``axis_form``: initializer, constant (a Constant node) or input
    (a graph input fed at run time as ``axis``). bfloat16 models Cast in from and out to float32."""
    nodes = []
    inputs = [helper.make_tensor_value_info("x", io_type(elem_type), list(shape))]
    initializers = []
    axis_tensor = helper.make_tensor("axis", axis_type, [], [axis])
    if axis_form == "initializer":
        initializers.append(axis_tensor)
    elif axis_form == "constant":
        nodes.append(helper.make_node("Constant", [], ["axis"], value=axis_tensor))
    elif axis_form == "input":
        inputs.append(helper.make_tensor_value_info("axis", axis_type, []))
    else:
        raise ValueError(axis_form)
    x, y = "x", "y"
    if elem_type == TensorProto.BFLOAT16:
        nodes.append(helper.make_node("Cast", ["x"], ["x_bf16"], to=elem_type))
        x, y = "x_bf16", "y_bf16"
    attrs = {k: v for k, v in (("exclusive", exclusive), ("reverse", reverse)) if v}
    nodes.append(helper.make_node("CumProd", [x, "axis"], [y], name="cumprod", **attrs))
    if elem_type == TensorProto.BFLOAT16:
        nodes.append(helper.make_node("Cast", [y], ["y"], to=TensorProto.FLOAT))
    graph = helper.make_graph(
        nodes,
        "main",
        inputs,
        [helper.make_tensor_value_info("y", io_type(elem_type), list(shape))],
        initializers,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def run_ort(model: onnx.ModelProto | ir.Model, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    if isinstance(model, ir.Model):
        model = ir.serde.serialize_model(model)
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    return session.run(None, feeds)


def all_nodes(model: onnx.ModelProto) -> list[onnx.NodeProto]:
    """Every node in the model: graph, subgraphs (If branches, Loop / Scan bodies) and
    functions."""
    found: list[onnx.NodeProto] = []

    def walk(nodes: Sequence[onnx.NodeProto]) -> None:
        for node in nodes:
            found.append(node)
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.GRAPH:
                    walk(attr.g.node)
                for g in attr.graphs:
                    walk(g.node)

    walk(model.graph.node)
    for function in model.functions:
        walk(function.node)
    return found


def op_types(model: onnx.ModelProto) -> list[str]:
    """Every op type in the model: graph, subgraphs and functions."""
    return [node.op_type for node in all_nodes(model)]


def reference(x: np.ndarray, axis: int, exclusive: int, reverse: int) -> np.ndarray:
    """onnx.reference's CumProd on ``x`` in x's own dtype (numpy semantics)."""
    dtype = x.dtype
    elem = TensorProto.DOUBLE if dtype == np.longdouble else helper.np_dtype_to_tensor_dtype(dtype)
    node = helper.make_node("CumProd", ["x", "axis"], ["y"], exclusive=exclusive, reverse=reverse)
    graph = helper.make_graph(
        [node],
        "ref",
        [helper.make_tensor_value_info("x", elem, None)],
        [helper.make_tensor_value_info("y", elem, None)],
        [helper.make_tensor("axis", TensorProto.INT64, [], [axis])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26)])
    return ReferenceEvaluator(model).run(None, {"x": x})[0]


def wide_reference(x: np.ndarray, axis: int, exclusive: int, reverse: int) -> np.ndarray:
    """The product in longdouble (float64 inputs) or float64 (narrower floats)."""
    wide = np.longdouble if x.dtype == np.float64 else np.float64
    return reference(x.astype(wide), axis, exclusive, reverse)


def float32_ulps(y: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """The error of float32 ``y`` in float32 ulps of the float64 ``exact``."""
    return np.abs(y.astype(np.float64) - exact) / np.spacing(np.abs(exact).astype(np.float32))


def counts(shape: tuple[int, ...], axis: int, exclusive: int, reverse: int) -> np.ndarray:
    return bounds.factor_counts(shape, axis, bool(exclusive), bool(reverse))


def expected_and_bound(
    elem_type: int, lowering: str, x: np.ndarray, axis: int, *, exclusive: int, reverse: int
) -> tuple[np.ndarray, np.ndarray | float]:
    """The reference a lowered CumProd is compared with, and the bound it is held to:
    integers against onnx.reference, bit-exact; floats against a float64 (longdouble for
    float64) reference, within the contract's bound (tests/bounds.py, never the code's)."""
    if elem_type in INTS:
        return reference(x, axis, exclusive, reverse), 0.0
    bound = bounds.ulp_bound(lowering, x.dtype, counts(x.shape, axis, exclusive, reverse))
    return wide_reference(x, axis, exclusive, reverse), bound


def check_result(
    elem_type: int,
    lowering: str,
    actual: np.ndarray,
    x: np.ndarray,
    axis: int,
    *,
    exclusive: int,
    reverse: int,
) -> str | None:
    """None when ``actual`` (a lowered CumProd of x) meets the contract, else why not."""
    expected, bound = expected_and_bound(
        elem_type, lowering, x, axis, exclusive=exclusive, reverse=reverse
    )
    return bounds.check(actual, expected, np_dtype(elem_type), bound)


def random_data(elem_type: int, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Integers: odd, half full-range (wraps at once), half small (negatives too). Odd so
    that no running product turns to 0: with zeros or even factors every output past a few
    dozen positions of an int64 axis is 0 whatever a lowering did before it, which would hide
    a wrong carry on long axes (zeros and wrapping-to-zero values: ``sprinkle_specials``).
    Floats: sign * 2^U(-s, s) with s = min(1, 4 / sqrt(longest dim)), so that no prefix
    product leaves any type's normal range, even over thousands of factors."""
    dtype = np_dtype(elem_type)
    if elem_type in INTS:
        info = np.iinfo(dtype)
        big = rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)
        small = rng.integers(max(info.min, -7), 8, size=shape).astype(dtype)
        return np.where(rng.random(shape) < 0.5, big, small) | np.ones((), dtype)
    spread = min(1.0, 4.0 / np.sqrt(max(shape, default=1) or 1))
    values = np.exp2(rng.uniform(-spread, spread, size=shape)) * rng.choice([-1.0, 1.0], size=shape)
    return values.astype(dtype)


SPECIAL_FLOATS = (0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0)


def sprinkle_specials(
    elem_type: int, x: np.ndarray, rng: np.random.Generator, rate: float
) -> np.ndarray:
    """``x`` with about ``rate`` of its elements replaced by special values: 0, -0, +-inf,
    NaN, +-1 for floats; 0, -1, the extremes and 2^(bits/2) (which wraps when squared) for
    integers. The float specials multiply exactly in any order."""
    if not x.size or rate <= 0:
        return x
    dtype = np_dtype(elem_type)
    if elem_type in INTS:
        info = np.iinfo(dtype)
        half = 1 << (dtype.itemsize * 4)
        pool = np.array([0, 1, info.max, info.min, half], dtype=dtype)
        if info.min < 0:
            pool = np.append(pool, np.array(-1, dtype=dtype))
    else:
        pool = np.array(SPECIAL_FLOATS).astype(dtype)
    out = x.copy()
    mask = rng.random(x.shape) < rate
    out[mask] = rng.choice(pool, size=int(mask.sum()))
    return out


def feed(elem_type: int, x: np.ndarray) -> np.ndarray:
    """What the test model takes for x (bfloat16 models take float32)."""
    return x.astype(np.float32) if elem_type == TensorProto.BFLOAT16 else x


# Strategies onnxruntime refuses for every node, and whose graphs for other targets are
# wrong there: masked (its integer ReduceProd saturates, its Where loses -0.0; tinygrad
# only, tested in tests/lowerings/test_masked.py). Tests that run every strategy on
# onnxruntime take ort_strategies().
NOT_ON_ORT = frozenset({"masked"})


def ort_strategies() -> list[str]:
    import rewriter

    return [s for s in rewriter.STRATEGIES if s not in NOT_ON_ORT]


def strategies_for(elem_type: int) -> list[str]:
    """Every strategy that applies to the type on onnxruntime (logsum refuses integers)."""
    refused = {"logsum"} if elem_type in INTS else set()
    return [s for s in ort_strategies() if s not in refused]


EXACT_STRATEGIES = strategies_for(TensorProto.INT64)  # the ones that take integers


REFUSALS = (
    "is inexact for",
    "float32 cannot hold float64 inputs",  # logsum on a target without float64
    "needs the length of the scanned axis",
    "unrolls at most",
    "strategy 'masked' multiplies integers with ReduceProd",  # Target.reduce_prod_wraps
    "strategy 'masked' selects x's factors with Where",  # Target.where_keeps_negative_zero
    "strategy 'masked' multiplies",  # float32 in float64: Target.float64
)
# Also the refusals the targets document (rewriter/targets.py): anything else is a failure.
TARGET_REFUSALS = (
    *REFUSALS,
    "a bound on the length",
    "which the openvino target does not use",  # If (two If-guarded Scans went wrong)
    "which tract lacks",
    "which iree lacks",
    "which tflite lacks",
    "which tinygrad lacks",
    "which the tinygrad target does not use",  # If (it runs both branches)
    "which portable lacks",
    "cannot take a shape computed at run time",  # the rank of x not known
    "cannot load a Pad or Reshape sized from a length",  # tract: Target.bounded_lengths
    "failed to compile or run strategy",  # iree: Target.padded_lowerings
    "computes as the inclusive sum minus x",  # iree, logsum exclusive: Target.exclusive_cumsum
    "computes wrong values on tflite",  # radix / carry: Target.wrong_lowerings
    "'logsum' computes wrong values on openvino",  # NaN: Target.wrong_lowerings
    "converter re-lays out rank-3 tensors",  # tflite, symbolic dims, a 3-D view
    "'loop' gives wrong values on openvino",  # below opset 14: Target.loop_exclusive_min_opset
    "'cached' was measured and tested on onnxruntime only",  # its Scan over tiles
    "which mnn lacks",
    "which tvm lacks",
    "which ncnn lacks",
    "cannot compute with symbolic dims",  # tvm, ncnn: Target.shape_arithmetic
    "ncnn computes only",  # Target.element_types
    "cannot take a run-time axis",  # ncnn: Target.axis_input
    "fails to load on ncnn",  # Target.unloadable_lowerings
)


def lower_or_refused(
    model: onnx.ModelProto, strategy: str, **options: object
) -> onnx.ModelProto | None:
    """The model lowered with ``strategy``, or None when the strategy refuses it for one of
    the reasons it documents (logsum: integers; chain: a length that is not static)."""
    import rewriter

    if strategy == "doubling":  # its bound on lengths known only at run time
        options.setdefault("max_length", 64)
    try:
        return rewriter.decompose_cumprod(model, strategy=strategy, **options)  # type: ignore[arg-type,return-value]
    except rewriter.StrategyError as error:
        target = options.get("target")
        if isinstance(target, str) and declared_refusal(target, error):
            return None
        assert any(reason in str(error) for reason in REFUSALS), str(error)
        return None


# -- lowering one model and running it on onnxruntime


def lower(
    model: onnx.ModelProto,
    strategy: str,
    *,
    target: str = "onnxruntime",
    opset: int | None = None,
    max_length: int | None = None,
) -> tuple[onnx.ModelProto, list[str]]:
    """The model lowered by ``DecomposeCumProdPass`` (no CumProd left) and the lowering
    chosen for each CumProd; ``logsum32`` names logsum computed in float32: on a target
    without float64 (portable)."""
    if strategy == "logsum32":
        proto, used = lower(model, "logsum", target="portable", opset=opset, max_length=max_length)
        return proto, ["logsum32" if name == "logsum" else name for name in used]
    import rewriter

    rewrite = rewriter.DecomposeCumProdPass(
        strategy, target_opset=opset, target=target, max_length=max_length
    )
    ir_model = ir.serde.deserialize_model(model)
    rewrite(ir_model)
    proto = ir.serde.serialize_model(ir_model)
    assert "CumProd" not in op_types(proto)
    return proto, [plan.lowering.name for plan in rewrite.plans]


def session(model: onnx.ModelProto) -> Callable[[dict[str, np.ndarray]], list[np.ndarray]]:
    """One onnxruntime session of ``model`` (CPU), as a function of the feeds."""
    options = ort.SessionOptions()
    options.log_severity_level = 3
    sess = ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    return lambda feeds: sess.run(None, feeds)


def rng_for(*key: object) -> np.random.Generator:
    """A generator seeded by ``key`` (the same draws for the same test case in any order)."""
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def run_checked(
    run: Callable[[dict[str, np.ndarray]], list[np.ndarray]],
    elem_type: int,
    lowering: str,
    shape: tuple[int, ...],
    axis: int,
    *,
    ex: int,
    rev: int,
    axis_input: bool = False,
    key: object = None,
) -> None:
    """x drawn by :func:`random_data` (seeded by ``key``), run by ``run``, held to the
    contract (:func:`check_result`)."""
    x = random_data(elem_type, shape, rng_for(key, shape, axis, ex, rev))  # odd integers
    feeds = {"x": feed(elem_type, x)}
    if axis_input:
        feeds["axis"] = np.array(axis, np.int64)
    (y,) = run(feeds)
    problem = check_result(elem_type, lowering, y, x, axis, exclusive=ex, reverse=rev)
    assert problem is None, (
        f"{TYPE_NAMES[elem_type]} {shape} axis {axis} ex{ex} rev{rev}: {problem}"
    )


def run_cli(
    *args: str | os.PathLike[str], cwd: str | os.PathLike[str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``cumprod-rewriter ARGS`` run in this process (``rewriter.cli.main``) as a fresh
    process runs it: the root logger without handlers (so main adds its own, on stderr),
    stdout and stderr captured, the working directory ``cwd``; an argparse exit is its
    exit status."""
    from rewriter.cli import main

    out, err = io.StringIO(), io.StringIO()
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    previous = os.getcwd()
    root.handlers = []
    try:
        if cwd is not None:
            os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                status = main([str(a) for a in args])
            except SystemExit as exited:  # argparse: --help, usage errors
                status = exited.code if isinstance(exited.code, int) else int(bool(exited.code))
    finally:
        os.chdir(previous)
        root.handlers = handlers
        root.setLevel(level)
    return subprocess.CompletedProcess(list(args), status, out.getvalue(), err.getvalue())


_CONFORMANCE: list = []


def conformance_cases() -> list:
    """The onnx package's CumProd node test cases (built on first use, not at import). Only
    the CumProd case module is imported when onnx's layout allows it (``collect_testcases``
    imports every op's generators: ~10 s); otherwise through ``collect_testcases``."""
    if not _CONFORMANCE:
        import importlib
        import warnings

        with warnings.catch_warnings():  # other ops' case generators divide by zero on purpose
            warnings.simplefilter("ignore")
            node = importlib.import_module("onnx.backend.test.case.node")
            cases: list = []
            if hasattr(node, "_TargetOpType") and hasattr(node, "_NodeTestCases"):
                node._TargetOpType = "CumProd"
                importlib.import_module("onnx.backend.test.case.node.cumprod")
                cases = [c for c in node._NodeTestCases if c.model is not None]
            if not cases:
                cases = [c for c in node.collect_testcases("CumProd") if c.model is not None]
        _CONFORMANCE.extend(c for c in cases if c.model.graph.node[0].op_type == "CumProd")
    return _CONFORMANCE


def scan_body_model(
    elem_type: int, dims: Sequence[Dim], axis: int, *, exclusive: int = 0
) -> onnx.ModelProto:
    """y = Scan over x's first axis, whose body is yi = CumProd(xi, axis) (a Constant axis
    in the body; the body's values declare no shape)."""
    attrs = {"exclusive": exclusive} if exclusive else {}
    body = helper.make_graph(
        [
            helper.make_node(
                "Constant", [], ["ax"], value=helper.make_tensor("v", TensorProto.INT64, [], [axis])
            ),
            helper.make_node("CumProd", ["xi", "ax"], ["yi"], name="cp", **attrs),
        ],
        "body",
        [helper.make_tensor_value_info("xi", elem_type, None)],
        [helper.make_tensor_value_info("yi", elem_type, None)],
    )
    graph = helper.make_graph(
        [helper.make_node("Scan", ["x"], ["y"], body=body, num_scan_inputs=1)],
        "scanned",
        [helper.make_tensor_value_info("x", elem_type, list(dims))],
        [helper.make_tensor_value_info("y", elem_type, list(dims))],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26)])


def functions_model(
    float_type: int = TensorProto.FLOAT, int_type: int = TensorProto.INT32
) -> tuple[onnx.ModelProto, list[tuple[str, int, int]]]:
    """A model whose CumProds are all in model-local functions (domain ``local``):

    - F(x): CumProd(x, 1) with exclusive / reverse from F's attributes ``ex`` / ``rev``;
    - G(x): F(x) with ex from G's own attribute ``e`` (by reference through two calls);
    - K(x): Abs(x), no CumProd; Unused(x): a CumProd nothing calls.

    Inputs a (``float_type``) and b (``int_type``), both [3, 5]; outputs y1 = F<ex=1,
    rev=1>(a), y2 = F(b) (F called with two element types), y3 = G<e=1>(b), y4 =
    F<rev=1>(K(a)). Returns the model and, per output, (the input, exclusive, reverse) of the
    CumProd along axis 1 it computes (y4's input is |a|: the caller takes abs)."""
    f, i = (TensorProto.DataType.Name(t).lower() for t in (float_type, int_type))
    model = parse_local(
        f"""main ({f}[3, 5] a, {i}[3, 5] b)
            => ({f}[3, 5] y1, {i}[3, 5] y2, {i}[3, 5] y3, {f}[3, 5] y4) {{
            y1 = local.F<ex = 1, rev = 1>(a)
            y2 = local.F(b)
            y3 = local.G<e = 1>(b)
            abs_a = local.K(a)
            y4 = local.F<rev = 1>(abs_a)
        }}""",
        """F <ex, rev> (x) => (y) {
            axis = Constant<value_int = 1>()
            y = CumProd<exclusive: int = @ex, reverse: int = @rev>(x, axis)
        }""",
        "G <e> (x) => (y) { y = local.F<ex: int = @e>(x) }",
        "K (x) => (y) { y = Abs(x) }",
        cumprod_function_text("Unused", axis=0),
    )
    return model, [("a", 1, 1), ("b", 0, 0), ("b", 1, 0), ("abs_a", 0, 1)]


def cumprod_in_if_model(dims: list[int | str], axis: int) -> onnx.ModelProto:
    """y = If(c, then: CumProd(x, axis), else: x), x float32 of ``dims``."""
    value = {name: helper.make_tensor_value_info(name, TensorProto.FLOAT, dims) for name in "xte"}
    then = helper.make_graph(
        [helper.make_node("CumProd", ["x", "axis"], ["t"], name="scan")],
        "then",
        [],
        [value["t"]],
        [helper.make_tensor("axis", TensorProto.INT64, [], [axis])],
    )
    other = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["e"])], "else", [], [value["e"]]
    )
    graph = helper.make_graph(
        [helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other, name="pick")],
        "in_if",
        [value["x"], helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, dims)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26)])


def swinging(shape: tuple[int, ...], axis: int) -> np.ndarray:
    """float32 factors 2^-70, 1, 1, 1, then (2^70, 2^70, 2^-70, 2^-70) repeated along
    ``axis``: the running product stays within 2^+-70 (far from float32's 2^128), a product
    of two or more factors that does not start at the front reaches 2^+-140."""
    walk = np.resize(np.array([-70, 0, 0, 0] + [70, 70, -70, -70] * 1024), shape[axis])
    steps = np.ldexp(np.float32(1), walk).astype(np.float32)
    view = [1] * len(shape)
    view[axis] = shape[axis]
    return np.ascontiguousarray(np.broadcast_to(steps.reshape(view), shape))


def declared_refusal(target: str, error: Exception) -> bool:
    """Whether ``error`` is a refusal the target declares as data (TVM's symbolic-dim
    arithmetic, ncnn's element types, run-time axis and wrong lowerings), not a failure."""
    import rewriter

    spec, message = rewriter.TARGETS[target], str(error)
    return isinstance(error, rewriter.StrategyError) and (
        (not spec.shape_arithmetic and "cannot compute with symbolic dims" in message)
        or (spec.element_types is not None and f"{target} computes only" in message)
        or (not spec.axis_input and "cannot take a run-time axis" in message)
        or f"computes wrong values on {target}" in message
        or f"fails to load on {target}" in message
    )


def refuses_broadly(target: str) -> bool:
    """Whether the target refuses whole classes of models as data (tvm: symbolic-dim
    arithmetic; ncnn: every type but float32, a run-time axis, every lowering but chain):
    the sweeps over every target that expect a lowering leave these out, and
    tests/test_runtimes_new.py tests their refusals."""
    import rewriter

    spec = rewriter.TARGETS[target]
    return not spec.shape_arithmetic or spec.element_types is not None or not spec.axis_input


# Models as found in the wild (functions, subgraphs, declarations), and the check of their
# rewrite against onnxruntime's native CumProd (>= 1.25) on the original.
OPSET = [helper.make_opsetid("", 26)]


LOCAL = "local"


def native(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """The original model on onnxruntime's own CumProd kernel."""
    assert ort.__version__ >= "1.25", "the main environment must have a native CumProd"
    return run_ort(model, feeds)


VIA = ["pass", "rules"]  # decompose_cumprod, or the onnxscript rule set


def rewrite_via(model: onnx.ModelProto, via: str = "pass", **options: object) -> onnx.ModelProto:
    """The model rewritten by ``decompose_cumprod`` (``via="pass"``) or by the onnxscript rule
    set (``via="rules"``)."""
    import onnxscript.rewriter

    import rewriter
    from rewriter.rules import cumprod_rules

    if via == "rules":
        rules = cumprod_rules(**options)  # type: ignore[arg-type]
        return onnxscript.rewriter.rewrite(model, pattern_rewrite_rules=rules)
    rewritten = rewriter.decompose_cumprod(model, **options)  # type: ignore[arg-type]
    assert isinstance(rewritten, onnx.ModelProto)
    return rewritten


def check_against_native(
    model: onnx.ModelProto, feeds: dict[str, np.ndarray], via: str = "pass", **options: object
) -> onnx.ModelProto:
    """The model and its rewrite pass onnx's full check, and the rewrite gives onnxruntime's
    native CumProd's results bit for bit (integers, exact float products); returns it."""
    onnx.checker.check_model(model, full_check=True)
    rewritten = rewrite_via(model, via, **options)
    onnx.checker.check_model(rewritten, full_check=True)
    assert "CumProd" not in op_types(rewritten)
    expected = native(model, feeds)
    actual = run_ort(rewritten, feeds)
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        assert a.dtype == e.dtype and a.shape == e.shape
        np.testing.assert_array_equal(a, e)  # integers / exact float products
    return rewritten


def local_model(nodes, inputs, outputs, functions=(), initializers=()) -> onnx.ModelProto:  # type: ignore[no-untyped-def]
    """A model at opset 26 and IR 10 importing the model-local domain ``LOCAL``."""
    graph = helper.make_graph(nodes, "main", inputs, outputs, list(initializers))
    return helper.make_model(
        graph,
        opset_imports=[*OPSET, helper.make_opsetid(LOCAL, 1)],
        functions=list(functions),
        ir_version=10,
    )


def loop_model(
    body_nodes: list[onnx.NodeProto],
    elem: int,
    declared: list | None,
    x_shape: list,
    y_shape: list | None,
    *,
    declared_out: list | None = None,
) -> onnx.ModelProto:
    """y = Loop(n, x): the body maps its carried value ``acc`` (declared ``declared``) to
    ``out`` (declared ``declared_out``, default the same) with ``body_nodes``."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["c"], ["co"]), *body_nodes],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("c", TensorProto.BOOL, []),
            helper.make_tensor_value_info("acc", elem, declared),
        ],
        [
            helper.make_tensor_value_info("co", TensorProto.BOOL, []),
            helper.make_tensor_value_info(
                "out", elem, declared if declared_out is None else declared_out
            ),
        ],
    )
    return local_model(
        [helper.make_node("Loop", ["n", "", "x"], ["y"], body=body)],
        [
            helper.make_tensor_value_info("n", TensorProto.INT64, []),
            helper.make_tensor_value_info("x", elem, x_shape),
        ],
        [helper.make_tensor_value_info("y", elem, y_shape)],
    )


def _function_text(text: str) -> str:
    """A function's onnx.parser text with its header: in ``LOCAL``, importing ai.onnx 26
    (and ``LOCAL`` where it calls a function there), unless the text has its own header."""
    if text.lstrip().startswith("<"):
        return text
    imports = f'"" : 26, "{LOCAL}" : 1' if f"{LOCAL}." in text else '"" : 26'
    return f'<domain: "{LOCAL}", opset_import: [{imports}]>\n{text}'


def parse_local(graph: str, *functions: str) -> onnx.ModelProto:
    """The model of onnx.parser text ``graph`` (``main (float[3, 4] a) => (...) {...}``)
    with the functions of texts ``functions``, as :func:`local_model` builds one: opset 26,
    IR 10, importing the model-local domain ``LOCAL`` (a call: ``local.F(a)``)."""
    header = f'<ir_version: 10, opset_import: ["" : 26, "{LOCAL}" : 1]>'
    return onnx.parser.parse_model("\n".join([header, graph, *map(_function_text, functions)]))


def calling(model: onnx.ModelProto, function: str, x: str) -> onnx.ModelProto:
    """``model`` (its functions kept) with its main graph replaced by y = ``function``(x)
    (a function in ``LOCAL``), x and y of onnx.parser type ``x`` (``float16[64]``): how a
    test calls a function no call site of the model typed."""
    called = onnx.ModelProto()
    called.CopyFrom(model)
    main = f"main ({x} x) => ({x} y) {{ y = {LOCAL}.{function}(x) }}"
    called.graph.CopyFrom(parse_local(main).graph)
    return called


def cumprod_function_text(name: str, axis: int = 1) -> str:
    """The onnx.parser text of function ``name``: y = CumProd(x, axis)."""
    return f"""{name} (x) => (y) {{
        axis = Constant<value_int = {axis}>()
        y = CumProd(x, axis)
    }}"""


def cumprod_function(name: str, axis: int = 1) -> onnx.FunctionProto:
    """A model-local function ``name`` (y = CumProd(x, axis)) in ``LOCAL``."""
    return onnx.parser.parse_function(_function_text(cumprod_function_text(name, axis)))


def odd_ints(shape: tuple[int, ...], seed: int) -> np.ndarray:
    """Odd int64 in [-9, 9): no product of them is 0."""
    return np.random.default_rng(seed).integers(-9, 9, shape).astype(np.int64) | 1


def check_lowering(
    elem_type: int,
    strategy: str,
    dims: Sequence[Dim],
    axis: int,
    *,
    exclusive: int,
    reverse: int,
    native_bits: bool = False,
    **options: object,
) -> None:
    """CumProd(x, axis) over ``dims`` lowered by ``strategy`` alone (``options``: target,
    opset, max_length), run on onnxruntime on a seeded :func:`random_data` x (symbolic dims
    fed 5), held to the contract (:func:`check_result`: onnx.reference, tests/bounds.py)
    and, with ``native_bits``, equal bit for bit to onnxruntime's native CumProd run on the
    original."""
    model = cumprod_model(elem_type, dims, axis, exclusive=exclusive, reverse=reverse)
    lowered, used = lower(model, strategy, **options)  # type: ignore[arg-type]
    assert set(used) == {strategy}, used
    shape = tuple(5 if isinstance(d, str) else d for d in dims)
    x = random_data(elem_type, shape, rng_for(strategy, elem_type, shape, axis, exclusive, reverse))
    feeds = {"x": feed(elem_type, x)}
    (y,) = run_ort(lowered, feeds)
    problem = check_result(elem_type, strategy, y, x, axis, exclusive=exclusive, reverse=reverse)
    assert problem is None, f"{TYPE_NAMES[elem_type]} {shape} ex{exclusive} rev{reverse}: {problem}"
    if native_bits:
        np.testing.assert_array_equal(y, native(model, feeds)[0])


# (exclusive, reverse): every pair of CumProd's attributes.
ATTRIBUTE_PAIRS = [(0, 0), (0, 1), (1, 0), (1, 1)]


def check_every_type(
    elem_type: int,
    strategy: str,
    cases: Sequence[tuple[Sequence[Dim], int] | tuple[Sequence[Dim], int, dict[str, Any]]],
    *,
    native_bits: bool = False,
) -> None:
    """One element type of a lowering's type sweep (its test is parametrized over the types):
    :func:`check_lowering` of ``strategy`` on each ``(dims, axis[, options])`` of ``cases``
    with each (exclusive, reverse) pair; with ``native_bits``, the float32, float64 and
    integer results also equal onnxruntime's native CumProd bit for bit (a lowering that
    multiplies in the native kernel's order)."""
    exact_native = native_bits and elem_type in (F32, F64, *INTS)
    for exclusive, reverse in ATTRIBUTE_PAIRS:
        for dims, axis, *options in cases:
            check_lowering(
                elem_type,
                strategy,
                dims,
                axis,
                exclusive=exclusive,
                reverse=reverse,
                native_bits=exact_native,
                **(options[0] if options else {}),
            )


def set_pieces(monkeypatch: pytest.MonkeyPatch, tile: int | None, chunk: int | None) -> None:
    """``cached``'s most tile and chunk bytes (``Target.cache_pieces``; None: as it is) on
    every target that offers it."""
    for name, target in list(TARGETS.items()):
        if target.cache_pieces is not None:
            sizes = (tile or target.cache_pieces[0], chunk or target.cache_pieces[1])
            monkeypatch.setitem(TARGETS, name, dataclasses.replace(target, cache_pieces=sizes))


# -- what needs another environment: torch, onnxruntime 1.20.1 (.venv-ort120)

ROOT = Path(__file__).resolve().parents[1]
LEGACY_PYTHON = Path(
    os.environ.get("CUMPROD_LEGACY_PYTHON", ROOT / ".venv-ort120" / "bin" / "python")
)


def missing(message: str) -> NoReturn:
    """A test that cannot run here: a skip, but a failure on CI (never skipped there)."""
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def import_torch() -> Any:
    """The torch module (an optional extra: without it the test skips, fails on CI)."""
    try:
        import torch
    except ImportError:
        missing("torch is not installed (pip install 'cumprod-rewriter[torch]')")
    return torch


def torch_draws(seed: int = 0) -> tuple[Callable[..., Any], ...]:
    """Three draws from one seeded torch generator: ``rand(*shape, dtype=float32)`` uniform
    in [0, 1), ``ints(low, high, *shape, dtype=int64)`` and ``randn(*shape)`` normal."""
    torch = import_torch()
    gen = torch.Generator().manual_seed(seed)

    def rand(*shape: int, dtype: Any = torch.float32) -> Any:
        return torch.rand(*shape, generator=gen, dtype=dtype)

    def ints(low: int, high: int, *shape: int, dtype: Any = torch.int64) -> Any:
        return torch.randint(low, high, shape, generator=gen, dtype=dtype)

    def randn(*shape: int) -> Any:
        return torch.randn(*shape, generator=gen)

    return rand, ints, randn


class LegacyBatch:
    """Models written to a folder as NAME.onnx with their feeds (NAME.in.npz), then run at
    once by tests/legacy_runner.py on onnxruntime 1.20.1 (``LEGACY_PYTHON``, which
    scripts/test.sh creates: made without it, the batch skips, fails on CI); ``cases`` keeps
    each model's check for the caller."""

    def __init__(self, folder: Path) -> None:
        if not LEGACY_PYTHON.exists():
            missing(f"{LEGACY_PYTHON} is missing: scripts/test.sh creates it")
        self.folder = folder
        self.cases: dict[str, object] = {}

    def add(
        self,
        name: str,
        model: onnx.ModelProto,
        feeds: dict[str, np.ndarray],
        check: object = None,
    ) -> None:
        onnx.save(model, self.folder / f"{name}.onnx")
        np.savez(self.folder / f"{name}.in.npz", **feeds)
        self.cases[name] = check

    def run(self) -> None:
        """Every model on onnxruntime 1.20.1 with onnx 1.17.0 (the runner says which)."""
        result = subprocess.run(
            [str(LEGACY_PYTHON), str(ROOT / "tests" / "legacy_runner.py"), str(self.folder)],
            capture_output=True,
            text=True,
            timeout=1200,
            check=False,
        )
        assert result.returncode == 0, result.stderr
        assert result.stdout.startswith("onnxruntime 1.20.1, onnx 1.17.0"), result.stdout

    def outputs(self, name: str) -> list[np.ndarray]:
        """The outputs of model ``name`` there, or the test fails with the runtime's error."""
        error = self.folder / f"{name}.err.txt"
        if error.exists():
            pytest.fail(f"{name} failed on onnxruntime 1.20.1: {error.read_text()}")
        with np.load(self.folder / f"{name}.out.npz") as data:
            return [data[f"arr_{i}"] for i in range(len(data.files))]
