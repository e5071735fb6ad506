"""``rewriter.types``: element types and shapes found by onnx's inference, not by names or
declarations alone (names reused across branches and bodies, function inputs typed by their
calls or declarations, overloads, overridable initializers, graph outputs that are inputs);
each rewrite compared with onnxruntime's native CumProd on the original."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from onnx import TensorProto, helper

import rewriter
import rewriter.io
from rewriter.decompose import plan_cumprods
from rewriter.specialize import SpecializeFunctionsPass
from rewriter.targets import target_named
from tests.helpers import (
    LOCAL,
    VIA,
    calling,
    check_against_native,
    local_model,
    loop_model,
    native,
    odd_ints,
    op_types,
    parse_local,
    run_ort,
)

RELU_3 = "main (float[3] x) => (float[3] y) { y = Relu(x) }"  # calls no function


def _neg_then_cumprod(name: str, declared: str = "") -> str:
    """Function ``name``: y = CumProd(-x, 0), its values declared by ``declared``."""
    return f"""{name} (x) => (y) {declared} {{
        axis = Constant<value_int = 0>()
        t = Neg(x)
        y = CumProd(t, axis)
    }}"""


def test_a_function_input_declared_in_its_value_info_keeps_its_type(
    caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    """Found by a mutation review: no call site gives F's input a type, but F declares it
    float16 (IR >= 10 functions may). That type must choose the lowering: float16 multiplied
    in float32 and rounded once, as the native kernel does, not the type-generic lowering
    (float16 products rounded at every step, and a warning). The CumProd reads a Neg of the
    input, so the declared type must also flow through the body."""
    model = parse_local(RELU_3, _neg_then_cumprod("Typed", "<float16[64] x>"))
    path = tmp_path / "typed.onnx"
    onnx.save(model, path)
    loaded = rewriter.io.load_model(path)  # the command line's way in
    assert loaded.functions[(LOCAL, "Typed", "")].inputs[0].dtype == ir.DataType.FLOAT16
    with caplog.at_level("WARNING", logger="rewriter"):
        rewritten = rewriter.decompose_cumprod(model)
    assert isinstance(rewritten, onnx.ModelProto)
    assert "element type is not known" not in caplog.text

    data = np.random.default_rng(13).uniform(0.9, 1.1, 64).astype(np.float16)
    expected = native(calling(model, "Typed", "float16[64]"), {"x": data})
    actual = run_ort(calling(rewritten, "Typed", "float16[64]"), {"x": data})
    np.testing.assert_array_equal(actual[0], expected[0])  # rounded once, like the kernel


def test_a_function_input_shape_declared_in_the_ir_is_not_built_on() -> None:
    """An ``ir.Model`` whose function input carries a type and a shape ([4]) that no call
    site confirms: the element type is taken, the shape is not (a function may be called
    with other shapes), so the lowered function is right when called with [6]."""
    model = parse_local(RELU_3, _neg_then_cumprod("Shaped"))
    ir_model = ir.serde.deserialize_model(model)
    x = ir_model.functions[(LOCAL, "Shaped", "")].inputs[0]
    x.type, x.shape = ir.TensorType(ir.DataType.FLOAT), ir.Shape([4])
    rewriter.decompose_cumprod(ir_model)
    rewritten = ir.serde.serialize_model(ir_model)
    assert "CumProd" not in op_types(rewritten)

    def with_call(m: onnx.ModelProto) -> onnx.ModelProto:
        c = onnx.ModelProto()
        c.CopyFrom(m)
        del c.functions[0].value_info[:]  # the call below is [6]
        del c.graph.node[:]
        c.graph.node.append(helper.make_node("Shaped", ["x"], ["y"], domain=LOCAL))
        c.graph.input[0].CopyFrom(helper.make_tensor_value_info("x", TensorProto.FLOAT, [6]))
        c.graph.output[0].CopyFrom(helper.make_tensor_value_info("y", TensorProto.FLOAT, [6]))
        return c

    data = np.array([2, -3, 0.5, 4, -1, 3], np.float32)
    expected = native(with_call(model), {"x": data})
    np.testing.assert_array_equal(run_ort(with_call(rewritten), {"x": data})[0], expected[0])


@pytest.mark.parametrize("via", VIA)
def test_unknown_rank_integer_in_a_loop_body(via: str) -> None:
    """A Loop-carried value declared without shape: rank unknown inside the body."""
    nodes = [
        helper.make_node("Constant", [], ["axis"], value_int=-1),
        helper.make_node("CumProd", ["acc", "axis"], ["out"], exclusive=1),
    ]
    model = loop_model(nodes, TensorProto.INT64, None, ["A", "B"], ["A", "B"])
    x = np.array([[3, 5, 7], [2, -9, 4]], dtype=np.int64)
    check_against_native(model, {"n": np.array(3, dtype=np.int64), "x": x}, via)


# An If whose branches both define ``h``: [2, 6] in one, [6, 2] (a Transpose) in the other.
_IF_REUSING_H = """
    y = If (c) <
        then_branch = tg () => (int64[12] t) {
            ax = Constant <value = int64 {1}> ()
            h = Identity (x)
            p = CumProd (h, ax)
            fl = Constant <value = int64[1] {12}> ()
            t = Reshape (p, fl)
        },
        else_branch = eg () => (int64[12] e) {
            ax2 = Constant <value = int64 {0}> ()
            h = Transpose <perm = [1, 0]> (x)
            p2 = CumProd (h, ax2)
            fl2 = Constant <value = int64[1] {12}> ()
            e = Reshape (p2, fl2)
        }
    >
"""


@pytest.mark.parametrize("via", VIA)
def test_if_branches_reusing_a_name_with_other_shapes(via: str) -> None:
    """A lookup by name alone gave the then-branch's CumProd the else-branch's static dims
    (wrong values)."""
    model = onnx.parser.parse_model(
        '<ir_version: 10, opset_import: ["" : 26]>'
        f" main (int64[2, 6] x, bool c) => (int64[12] y) {{ {_IF_REUSING_H} }}"
    )
    for c in (True, False):
        check_against_native(model, {"x": odd_ints((2, 6), 0), "c": np.array(c)}, via)


@pytest.mark.parametrize("via", VIA)
def test_loop_bodies_reusing_names_with_other_shapes_and_types(via: str) -> None:
    """Two Loop bodies (as exporters name them) both define ``h``: other shapes in the first
    pair, other element types in the second (which inference, merged by name, refused)."""
    text = """
        <ir_version: 10, opset_import: ["" : 26]>
        main (T1[3, 4] a, T2[4, 3] b, int64 n) => (T1[3, 4] ya, T2[4, 3] yb) {
            t = Constant <value = bool {1}> ()
            ya = Loop (n, t, a) <
                body = b1 (int64 i, bool c, T1[3, 4] acc) => (bool co, T1[3, 4] out) {
                    co = Identity (c)
                    ax = Constant <value = int64 {1}> ()
                    h = Identity (acc)
                    out = CumProd (h, ax)
                }
            >
            yb = Loop (n, t, b) <
                body = b2 (int64 i, bool c, T2[4, 3] acc) => (bool co, T2[4, 3] out) {
                    co = Identity (c)
                    ax = Constant <value = int64 {0}> ()
                    h = Identity (acc)
                    out = CumProd (h, ax)
                }
            >
        }
    """
    for t1, t2 in (("int64", "int64"), ("int64", "int32")):
        model = onnx.parser.parse_model(text.replace("T1", t1).replace("T2", t2))
        feeds = {
            "a": odd_ints((3, 4), 1).astype(t1),
            "b": odd_ints((4, 3), 2).astype(t2),
            "n": np.array(2, np.int64),
        }
        check_against_native(model, feeds, via)


@pytest.mark.parametrize("via", VIA)
def test_function_with_if_branches_reusing_a_name(via: str) -> None:
    """The same If inside a model-local function (types propagated node by node there)."""
    model = parse_local(
        "main (int64[2, 6] x, bool c) => (int64[12] y) { y = local.F (x, c) }",
        f"F (x, c) => (y) {{ {_IF_REUSING_H} }}",
    )
    for c in (True, False):
        check_against_native(model, {"x": odd_ints((2, 6), 3), "c": np.array(c)}, via)


def _overridable_reshape(default: list[int]) -> onnx.ModelProto:
    """y = CumProd(Reshape(x, s), 1), s an initializer (``default``) that is also a graph
    input: a feed may replace it."""
    return local_model(
        [
            helper.make_node("Reshape", ["x", "s"], ["r"]),
            helper.make_node("CumProd", ["r", "axis"], ["y"]),
        ],
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [6]),
            helper.make_tensor_value_info("s", TensorProto.INT64, [2]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["a", "b"])],
        initializers=[
            helper.make_tensor("s", TensorProto.INT64, [2], default),
            helper.make_tensor("axis", TensorProto.INT64, [], [1]),
        ],
    )


@pytest.mark.parametrize("target", ["onnxruntime", "tract"])
@pytest.mark.parametrize("via", VIA)
@pytest.mark.parametrize("default", [[2, 3], [6, 1]], ids=["2x3", "length-1"])
def test_an_overridable_initializer_is_not_a_constant(
    via: str, target: str, default: list[int]
) -> None:
    """Found by a review from outside: shape inference read s's default, so the lowering was
    built for it; fed another s the rewrite gave the default's shape and wrong values (with
    a default of length 1, x itself, unscanned). Inference takes such inputs as inputs."""
    model = _overridable_reshape(default)
    x = np.arange(1, 7, dtype=np.float32)
    for s in ([3, 2], [2, 3], default):
        feeds = {"x": x, "s": np.array(s, dtype=np.int64)}
        rewritten = check_against_native(model, feeds, via, target=target, max_length=8)
        np.testing.assert_array_equal(run_ort(rewritten, feeds)[0], np.cumprod(x.reshape(s), 1))


@pytest.mark.parametrize("elem", [TensorProto.FLOAT16, TensorProto.UINT32])
def test_types_flow_through_a_call_inside_a_function(elem: int) -> None:
    """Found by a review from outside: G(x) = H(K(x)), H's CumProd got x's type from K's
    output, which the propagation inside functions did not follow (calls to local functions
    were skipped): a type-generic lowering, float16 multiplied in float16 (9 ulp where the
    native kernel has 0) and uint32 multiplied as uint32 (onnxruntime 1.20.1 has no such Mul)."""
    elem_name = TensorProto.DataType.Name(elem).lower()
    model = parse_local(
        f"main ({elem_name}[4, 7] x) => ({elem_name}[4, 7] y) {{ y = local.G(x) }}",
        """H (x) => (y) {
            ax = Constant<value_int = -1>()
            y = CumProd(x, ax)
        }""",
        "K (x) => (y) { y = Identity(x) }",
        """G (x) => (y) {
            t = local.K(x)
            y = local.H(t)
        }""",
    )
    work = ir.serde.deserialize_model(model)
    SpecializeFunctionsPass()(work)
    (plan,) = plan_cumprods(work)
    assert plan.site.spec.dtype == ir.DataType(elem)


@pytest.mark.parametrize("via", VIA)
def test_function_overloads_stay_apart(via: str) -> None:
    """Two overloads of one function (IR 10: same domain and name, ``overload`` "inc" and
    "exc": inclusive and exclusive CumProd), one called on float16, the other on int64:
    each call must reach its own overload, typed by its own call. float16 tells a call
    typed from its caller (multiplied in float32, rounded once, as the native kernel) from
    a type-generic lowering (float16 products), which a function taken for uncalled, or
    called with two types, gets."""
    overloads = [
        f"""<domain: "local", overload: "{overload}", opset_import: ["" : 26]>
        B (x) => (y) {{
            axis = Constant<value_int = 1>()
            y = CumProd<exclusive = {exclusive}>(x, axis)
        }}"""
        for overload, exclusive in (("inc", 0), ("exc", 1))
    ]
    model = parse_local(
        """main (float16[3, 5] f, int64[3, 5] i) => (float16[3, 5] p, int64[3, 5] q) {
            p = local.B:inc(f)
            q = local.B:exc(i)
        }""",
        *overloads,
    )
    rng = np.random.default_rng(6)
    f = rng.uniform(0.5, 2.0, (3, 5)).astype(np.float16)
    i = rng.integers(-9, 10, (3, 5)) | 1
    rewritten = check_against_native(model, {"f": f, "i": i}, via)
    p, q = run_ort(rewritten, {"f": f, "i": i})
    np.testing.assert_array_equal(p, np.cumprod(f.astype(np.float32), 1).astype(np.float16))
    np.testing.assert_array_equal(q[:, 0], 1)
    np.testing.assert_array_equal(q[:, 1:], np.cumprod(i, 1)[:, :-1])


@pytest.mark.parametrize("also_output", ["input", "initializer"])
def test_a_graph_output_that_is_also_an_input_keeps_downstream_shapes(also_output: str) -> None:
    """Found by a red-team review of the library: x (or a weight) listed as a graph output
    too lost its declared shape before shape inference, so everything computed from it had
    unknown rank: a static CumProd was lowered for a run-time rank (onnxruntime) or refused
    ("the rank of x is not known", tract, TFLite, IREE). Its shape is kept now."""
    w = (np.arange(21, dtype=np.int64).reshape(3, 7) % 5) - 2
    model = local_model(
        [
            helper.make_node("Mul", ["x", "w"], ["xw"]),
            helper.make_node("CumProd", ["xw", "axis"], ["y"]),
        ],
        [helper.make_tensor_value_info("x", TensorProto.INT64, [3, 7])],
        [
            helper.make_tensor_value_info("y", TensorProto.INT64, [3, 7]),
            helper.make_tensor_value_info(
                "x" if also_output == "input" else "w", TensorProto.INT64, [3, 7]
            ),
        ],
        initializers=[
            onnx.numpy_helper.from_array(w, "w"),
            helper.make_tensor("axis", TensorProto.INT64, [], [1]),
        ],
    )
    for target in ("onnxruntime", "tract"):
        (plan,) = plan_cumprods(ir.serde.deserialize_model(model), target=target_named(target))
        assert plan.site.spec.describe() == "int64 [3, 7] axis 1", plan.site.spec.describe()
    x = np.random.default_rng(3).integers(-5, 6, (3, 7))
    check_against_native(model, {"x": x}, target="tract")
