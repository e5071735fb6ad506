"""``verify_model`` must catch wrong rewrites and pass right ones (the whole model; each
CumProd alone is tests/verify/test_sites.py).

Each wrong rewrite is made by editing a model the tool rewrote correctly; the right ones are
the tool's own rewrites of the bundled example and of models with several outputs, integer
index inputs and sequence inputs.
"""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from onnx import TensorProto, helper

import rewriter
from rewriter.convert import convert_file, lower_sites
from rewriter.decompose import DecomposeCumProdPass
from rewriter.verify import (
    VerifyResult,
    compare,
    index_inputs,
    random_inputs,
    symbolic_sizes,
    ulp_error,
    verify_model,
)
from tests.helpers import cumprod_model, run_ort
from tests.verify.models import loop_model, opset26, reroute, symbolic_model

EXAMPLE = Path(__file__).resolve().parents[2] / "rewriter" / "examples" / "example.onnx"


BOUND = 4.0  # ulps: the models below only multiply, no lowering is looser than this here


def _rewrite(model: onnx.ModelProto, folder: Path, name: str) -> tuple[Path, Path]:
    """(original file, the tool's rewrite of it)."""
    original = folder / f"{name}.onnx"
    onnx.save(model, original)
    rewritten = folder / f"{name}.rewritten.onnx"
    onnx.save(rewriter.decompose_cumprod(model), rewritten)
    return original, rewritten


def _verify(original: Path, rewritten: Path, *, sites: bool = False) -> VerifyResult:
    plans: list[object] = []
    if sites:
        import onnx_ir as ir

        rewrite = DecomposeCumProdPass("auto")
        rewrite(ir.load(original))
        plans = list(rewrite.plans)
    return verify_model(
        original, rewritten, bound_ulps=BOUND, runs=2, plans=plans, sites=lower_sites(plans)
    )


def _edit(rewritten: Path, folder: Path, change: Callable[[onnx.ModelProto], None]) -> Path:
    model = onnx.load(rewritten)
    change(model)
    onnx.checker.check_model(model)  # still a valid model: only verify can tell
    path = folder / "corrupted.onnx"
    onnx.save(model, path)
    return path


# -- wrong rewrites ----------------------------------------------------------------------------


def _two_outputs() -> onnx.ModelProto:
    graph = helper.make_graph(
        [
            helper.make_node("CumProd", ["x", "axis"], ["y"], name="scan"),
            helper.make_node("Neg", ["y"], ["z"]),
        ],
        "main",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 6])],
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 6]),
            helper.make_tensor_value_info("z", TensorProto.FLOAT, [3, 6]),
        ],
        [helper.make_tensor("axis", TensorProto.INT64, [], [1])],
    )
    return opset26(graph)


def _drop_output(model: onnx.ModelProto) -> None:
    del model.graph.output[1]


def _rename_output(model: onnx.ModelProto) -> None:
    model.graph.node.append(helper.make_node("Identity", ["y"], ["y_renamed"]))
    model.graph.output[0].name = "y_renamed"


def _to_double(model: onnx.ModelProto) -> None:
    reroute(model, "z", [helper.make_node("Cast", ["z_inner"], ["z"], to=TensorProto.DOUBLE)])
    model.graph.output[1].type.tensor_type.elem_type = TensorProto.DOUBLE


def _nan_at_zeros(model: onnx.ModelProto) -> None:
    model.graph.initializer.extend(
        [
            helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0]),
            helper.make_tensor("nan", TensorProto.FLOAT, [], [float("nan")]),
        ]
    )
    reroute(
        model,
        "y",
        [
            helper.make_node("Equal", ["x", "zero"], ["x_is_zero"]),
            helper.make_node("Where", ["x_is_zero", "nan", "y_inner"], ["y"]),
        ],
    )


def _cap_1000(model: onnx.ModelProto) -> None:
    model.graph.initializer.append(helper.make_tensor("cap", TensorProto.FLOAT, [], [1000.0]))
    reroute(model, "y", [helper.make_node("Min", ["y_inner", "cap"], ["y"])])


def _declared_shape(model: onnx.ModelProto) -> None:
    model.graph.output[1].type.tensor_type.shape.dim[1].dim_value = 7


CORRUPTIONS: dict[str, tuple[Callable[[onnx.ModelProto], None], str]] = {
    "output dropped": (_drop_output, "output missing from the rewritten model"),
    "output renamed": (_rename_output, "output missing from the rewritten model"),
    "float output turned into double": (_to_double, "declared type double[3, 6]"),
    "declared shape changed": (_declared_shape, "declared type float[3, 7]"),
    "NaN wherever x == 0": (_nan_at_zeros, "NaN where the reference is not"),
    "results capped at 1000": (_cap_1000, "got 1000, reference "),
}


@pytest.mark.parametrize("case", list(CORRUPTIONS))
def test_a_corrupted_rewrite_is_reported(tmp_path: Path, case: str) -> None:
    change, expected = CORRUPTIONS[case]
    original, rewritten = _rewrite(_two_outputs(), tmp_path, "m")
    assert _verify(original, rewritten).ok  # the tool's own rewrite passes
    result = _verify(original, _edit(rewritten, tmp_path, change))
    assert not result.ok
    details = [f"{c.name}: {c.detail}" for c in result.mismatches()]
    assert any(expected in d for d in details), details


def test_int64_computed_in_int32_is_reported(tmp_path: Path) -> None:
    """The int32 rewrite of the same CumProd, wrapped in Casts from and back to int64."""
    original, correct = _rewrite(cumprod_model(TensorProto.INT64, [2, 5], 1), tmp_path, "m64")
    assert _verify(original, correct).ok
    _, narrow = _rewrite(cumprod_model(TensorProto.INT32, [2, 5], 1), tmp_path, "m32")

    def in_int32(model: onnx.ModelProto) -> None:
        for node in _all_nodes(model.graph):
            node.input[:] = ["x32" if n == "x" else n for n in node.input]
        reroute(model, "y", [helper.make_node("Cast", ["y_inner"], ["y"], to=TensorProto.INT64)])
        model.graph.node.insert(0, helper.make_node("Cast", ["x"], ["x32"], to=TensorProto.INT32))
        model.graph.input[0].type.tensor_type.elem_type = TensorProto.INT64
        model.graph.output[0].type.tensor_type.elem_type = TensorProto.INT64

    result = _verify(original, _edit(narrow, tmp_path, in_int32))
    assert not result.ok
    (bad,) = result.mismatches()
    assert bad.name == "y" and "element(s) differ" in bad.detail, bad


def _all_nodes(graph: onnx.GraphProto) -> list[onnx.NodeProto]:
    nodes = list(graph.node)
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                nodes.extend(_all_nodes(attr.g))
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for g in attr.graphs:
                    nodes.extend(_all_nodes(g))
    return nodes


# -- right rewrites ----------------------------------------------------------------------------


def test_the_bundled_example_passes(tmp_path: Path) -> None:
    original = Path(shutil.copy(EXAMPLE, tmp_path / "example.onnx"))
    rewritten = tmp_path / "rewritten.onnx"
    onnx.save(rewriter.decompose_cumprod(onnx.load(original)), rewritten)
    result = _verify(original, rewritten, sites=True)
    assert result.ok, [c.detail for c in result.mismatches()]
    assert len(result.outputs) == 4 and len(result.sites) == 4


def test_several_outputs_pass(tmp_path: Path) -> None:
    result = _verify(*_rewrite(_two_outputs(), tmp_path, "m"), sites=True)
    assert result.ok and [o.name for o in result.outputs] == ["y", "z"]


def _index_model() -> onnx.ModelProto:
    """Gather(x, idx) (idx an int64 graph input), a CumProd over a run-time axis, and an
    int64 input used as data (wraps around in the extreme run)."""
    graph = helper.make_graph(
        [
            helper.make_node("Gather", ["x", "idx"], ["g"], axis=0),
            helper.make_node("CumProd", ["g", "axis"], ["y"], name="on_rows"),
            helper.make_node("CumProd", ["n", "zero"], ["m"], name="on_ints"),
        ],
        "main",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 5]),
            helper.make_tensor_value_info("idx", TensorProto.INT64, [3]),
            helper.make_tensor_value_info("axis", TensorProto.INT64, []),
            helper.make_tensor_value_info("n", TensorProto.INT64, [6]),
        ],
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 5]),
            helper.make_tensor_value_info("m", TensorProto.INT64, [6]),
        ],
        [helper.make_tensor("zero", TensorProto.INT64, [], [0])],
    )
    return opset26(graph)


def test_integer_index_inputs_pass_and_stay_in_range(tmp_path: Path) -> None:
    model = _index_model()
    assert index_inputs(model) == {"idx": 0, "axis": 0}
    rng = np.random.default_rng(0)
    extreme = random_inputs(model, rng, kind="extreme")
    assert not extreme["idx"].any() and extreme["axis"] == 0
    assert np.abs(extreme["n"]).max() > 2**40  # data integers take the whole range
    result = _verify(*_rewrite(model, tmp_path, "m"), sites=True)
    assert result.ok, [c.detail for c in result.mismatches()]


def _sequence_model() -> onnx.ModelProto:
    seq = helper.make_tensor_sequence_value_info("xs", TensorProto.FLOAT, [2, 4])
    graph = helper.make_graph(
        [
            helper.make_node("SequenceAt", ["xs", "pos"], ["x"]),
            helper.make_node("CumProd", ["x", "axis"], ["y"], name="scan"),
        ],
        "main",
        [seq, helper.make_tensor_value_info("pos", TensorProto.INT32, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor("axis", TensorProto.INT64, [], [-1])],
    )
    return opset26(graph)


def test_sequence_inputs_pass(tmp_path: Path) -> None:
    model = _sequence_model()
    feeds = random_inputs(model, np.random.default_rng(0), kind="special")
    assert isinstance(feeds["xs"], list) and len(feeds["xs"]) == 2 and feeds["pos"] == 0
    result = _verify(*_rewrite(model, tmp_path, "m"), sites=True)
    assert result.ok, [c.detail for c in result.mismatches()]


def test_a_scalar_bool_input_passes(tmp_path: Path) -> None:
    """An If condition as a 0-D bool graph input (a numpy comparison of a 0-D array gives a
    numpy scalar, which onnxruntime refuses as a feed)."""
    model = onnx.parser.parse_model(
        """
        <ir_version: 10, opset_import: ["" : 26]>
        main (float[2, 3] x, bool c) => (float[2, 3] y) {
            ax = Constant <value = int64 {1}> ()
            p = CumProd (x, ax)
            y = If (c) < then_branch = t () => (float[2, 3] a) { a = Identity (p) },
                         else_branch = e () => (float[2, 3] b) { b = Neg (p) } >
        }
        """
    )
    feeds = random_inputs(model, np.random.default_rng(0))
    assert isinstance(feeds["c"], np.ndarray) and feeds["c"].shape == ()
    result = _verify(*_rewrite(model, tmp_path, "m"), sites=True)
    assert result.ok, [c.detail for c in result.mismatches()]


def test_symbolic_dims_are_fed_at_sizes_of_their_own(tmp_path: Path) -> None:
    """A rewrite that is right only when B == N (it keeps the first B columns): with every
    symbolic dim fed at 3 it passed."""
    original, rewritten = _rewrite(symbolic_model(TensorProto.FLOAT, ["B", "N"], 1), tmp_path, "m")

    def first_b_columns(model: onnx.ModelProto) -> None:
        model.graph.initializer.extend(
            [
                helper.make_tensor("zero", TensorProto.INT64, [1], [0]),
                helper.make_tensor("one", TensorProto.INT64, [1], [1]),
            ]
        )
        for node in model.graph.node:
            node.input[:] = ["x_cut" if i == "x" else i for i in node.input]
        model.graph.node.insert(0, helper.make_node("Shape", ["x"], ["x_shape"], end=1))
        model.graph.node.insert(
            1, helper.make_node("Slice", ["x", "zero", "x_shape", "one"], ["x_cut"])
        )

    assert _verify(original, rewritten).ok
    result = _verify(original, _edit(rewritten, tmp_path, first_b_columns))
    assert dict(result.sizes) == {"B": 3, "N": 4}, result.sizes
    assert not result.ok, result


def test_loop_trip_counts_run_the_body_more_than_once(tmp_path: Path) -> None:
    """A rewrite whose Loop body is right on the first trip only: with the trip count fed 1
    (the safe value) it passed."""
    good = loop_model(lambda: [helper.make_node("CumProd", ["acc", "ax"], ["out"])])
    first_trip_only = loop_model(
        lambda: [
            helper.make_node("CumProd", ["acc", "ax"], ["cp"]),
            helper.make_node("Constant", [], ["zero"], value_int=0),
            helper.make_node("Equal", ["i", "zero"], ["first"]),
            helper.make_node("Where", ["first", "cp", "acc"], ["out"]),
        ]
    )
    original, rewritten = tmp_path / "loop.onnx", tmp_path / "loop.wrong.onnx"
    onnx.save(good, original)
    onnx.save(first_trip_only, rewritten)
    result = _verify(original, rewritten)
    assert result.richer_feeds and not result.ok, result


def test_feeds_fall_back_when_the_original_needs_them(tmp_path: Path) -> None:
    """B and N must be equal for the original to run (an Add of x and its transpose): the
    richer feeds fail there, and verify falls back to every dim at 3."""
    graph = helper.make_graph(
        [
            helper.make_node("Transpose", ["x"], ["xt"], perm=[1, 0]),
            helper.make_node("Add", ["x", "xt"], ["s"]),
            helper.make_node("CumProd", ["s", "axis"], ["y"]),
        ],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", "N"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["B", "N"])],
        [helper.make_tensor("axis", TensorProto.INT64, [], [1])],
    )
    original, rewritten = _rewrite(opset26(graph), tmp_path, "square")
    result = _verify(original, rewritten)
    assert result.ok and not result.richer_feeds, result
    assert dict(result.sizes) == {"B": 3, "N": 3}, result.sizes


# -- the command -------------------------------------------------------------------------------


def _capped(real: Callable[..., object]) -> Callable[..., object]:
    """``rewriter.io.save_model`` that saves the rewrite with every float output clipped to
    +-1000: a wrong rewrite for --verify to find."""

    def capped(model: ir.Model, target: object, **kwargs: object) -> object:
        proto = ir.serde.serialize_model(model)
        proto.graph.initializer.append(helper.make_tensor("cap", TensorProto.FLOAT, [], [1000.0]))
        proto.graph.initializer.append(helper.make_tensor("low", TensorProto.FLOAT, [], [-1000.0]))
        for out in proto.graph.output:
            if out.type.tensor_type.elem_type == TensorProto.FLOAT:
                for node in proto.graph.node:
                    node.output[:] = [n + "_inner" if n == out.name else n for n in node.output]
                proto.graph.node.append(
                    helper.make_node("Clip", [out.name + "_inner", "low", "cap"], [out.name])
                )
        return real(ir.serde.deserialize_model(proto), target, **kwargs)

    return capped


def test_cli_verify_mismatch_exit_1_one_line_each_nothing_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import rewriter.io
    from rewriter.cli import main

    monkeypatch.setattr(rewriter.io, "save_model", _capped(rewriter.io.save_model))
    source = shutil.copy(EXAMPLE, tmp_path / "model.onnx")
    status = main([str(source), "-o", str(tmp_path / "out.onnx"), "--verify"])
    out, err = capsys.readouterr()
    assert status == 1, out + err
    bad = [line for line in out.splitlines() if "[MISMATCH]" in line]
    # the three float outputs are capped; strides (int64) and the CumProd alone are right
    assert sorted(line.split()[1] for line in bad) == [
        "alphas_cumprod",
        "transmittance",
        "weights",
    ], out
    assert "--verify found a mismatch; nothing written" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.onnx"]


def test_cli_verify_takes_a_positive_count(tmp_path: Path) -> None:
    source = shutil.copy(EXAMPLE, tmp_path / "model.onnx")
    for bad in ("-1", "0", "x"):
        result = subprocess.run(
            [sys.executable, "-m", "rewriter", source, f"--verify={bad}"],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert result.returncode == 2 and "must be a whole number >= 1" in result.stderr
        assert sorted(p.name for p in tmp_path.iterdir()) == ["model.onnx"]


def test_cli_verify_says_what_it_fed_and_what_it_skipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The sizes of the symbolic dims are printed, and a site check that could not run says
    SKIPPED, not ok."""
    from rewriter.cli import main

    symbolic = tmp_path / "sym.onnx"
    onnx.save(symbolic_model(TensorProto.FLOAT, ["B", "N"], 1), symbolic)
    assert main([str(symbolic), "-o", str(tmp_path / "sym.out.onnx"), "--verify"]) == 0
    assert "symbolic dims fed at B=3, N=4" in capsys.readouterr().out
    looped = tmp_path / "loop.onnx"
    model = loop_model(lambda: [helper.make_node("CumProd", ["acc", "ax"], ["out"])], None)
    onnx.save(model, looped)  # rank unknown in the body
    assert main([str(looped), "-o", str(tmp_path / "loop.out.onnx"), "--verify"]) == 0
    lines = capsys.readouterr().out.splitlines()
    site = [line for line in lines if "alone" in line]
    assert len(site) == 1 and "[SKIPPED] not checked: rank unknown" in site[0], lines


def test_verify_runs_the_rewritten_model_on_the_targets_runtime(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """With the target's runtime installed, --verify runs the rewritten model there (here a
    stand-in runtime that doubles every output: the mismatch shows it was used) and says so."""
    from rewriter import runtimes

    source = tmp_path / "m.onnx"
    onnx.save(cumprod_model(TensorProto.FLOAT, [3, 4], 1), source)
    rewritten = tmp_path / "r.onnx"
    onnx.save(rewriter.decompose_cumprod(onnx.load(source), target="tract"), rewritten)
    calls = []

    def fake(path, feeds):  # type: ignore[no-untyped-def]
        calls.append(path)
        return [2 * y for y in run_ort(onnx.load(path), feeds)]

    monkeypatch.setattr(runtimes, "runner_for", lambda target: fake if target == "tract" else None)
    result = verify_model(source, rewritten, bound_ulps=4.0, target="tract")
    assert calls and result.runtime == "tract" and not result.ok
    assert verify_model(source, rewritten, bound_ulps=4.0, target="spec").ok
    plain = verify_model(source, rewritten, bound_ulps=4.0, target="openvino")
    assert plain.runtime.startswith("onnxruntime")


def test_compare_sees_the_sign_of_a_zero_and_every_bit_of_an_int64() -> None:
    """A lowering that loses the sign of a zero, or the low bits of an int64 product (say,
    computed through float64), must not pass --verify."""
    zero = compare(np.array([-0.0], np.float32), np.array([0.0]), ir.DataType.FLOAT, 4.0)
    assert not zero.ok
    assert compare(np.array([-0.0], np.float32), np.array([-0.0]), ir.DataType.FLOAT, 4.0).ok
    big = np.array([2**60 + 1], np.int64)
    assert not compare(big, np.array([2**60], np.int64), ir.DataType.INT64).ok
    assert compare(big, big.copy(), ir.DataType.INT64).ok

    # one ulp is one ulp: a bound of half an ulp refuses it (not a unit twice as large)
    one_up = np.array([1 + 2**-23], np.float32)
    assert ulp_error(one_up, np.array([1.0]), ir.DataType.FLOAT).tolist() == [1.0]
    assert not compare(one_up, np.array([1.0]), ir.DataType.FLOAT, 0.5).ok


def test_a_failing_site_fails_the_whole_verify(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The outputs agree but a CumProd standalone does not (adversarial values the model's
    own feeds never reach): --verify is not ok."""
    import rewriter.verify.model

    original, rewritten = _rewrite(_two_outputs(), tmp_path, "m")
    assert _verify(original, rewritten, sites=True).ok
    real = rewriter.verify.model.check_sites

    def failing(*args: object, **kwargs: object) -> list[object]:
        return [dataclasses.replace(c, ok=False) for c in real(*args, **kwargs)]  # type: ignore[arg-type]

    monkeypatch.setattr(rewriter.verify.model, "check_sites", failing)
    result = _verify(original, rewritten, sites=True)
    assert all(o.ok for o in result.outputs) and result.sites
    assert not result.ok


def test_an_output_of_another_element_type_is_a_mismatch() -> None:
    """A runtime that hands back float64 for a float32 output fails the check even where
    the values agree."""
    from rewriter.verify.model import _compare_value

    expected = np.array([1.0, 2.0], np.float32)
    result, _ = _compare_value(expected.astype(np.float64), expected, 4.0, [2], None)
    assert not result.ok
    same, _ = _compare_value(expected.copy(), expected, 4.0, [2], None)
    assert same.ok


def _bfloat16_model() -> onnx.ModelProto:
    """y = CumProd(x, 1) with x and y bfloat16: onnxruntime's Python binding neither takes
    nor returns bfloat16 arrays."""
    return opset26(
        helper.make_graph(
            [helper.make_node("CumProd", ["x", "axis"], ["y"])],
            "bf16",
            [helper.make_tensor_value_info("x", TensorProto.BFLOAT16, [3, 8])],
            [helper.make_tensor_value_info("y", TensorProto.BFLOAT16, [3, 8])],
            [helper.make_tensor("axis", TensorProto.INT64, [], [1])],
        )
    )


def test_bfloat16_inputs_and_outputs_are_verified(tmp_path: Path) -> None:
    """Every model with a bfloat16 graph input or output was reported a mismatch ("the
    rewritten model fails ... Numpy_type 256 can't be converted"), so --verify refused to
    write it. The tool's rewrite passes; one whose every product is one factor short is
    caught."""
    original, rewritten = _rewrite(_bfloat16_model(), tmp_path, "bf16")
    result = _verify(original, rewritten)
    assert result.ok, [f"{c.name}: {c.detail}" for c in result.mismatches()]
    assert [(c.name, c.dtype, c.skipped) for c in result.outputs] == [("y", "bfloat16", False)]

    def exclusive(model: onnx.ModelProto) -> None:  # y_k = x_0 .. x_{k-1}: a wrong rewrite
        reroute(
            model,
            "y",
            [
                helper.make_node(
                    "Constant",
                    [],
                    ["one"],
                    value=helper.make_tensor("one", TensorProto.BFLOAT16, [3, 1], [1.0] * 3),
                ),
                helper.make_node("Constant", [], ["start"], value_ints=[0]),
                helper.make_node("Constant", [], ["stop"], value_ints=[7]),
                helper.make_node("Constant", [], ["ax"], value_ints=[1]),
                helper.make_node("Slice", ["y_inner", "start", "stop", "ax"], ["head"]),
                helper.make_node("Concat", ["one", "head"], ["y"], axis=1),
            ],
        )

    broken = _verify(original, _edit(rewritten, tmp_path, exclusive))
    assert not broken.ok
    assert any(c.name == "y" and "ulp" in c.detail for c in broken.mismatches()), [
        f"{c.name}: {c.detail}" for c in broken.mismatches()
    ]


def _bfloat16_then(nodes: list[onnx.NodeProto], out: str, elem: int) -> onnx.ModelProto:
    return opset26(
        helper.make_graph(
            [helper.make_node("CumProd", ["x", "axis"], ["y"]), *nodes],
            "bf16_then",
            [helper.make_tensor_value_info("x", TensorProto.BFLOAT16, ["b", "n"])],
            [helper.make_tensor_value_info(out, elem, ["b", "n"])],
            [helper.make_tensor("axis", TensorProto.INT64, [], [1])],
        )
    )


def test_a_bfloat16_original_is_run_as_onnxruntime_multiplies(tmp_path: Path) -> None:
    """Found by a red-team review: onnxruntime has no bfloat16 CumProd, so the original runs
    in onnx.reference, whose CumProd rounds to bfloat16 at every step; the rewrite (like
    onnxruntime's float16 kernel) multiplies in float32 and rounds once. A Cast to int32
    after it kept a 1-ulp difference, and --verify refused a correct rewrite."""
    model = _bfloat16_then(
        [
            helper.make_node("Cast", ["y"], ["f"], to=TensorProto.FLOAT),
            helper.make_node("Cast", ["f"], ["q"], to=TensorProto.INT32),
        ],
        "q",
        TensorProto.INT32,
    )
    original, rewritten = _rewrite(model, tmp_path, "cast")
    result = verify_model(original, rewritten, bound_ulps=BOUND, runs=3)
    assert result.reference == "onnx.reference"
    assert result.ok, [f"{c.name}: {c.detail}" for c in result.mismatches()]


def test_a_rewrite_onnxruntime_cannot_load_either_runs_in_the_reference(tmp_path: Path) -> None:
    """A bfloat16 Mul after the CumProd: onnxruntime loads neither model, and --verify
    stopped on its error (exit 2) where the rewrite alone was written. Both now run in
    onnx.reference; a wrong rewrite is still caught there."""
    model = _bfloat16_then([helper.make_node("Mul", ["y", "x"], ["z"])], "z", TensorProto.BFLOAT16)
    original, rewritten = _rewrite(model, tmp_path, "mul")
    result = verify_model(original, rewritten, bound_ulps=BOUND, runs=2)
    assert result.ok, [f"{c.name}: {c.detail}" for c in result.mismatches()]
    assert result.runtime.startswith("onnx.reference (onnxruntime cannot load it either")

    def squared(model: onnx.ModelProto) -> None:
        reroute(model, "z", [helper.make_node("Mul", ["z_inner", "z_inner"], ["z"])])

    assert not verify_model(
        original, _edit(rewritten, tmp_path, squared), bound_ulps=BOUND, runs=2
    ).ok


# -- wrong rewrites the whole-model runs used to miss (found by a red-team review) -------------


def _float_model(shape: list[int | str | None], axis: int | None = 1) -> onnx.ModelProto:
    """y = CumProd(x, axis) on float32; ``axis`` None: a graph input."""
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)]
    initializers = []
    if axis is None:
        inputs.append(helper.make_tensor_value_info("axis", TensorProto.INT64, []))
    else:
        initializers.append(helper.make_tensor("axis", TensorProto.INT64, [], [axis]))
    graph = helper.make_graph(
        [helper.make_node("CumProd", ["x", "axis"], ["y"])],
        "f32",
        inputs,
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
        initializers,
    )
    if shape == [None, None]:  # dims with no name
        for dim in graph.input[0].type.tensor_type.shape.dim:
            dim.ClearField("dim_param")
        for dim in graph.output[0].type.tensor_type.shape.dim:
            dim.ClearField("dim_param")
    return opset26(graph)


def _const(name: str, value: float, elem: int = TensorProto.FLOAT) -> onnx.TensorProto:
    return helper.make_tensor(name, elem, [], [value])


def _read_instead(model: onnx.ModelProto, name: str, new: str, nodes: list[onnx.NodeProto]) -> None:
    """Every node that reads ``name`` reads ``new`` instead, which ``nodes`` (put first)
    compute."""
    for node in _all_nodes(model.graph):
        for i, read in enumerate(node.input):
            if read == name:
                node.input[i] = new
    for i, new_node in enumerate(nodes):
        model.graph.node.insert(i, new_node)


def _axis_ignored(model: onnx.ModelProto) -> None:  # scans axis 0 whatever is fed
    _read_instead(
        model,
        "axis",
        "axis0",
        [helper.make_node("Constant", [], ["axis0"], value=_const("a", 0, TensorProto.INT64))],
    )


def _overflow_saturates(model: onnx.ModelProto) -> None:
    """A product that overflows gives ±FLT_MAX (an inf input still gives inf)."""
    model.graph.initializer.extend(
        [
            _const("fmax", float(np.finfo(np.float32).max)),
            _const("zero", 0.0),
            _const("ax1", 1, TensorProto.INT64),
        ]
    )
    reroute(
        model,
        "y",
        [
            helper.make_node("IsInf", ["x"], ["x_inf"]),
            helper.make_node("Cast", ["x_inf"], ["x_inf_f"], to=TensorProto.FLOAT),
            helper.make_node("CumSum", ["x_inf_f", "ax1"], ["n_inf"]),
            helper.make_node("Greater", ["n_inf", "zero"], ["inf_before"]),
            helper.make_node("Not", ["inf_before"], ["no_inf_before"]),
            helper.make_node("IsInf", ["y_inner"], ["y_inf"]),
            helper.make_node("And", ["y_inf", "no_inf_before"], ["overflowed"]),
            helper.make_node("Sign", ["y_inner"], ["s"]),
            helper.make_node("Mul", ["s", "fmax"], ["saturated"]),
            helper.make_node("Where", ["overflowed", "saturated", "y_inner"], ["y"]),
        ],
    )


def _underflow_unsigned(model: onnx.ModelProto) -> None:
    """A product that underflows to zero comes out +0 (zeros from zero inputs keep their
    sign)."""
    model.graph.initializer.extend([_const("zero", 0.0), _const("ax1", 1, TensorProto.INT64)])
    reroute(
        model,
        "y",
        [
            helper.make_node("Equal", ["x", "zero"], ["x0"]),
            helper.make_node("Cast", ["x0"], ["x0f"], to=TensorProto.FLOAT),
            helper.make_node("CumSum", ["x0f", "ax1"], ["zeros"]),
            helper.make_node("Greater", ["zeros", "zero"], ["zero_before"]),
            helper.make_node("Not", ["zero_before"], ["no_zero_before"]),
            helper.make_node("Equal", ["y_inner", "zero"], ["y0"]),
            helper.make_node("And", ["y0", "no_zero_before"], ["underflowed"]),
            helper.make_node("Abs", ["y_inner"], ["y_abs"]),
            helper.make_node("Where", ["underflowed", "y_abs", "y_inner"], ["y"]),
        ],
    )


def _zero_sign_dropped(model: onnx.ModelProto) -> None:  # y + 0: -0.0 becomes +0.0
    model.graph.initializer.append(_const("zero", 0.0))
    reroute(model, "y", [helper.make_node("Add", ["y_inner", "zero"], ["y"])])


def _negative_zero_inputs_positive(model: onnx.ModelProto) -> None:  # x + 0: -0.0 in is +0.0
    model.graph.initializer.append(_const("zero", 0.0))
    _read_instead(model, "x", "x_plus", [helper.make_node("Add", ["x", "zero"], ["x_plus"])])


def _subnormals_flushed(model: onnx.ModelProto) -> None:  # denormals-are-zero on the input
    model.graph.initializer.extend(
        [_const("tiny", float(np.finfo(np.float32).tiny)), _const("zero", 0.0)]
    )
    _read_instead(
        model,
        "x",
        "x_daz",
        [
            helper.make_node("Abs", ["x"], ["x_abs"]),
            helper.make_node("Less", ["x_abs", "tiny"], ["subnormal"]),
            helper.make_node("Mul", ["x", "zero"], ["x_zero"]),
            helper.make_node("Where", ["subnormal", "x_zero", "x"], ["x_daz"]),
        ],
    )


def _nan_as_one(model: onnx.ModelProto) -> None:  # a NaN input multiplies as 1
    model.graph.initializer.append(_const("one", 1.0))
    _read_instead(
        model,
        "x",
        "x_no_nan",
        [
            helper.make_node("IsNaN", ["x"], ["x_nan"]),
            helper.make_node("Where", ["x_nan", "one", "x"], ["x_no_nan"]),
        ],
    )


def _dims_swapped(model: onnx.ModelProto) -> None:
    """x reshaped to its two dims swapped, scanned, reshaped back: right when square."""
    model.graph.initializer.extend(
        [helper.make_tensor(f"k{i}", TensorProto.INT64, [1], [i]) for i in range(3)]
    )
    _read_instead(
        model,
        "x",
        "x_swapped",
        [
            helper.make_node("Shape", ["x"], ["sx"]),
            helper.make_node("Slice", ["sx", "k0", "k1"], ["d0"]),
            helper.make_node("Slice", ["sx", "k1", "k2"], ["d1"]),
            helper.make_node("Concat", ["d1", "d0"], ["swapped"], axis=0),
            helper.make_node("Reshape", ["x", "swapped"], ["x_swapped"]),
        ],
    )
    reroute(model, "y", [helper.make_node("Reshape", ["y_inner", "sx"], ["y"])])


WHOLE_MODEL_MISSES = {
    "run-time axis ignored": (lambda: _float_model(["b", "n"], axis=None), _axis_ignored),
    "overflow saturates": (lambda: _float_model(["b", "n"]), _overflow_saturates),
    "underflowed zero loses its sign": (lambda: _float_model(["b", "n"]), _underflow_unsigned),
    "-0.0 results made +0.0": (lambda: _float_model(["b", "n"]), _zero_sign_dropped),
    "subnormal inputs flushed": (lambda: _float_model(["b", "n"]), _subnormals_flushed),
    "-0.0 inputs taken as +0.0": (lambda: _float_model(["b", "n"]), _negative_zero_inputs_positive),
    "NaN multiplied as 1, static [4]": (lambda: _float_model([4], axis=0), _nan_as_one),
    "unnamed dims swapped": (lambda: _float_model([None, None]), _dims_swapped),
}


@pytest.mark.parametrize("case", list(WHOLE_MODEL_MISSES))
def test_whole_model_runs_catch(tmp_path: Path, case: str) -> None:
    """Each wrong rewrite passed --verify: the run-time axis was always fed 0, no feed
    overflowed or underflowed, the special feed's NaNs hid the sign of zero and subnormals
    (and a 4-element input never got a NaN), unnamed dims were all fed 3. Now the axis is
    fed 0 and -1 by turns, ``finite special`` / ``overflow`` / ``underflow`` feeds run,
    NaN comes first in the special feed, and each unnamed dim gets a size of its own."""
    build, corrupt = WHOLE_MODEL_MISSES[case]
    original, rewritten = _rewrite(build(), tmp_path, "m")
    assert _verify(original, rewritten).ok  # the tool's own rewrite passes
    assert not _verify(original, _edit(rewritten, tmp_path, corrupt)).ok


def test_logsum_at_the_bottom_of_the_range_passes(tmp_path: Path) -> None:
    """``underflow`` feeds products of exactly half the smallest subnormal, which IEEE
    rounds to zero and ``logsum``'s Exp rounds up to the smallest subnormal: one ulp of the
    subnormal spacing, counted as such (a zero met by a subnormal of the same sign)."""
    source = tmp_path / "m.onnx"
    onnx.save(_float_model([4, 5, 6]), source)
    for strategy in ("logsum",):
        report = convert_file(
            source, tmp_path / f"{strategy}.onnx", strategy=strategy, verify_runs=3
        )
        assert report.status == "rewritten", report.error
    assert compare(
        np.array([1.4e-45, -1.4e-45], np.float32), np.array([0.0, -0.0]), ir.DataType.FLOAT, 1.0
    ).ok
    assert not compare(np.array([-1.4e-45], np.float32), np.array([0.0]), ir.DataType.FLOAT, 1.0).ok


def test_the_reference_multiplies_bfloat16_as_onnxruntime_does(tmp_path: Path) -> None:
    """The reference verify runs a bfloat16 original in: float32 products rounded once to
    bfloat16 (onnxruntime's kernel, and every lowering here), not onnx.reference's own
    CumProd, which rounds at every step; the input is one where the two differ."""
    import ml_dtypes
    from onnx.reference import ReferenceEvaluator

    from rewriter.verify.run import _run_reference

    path = tmp_path / "bf16.onnx"
    onnx.save(_bfloat16_model(), path)
    rng = np.random.default_rng(11)
    x = rng.uniform(0.5, 2.0, (3, 8)).astype(ml_dtypes.bfloat16)
    once = np.cumprod(x.astype(np.float32), axis=1).astype(ml_dtypes.bfloat16)
    every_step = ReferenceEvaluator(str(path)).run(None, {"x": x})[0]
    assert not np.array_equal(every_step.astype(np.float32), once.astype(np.float32))
    (got,) = _run_reference(str(path), {"x": x})
    assert got.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(got.astype(np.float32), once.astype(np.float32))


def _verify_as_the_command_does(original: Path, rewritten: Path) -> VerifyResult:
    """verify_model with the pass's plans and the bound the command line computes."""
    from rewriter.convert import _verify_bound

    model = ir.load(original)
    sizes = symbolic_sizes(model)
    rewrite = DecomposeCumProdPass("auto")
    rewrite(model)
    plans = list(rewrite.plans)
    bound = _verify_bound(plans, sizes)
    return verify_model(original, rewritten, bound_ulps=bound, runs=3, plans=plans)


def _two_cumprods(a: int, a_shape: list[int], x_shape: list[int]) -> onnx.ModelProto:
    """ya = CumProd(a), y = CumProd(x) (float32), each along axis 1."""
    return opset26(
        helper.make_graph(
            [
                helper.make_node("CumProd", ["a", "axis"], ["ya"]),
                helper.make_node("CumProd", ["x", "axis"], ["y"]),
            ],
            "two",
            [
                helper.make_tensor_value_info("a", a, a_shape),
                helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape),
            ],
            [
                helper.make_tensor_value_info("ya", a, a_shape),
                helper.make_tensor_value_info("y", TensorProto.FLOAT, x_shape),
            ],
            [helper.make_tensor("axis", TensorProto.INT64, [], [1])],
        )
    )


def _y_in_bfloat16(model: onnx.ModelProto) -> None:  # the float32 CumProd's result rounded
    reroute(
        model,
        "y",
        [
            helper.make_node("Cast", ["y_inner"], ["y_b"], to=TensorProto.BFLOAT16),
            helper.make_node("Cast", ["y_b"], ["y"], to=TensorProto.FLOAT),
        ],
    )


def _y_off_by_1000_ulps(model: onnx.ModelProto) -> None:
    model.graph.initializer.append(_const("f", 1 + 2**-13))
    reroute(model, "y", [helper.make_node("Mul", ["y_inner", "f"], ["y"])])


@pytest.mark.parametrize(
    "case",
    ["float32 output rounded to bfloat16 beside a bfloat16 CumProd", "short scan beside a long"],
)
def test_each_output_is_held_to_its_own_cumprods_bound(tmp_path: Path, case: str) -> None:
    """Found by a red-team review: one bound served every output, the longest scan's,
    widened to the narrowest float CumProd of the model. A float32 output rounded to
    bfloat16 passed because the model also had a bfloat16 CumProd (2^16 times wider), and a
    4-long scan's output ~1000 ulps off passed beside a 2048-long scan (bound ~4100 ulps).
    Each output now takes the bound of the CumProds it is computed from."""
    if case.startswith("float32"):
        model = _two_cumprods(TensorProto.BFLOAT16, [2, 4], [2, 4])
        corrupt = _y_in_bfloat16
    else:
        model = _two_cumprods(TensorProto.FLOAT, [1, 2048], [3, 4])
        corrupt = _y_off_by_1000_ulps
    original, rewritten = _rewrite(model, tmp_path, "two")
    assert _verify_as_the_command_does(original, rewritten).ok
    broken = _verify_as_the_command_does(original, _edit(rewritten, tmp_path, corrupt))
    assert [c.name for c in broken.mismatches()] == ["y"], [
        f"{c.name}: {c.detail}" for c in broken.mismatches()
    ]


def test_a_bound_covers_the_sizes_fed_to_unnamed_dims(tmp_path: Path) -> None:
    """Unnamed dims are fed sizes of their own (after the named ones'), so a scan along one
    is longer than DEFAULT_DIM: the bound of its CumProd must cover the longest fed, or a
    correct tree lowering (k - 1 ulps) could be reported a mismatch."""
    from rewriter.verify import plan_bound

    model = _float_model([None, None])
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    rewrite = DecomposeCumProdPass("dynamic")
    rewrite(ir.load(path))
    (plan,) = rewrite.plans
    fed = random_inputs(model, np.random.default_rng(0), {}, "random", richer=True)["x"]
    k = fed.shape[1]
    assert k > 3  # a size of its own, not DEFAULT_DIM
    needed = float(plan.lowering.max_ulps(ir.DataType.FLOAT, np.array([k]))[0]) + k - 1
    assert plan_bound(plan, {}) >= needed
    rewritten = tmp_path / "r.onnx"
    onnx.save(rewriter.decompose_cumprod(model, strategy="dynamic"), rewritten)
    result = verify_model(
        path,
        rewritten,
        bound_ulps=plan_bound(plan, {}),
        runs=3,
        plans=[plan],
        sites=lower_sites([plan], strategy="dynamic"),
    )
    assert result.ok, [f"{c.name}: {c.detail}" for c in result.mismatches()]


def test_verify_gives_each_target_warning_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """--verify lowers each CumProd again alone (graph 'site'): the target's warnings came a
    second time, naming a graph the user's model does not have (found by a review of the
    README). They come once, for the model; the rewriter's logging level is left as it was."""
    import logging

    source = tmp_path / "m.onnx"
    onnx.save(cumprod_model(TensorProto.FLOAT, (3, "n"), 1), source)
    caplog.set_level(logging.WARNING, logger="rewriter")
    before = logging.getLogger("rewriter").level
    report = convert_file(source, tmp_path / "o.onnx", target="iree", max_length=16, verify_runs=1)
    assert report.status == "rewritten", report.error
    assert report.verify is not None and report.verify.ok
    messages = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert not [m for m in messages if "graph 'site'" in m], messages
    assert len([m for m in messages if "flushes subnormal" in m]) == 1, messages
    assert logging.getLogger("rewriter").level == before


@pytest.mark.parametrize("spread", ["shipped", "2^U(-1, 1)"])
def test_a_long_float_axis_is_fed_products_in_range(
    tmp_path: Path, spread: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """float32 along 65536 positions (a product tree under ``auto``): the random floats'
    spread shrinks with the longest dim, so that the running products stay in range and
    --verify does not refuse a right rewrite for a difference at the range's edge, which the
    README allows (a tree finite where the sequential kernel overflowed for a while). With
    the short axes' spread, 2^U(-1, 1), these feeds leave the range and the same rewrite is
    refused: the case the spread is for."""
    from rewriter.verify import feeds

    if spread != "shipped":
        monkeypatch.setattr(feeds, "_random_spread", lambda dtype, shape: 1.0)
    model = cumprod_model(TensorProto.FLOAT, (4, 65536), 1)
    result = _verify_as_the_command_does(*_rewrite(model, tmp_path, "long"))
    feeds = random_inputs(model, np.random.default_rng(0))
    reach = np.abs(np.cumsum(np.log2(np.abs(feeds["x"].astype(np.float64))), axis=1)).max()
    if spread == "shipped":
        assert result.ok, [c.detail for c in result.mismatches()]
        assert reach < 126 / 2
    else:
        assert not result.ok and reach > 126


@pytest.mark.parametrize(
    ("elem_type", "n", "cut"), [(TensorProto.INT64, 200, 100), (TensorProto.INT32, 100, 50)]
)
def test_a_wrong_integer_rewrite_past_64_positions_is_seen(
    tmp_path: Path, elem_type: int, n: int, cut: int
) -> None:
    """Found by a review from outside: a rewrite that gave 0 from position ``cut`` on passed
    the whole-model check (every feed but the odd one gives a product 0 modulo 2^k there: a
    factor 0 or k factors of 2). The site checks are left out: they lower the node again on
    their own and do not see the file's graph."""
    original, rewritten = _rewrite(cumprod_model(elem_type, (4, n), 1), tmp_path, "long")

    def zero_from_cut(model: onnx.ModelProto) -> None:
        for node in model.graph.node:
            node.output[:] = ["y_true" if o == "y" else o for o in node.output]
        mask = (np.arange(n) < cut).astype(helper.tensor_dtype_to_np_dtype(elem_type))
        model.graph.initializer.append(onnx.numpy_helper.from_array(mask[None, :], "mask"))
        model.graph.node.append(helper.make_node("Mul", ["y_true", "mask"], ["y"]))

    result = _verify(original, _edit(rewritten, tmp_path, zero_from_cut))
    assert not result.ok
    assert not any(o.ok for o in result.outputs), result.outputs
