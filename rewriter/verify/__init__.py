"""Checking a rewritten model against its original, and the comparison rules shared with the
tests. Reads models, never changes them, and never lowers anything: the caller lowers each
CumProd's standalone model (:class:`LoweredSite`) and hands it in.

- :mod:`~rewriter.verify.compare`: ulp errors and the per-type rules (integers bit-exact;
  floats: NaN, infinities and signed zeros where the reference has them, else within a bound).
- :mod:`~rewriter.verify.analysis`: what graph inputs index or count, which outputs are drawn.
- :mod:`~rewriter.verify.feeds`: symbolic sizes and random / special / extreme feeds.
- :mod:`~rewriter.verify.run`: onnxruntime and ``onnx.reference`` runners.
- :mod:`~rewriter.verify.model`: the whole-model check (:func:`verify_model`).
- :mod:`~rewriter.verify.sites`: each CumProd alone on adversarial values (:func:`check_sites`).
- :mod:`~rewriter.verify.records`: the result records.
"""

from __future__ import annotations

from rewriter.verify.analysis import (
    INDEX_POSITIONS,
    RANDOM_OPS,
    cumprod_axis_inputs,
    index_inputs,
    random_outputs,
)
from rewriter.verify.compare import (
    PRECISION,
    Comparison,
    compare,
    factor_counts,
    numpy_cumprod,
    ulp_error,
)
from rewriter.verify.feeds import (
    DEFAULT_DIM,
    FEED_LIMIT,
    UNNAMED_SIZES,
    random_inputs,
    symbolic_sizes,
)
from rewriter.verify.model import plan_bound, verify_model
from rewriter.verify.records import OutputCheck, VerifyResult
from rewriter.verify.sites import SITE_LENGTHS, LoweredSite, check_sites, site_model

__all__ = [
    "DEFAULT_DIM",
    "FEED_LIMIT",
    "INDEX_POSITIONS",
    "PRECISION",
    "RANDOM_OPS",
    "SITE_LENGTHS",
    "UNNAMED_SIZES",
    "Comparison",
    "LoweredSite",
    "OutputCheck",
    "VerifyResult",
    "check_sites",
    "compare",
    "cumprod_axis_inputs",
    "factor_counts",
    "index_inputs",
    "numpy_cumprod",
    "plan_bound",
    "random_inputs",
    "random_outputs",
    "site_model",
    "symbolic_sizes",
    "ulp_error",
    "verify_model",
]
