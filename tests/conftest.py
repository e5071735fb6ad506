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
        "test_pytorch.py",  # torch
    }
)
# Single tests that take tens of seconds (multi-GiB files).
SLOW_TESTS = frozenset({"test_io.py::test_weights_above_2_gib"})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        module = item.path.name
        name = f"{module}::{item.originalname}" if hasattr(item, "originalname") else item.name
        if module in SLOW_MODULES or name in SLOW_TESTS:
            item.add_marker(pytest.mark.slow)


def pytest_report_header(config: pytest.Config) -> str:
    if os.environ.get("CI") == "true":
        return "hypothesis: exploring (CI=true): a failure prints its seed and reproduce blob"
    return "hypothesis: derandomized (set CI=true to explore new examples)"
