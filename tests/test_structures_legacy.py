"""Issue 56's item 1 on onnxruntime 1.20.1 (opset 21, .venv-ort120; slow tier like
tests/test_legacy_runtime.py): a length-1 float16 CumProd read inside an If branch or a Loop
body, rewritten, runs there and gives x (inclusive) or ones (exclusive) as numpy does."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import rewriter
from tests.helpers import LegacyBatch
from tests.test_structures import length_one_feeds, length_one_model

pytestmark = pytest.mark.slow

CASES = [(where, exclusive) for where in ("if", "loop") for exclusive in (0, 1)]


def test_length_one_float16_in_subgraphs_on_onnxruntime_1_20(tmp_path: Path) -> None:
    batch = LegacyBatch(tmp_path)
    feeds = length_one_feeds()
    for where, exclusive in CASES:
        lowered = rewriter.decompose_cumprod(length_one_model(where, exclusive), target_opset=21)
        batch.add(f"{where}_ex{exclusive}", lowered, feeds)
    batch.run()
    x = feeds["x"].astype(np.float64)
    for where, exclusive in CASES:
        y = np.ones_like(x) if exclusive else x  # a scan of length 1 (numpy's cumprod)
        expected = y if where == "if" else x + 2 * y  # the Loop adds y twice to x
        (got,) = batch.outputs(f"{where}_ex{exclusive}")
        assert got.dtype == np.float16
        np.testing.assert_array_equal(got.astype(np.float64), expected)
