"""cumprod-rewriter: lower ONNX opset-26 CumProd to older ops, exactly, for every type."""

from __future__ import annotations

from rewriter.decompose import DecomposeCumProdPass, decompose_cumprod
from rewriter.errors import CumProdError, InvalidCumProdError, StrategyError
from rewriter.lowerings import STRATEGIES

__all__ = [
    "STRATEGIES",
    "CumProdError",
    "DecomposeCumProdPass",
    "InvalidCumProdError",
    "StrategyError",
    "decompose_cumprod",
]
