"""Test tiers (pyproject.toml's markers): ``pytest -m "not slow"`` is the fast tier; the whole
suite adds what needs other environments or minutes. Whole modules and a few single tests
are marked here, so the tier of a test owned elsewhere is decided in one place."""

from __future__ import annotations

import os
import time

import onnxruntime as ort
import pytest

ort.set_default_logger_severity(3)

# Modules that need another environment or run minutes: the slow tier.
SLOW_MODULES = frozenset(
    {
        "test_legacy_runtime.py",  # onnxruntime 1.20.1 in .venv-ort120
        "test_runtimes.py",  # OpenVINO, tract, tinygrad environments
        "test_runtimes_iree_tflite.py",  # IREE, TFLite environments
        "test_runtime_tables.py",  # OpenVINO, tract, IREE: auto's tables at long axes
        "test_runtime_accuracy.py",  # tract, IREE, tinygrad, OpenVINO: factors near 1
        "test_dynamo.py",  # torch (tests/pytorch/)
        "test_runtimes_new.py",  # MNN, TVM, ncnn environments
    }
)
# Single tests in the slow tier: multi-GiB files, and command-line runs beyond one per
# command-line path, which the fast tier keeps (in process, tests.helpers.run_cli, but for
# the README's command and a signal, which run the process): --help, -o FILE, a folder,
# --in-place, a bad input (exit 2), --list, --report, --verify (exit 0 and exit 1),
# --target-opset, --max-length.
SLOW_TESTS = (
    "test_atomic.py::test_weights_above_2_gib",
    "test_cli.py::test_default_output_goes_beside_the_input",
    "test_cli.py::test_external_data_output_folder_is_self_contained",
    "test_cli.py::test_bad_input_is_one_line_exit_2_nothing_written[",  # but one, below
    "test_cli.py::test_verbose_shows_the_traceback",
    "test_cli.py::test_running_on_its_own_output_changes_nothing",
    "test_cli.py::test_quiet_prints_nothing_on_success",
    "test_cli.py::test_quiet_drops_warnings_and_a_bad_target_opset_is_a_usage_error",
    "test_cli.py::test_list_reports_what_the_rewrite_would_refuse",
    "test_cli.py::test_warnings_name_the_file_and_an_empty_folder_says_so",
    "test_cli.py::test_list_shows_each_nodes_lowering_for_the_target",
    "test_cli.py::test_a_function_that_cannot_be_inlined_for_the_target_is_one_line[list]",
    "test_model.py::test_cli_verify_takes_a_positive_count",  # tests/verify/
    "test_file_safety.py::",  # but the two below
    # rewrite-only sweeps of every combination on every target (the sweeps they guard stay
    # fast; on onnxruntime every type x strategy x axis form is rewritten and its refusal
    # held to the documented list by test_decompose.py's
    # test_checker_passes_for_every_type_and_strategy)
    "test_view.py::test_every_refusal_is_documented[",
    "test_properties.py::test_every_refusal_is_documented[",
    "test_readme.py::test_command_line_example_runs[",  # but one (a subprocess each)
    "test_model.py::test_a_long_float_axis_is_fed_products_in_range[",  # but one
)
FAST_ANYWAY = (
    "test_readme.py::test_command_line_example_runs["
    "cumprod-rewriter model.onnx -o model.nocumprod.onnx --verify]",
    "test_model.py::test_a_long_float_axis_is_fed_products_in_range[shipped]",
    "test_cli.py::test_bad_input_is_one_line_exit_2_nothing_written[not ONNX]",
    "test_file_safety.py::test_a_signal_cleans_up_and_exits[15-143]",
    "test_file_safety.py::test_in_place_keeps_mode_and_owner_of_model_and_data",
)


# Grids that repeat one check over types x attributes x shapes x targets: the fast tier
# keeps every k-th case (the first included, k coprime to the innermost parameter's count, so
# each of its values stays: every type, every target), the slow tier the others.
THINNED = {
    "test_tree.py::test_integers_bit_exact_against_native": 5,
    "test_tree.py::test_floats_within_k_minus_1_ulps": 5,
    "test_scan.py::test_every_type_rank_and_attribute_pair": 5,
    "test_scan.py::test_symbolic_dims": 3,
    "test_cached.py::test_cached_is_exact_on_every_type_and_attribute": 5,
    "test_cached.py::test_auto_takes_cached_for_carry_on_large_tensors": 3,
    "test_targets.py::test_no_missing_op_and_no_float64_compute": 4,
    "test_special_values.py::test_special_values_as_numpy_gives_them": 3,
    "test_tree_accuracy.py::test_prefixes_swinging_within_range_as_native": 5,
    "test_conformance.py::test_spec_examples": 5,
    "test_target_tflite.py::test_tflite_output_is_exact_with_special_values": 5,
    "test_decompose.py::test_no_lowering_leaves_a_node_nothing_reads": 4,
}


def _slow(item: pytest.Item, function: str, index: int) -> bool:
    name = f"{item.path.name}::{item.name}"
    if name.startswith(FAST_ANYWAY):
        return False
    if item.path.name in SLOW_MODULES or name.startswith(SLOW_TESTS):
        return True
    return index % THINNED.get(function, 1) != 0


# The files that take minutes, longest first (durations of CI=true runs): under
# `--dist loadfile` a worker takes a whole file, and pytest-xdist would otherwise hand out
# files by their count of tests, so files of a few long tests (the structure generator, the
# runtime tables) came last and one worker ran them alone. Collected first, in this order,
# they start at once and the many short files fill the gaps.
LONGEST_FIRST = (
    "test_runtime_tables.py",
    "test_runtimes_new.py",
    "test_file_safety.py",
    "test_runtimes.py",
    "test_view.py",
    "test_runtime_accuracy.py",
    "test_dynamo.py",
    "test_runtimes_iree_tflite.py",
    "test_structure_fuzz.py",
    "test_properties.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    seen: dict[str, int] = {}  # cases of each parametrised test so far
    for item in items:
        function = f"{item.path.name}::{getattr(item, 'originalname', item.name)}"
        index = seen[function] = seen.get(function, -1) + 1
        if _slow(item, function, index):
            item.add_marker(pytest.mark.slow)
    rank = {name: k for k, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: else as collected


@pytest.hookimpl(tryfirst=True)  # before hypothesis's plugin reads --hypothesis-seed
def pytest_configure(config: pytest.Config) -> None:
    """CI's hypothesis seed (below), and the collection's order kept by `--dist loadfile`."""
    if getattr(config.option, "dist", "no") in ("loadfile", "loadscope"):
        config.option.loadscopereorder = False  # LONGEST_FIRST, not xdist's count of tests
    if os.environ.get("CI") == "true" and config.getoption("hypothesis_seed", None) is None:
        config.option.hypothesis_seed = _day_seed()


def _day_seed() -> int:
    """The seed of an exploring run: CUMPROD_HYPOTHESIS_SEED, else today's date (UTC) as
    YYYYMMDD, so a day's runs draw the same examples and a failure reruns as it happened."""
    return int(os.environ.get("CUMPROD_HYPOTHESIS_SEED") or time.strftime("%Y%m%d", time.gmtime()))


def pytest_report_header(config: pytest.Config) -> str:
    if os.environ.get("CI") == "true":
        return (
            f"hypothesis: exploring (CI=true), seed {config.getoption('hypothesis_seed')} "
            "(CUMPROD_HYPOTHESIS_SEED=N or --hypothesis-seed=N to change it; a day's draw "
            "by default)"
        )
    return "hypothesis: derandomized (set CI=true to explore new examples)"
