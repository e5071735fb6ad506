"""Test tiers (pyproject.toml's markers): ``pytest -m "not slow"`` is the fast tier; the whole
suite adds what needs other environments or minutes. Whole modules and a few single tests
are marked here, so the tier of a test owned elsewhere is decided in one place."""

from __future__ import annotations

import os

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
        "test_pytorch.py",  # torch
    }
)
# Single tests in the slow tier: multi-GiB files, and command-line runs (a subprocess each,
# about 2 s of imports) beyond one per command-line path, which the fast tier keeps:
# --help, -o FILE, a folder, --in-place, a bad input (exit 2), --list, --report, --verify
# (exit 0 and exit 1), --target-opset, --max-length, the README's commands, a signal.
SLOW_TESTS = (
    "test_io.py::test_weights_above_2_gib",
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
    "test_model.py::test_cli_verify_takes_a_positive_count",  # tests/verify/
    "test_file_safety.py::",  # but the two below
)
FAST_ANYWAY = (
    "test_cli.py::test_bad_input_is_one_line_exit_2_nothing_written[not ONNX]",
    "test_file_safety.py::test_a_signal_cleans_up_and_exits[15-143]",
    "test_file_safety.py::test_in_place_keeps_mode_and_owner_of_model_and_data",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        name = f"{item.path.name}::{item.name}"
        slow = item.path.name in SLOW_MODULES or name.startswith(SLOW_TESTS)
        if slow and not name.startswith(FAST_ANYWAY):
            item.add_marker(pytest.mark.slow)


def pytest_report_header(config: pytest.Config) -> str:
    if os.environ.get("CI") == "true":
        return "hypothesis: exploring (CI=true): a failure prints its seed and reproduce blob"
    return "hypothesis: derandomized (set CI=true to explore new examples)"
