"""cumprod-rewriter: lower ONNX opset-26 CumProd to older ops, exactly, for every type."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rewriter.decompose import DecomposeCumProdPass, decompose_cumprod
    from rewriter.errors import (
        CumProdError,
        InputModelError,
        InvalidCumProdError,
        OpsetError,
        StrategyError,
        TargetError,
    )
    from rewriter.lowerings import STRATEGIES
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

# Where each public name lives: loaded on first use, so that ``import rewriter`` (which
# ``python -m rewriter`` does before its __main__ can catch a Ctrl-C) imports no onnx.
_HOMES = {
    "DecomposeCumProdPass": "rewriter.decompose",
    "decompose_cumprod": "rewriter.decompose",
    "CumProdError": "rewriter.errors",
    "InputModelError": "rewriter.errors",
    "InvalidCumProdError": "rewriter.errors",
    "StrategyError": "rewriter.errors",
    "TargetError": "rewriter.errors",
    "STRATEGIES": "rewriter.lowerings",
    "OpsetError": "rewriter.errors",
    "DEFAULT_TARGET": "rewriter.targets",
    "TARGETS": "rewriter.targets",
}


def __getattr__(name: str) -> object:
    """The public names, and the package's modules (``rewriter.rules``, ``rewriter.io``, ...,
    reached as attributes as they were when the package imported them all), loaded on first
    use."""
    if name in _HOMES:
        return getattr(importlib.import_module(_HOMES[name]), name)
    if not name.startswith("_"):
        try:
            return importlib.import_module(f"rewriter.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"rewriter.{name}":
                raise
    raise AttributeError(f"module 'rewriter' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOMES, "rules", "pytorch"})
