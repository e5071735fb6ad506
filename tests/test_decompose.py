"""The public API: ModelProto vs onnx_ir.Model, what stays unchanged, idempotence, structure,
composition in a PassManager."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from onnx import TensorProto, helper

import rewriter
from tests.helpers import (
    ALL_TYPES,
    INTS,
    all_nodes,
    cumprod_model,
    local_model,
    lower_or_refused,
    op_types,
    ort_strategies,
    random_data,
    reference,
    run_ort,
)

RICH_MODEL = """
<ir_version: 11, opset_import: ["" : 26], producer_name: "tests", doc_string: "a model">
main (float[N, 4] x) => (float[N, 4] y, float[N, 4] r) {
    h = Relu (x)
    r = Identity (h)
    ax = Constant <value_int = 1> ()
    scanned = CumProd <reverse = 1> (h, ax)
    y = Mul (scanned, x)
}
"""


def _rich() -> onnx.ModelProto:
    model = onnx.parser.parse_model(RICH_MODEL)
    model.metadata_props.add(key="origin", value="unit test")
    model.graph.value_info.append(
        onnx.helper.make_tensor_value_info("h", TensorProto.FLOAT, ["N", 4])
    )
    model.graph.node[0].doc_string = "kept"
    return model


def _nodes(nodes: list[onnx.NodeProto]) -> list[tuple]:
    """What a node is, leaving out how it is spelled (an explicit empty domain or not)."""
    return [
        (
            n.op_type,
            n.domain or "",
            n.name,
            list(n.input),
            list(n.output),
            n.doc_string,
            [a.SerializeToString() for a in n.attribute],
        )
        for n in nodes
    ]


def test_model_proto_is_not_modified_and_a_new_one_is_returned() -> None:
    model = _rich()
    before = model.SerializeToString()
    rewritten = rewriter.decompose_cumprod(model)
    assert isinstance(rewritten, onnx.ModelProto)
    assert model.SerializeToString() == before
    assert "CumProd" in op_types(model) and "CumProd" not in op_types(rewritten)


def test_everything_else_stays_as_it_was() -> None:
    model = _rich()
    rewritten = rewriter.decompose_cumprod(model)
    onnx.checker.check_model(rewritten, full_check=True)
    assert [o.name for o in rewritten.graph.output] == ["y", "r"]
    assert rewritten.graph.output == model.graph.output
    assert rewritten.graph.input == model.graph.input
    assert rewritten.doc_string == "a model" and rewritten.producer_name == "tests"
    assert {p.key: p.value for p in rewritten.metadata_props} == {"origin": "unit test"}
    assert [vi for vi in rewritten.graph.value_info if vi.name == "h"] == list(
        model.graph.value_info
    )
    assert _nodes(rewritten.graph.node[:2]) == _nodes(model.graph.node[:2])  # Relu, Identity
    assert _nodes(rewritten.graph.node[-1:]) == _nodes(model.graph.node[-1:])  # the Mul
    assert rewritten.opset_import == model.opset_import
    # The axis constant served only the CumProd: it goes with it.
    assert not [n for n in rewritten.graph.node if n.output == ["ax"]]

    x = np.random.default_rng(0).uniform(-2, 2, (3, 4)).astype(np.float32)
    y, r = run_ort(rewritten, {"x": x})
    expected = reference(np.maximum(x, 0), 1, 0, 1) * x
    np.testing.assert_allclose(y, expected, rtol=2.0**-23)  # logsum: 1 ulp, times x: 1 more
    np.testing.assert_array_equal(r, np.maximum(x, 0))


def test_ir_model_is_rewritten_in_place() -> None:
    model = ir.serde.deserialize_model(_rich())
    result = rewriter.decompose_cumprod(model)
    assert result is model
    assert all(node.op_type != "CumProd" for node in model.graph)


def test_model_without_cumprod_comes_back_unchanged() -> None:
    model = onnx.parser.parse_model(
        '<ir_version: 11, opset_import: ["" : 21]>'
        " main (float[2] x) => (float[2] y) { y = Relu (x) }"
    )
    assert rewriter.decompose_cumprod(model).SerializeToString() == model.SerializeToString()
    ir_model = ir.serde.deserialize_model(model)
    assert not rewriter.DecomposeCumProdPass()(ir_model).modified


@pytest.mark.parametrize("strategy", ort_strategies())
def test_running_twice_equals_running_once(strategy: str) -> None:
    once = rewriter.decompose_cumprod(_rich(), strategy=strategy)
    twice = rewriter.decompose_cumprod(once, strategy=strategy)
    assert twice.SerializeToString() == once.SerializeToString()


def test_structure_of_each_lowering() -> None:
    model = cumprod_model(TensorProto.FLOAT, [3, 8], 1, exclusive=1, reverse=1)
    logsum = op_types(rewriter.decompose_cumprod(model, strategy="logsum"))
    assert logsum.count("CumSum") == 3 and {"Log", "Exp", "Abs"} <= set(logsum)
    assert "Where" not in logsum and "Loop" not in logsum
    loop = op_types(rewriter.decompose_cumprod(model, strategy="loop"))
    assert loop.count("Loop") == 1 and "Pad" in loop and "CumSum" not in loop
    assert loop.count("Slice") == 3  # flip in, drop-last for exclusive, flip out


def test_composes_in_a_pass_manager() -> None:
    from onnx_ir.passes.common import CheckerPass, RemoveUnusedNodesPass

    model = ir.serde.deserialize_model(cumprod_model(TensorProto.INT64, [2, 3], -1))
    manager = ir.passes.PassManager(
        [
            rewriter.DecomposeCumProdPass("loop"),
            RemoveUnusedNodesPass(),
            CheckerPass(full_check=True),
        ]
    )
    result = manager(model)
    assert result.modified
    x = np.arange(1, 7, dtype=np.int64).reshape(2, 3)
    (y,) = run_ort(result.model, {"x": x})
    np.testing.assert_array_equal(y, reference(x, -1, 0, 0))


CHAINED = """
<ir_version: 11, opset_import: ["" : 26]>
main (float[2, 6] x, int64[1] a, bool c) => (float[2, 6] y, float[2, 6] t, float[2, 6] z) {
    zero = Constant <value_int = 0> ()
    a1 = CumProd (a, zero)
    ax = Squeeze (a1)
    t = CumProd (x, ax)
    y = CumProd <reverse = 1> (t, ax)
    z = If (c) <then_branch = g1 () => (float[2, 6] b1) { b1 = CumProd <exclusive = 1> (t, ax) },
                else_branch = g2 () => (float[2, 6] b2) { b2 = Identity (t) }>
}
"""


@pytest.mark.parametrize("strategy", ["auto", "chain", "loop"])
def test_a_cumprod_reading_another_reads_its_lowering_in_memory(strategy: str) -> None:
    """Found by a review from outside: on an onnx_ir.Model, x -> CumProd -> t -> CumProd
    lowered the second from the first's removed output (the site's x as planned), so the IR
    was broken in memory (clone failed; RemoveUnusedNodesPass after it dropped the first
    lowering). Here t is also a graph output and read in an If branch, and the axis itself
    comes out of a CumProd."""
    from onnx_ir.passes.common import RemoveUnusedNodesPass

    model = ir.serde.deserialize_model(onnx.parser.parse_model(CHAINED))
    ir.passes.PassManager([rewriter.DecomposeCumProdPass(strategy), RemoveUnusedNodesPass()])(model)
    model.clone()  # raises on a value whose producer left the graph
    x = np.random.default_rng(3).uniform(0.5, 1.5, (2, 6)).astype(np.float32)
    feeds = {"x": x, "a": np.array([-1], np.int64), "c": np.array(True)}
    y, t, z = run_ort(ir.serde.serialize_model(model), feeds)
    wide = x.astype(np.float64)
    np.testing.assert_allclose(t, reference(wide, 1, 0, 0), rtol=1e-6)
    np.testing.assert_allclose(y, reference(reference(wide, 1, 0, 0), 1, 0, 1), rtol=1e-6)
    np.testing.assert_allclose(z, reference(reference(wide, 1, 0, 0), 1, 1, 0), rtol=1e-6)


def test_checker_passes_for_every_type_and_strategy() -> None:
    for elem_type in ALL_TYPES:
        for strategy in ort_strategies():
            for axis_form in ("initializer", "input"):
                model = cumprod_model(elem_type, ["B", 5], 1, axis_form=axis_form, exclusive=1)
                rewritten = lower_or_refused(model, strategy)
                refused = (strategy == "logsum" and elem_type in INTS) or (
                    strategy in ("chain", "blocked", "radix") and axis_form == "input"
                )  # with a run-time axis the scanned length is only known at run time
                assert (rewritten is None) == refused, (elem_type, strategy, axis_form)
                if rewritten is not None:
                    onnx.checker.check_model(rewritten, full_check=True)


@pytest.mark.parametrize("elem_type", [TensorProto.UINT32, TensorProto.UINT64])
def test_targets_decide_the_integer_compute_type(elem_type: int) -> None:
    """``onnxruntime`` (default) multiplies uint32 / uint64 as int64 (onnxruntime 1.20.1 has no
    Mul for them); ``spec`` keeps their own type. Both bit-exact (onnxruntime 1.32 has Mul)."""
    model = cumprod_model(elem_type, [3, 40], 1, exclusive=1)
    x = random_data(elem_type, (3, 40), np.random.default_rng(11))
    expected = reference(x, 1, 1, 0)
    for target, casts in (("onnxruntime", True), ("spec", False)):
        rewritten = rewriter.decompose_cumprod(model, strategy="scan", target=target)
        assert ("Cast" in op_types(rewritten)) == casts, target
        (y,) = run_ort(rewritten, {"x": x})
        np.testing.assert_array_equal(y, expected)
    with pytest.raises(ValueError, match="unknown target 'gpu'"):
        rewriter.decompose_cumprod(model, target="gpu")


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"target_opset": 13.0}, TypeError, "target_opset must be a whole number, got 13.0"),
        ({"target_opset": "13"}, TypeError, "target_opset must be a whole number, got '13'"),
        ({"target_opset": True}, TypeError, "target_opset must be a whole number, got True"),
        ({"max_length": "8"}, TypeError, "max_length must be a whole number, got '8'"),
        ({"max_length": 0}, ValueError, "max_length must be a whole number >= 1, got 0"),
        ({"max_length": -3}, ValueError, "max_length must be a whole number >= 1, got -3"),
    ],
)
def test_api_options_that_are_not_whole_numbers_are_one_clear_error(
    options: dict, error: type, message: str
) -> None:
    """Found by a review from outside: target_opset="13" or 13.0 raised a TypeError from deep
    inside onnx, and max_length=0 or -3 was taken (a bound no length fits)."""
    model = cumprod_model(TensorProto.FLOAT, (2, "n"), 1)
    with pytest.raises(error, match=f"^{message}$"):
        rewriter.decompose_cumprod(model, target="iree", **options)
    with pytest.raises(error, match=f"^{message}$"):
        rewriter.DecomposeCumProdPass(**options)
    rewritten = rewriter.decompose_cumprod(
        model, target="iree", target_opset=np.int64(14), max_length=np.int64(8)
    )
    assert rewritten.opset_import[0].version == 14


@pytest.mark.parametrize("target", list(rewriter.TARGETS))
def test_no_lowering_leaves_a_node_nothing_reads(target: str) -> None:
    """A lowering's helper constants that it did not use after all were left in the graph:
    onnxruntime printed "Removing initializer 'CumProd_Constant_4'. It is not used by any
    node" for each, on every session (found by a review from outside); If branches kept
    theirs (a Constant per branch at every opset: session-32 note). Every strategy, on
    static, symbolic and run-time lengths, and a run-time axis, at opsets 26 and 13."""
    from tests.helpers import lower_or_refused

    models = [
        cumprod_model(TensorProto.FLOAT, (4, 5), 1),
        cumprod_model(TensorProto.INT64, ("b", 40, 3), 1, exclusive=1, reverse=1),
        cumprod_model(TensorProto.FLOAT, (3, "n"), 1),
        cumprod_model(TensorProto.FLOAT, ("a", "n"), 1),
        cumprod_model(TensorProto.INT32, (2, 3, 4), 1, axis_form="input"),
    ]

    def dead(graph: onnx.GraphProto, read: set[str]) -> list[str]:
        outputs = {out.name for out in graph.output}
        found = [
            n.output[0] for n in graph.node if not any(o in read or o in outputs for o in n.output)
        ]
        for node in graph.node:
            for attr in node.attribute:
                subgraphs = [attr.g] if attr.type == onnx.AttributeProto.GRAPH else attr.graphs
                for sub in subgraphs:
                    found += [f"{node.op_type}.{attr.name}: {d}" for d in dead(sub, read)]
        return found

    for strategy in rewriter.lowerings.STRATEGIES:
        for model in models:
            for opset in (26, 13):
                try:
                    lowered = lower_or_refused(
                        model, strategy, target=target, max_length=64, target_opset=opset
                    )
                except (AssertionError, rewriter.OpsetError, rewriter.TargetError):
                    continue  # a refusal of this target (tests/lowerings/test_view.py checks those)
                if lowered is None:
                    continue
                read = {name for node in all_nodes(lowered) for name in node.input}
                assert dead(lowered.graph, read) == [], f"{strategy} at {opset}"


def test_sparse_initializers_and_training_info_are_kept() -> None:
    model = local_model(
        [
            helper.make_node("Constant", [], ["axis"], value_int=0),
            helper.make_node("CumProd", ["x", "axis"], ["y"]),
        ],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
    )
    sparse = helper.make_sparse_tensor(
        helper.make_tensor("sp", TensorProto.FLOAT, [1], [2.0]),
        helper.make_tensor("sp_idx", TensorProto.INT64, [1], [1]),
        [4],
    )
    model.graph.sparse_initializer.append(sparse)
    training = onnx.TrainingInfoProto()
    training.algorithm.name = "algo"
    model.training_info.append(training)
    rewritten = rewriter.decompose_cumprod(model)
    assert isinstance(rewritten, onnx.ModelProto)
    assert list(rewritten.graph.sparse_initializer) == [sparse]
    assert list(rewritten.training_info) == [training]


@pytest.mark.parametrize("held_by", ["main graph", "branch"])
def test_a_sparse_initializer_a_node_reads_is_one_clear_error(held_by: str) -> None:
    """Found by a review from outside: onnx_ir does not load sparse initializers, and one a
    node reads (here in an If branch) made onnx_ir's cloner raise a RuntimeError from deep
    inside. One line now, naming the node and the tensor; a path is a TypeError."""
    then = helper.make_graph(
        [helper.make_node("Add", ["c", "sp"], ["t"], name="add_sparse")],
        "then",
        [],
        [helper.make_tensor_value_info("t", TensorProto.FLOAT, [4])],
    )
    model = local_model(
        [
            helper.make_node("Constant", [], ["axis"], value_int=0),
            helper.make_node("CumProd", ["x", "axis"], ["c"]),
            helper.make_node("If", ["b"], ["y"], then_branch=then, else_branch=then),
        ],
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [4]),
            helper.make_tensor_value_info("b", TensorProto.BOOL, []),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
    )
    sparse = helper.make_sparse_tensor(
        helper.make_tensor("sp", TensorProto.FLOAT, [1], [2.0]),
        helper.make_tensor("sp_idx", TensorProto.INT64, [1], [1]),
        [4],
    )
    if held_by == "branch":
        model.graph.node[-1].attribute[0].g.sparse_initializer.append(sparse)
    else:
        model.graph.sparse_initializer.append(sparse)
    with pytest.raises(
        rewriter.InputModelError,
        match=r"^node 'add_sparse' \(Add\) reads the sparse initializer 'sp', which onnx_ir",
    ):
        rewriter.decompose_cumprod(model)
    with pytest.raises(TypeError, match=r"takes an onnx\.ModelProto or an onnx_ir\.Model, not str"):
        rewriter.decompose_cumprod("model.onnx")  # type: ignore[arg-type]


def test_an_overridable_input_without_a_shape_is_refused_as_the_checker_would() -> None:
    """Found by a review from outside: x declared without a shape (which the ONNX checker
    refuses) and also an initializer of 3 elements came out declared [3] (onnx_ir's C API
    calls set it from the tensor, so its checker pass does not see it), and onnxruntime then
    refused the 5-element feed the original takes. Refused now, as the checker would."""
    model = local_model(
        [helper.make_node("CumProd", ["x", "axis"], ["y"])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["M"])],
        initializers=[
            helper.make_tensor("x", TensorProto.FLOAT, [3], [2.0, 3.0, 4.0]),
            helper.make_tensor("axis", TensorProto.INT64, [], [0]),
        ],
    )
    with pytest.raises(onnx.checker.ValidationError, match="Field 'shape' of 'type' is required"):
        onnx.checker.check_model(model, full_check=True)
    for options in ({}, {"target_opset": 18}):
        with pytest.raises(
            rewriter.InputModelError, match=r"graph input 'x' \(also an initializer\) declares no"
        ):
            rewriter.decompose_cumprod(model, **options)  # type: ignore[arg-type]


def test_a_proto_without_its_external_data_from_another_folder_is_one_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by a red-team review of the library: a ModelProto loaded with
    ``load_external_data=False`` carries no folder; from another working directory the
    rewrite failed with a bare FileNotFoundError naming only the file. Now one
    InputModelError naming the tensor and what to pass instead; from the model's folder it
    still works (bitwise against native)."""
    w = (np.arange(64, dtype=np.int64).reshape(2, 32) % 5) - 2
    model = local_model(
        [
            helper.make_node("Mul", ["x", "w"], ["xw"]),
            helper.make_node("Constant", [], ["axis"], value_int=1),
            helper.make_node("CumProd", ["xw", "axis"], ["y"]),
        ],
        [helper.make_tensor_value_info("x", TensorProto.INT64, [2, 32])],
        [helper.make_tensor_value_info("y", TensorProto.INT64, [2, 32])],
        initializers=[onnx.numpy_helper.from_array(w, "w")],
    )
    (tmp_path / "in").mkdir()
    onnx.save(
        model,
        tmp_path / "in" / "m.onnx",
        save_as_external_data=True,
        location="m.data",
        size_threshold=0,
    )
    lazy = onnx.load(str(tmp_path / "in" / "m.onnx"), load_external_data=False)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(
        rewriter.InputModelError, match=r"tensor 'w' keeps its data in 'm.data', which is not found"
    ):
        rewriter.decompose_cumprod(lazy)
    monkeypatch.chdir(tmp_path / "in")
    rewritten = rewriter.decompose_cumprod(lazy)
    assert isinstance(rewritten, onnx.ModelProto)
    x = np.random.default_rng(4).integers(-5, 6, (2, 32))
    np.testing.assert_array_equal(run_ort(rewritten, {"x": x})[0], np.cumprod(x * w, axis=1))
