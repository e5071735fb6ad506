"""``target_opset``: the lowering built at an older opset and the rest of the model taken
there (rewriter/opset.py, rewriter/opset_rules.py): onnx's version converter where a signature
changed, a refusal where the older op means something else (a moved default, a value the older
op leaves undefined, a type it does not allow), functions and initializers kept as they were.
References: numpy and onnx.reference on the same inputs."""

from __future__ import annotations

import re

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import rewriter
from rewriter.opset import TargetOpsetPass
from tests.helpers import (
    cumprod_model,
    reference,
    run_ort,
)


def _at_opset_26(body: str, out_shape: str) -> onnx.ModelProto:
    return onnx.parser.parse_model(
        '<ir_version: 11, opset_import: ["" : 26]>'
        f" main (float[2, 3, 4] x) => (float{out_shape} y) {{ {body} }}"
    )


def test_target_opset_sends_changed_signatures_through_onnx_converter() -> None:
    """ReduceSum-13 takes its axes as an input, ReduceSum-11 as an attribute: onnx's version
    converter adapts it; the CumProd lowering is built at 11; the numbers are numpy's. The
    graph's inputs stay its own: the converter's output lists every initializer as an input
    too (w here), which would let a caller override a weight."""
    model = onnx.parser.parse_model(
        '<ir_version: 11, opset_import: ["" : 26]>'
        " main (float[2, 3, 4] x) => (float[2, 1, 4] y) <float[4] w = {1, 1, 1, 1}> {"
        " m = Mul (x, w) ra = Constant <value = int64[1] {1}> ()"
        " s = ReduceSum <keepdims = 1> (m, ra) ax = Constant <value = int64 {2}> ()"
        " y = CumProd (s, ax) }"
    )
    rewritten = rewriter.decompose_cumprod(model, target_opset=11)
    onnx.checker.check_model(rewritten, full_check=True)
    assert [(o.domain, o.version) for o in rewritten.opset_import] == [("", 11)]
    assert [i.name for i in rewritten.graph.input] == ["x"]
    (reduce,) = [n for n in rewritten.graph.node if n.op_type == "ReduceSum"]
    assert [list(a.ints) for a in reduce.attribute if a.name == "axes"] == [[1]]
    x = np.random.default_rng(5).uniform(-1, 1, (2, 3, 4)).astype(np.float32)
    (y,) = run_ort(rewritten, {"x": x})
    np.testing.assert_array_equal(y, reference(x.sum(axis=1, keepdims=True), 2, 0, 0))


def test_target_opset_keeps_a_softmax_on_its_last_axis_and_refuses_the_others() -> None:
    """Below 13 Softmax flattens from its axis on (and defaults to axis 1); onnx's converter
    does not adapt that. On the last axis it means the same once axis=-1 is written out;
    on another axis it is a blocker, and the model is not touched."""
    last = _at_opset_26(
        "s = Softmax (x) ax = Constant <value = int64 {1}> () y = CumProd (s, ax)", "[2, 3, 4]"
    )
    rewritten = rewriter.decompose_cumprod(last, target_opset=11)
    (softmax,) = [n for n in rewritten.graph.node if n.op_type == "Softmax"]
    assert [a.i for a in softmax.attribute if a.name == "axis"] == [-1]
    x = np.random.default_rng(6).uniform(-1, 1, (2, 3, 4)).astype(np.float32)
    e = np.exp(x.astype(np.float64))
    expected = np.cumprod(e / e.sum(axis=-1, keepdims=True), axis=1)
    (y,) = run_ort(rewritten, {"x": x})
    np.testing.assert_allclose(y, expected, rtol=4 * 2.0**-24 * 3)

    middle = _at_opset_26(
        "s = Softmax <axis = 1> (x) ax = Constant <value = int64 {1}> () y = CumProd (s, ax)",
        "[2, 3, 4]",
    )
    before = middle.SerializeToString()
    with pytest.raises(rewriter.OpsetError, match="Softmax-13 in graph 'main': Softmax below"):
        rewriter.decompose_cumprod(middle, target_opset=11)
    assert middle.SerializeToString() == before


def test_target_opset_does_not_relabel_an_attribute_default_that_moved() -> None:
    """DFT-20 takes its axis as an input (default -2); DFT-17's attribute defaults to 1. A
    DFT-20 without the input relabelled as DFT-17 would transform another axis: it goes
    through onnx's converter, which writes the axis out."""
    model = _at_opset_26(
        "r = DFT (x) ax = Constant <value = int64 {-1}> () y = CumProd (r, ax)", "[2, 3, 4, 2]"
    )
    model.graph.input[0].type.tensor_type.shape.dim.add().dim_value = 1
    x = np.random.default_rng(7).uniform(0.5, 1.5, (2, 3, 4, 1)).astype(np.float32)
    rewritten = rewriter.decompose_cumprod(model, target_opset=17)
    (dft,) = [n for n in rewritten.graph.node if n.op_type == "DFT"]
    assert [a.i for a in dft.attribute if a.name == "axis"] == [-2]
    (y,) = run_ort(rewritten, {"x": x})
    spectrum = np.fft.fft(x[..., 0].astype(np.float64), axis=-1)  # x's axis 2 (-2)
    r = np.stack([spectrum.real, spectrum.imag], axis=-1)
    np.testing.assert_allclose(y, np.cumprod(r, axis=-1), rtol=1e-5, atol=1e-5)


def test_target_opset_refuses_roialign_whose_default_mode_changed() -> None:
    """RoiAlign-16's coordinate_transformation_mode defaults to half_pixel; RoiAlign-10 is
    always output_half_pixel. Not relabelled; onnx's converter has no adapter: refused."""
    model = onnx.parser.parse_model(
        '<ir_version: 11, opset_import: ["" : 26]>'
        " main (float[1, 2, 4, 4] x, float[1, 4] rois) => (float[1, 2, 2, 2] y) {"
        " bi = Constant <value = int64[1] {0}> ()"
        " r = RoiAlign <output_height = 2, output_width = 2> (x, rois, bi)"
        " ax = Constant <value = int64 {-1}> () y = CumProd (r, ax) }"
    )
    onnx.checker.check_model(model, full_check=True)  # valid: the refusal is the opset's
    with pytest.raises(rewriter.OpsetError, match="RoiAlign"):
        rewriter.decompose_cumprod(model, target_opset=15)


def _pool_model(op: str, attrs: str, x_shape: str, y_shape: str) -> onnx.ModelProto:
    return onnx.parser.parse_model(
        '<ir_version: 11, opset_import: ["" : 26]>'
        f" main (float{x_shape} x) => (float{y_shape} y) {{"
        f" p = {op} <{attrs}> (x) ax = Constant <value = int64 {{1}}> () y = CumProd (p, ax) }}"
    )


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool", "LpPool"])
def test_target_opset_refuses_a_ceil_mode_pool_whose_size_changed_at_22(op: str) -> None:
    """Pool-22 drops a ceil_mode window that starts in the right padding; Pool-21 keeps it
    (a 2 x 2 output where 22 gives 1 x 1, seen on onnxruntime 1.20.1): same signature, so it
    was relabelled. Where the shapes show no such window, it still is (and runs right).
    LpPool changed at 22 as the other two (found by a review from outside)."""
    dropped = _pool_model(
        op, "ceil_mode = 1, kernel_shape = [1, 1], strides = [2, 2]", "[1, 1, 2, 2]", "[1, 1, 1, 1]"
    )
    with pytest.raises(rewriter.OpsetError, match=f"{op}-22 .*ceil_mode=1"):
        rewriter.decompose_cumprod(dropped, target_opset=21)
    unknown = _pool_model(
        op, "ceil_mode = 1, kernel_shape = [2, 2], strides = [2, 2]", "[1, 1, N, N]", "[1, 1, M, M]"
    )
    with pytest.raises(rewriter.OpsetError, match="spatial dims must be known"):
        rewriter.decompose_cumprod(unknown, target_opset=21)
    kept = _pool_model(
        op, "ceil_mode = 1, kernel_shape = [2, 2], strides = [2, 2]", "[1, 1, 5, 5]", "[1, 1, 3, 3]"
    )
    rewritten = rewriter.decompose_cumprod(kept, target_opset=21)
    x = np.random.default_rng(8).uniform(0.5, 1.5, (1, 1, 5, 5)).astype(np.float32)
    (want,) = run_ort(kept, {"x": x})
    (y,) = run_ort(rewritten, {"x": x})
    assert y.shape == want.shape == (1, 1, 3, 3)
    np.testing.assert_allclose(y, want, rtol=1e-6)


@pytest.mark.parametrize(
    ("body", "target", "reason"),
    [
        (
            "i = Constant <value = int64[2, 1] {0, 2}> () u = Constant <value = float[2, 4] "
            "{9, 9, 9, 9, 9, 9, 9, 9}> () "
            's = ScatterElements <reduction = "max"> (x, i, u)',
            17,
            "reduction='max' exists from opset 18",
        ),
        (
            "d = Constant <value = float {2.5}> () s = Mod (x, d)",
            21,
            "a floor Mod \\(fmod=0\\) of floats exists from opset 28",
        ),
        (
            "sc = Constant <value = float[4] {1, 2, 3, 4}> ()"
            " q = QuantizeLinear <axis = 1> (x, sc) s = DequantizeLinear <axis = 1> (q, sc)",
            12,
            "per-axis quantization",
        ),
        (
            "sc = Constant <value = float[2] {1, 1}> () "
            's = Resize <coordinate_transformation_mode = "half_pixel_symmetric"> (x, , sc)',
            18,
            "coordinate_transformation_mode='half_pixel_symmetric' exists from opset 19",
        ),
        # the version just before the value: an off-by-one in the table shows here
        (
            'p = Constant <value = int64[4] {0, 0, 0, 0}> () s = Pad <mode = "wrap"> (x, p)',
            18,
            "mode='wrap' exists from opset 19",
        ),
        (
            "i = Constant <value = int64[2, 1] {0, 1}> () u = Constant <value = float[2, 4] "
            "{9, 9, 9, 9, 9, 9, 9, 9}> () "
            's = ScatterND <reduction = "min"> (x, i, u)',
            17,
            "reduction='min' exists from opset 18",
        ),
        # a type or shape not known counts as the one that changed meaning
        (
            "g = com.microsoft.Gelu (x) d = Constant <value = float {2.5}> () s = Mod (g, d)",
            21,
            "a floor Mod \\(fmod=0\\) of floats exists from opset 28",
        ),
        (
            "sc = Constant <value = float[4] {1, 2, 3, 4}> () r = Reshape (sc, shp)"
            " q = QuantizeLinear <axis = 1> (x, r) s = DequantizeLinear <axis = 1> (q, r)",
            12,
            "per-axis quantization",
        ),
    ],
    ids=[
        "scatter max",
        "float floor mod",
        "per-axis quantization",
        "resize mode",
        "pad wrap at 18",
        "scatternd min at 17",
        "mod of an unknown type",
        "scale of an unknown rank",
    ],
)
def test_target_opset_refuses_a_value_the_older_op_does_not_mean(
    body: str, target: int, reason: str
) -> None:
    """The older schema has the same signature (or the same attributes), but not this value:
    relabelled, the node was outside the older spec (a Mod-13 that fails at run time, a
    Scatter reduction and a 1-D quantization scale opset 16 / 10 do not define)."""
    shape_input = ", int64[K] shp" if "shp" in body else ""  # a scale of unknown rank
    model = onnx.parser.parse_model(
        '<ir_version: 11, opset_import: ["" : 28, "com.microsoft" : 1]>'
        f" main (float[2, 4] x{shape_input}) => (float[2, 4] y) {{ {body}"
        " ax = Constant <value = int64 {1}> () y = CumProd (s, ax) }"
    )
    onnx.checker.check_model(model, full_check="com.microsoft" not in body)
    with pytest.raises(rewriter.OpsetError, match=reason):
        rewriter.decompose_cumprod(model, target_opset=target)


def _at_opset_28(body: str, inputs: str, out: str = "uint32[4] y") -> onnx.ModelProto:
    model = onnx.parser.parse_model(
        f'<ir_version: 11, opset_import: ["" : 28]> main ({inputs}) => ({out}) {{ {body} }}'
    )
    onnx.checker.check_model(model, full_check=True)
    return model


_SHIFT = (
    's = BitShift <direction = "LEFT"> (x, k) ax = Constant <value = int64 {0}> ()'
    " y = CumProd (s, ax)"
)


def test_target_opset_refuses_a_bitshift_the_older_op_leaves_undefined() -> None:
    """BitShift-28 gives 0 for a shift by the type's width or more; BitShift-11 leaves it
    undefined (onnxruntime 1.20.1 shifted uint32 1 << 32 to 1; found by a review from
    outside). A shift fed at run time, or a constant one reaching the width, is refused; a
    constant one below the width is relabelled and runs right."""
    fed = _at_opset_28(_SHIFT, "uint32[4] x, uint32[4] k")
    with pytest.raises(rewriter.OpsetError, match=r"BitShift-28 .*width or more"):
        rewriter.decompose_cumprod(fed, target_opset=18)
    wide = _at_opset_28(
        "k = Constant <value = uint32[4] {1, 2, 3, 32}> () " + _SHIFT, "uint32[4] x"
    )
    with pytest.raises(rewriter.OpsetError, match=r"BitShift-28 .*width or more"):
        rewriter.decompose_cumprod(wide, target_opset=18)
    narrow = _at_opset_28(
        "k = Constant <value = uint32[4] {1, 2, 3, 31}> () " + _SHIFT, "uint32[4] x"
    )
    rewritten = rewriter.decompose_cumprod(narrow, target_opset=18)
    x = np.array([3, 5, 7, 1], np.uint32)
    expected = np.cumprod(x << np.array([1, 2, 3, 31], np.uint32), dtype=np.uint32)
    (y,) = run_ort(rewritten, {"x": x})
    np.testing.assert_array_equal(y, expected)


@pytest.mark.parametrize("to", ["FLOAT8E4M3FNUZ", "FLOAT8E5M2FNUZ"])
@pytest.mark.parametrize("op", ["Cast", "CastLike"])
def test_target_opset_refuses_a_saturating_fnuz_cast_below_24(op: str, to: str) -> None:
    """Cast-24 and CastLike-24 saturate ±inf to the largest float8 FNUZ value; Cast-23 gives
    NaN (onnx PR 7130; found by a review from outside). Refused from a float input with
    saturate=1 (the default); relabelled with saturate=0, to another float8 type, or from
    an integer input, which cannot be infinite."""
    code = getattr(TensorProto, to)

    def model(attrs: str, x: str = "float", to_code: int = code) -> onnx.ModelProto:
        if op == "Cast":
            cast = f"c = Cast <to = {to_code}{attrs}> (x)"
        else:
            like = onnx.helper.tensor_dtype_to_string(to_code).split(".")[-1].lower()
            cast = f"l = Constant <value = {like}[1] {{0}}> () c = CastLike <{attrs[2:]}> (x, l)"
            cast = cast.replace("CastLike <>", "CastLike")
        body = f"{cast} f = Cast <to = 1> (c) ax = Constant <value = int64 {{0}}> ()"
        return _at_opset_28(f"{body} y = CumProd (f, ax)", f"{x}[4] x", "float[4] y")

    with pytest.raises(rewriter.OpsetError, match=f"{op}-24 saturates"):
        rewriter.decompose_cumprod(model(""), target_opset=23)
    with pytest.raises(rewriter.OpsetError, match=f"{op}-24 saturates"):
        rewriter.decompose_cumprod(model(", saturate = 1"), target_opset=23)
    for kept in (
        model(", saturate = 0"),
        model("", x="int32"),
        model("", to_code=TensorProto.FLOAT8E4M3FN),
    ):
        rewritten = rewriter.decompose_cumprod(kept, target_opset=23)
        assert rewritten.opset_import[0].version == 23


def test_target_opset_refuses_a_softmax_of_a_0d_input() -> None:
    """Softmax-13 on a 0-D input (an invalid model) crashed the opset check with a
    ZeroDivisionError (found by a review from outside); now one line saying why."""
    model = onnx.parser.parse_model(
        '<ir_version: 11, opset_import: ["" : 26]>'
        " main (float x, float[3] z) => (float s, float[3] y) {"
        " s = Softmax (x) ax = Constant <value = int64 {0}> () y = CumProd (z, ax) }"
    )
    with pytest.raises(rewriter.InputModelError, match=r"fails the ONNX checker .*rank"):
        rewriter.decompose_cumprod(model, target_opset=12)
    with pytest.raises(rewriter.OpsetError, match="a 0-D input \\(invalid"):  # the pass alone
        TargetOpsetPass(12).call(ir.serde.deserialize_model(model))


def test_target_opset_refuses_to_raise_a_function_importing_an_older_opset() -> None:
    """A function importing ai.onnx 12 in a model at 26 (the checker refuses it: Softmax-11
    there, Softmax-13 in the model) was written with every import set to the target:
    its Softmax-11 (which flattens) became a Softmax-13 (one axis), without a word (found
    by a review from outside)."""
    f = helper.make_function(
        "local",
        "F",
        ["a"],
        ["b"],
        [helper.make_node("Softmax", ["a"], ["b"], axis=1)],
        [helper.make_opsetid("", 12)],
    )
    g = helper.make_graph(
        [
            helper.make_node("F", ["x"], ["s"], domain="local"),
            helper.make_node("Constant", [], ["ax"], value=helper.make_tensor("v", 7, [], [1])),
            helper.make_node("CumProd", ["s", "ax"], ["y"]),
        ],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 4])],
    )
    model = helper.make_model(
        g,
        opset_imports=[helper.make_opsetid("", 26), helper.make_opsetid("local", 1)],
        functions=[f],
        ir_version=10,
    )
    with pytest.raises(rewriter.InputModelError, match=r"fails the ONNX checker .*version 12"):
        rewriter.decompose_cumprod(model, target_opset=13)
    with pytest.raises(rewriter.OpsetError, match=r"imports ai\.onnx 12, older than the model"):
        TargetOpsetPass(13).call(ir.serde.deserialize_model(model))


def test_target_opset_drops_a_default_attribute_before_onnx_converter() -> None:
    """ReduceMean-18 with noop_with_empty_axes=0 spelled out: onnx's converter kept it, and
    ReduceMean-17 has no such attribute (refused as a CumProd checker failure). Dropped first,
    the node converts. A checker failure after an opset change (here Identity-13 on a
    sequence) is an OpsetError, not a CumProd error or a raw InferenceError."""
    model = _at_opset_26(
        "ra = Constant <value = int64[1] {1}> ()"
        " s = ReduceMean <keepdims = 1, noop_with_empty_axes = 0> (x, ra)"
        " ax = Constant <value = int64 {2}> () y = CumProd (s, ax)",
        "[2, 1, 4]",
    )
    rewritten = rewriter.decompose_cumprod(model, target_opset=17)
    (reduce,) = [n for n in rewritten.graph.node if n.op_type == "ReduceMean"]
    assert sorted(a.name for a in reduce.attribute) == ["axes", "keepdims"]
    x = np.random.default_rng(9).uniform(0.5, 1.5, (2, 3, 4)).astype(np.float32)
    (y,) = run_ort(rewritten, {"x": x})
    np.testing.assert_allclose(
        y, reference(x.astype(np.float64).mean(axis=1, keepdims=True), 2, 0, 0), rtol=1e-5
    )
    sequence = onnx.parser.parse_model(
        '<ir_version: 11, opset_import: ["" : 26]>'
        " main (float[2, 3] x) => (float[2, 3] y) {"
        " s = SequenceConstruct (x) o = Identity (s) zero = Constant <value = int64 {0}> ()"
        " e = SequenceAt (o, zero) ax = Constant <value = int64 {1}> () y = CumProd (e, ax) }"
    )
    with pytest.raises(rewriter.OpsetError, match=r"fails the ONNX checker: .*Identity"):
        rewriter.decompose_cumprod(sequence, target_opset=13)  # Identity-14: no sequences


@pytest.mark.parametrize(
    ("node", "y_type", "target"),
    [
        ("p = Cast <to = 6, saturate = 0> (x)", "int32", 18),
        ("p = AveragePool <kernel_shape = [2, 2], dilations = [1, 1]> (x)", "float", 18),
    ],
    ids=["Cast saturate to int32", "AveragePool dilations 1"],
)
def test_target_opset_drops_an_attribute_that_changes_nothing(
    node: str, y_type: str, target: int
) -> None:
    """Cast-19's saturate only acts on float8 outputs, AveragePool-19's dilations of 1 are no
    dilation: the older ops lack them, and they were refused as checker failures."""
    model = onnx.parser.parse_model(
        '<ir_version: 11, opset_import: ["" : 26]>'
        f" main (float[1, 1, 4, 4] x) => ({y_type}[1, 1, N, M] y) {{"
        f" {node} ax = Constant <value = int64 {{3}}> () y = CumProd (p, ax) }}"
    )
    rewritten = rewriter.decompose_cumprod(model, target_opset=target)
    (kept,) = [n for n in rewritten.graph.node if n.op_type in ("Cast", "AveragePool")]
    assert {a.name for a in kept.attribute} & {"saturate", "dilations"} == set()
    if "dilations" in node:  # one dilation of 2 is a dilation: never dropped
        dilated = onnx.parser.parse_model(
            '<ir_version: 11, opset_import: ["" : 26]>'
            " main (float[1, 1, 4, 4] x) => (float[1, 1, N, M] y) {"
            f" {node.replace('[1, 1]', '[1, 2]')}"
            " ax = Constant <value = int64 {3}> () y = CumProd (p, ax) }"
        )
        with pytest.raises(rewriter.OpsetError, match="AveragePool"):
            rewriter.decompose_cumprod(dilated, target_opset=target)
    x = np.random.default_rng(10).uniform(1.0, 3.9, (1, 1, 4, 4)).astype(np.float32)
    # onnxruntime refuses the original's Cast (saturate on a non-float8 Cast): the spec's
    (want,) = ReferenceEvaluator(model).run(None, {"x": x})
    (y,) = run_ort(rewritten, {"x": x})
    np.testing.assert_allclose(y, want, rtol=1e-6)


@pytest.mark.parametrize("target", [17, 13, 12, 11])
@pytest.mark.parametrize("width", [7, 8])
def test_target_opset_writes_out_split_num_outputs(target: int, width: int) -> None:
    """Split-18's num_outputs (torch.chunk's export) has no older form and onnx's converter
    no adapter: over a static dim the sizes it means (chunks of ceil(d / k), the last one
    smaller) are written out as Split-13's input or Split-11's attribute."""
    text = (
        '<ir_version: 11, opset_import: ["" : 26]>'
        " main (float[2, WIDTH] x) => (float[2, 2] a, float[2, 2] b, float[2, 2] c,"
        " float[2, LAST] d) { a, b, c, e = Split <axis = 1, num_outputs = 4> (x)"
        " ax = Constant <value = int64 {1}> () d = CumProd (e, ax) }"
    )
    model = onnx.parser.parse_model(
        text.replace("WIDTH", str(width)).replace("LAST", str(width - 3 * 2))
    )
    rewritten = rewriter.decompose_cumprod(model, target_opset=target)
    onnx.checker.check_model(rewritten, full_check=True)
    (split,) = [n for n in rewritten.graph.node if n.op_type == "Split"]
    assert "num_outputs" not in {a.name for a in split.attribute}
    x = np.random.default_rng(11).uniform(0.5, 1.5, (2, width)).astype(np.float32)
    for got, want in zip(run_ort(rewritten, {"x": x}), run_ort(model, {"x": x}), strict=True):
        np.testing.assert_array_equal(got, want)
    symbolic = onnx.parser.parse_model(text.replace("WIDTH", "W").replace("LAST", "L"))
    with pytest.raises(rewriter.OpsetError, match=r"No Adapter From Version .18 for Split"):
        rewriter.decompose_cumprod(symbolic, target_opset=target)


def test_target_opset_writes_out_split_num_outputs_on_the_default_axis() -> None:
    """Split's axis defaults to 0: the sizes written out are those of the first dim."""
    model = onnx.parser.parse_model(
        '<ir_version: 11, opset_import: ["" : 26]>'
        " main (float[7, 2] x) => (float[3, 2] a, float[3, 2] b, float[1, 2] d) {"
        " a, b, e = Split <num_outputs = 3> (x)"
        " ax = Constant <value = int64 {0}> () d = CumProd (e, ax) }"
    )
    x = np.arange(1, 15, dtype=np.float32).reshape(7, 2)
    for target in (13, 11):
        rewritten = rewriter.decompose_cumprod(model, target_opset=target)
        a, b, d = run_ort(rewritten, {"x": x})
        np.testing.assert_array_equal(a, x[:3])
        np.testing.assert_array_equal(b, x[3:6])
        np.testing.assert_array_equal(d, x[6:])


def test_target_opset_split_sizes_take_a_name_no_scope_uses() -> None:
    """Found by a review from outside: the Constant written for a Split-18 in an If branch
    was named val_0 by onnx_ir, a name the main graph used (torch's dynamo exporter names
    values so), and the output was refused as not in SSA form."""
    model = onnx.parser.parse_model(
        '<ir_version: 10, opset_import: ["" : 26]>'
        " main (float[2, 3, 4] x, bool cond) => (float[2, 3, 4] y) {"
        " ax = Constant <value = int64 {2}> () val_0 = CumProd (x, ax)"
        " y = If (cond) <then_branch = then () => (float[2, 3, 4] tout) {"
        " t0, t1, t2 = Split <axis = 2, num_outputs = 3> (val_0)"
        " tout = Concat <axis = 2> (t2, t1, t0) },"
        " else_branch = else () => (float[2, 3, 4] eout) { eout = Identity (val_0) }> }"
    )
    rewritten = rewriter.decompose_cumprod(model, target_opset=17)
    onnx.checker.check_model(rewritten, full_check=True)
    x = np.random.default_rng(15).uniform(0.5, 1.5, (2, 3, 4)).astype(np.float32)
    for cond in (True, False):
        feeds = {"x": x, "cond": np.array(cond)}
        (got,), (want,) = run_ort(rewritten, feeds), run_ort(model, feeds)
        np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize(
    ("node", "axes", "out"),
    [
        ("ReduceSum <keepdims = 1> (c, ra)", 2, "float[2, 3, 1]"),
        ("Unsqueeze (c, ra)", 3, "float[2, 3, 4, 1]"),
    ],
)
@pytest.mark.parametrize("target", [12, 11])
def test_target_opset_converts_axes_from_constant_value_ints(
    node: str, axes: int, out: str, target: int
) -> None:
    """Axes from ``Constant <value_ints>`` (the torch exporter's form) were refused at 12:
    onnx's converter reads a constant input from a Constant's ``value`` only (at 11 the
    Constant was already written as ``value``). Written as ``value`` before it runs."""
    model = onnx.parser.parse_model(
        '<ir_version: 10, opset_import: ["" : 26]>'
        f" main (float[2, 3, 4] x) => ({out} y) {{ ax = Constant <value = int64 {{1}}> ()"
        f" c = CumProd (x, ax) ra = Constant <value_ints = [{axes}]> () y = {node} }}"
    )
    rewritten = rewriter.decompose_cumprod(model, target_opset=target)
    onnx.checker.check_model(rewritten, full_check=True)
    x = np.random.default_rng(19).uniform(0.5, 1.5, (2, 3, 4)).astype(np.float32)
    (got,), (want,) = run_ort(rewritten, {"x": x}), run_ort(model, {"x": x})
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize(
    ("attr", "out"),
    [
        ("value_float = 2.5", "float"),
        ("value_floats = [1.5, 2.0]", "float[2]"),
        ("value_int = 7", "int64"),
        ("value_ints = [1, 2, 3]", "int64[3]"),
        ('value_string = "ab"', "string"),
        ('value_strings = ["a", "bc"]', "string[2]"),
    ],
)
def test_target_opset_11_writes_constant_values_as_tensors(attr: str, out: str) -> None:
    """Constant's value_float(s) / value_int(s) / value_string(s) came with Constant-12 (the
    torch exporter writes value_ints): at 11 they are written as the same ``value`` tensor;
    they were refused (onnx's converter has no adapter)."""
    model = onnx.parser.parse_model(
        '<ir_version: 11, opset_import: ["" : 26]>'
        f" main (float[2, 3] x) => (float[2, 3] y, {out} c) {{ c = Constant <{attr}> ()"
        " ax = Constant <value = int64 {1}> () y = CumProd (x, ax) }"
    )
    rewritten = rewriter.decompose_cumprod(model, target_opset=11)
    onnx.checker.check_model(rewritten, full_check=True)
    x = np.random.default_rng(12).uniform(0.5, 1.5, (2, 3)).astype(np.float32)
    (_, got), (_, want) = run_ort(rewritten, {"x": x}), run_ort(model, {"x": x})
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(
    ("op", "target"), [("ReduceMean", 17), ("ReduceMean", 13), ("Unsqueeze", 11)]
)
@pytest.mark.parametrize("shared", [False, True])
def test_target_opset_refuses_to_freeze_an_overridable_initializer(
    op: str, target: int, shared: bool
) -> None:
    """Found by a review from outside: axes from an initializer that the graph also takes as
    an input (a caller may feed another value; exporters' keep_initializers_as_inputs) went
    through onnx's converter, which froze its default into an attribute: fed [2], the
    lowered ReduceMean reduced axis 1 (shared with another node: a silently wrong result) or
    the input was gone (an error at run time). Refused, naming the input."""
    reduce = op == "ReduceMean"
    shape, out = ([2, 3, 4], ["a", "b", "c"]) if reduce else ([2, 3], ["a", "b", "c"])
    nodes = [helper.make_node(op, ["x", "ax"], ["y"])]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, out)]
    if shared:
        nodes.append(helper.make_node("Identity", ["ax"], ["ax_out"]))
        outputs.append(helper.make_tensor_value_info("ax_out", TensorProto.INT64, [1]))
    nodes.append(helper.make_node("CumProd", ["c", "cax"], ["cy"]))
    outputs.append(helper.make_tensor_value_info("cy", TensorProto.INT64, [2, 3]))
    graph = helper.make_graph(
        nodes,
        "g",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, shape),
            helper.make_tensor_value_info("ax", TensorProto.INT64, [1]),
            helper.make_tensor_value_info("c", TensorProto.INT64, [2, 3]),
        ],
        outputs,
        [
            onnx.numpy_helper.from_array(np.array([1], np.int64), "ax"),
            onnx.numpy_helper.from_array(np.array(1, np.int64), "cax"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26)])
    model.ir_version = 10
    onnx.checker.check_model(model, full_check=True)
    with pytest.raises(rewriter.OpsetError, match=f"{op}-.*would freeze ax"):
        rewriter.decompose_cumprod(model, target_opset=target)
    del model.graph.input[1]  # a plain initializer: nothing to feed, the converter may fold it
    rewritten = rewriter.decompose_cumprod(model, target_opset=target)
    feeds = {
        "x": np.arange(np.prod(shape), dtype=np.float32).reshape(shape),
        "c": np.ones((2, 3), np.int64),
    }
    for got, want in zip(run_ort(rewritten, feeds), run_ort(model, feeds)):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("target", [13, 12, 11])
def test_target_opset_keeps_a_large_overridable_initializer(target: int) -> None:
    """Found by a review from outside: when onnx's converter ran (an Unsqueeze going below
    13), an initializer above 1 kB that the graph also takes as an input lost its default
    (onnx_ir lifts large tensors out around the C API): the output then needed it fed."""
    w = np.random.default_rng(13).uniform(0.9, 1.1, (16, 32)).astype(np.float32)  # 2 kB
    graph = helper.make_graph(
        [
            helper.make_node("Mul", ["x", "w"], ["m"]),
            helper.make_node("CumProd", ["m", "ax"], ["c"]),
            helper.make_node("Unsqueeze", ["c", "ua"], ["y"]),
        ],
        "g",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [16, 32]),
            helper.make_tensor_value_info("w", TensorProto.FLOAT, [16, 32]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 32])],
        [
            helper.make_tensor("ax", TensorProto.INT64, [], [1]),
            onnx.numpy_helper.from_array(w, "w"),
            helper.make_tensor("ua", TensorProto.INT64, [1], [0]),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26)])
    model.ir_version = 10
    rewritten = rewriter.decompose_cumprod(model, target_opset=target)
    assert rewritten.opset_import[0].version == target
    assert "w" in {t.name for t in rewritten.graph.initializer}
    x = np.random.default_rng(14).uniform(0.9, 1.1, (16, 32)).astype(np.float32)
    for feeds in ({"x": x}, {"x": x, "w": np.flip(w).copy()}):  # the default, another value
        (got,), (want,) = run_ort(rewritten, feeds), run_ort(model, feeds)
        np.testing.assert_allclose(got, want, rtol=1e-5)


@pytest.mark.parametrize("target", [12, 11])
@pytest.mark.parametrize("inside", [False, True])
def test_target_opset_types_a_call_after_the_lowering(target: int, inside: bool) -> None:
    """Found by a review from outside: a Relu over a model-local function's output was
    refused below 13 ("the element type of s is not known"): onnx's inference could not
    type the nodes built at the target while the model still imported 26, nor the call
    after them. The types inferred before the lowering type what it kept."""
    cumprod = "ax = Constant <value = int64 {1}> () b = CumProd (a, ax)"
    body, main = ("b = Neg (a)", f"{cumprod.replace('(a,', '(x,').replace('b =', 'c =')}")
    if inside:
        body, main = cumprod, "c = Identity (x)"
    model = onnx.parser.parse_model(
        '<ir_version: 10, opset_import: ["" : 26, "local" : 1]>'
        f" main (float[2, 3, 4] x) => (float[2, 3, 4] y) {{ {main}"
        " s = local.F (c) y = Relu (s) }"
        ' <domain: "local", opset_import: ["" : 26]> F (a) => (b) { ' + body + " }"
    )
    rewritten = rewriter.decompose_cumprod(model, target_opset=target)
    onnx.checker.check_model(rewritten, full_check=True)
    x = np.random.default_rng(16).uniform(-1.5, 1.5, (2, 3, 4)).astype(np.float32)
    (got,), (want,) = run_ort(rewritten, {"x": x}), run_ort(model, {"x": x})
    np.testing.assert_allclose(got, want, rtol=1e-6)


REFERENCES = """
<ir_version: 10, opset_import: ["" : 26, "local" : 1]>
main (float[2, 4] x) => (float[2, 7] y, float[2, 4] z) {
    ax = Constant <value = int64 {1}> ()
    c = CumProd (x, ax)
    pads = Constant <value = int64[4] {0, 2, 0, 1}> ()
    y = local.Pd <md = "reflect"> (c, pads)
    z = local.Scaled <k = 2.5> (x)
}
<domain: "local", opset_import: ["" : 26]>
Pd <md> (a, p) => (b) { b = Pad <mode: string = @md> (a, p) }
<domain: "local", opset_import: ["" : 26]>
Scaled <k> (a) => (b) { s = Constant <value_float: float = @k> () b = Mul (a, s) }
"""


@pytest.mark.parametrize("target", [18, 13, 11])
def test_target_opset_resolves_attribute_references_first(target: int) -> None:
    """Found by a review from outside: a function without CumProd is not specialised, so
    the opset lowering met its attributes by reference: Constant value_float=@k became a
    tensor of NaN at 11 (a silently wrong result), Pad mode=@md a TypeError. With a
    target opset, functions taking attributes by reference get one per call signature;
    where no call sets one (a function nothing calls), a node that changes is refused."""
    model = onnx.parser.parse_model(REFERENCES)
    rewritten = rewriter.decompose_cumprod(model, target_opset=target)
    onnx.checker.check_model(rewritten, full_check=True)
    x = np.random.default_rng(17).uniform(0.5, 1.5, (2, 4)).astype(np.float32)
    for got, want in zip(run_ort(rewritten, {"x": x}), run_ort(model, {"x": x}), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6)
    # The opset pass alone (no specialisation first) refuses what it cannot read.
    with pytest.raises(
        rewriter.OpsetError,
        match=r"Constant-25 in function 'local.Scaled': its attribute value_float refers",
    ):
        TargetOpsetPass(11)(ir.serde.deserialize_model(model))


def test_target_opset_splits_a_lowered_cumprod_in_a_function() -> None:
    """Found by a review from outside: Split-18 num_outputs after a CumProd in a function
    was refused at 13: inference after the lowering kept c's rank but not its dims, and the
    types from before it only filled names with none. They are taken over those now."""
    model = onnx.parser.parse_model(
        '<ir_version: 10, opset_import: ["" : 26, "local" : 1]>'
        " main (float[2, 3, 4] x) => (float[2, 3, 2] y, float[2, 3, 2] z) { y, z = local.F (x) }"
        ' <domain: "local", opset_import: ["" : 26]> F (a) => (b, d) {'
        " k = Constant <value_int = 2> () c = CumProd (a, k)"
        " b, d = Split <axis = 2, num_outputs = 2> (c) }"
    )
    rewritten = rewriter.decompose_cumprod(model, target_opset=13)
    onnx.checker.check_model(rewritten, full_check=True)
    x = np.random.default_rng(20).uniform(0.5, 1.5, (2, 3, 4)).astype(np.float32)
    for got, want in zip(run_ort(rewritten, {"x": x}), run_ort(model, {"x": x}), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("target", [15, 13, 11])
def test_target_opset_drops_a_string_attribute_spelled_at_its_default(target: int) -> None:
    """ScatterElements-16's reduction="none" (the default, what the older op does) was kept
    for onnx's converter, which has no adapter below 13: refused at 11. Dropped like an
    integer attribute at its default; a reduction the older op cannot do stays refused."""
    text = (
        '<ir_version: 10, opset_import: ["" : 26]>'
        " main (float[2, 3] x, int64[2, 3] i, float[2, 3] u) => (float[2, 3] y) {"
        " ax = Constant <value = int64 {1}> () c = CumProd (x, ax)"
        ' y = ScatterElements <axis = 1, reduction = "REDUCTION"> (c, i, u) }'
    )
    model = onnx.parser.parse_model(text.replace("REDUCTION", "none"))
    rewritten = rewriter.decompose_cumprod(model, target_opset=target)
    (scatter,) = [n for n in rewritten.graph.node if n.op_type == "ScatterElements"]
    assert [a.name for a in scatter.attribute] == ["axis"]
    rng = np.random.default_rng(21)
    feeds = {
        "x": rng.uniform(0.5, 1.5, (2, 3)).astype(np.float32),
        "i": np.array([[2, 0, 1], [1, 2, 0]]),
        "u": rng.uniform(5, 9, (2, 3)).astype(np.float32),
    }
    np.testing.assert_allclose(run_ort(rewritten, feeds)[0], run_ort(model, feeds)[0], rtol=1e-6)
    with pytest.raises(rewriter.OpsetError, match="ScatterElements"):
        rewriter.decompose_cumprod(
            onnx.parser.parse_model(text.replace("REDUCTION", "add")), target_opset=target
        )


def test_target_opset_above_the_models_own_is_refused() -> None:
    """A target above the model's own opset is no lowering (the output would import an
    opset its nodes were not checked against)."""
    model = cumprod_model(TensorProto.FLOAT, (2, 3), 1)
    with pytest.raises(rewriter.OpsetError, match="between 11 and the model's own opset 26"):
        rewriter.decompose_cumprod(model, target_opset=27)


@pytest.mark.parametrize(
    ("graph", "target", "message"),
    [
        (
            " main (int8[4] x) => (int8[4] y, float[2, 3] c) { y = Relu (x) CUMPROD }",
            13,
            "Relu-13 does not allow x: tensor(int8)",
        ),
        (
            " main (bfloat16[2, 4] x) => (bfloat16[2, 2] y, bfloat16[2, 2] b, float[2, 3] c) {"
            " y, b = Split <axis = 1, num_outputs = 2> (x) CUMPROD }",
            12,
            "Split-11 does not allow x: tensor(bfloat16)",
        ),
    ],
    ids=["Relu int8", "Split num_outputs bfloat16"],
)
def test_target_opset_names_a_type_the_older_op_does_not_allow(
    graph: str, target: int, message: str
) -> None:
    """Each node whose type the older op does not take is named in the refusal (also on
    the path that writes out Split-18's num_outputs), not left to the checker's message."""
    cumprod = (
        "k = Constant <value = float[2, 3] {1, 2, 3, 4, 5, 6}> ()"
        " ax = Constant <value = int64 {1}> () c = CumProd (k, ax)"
    )
    model = onnx.parser.parse_model(
        '<ir_version: 11, opset_import: ["" : 26]>' + graph.replace("CUMPROD", cumprod)
    )
    with pytest.raises(rewriter.OpsetError, match=re.escape(message)):
        rewriter.decompose_cumprod(model, target_opset=target)


def test_target_opset_refuses_an_unknown_type_where_the_older_op_allows_fewer() -> None:
    """Found by a review from outside: a Relu over the int8 output of a contrib op (onnx's
    shape inference does not type it) was written as Relu-13, which allows no int8, and the
    model did not load. A type not known is refused where the older schema allows fewer
    types than the node's own (Relu-14 -> 13); where it allows the same (Relu over a float
    to 14 -> Relu-14 itself, Identity ...) nothing changes."""
    model = onnx.parser.parse_model(
        '<ir_version: 10, opset_import: ["" : 26, "com.microsoft" : 1]>'
        " main (float[4] x) => (float[4] y, int64[2, 3] cy) {"
        " sc = Constant <value = float {0.5}> () zp = Constant <value = int8 {0}> ()"
        " q = com.microsoft.QuantizeLinear (x, sc, zp) r = Relu (q)"
        " y = com.microsoft.DequantizeLinear (r, sc, zp)"
        " c = Constant <value = int64[2, 3] {1, 2, 3, 4, 5, 6}> ()"
        " ax = Constant <value = int64 {1}> () cy = CumProd (c, ax) }"
    )
    with pytest.raises(rewriter.OpsetError, match=r"Relu-14 .*type of q.* is not known"):
        rewriter.decompose_cumprod(model, target_opset=13)
    rewritten = rewriter.decompose_cumprod(model, target_opset=14)
    assert rewritten.opset_import[0].version == 14


def test_target_opset_follows_an_unknown_type_to_where_it_comes_from() -> None:
    """Found by a review from outside: the contrib op's int8 output reached the Relu through
    an Abs (the same version at 13 and 26), or as a function's input, and the untyped value
    was let through: a written model neither onnxruntime loaded. Each is refused; the same
    chain over a float (typed) is lowered."""
    header = '<ir_version: 10, opset_import: ["" : 26, "com.microsoft" : 1, "local" : 1]>'
    quantized = (
        " sc = Constant <value = float {0.5}> () zp = Constant <value = int8 {0}> ()"
        " q = com.microsoft.QuantizeLinear (x, sc, zp)"
    )
    through_abs = onnx.parser.parse_model(
        f"{header} main (float[4] x) => (float[4] y) {{{quantized}"
        " a = Abs (q) r = Relu (a) f = Cast <to = 1> (r)"
        " ax = Constant <value = int64 {0}> () c = CumProd (x, ax) y = Add (c, f) }"
    )
    with pytest.raises(rewriter.OpsetError, match=r"Relu-14 .*type of a.* is not known"):
        rewriter.decompose_cumprod(through_abs, target_opset=13)
    function = (
        ' <domain: "local", opset_import: ["" : 26]> F (a, b) => (r, c)'
        " { r = Relu (a) ax = Constant <value = int64 {0}> () c = CumProd (b, ax) }"
    )
    into_function = onnx.parser.parse_model(
        f"{header} main (float[4] x) => (int8[4] r, float[4] c) {{{quantized}"
        f" r, c = local.F (q, x) }}{function}"
    )
    with pytest.raises(rewriter.OpsetError, match=r"Relu-14 in function .*type of a.* not known"):
        rewriter.decompose_cumprod(into_function, target_opset=13)
    typed = onnx.parser.parse_model(
        f"{header} main (float[4] x) => (float[4] r, float[4] c) {{ r, c = local.F (x, x) }}"
        f"{function}"
    )
    rewritten = rewriter.decompose_cumprod(typed, target_opset=13)
    x = np.array([-1.5, 2.0, -0.5, 3.0], np.float32)
    r, c = run_ort(rewritten, {"x": x})
    np.testing.assert_array_equal(r, np.maximum(x, 0))
    np.testing.assert_array_equal(c, np.cumprod(x))
    assert "never calls this function" not in str(_opset_refusal(into_function, 13))
    through_another = onnx.parser.parse_model(
        f"{header} main (float[4] x) => (int8[4] r, float[4] c) {{{quantized}"
        f" r, c = local.H (q, x) }}{function}"
        ' <domain: "local", opset_import: ["" : 26, "local" : 1]> H (a, b) => (r, c)'
        " { r, c = local.F (a, b) }"
    )
    message = str(_opset_refusal(through_another, 13))
    assert "Relu-14 in function 'local.F'" in message
    assert "never calls this function" not in message  # called, through H


def _opset_refusal(model: onnx.ModelProto, target_opset: int) -> rewriter.OpsetError:
    with pytest.raises(rewriter.OpsetError) as refused:
        rewriter.decompose_cumprod(model, target_opset=target_opset)
    return refused.value


def test_a_function_nothing_calls_is_refused_with_how_to_go_on() -> None:
    """A function nothing calls has inputs of no known type: a Relu in it cannot go below
    14 (Relu-13 allows fewer types). The refusal says the main graph never calls it (nor
    one called only from such a function); without it (onnx_ir's RemoveUnusedFunctionsPass)
    the model is lowered."""
    model = onnx.parser.parse_model(
        '<ir_version: 10, opset_import: ["" : 26, "local" : 1]>'
        " main (float[4] x) => (float[4] y) {"
        " ax = Constant <value = int64 {0}> () y = CumProd (x, ax) }"
        ' <domain: "local", opset_import: ["" : 26]> F (a) => (r) { r = Relu (a) }'
    )
    message = str(_opset_refusal(model, 13))
    assert "Relu-14 in function 'local.F'" in message
    assert "the main graph never calls this function" in message
    # Called only from a function the main graph never calls: the same.
    through = onnx.parser.parse_model(
        '<ir_version: 10, opset_import: ["" : 26, "local" : 1]>'
        " main (float[4] x) => (float[4] y) {"
        " ax = Constant <value = int64 {0}> () y = CumProd (x, ax) }"
        ' <domain: "local", opset_import: ["" : 26]> F (a) => (r) { r = Relu (a) }'
        ' <domain: "local", opset_import: ["" : 26, "local" : 1]> G (a) => (r) { r = local.F (a) }'
    )
    assert "the main graph never calls this function" in str(_opset_refusal(through, 13))
    ir_model = ir.serde.deserialize_model(model)
    ir.passes.common.RemoveUnusedFunctionsPass()(ir_model)
    rewritten = rewriter.decompose_cumprod(ir.serde.serialize_model(ir_model), target_opset=13)
    x = np.array([-1.5, 2.0, -0.5, 3.0], np.float32)
    np.testing.assert_array_equal(run_ort(rewritten, {"x": x})[0], np.cumprod(x))
