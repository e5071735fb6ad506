"""scripts/bench/bench_runtime.py's compile-cost half: the per-lowering summary of fresh-process
runs (median of paired ratios), the pick within the compile limit, one fresh process on
onnxruntime."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnx.reference
import pytest
from onnx import TensorProto, helper

from tests.helpers import load_script

_SCRIPTS = Path(__file__).resolve().parents[1] / "scripts" / "bench"


def _load(name: str):  # type: ignore[no-untyped-def]
    return load_script(_SCRIPTS / f"{name}.py", f"{name}_under_test")


@pytest.fixture(scope="module")
def bench():  # type: ignore[no-untyped-def]
    return _load("bench_runtime")


def test_compile_summary_takes_the_median_of_paired_ratios(bench) -> None:  # type: ignore[no-untyped-def]
    runs = [
        {"s": 2.0, "cumsum_s": 1.0, "process_s": 3.0, "cumsum_process_s": 2.0},
        {"s": 6.0, "cumsum_s": 2.0, "process_s": 8.0, "cumsum_process_s": 2.0},
        {"s": 3.0, "cumsum_s": 3.0, "process_s": 4.0, "cumsum_process_s": 4.0},
    ]
    summary = bench.compile_summary(runs)
    # paired ratios 2, 3, 1: median 2 (the ratio of the medians, 3 / 2, is not it)
    assert summary["ratio"] == 2.0
    assert (summary["s"], summary["cumsum_s"]) == (3.0, 2.0)
    assert summary["process_ratio"] == 1.5  # 1.5, 4, 1
    assert summary["reps"] == 3
    assert summary["timeout"] is False
    assert summary["cpu_ratio"] is None  # no CPU times given


def test_compile_summary_marks_timeouts_and_errors(bench) -> None:  # type: ignore[no-untyped-def]
    timed_out = bench.compile_summary(
        [{"s": 90.0, "cumsum_s": 9.0, "timeout": True, "process_s": 90.0, "cumsum_process_s": 10}]
    )
    assert timed_out["timeout"] is True
    assert timed_out["ratio"] == 10.0
    failed = bench.compile_summary([{"s": None, "cumsum_s": 1.0, "error": "exit 1: boom"}])
    assert failed == {"error": "exit 1: boom", "reps": 1}


def test_compile_pick_is_the_fastest_run_within_the_limit(bench) -> None:  # type: ignore[no-untyped-def]
    compile_ratio = {"chain": 6.0, "carry": 1.9, "radix": 1.2, "doubling": 2.0}
    run_ratio = {"chain": 0.5, "carry": 1.1, "radix": 1.4, "doubling": 0.9}
    assert bench.compile_pick(compile_ratio, run_ratio, 2.0) == "doubling"
    assert bench.compile_pick(compile_ratio, run_ratio, 1.5) == "radix"
    assert bench.compile_pick(compile_ratio, run_ratio, 1.0) is None
    # a lowering with no run ratio (not exact, or not timed) is not picked
    assert bench.compile_pick({"chain": 1.0}, {}, 2.0) is None


def _cumsum_file(tmp_path: Path) -> tuple[Path, Path]:
    node = helper.make_node("CumSum", ["x", "axis"], ["y"])
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor("axis", TensorProto.INT64, [], [1])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    onnx.save(model, str(tmp_path / "m.onnx"))
    np.save(tmp_path / "x.npy", np.ones((2, 3), np.float32))
    return tmp_path / "m.onnx", tmp_path / "x.npy"


def test_fresh_first_runs_one_process_and_kills_it_past_the_timeout(bench, tmp_path) -> None:  # type: ignore[no-untyped-def]
    model, x = _cumsum_file(tmp_path)
    python = Path(sys.executable)
    got = bench.fresh_first(python, "onnxruntime", model, x, timeout=600.0)
    assert "error" not in got, got
    assert got["first_s"] > 0 and got["first_cpu_s"] >= 0 and got["process_s"] >= got["first_s"]
    assert "timeout" not in got
    late = bench.fresh_first(python, "onnxruntime", model, x, timeout=0.001)
    assert late == {"first_s": 0.001, "process_s": 0.001, "timeout": True}
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(b"not a model")
    assert "error" in bench.fresh_first(python, "onnxruntime", broken, x, timeout=600.0)


def test_fresh_first_compiles_and_runs_on_iree(bench, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The child's IREE path (its own calls into rewriter.runtimes' compile tools)."""
    from tests.runtime_harness import require

    model, x = _cumsum_file(tmp_path)
    got = bench.fresh_first(require("iree"), "iree", model, x, timeout=600.0)
    assert "error" not in got, got
    assert got["first_s"] > 0 and got["process_s"] >= got["first_s"]


# A process that burns 0.3 s of its own CPU time (however loaded the machine), says so, and
# waits for its stdin to close.
_BURN = (
    "import sys, time\n"
    "while time.process_time() < 0.3:\n"
    "    pass\n"
    "print('burnt', flush=True)\n"
    "sys.stdin.read()\n"
)
# A process that starts _BURN as its own child (sharing its stdout) and waits for its stdin.
_PARENT_OF_BURN = (
    "import subprocess, sys\n"
    f"g = subprocess.Popen([sys.executable, '-c', {_BURN!r}], stdin=subprocess.PIPE)\n"
    "sys.stdin.read()\n"
    "g.stdin.close()\n"
    "g.wait()\n"
)


def test_cpu_clock_counts_descendants_still_running() -> None:
    """tinygrad compiles in a pool of worker processes alive until exit: the CPU clock of
    ``--first`` must count them (getrusage's RUSAGE_CHILDREN counts only reaped children)."""
    child = _load("bench_runtime_child")
    before = child._cpu_s()
    proc = subprocess.Popen(
        [sys.executable, "-c", _PARENT_OF_BURN],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        assert proc.stdout.readline().strip() == "burnt"
        during = child._cpu_s()
    finally:
        proc.stdin.close()
        proc.wait()
    # the grandchild's 0.3 s, in clock ticks of 10 ms or less (two roundings at most)
    assert during - before >= 0.28


def _constants(model: onnx.ModelProto) -> list[list[int]]:
    """The int64 values of the model's Constant nodes and initializers."""
    nodes = [node for node in model.graph.node if node.op_type == "Constant"]
    tensors = [a.t for node in nodes for a in node.attribute]
    tensors += list(model.graph.initializer)
    return [
        onnx.numpy_helper.to_array(t).ravel().tolist()
        for t in tensors
        if t.data_type == TensorProto.INT64
    ]


def test_variants_change_target_fields_and_module_constants_for_the_build_only(bench) -> None:  # type: ignore[no-untyped-def]
    """--variants: ``doubling_b16`` builds doubling's blocked form in blocks of 16 (a module
    constant), ``radix_r4`` radix with r = 4 (a Target field); both restored after, and both
    graphs still the scan."""
    from rewriter.lowerings import doubling
    from rewriter.targets import TARGETS

    shape, n = (4, 128), 128  # float32 past 64: doubling runs blocked
    model = bench.model_for(TensorProto.FLOAT, shape, 1, 0, 0)
    x = np.random.default_rng(1).uniform(0.9, 1.1, shape).astype(np.float32)
    expected = np.cumprod(x.astype(np.float64), axis=1)
    block, radix_r = doubling.BLOCK, TARGETS["onnxruntime"].radix_r
    built = {}
    for name in ("doubling_b16", "radix_r4"):
        strategy, fields = bench.VARIANTS[name]
        built[strategy] = bench.lowered(model, strategy, "onnxruntime", n)
        with bench._facts(**fields):
            built[name] = bench.lowered(model, strategy, "onnxruntime", n)
    assert (doubling.BLOCK, TARGETS["onnxruntime"].radix_r) == (block, radix_r)
    # blocks of 16: the (o * m, B, i) view is (4 * 8, 16, 1) in the variant only
    assert [32, 16, 1] in _constants(built["doubling_b16"])
    assert [32, 16, 1] not in _constants(built["doubling"])
    # r = 4 on 128: levels of 4, 4, 4 and a top chain of 2 (r = 8: 8, 8 and 2)
    assert [32, 4, 1] in _constants(built["radix_r4"])
    assert [32, 4, 1] not in _constants(built["radix"])
    for name, rewritten in built.items():
        (y,) = onnx.reference.ReferenceEvaluator(rewritten).run(None, {"x": x})
        np.testing.assert_allclose(y, expected, rtol=1e-5, err_msg=name)


def test_before_builds_an_earlier_codes_auto_beside_this_ones(bench, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``--before``: the earlier code's auto graph, twice (the control), beside this
    checkout's where the two differ; a reason, not models, where the code builds the same
    graph or fails."""
    import shutil

    model = bench.model_for(TensorProto.FLOAT, (4, 64), 1, 0, 0)
    same = tmp_path / "same"
    shutil.copytree(
        _SCRIPTS.parents[1] / "rewriter",
        same / "rewriter",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    lowers_nothing = tmp_path / "nothing" / "rewriter"  # an "earlier" rewriter
    lowers_nothing.mkdir(parents=True)
    (lowers_nothing / "__init__.py").write_text(
        "def decompose_cumprod(model, **options):\n    return model\n"
    )
    refuses = tmp_path / "refuses" / "rewriter"
    refuses.mkdir(parents=True)
    (refuses / "__init__.py").write_text(
        "def decompose_cumprod(model, **options):\n    raise ValueError('no such target')\n"
    )
    got = {}
    for code in (same, lowers_nothing.parent, refuses.parent):
        (tmp_path / f"cell-{code.name}").mkdir()
        got[code.name] = bench.against_models(
            tmp_path / f"cell-{code.name}",
            model,
            bench.lowered(model, "auto", "openvino", 64),
            "openvino",
            64,
            before=code,
            elem_type=TensorProto.FLOAT,
        )
    assert got["same"] == "the same graph"
    refused = bench.against_models(
        tmp_path, model, None, "openvino", 64, before=same, elem_type=TensorProto.FLOAT
    )
    assert refused == "this checkout refuses it"
    assert got["refuses"] == "the commit's code failed: ValueError: no such target"
    entries = got["nothing"]
    assert [e["name"] for e in entries] == ["auto_new", "auto_before", "auto_again"]
    assert {e["bound"] for e in entries} == {"auto.bound.npy"}
    cell = tmp_path / "cell-nothing"
    new, old, again = (onnx.load(cell / e["file"]) for e in entries)
    assert [n.op_type for n in old.graph.node] == [n.op_type for n in again.graph.node]
    assert [n.op_type for n in old.graph.node] == ["CumProd"]
    assert "CumProd" not in {n.op_type for n in new.graph.node}
    bound = np.load(cell / "auto.bound.npy")
    assert bound.shape == (64,) and bound[0] == 0 and 63 <= bound[-1] < 63.001  # k - 1 ulps


def test_against_markdown_gives_each_changed_cell_and_the_median(bench) -> None:  # type: ignore[no-untyped-def]
    """The --before table: new / before and the control per timed cell, a cell that did not
    run marked, the median and range over the timed ones, the untimed cells listed."""

    def cell(n: int, new: float, old: float, again: float, ok: bool = True) -> dict:
        models = {
            "auto_new": {"ok": ok, "s": new, "nodes": 10},
            "auto_before": {"ok": True, "s": old, "nodes": 20},
            "auto_again": {"ok": True, "s": again, "nodes": 20},
            "cumsum": {"ok": True, "s": 1.0},
        }
        ratios = {k: m["s"] for k, m in models.items() if k != "cumsum"}
        return {
            "dtype": "float32",
            "n": n,
            "position": "last",
            "shape": [4, n],
            "models": models,
            "ratio": ratios,
        }

    result = {
        "before": "abc1234",
        "not_against": ["int32 last n = 8: the same graph"],
        "cells": [
            cell(64, 3.0, 2.0, 2.2),
            cell(512, 1.0, 2.0, 2.0),
            cell(4096, 1.0, 1.0, 1.0, False),
        ],
    }
    text = "\n".join(bench.against_markdown(result))
    assert "## auto against abc1234" in text
    assert "Cells not timed: int32 last n = 8: the same graph." in text
    assert "| float32 | 64 | last | 4×64 | 1.500 | 1.100 | 2.00 | 3.00 | 20 → 10 |" in text
    assert "| float32 | 512 | last | 4×512 | 0.500 | 1.000 | 2.00 | 1.00 | 20 → 10 |" in text
    assert "| float32 | 4096 | last | – | not timed |||||" in text
    assert "2 cells changed: new / before median 1.000, 0.500-1.500." in text
    assert bench.against_markdown({"cells": []}) == []
