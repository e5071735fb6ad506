"""cumprod-rewriter: lower ONNX opset-26 CumProd to older ops, exactly, for every type."""

from __future__ import annotations

from rewriter.decompose import DecomposeCumProdPass, decompose_cumprod
from rewriter.errors import (
    CumProdError,
    InputModelError,
    InvalidCumProdError,
    StrategyError,
    TargetError,
)
from rewriter.lowerings import STRATEGIES
from rewriter.opset import OpsetError
from rewriter.targets import DEFAULT_TARGET, TARGETS

__all__ = [
    "DEFAULT_TARGET",
    "STRATEGIES",
    "TARGETS",
    "CumProdError",
    "DecomposeCumProdPass",
    "InputModelError",
    "InvalidCumProdError",
    "OpsetError",
    "StrategyError",
    "TargetError",
    "decompose_cumprod",
]


def __getattr__(name: str) -> object:
    """``rewriter.rules`` and ``rewriter.pytorch`` without importing them first (the README's
    ``rewriter.rules.cumprod_rules()`` failed with an AttributeError): loaded on first use,
    so ``import rewriter`` stays as fast as before."""
    if name in ("rules", "pytorch"):
        import importlib

        return importlib.import_module(f"rewriter.{name}")
    raise AttributeError(f"module 'rewriter' has no attribute {name!r}")
