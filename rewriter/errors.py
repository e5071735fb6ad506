"""The errors the rewriter raises, each one clear line: a node and what is wrong with it, a
target opset that cannot be reached, a file that cannot be read or written."""

from __future__ import annotations

import dataclasses

import onnx_ir as ir

__all__ = [
    "Blocker",
    "CumProdError",
    "InputModelError",
    "InvalidCumProdError",
    "ModelFileError",
    "OpsetError",
    "StrategyError",
    "TargetError",
    "pass_error_cause",
]


class CumProdError(ValueError):
    """Base class: a CumProd node that cannot be rewritten. The model is left untouched.

    Attributes:
        node_name: The offending node's name ("" when it has none).
        location: Where the node is: ``graph 'main'``, ``function 'pkg.F'``, or a path
            through the If / Loop / Scan attributes that hold it.
        problem: What is wrong, without the location.
    """

    def __init__(self, node_name: str, location: str, problem: str) -> None:
        self.node_name = node_name
        self.location = location
        self.problem = problem
        shown = f"'{node_name}'" if node_name else "(unnamed)"
        super().__init__(f"CumProd node {shown} in {location}: {problem}")


class InvalidCumProdError(CumProdError):
    """The node itself is malformed: no axis, a non-0-D or out-of-range axis, rank-0 input,
    an element type CumProd does not take, or a type that cannot be determined."""


class StrategyError(CumProdError):
    """The requested lowering cannot compute this node exactly (e.g. ``logsum`` on integers)."""


class InputModelError(ValueError):
    """The model as given fails the ONNX checker (full check), where the rewrite is checked:
    nothing is rewritten, and the message says that the input, not the rewrite, is at fault."""


class TargetError(ValueError):
    """The model cannot be written in a form the target's runtime loads (e.g. its model-local
    functions cannot be inlined for a runtime that loads none): nothing is rewritten."""


@dataclasses.dataclass(frozen=True)
class Blocker:
    """A node that cannot be expressed at the target opset."""

    op_type: str
    version: int
    location: str
    node_name: str
    reason: str

    def __str__(self) -> str:
        name = f" '{self.node_name}'" if self.node_name else ""
        return f"{self.op_type}-{self.version}{name} in {self.location}: {self.reason}"


class OpsetError(ValueError):
    """The model cannot be lowered to the target opset; lists every blocking node."""

    def __init__(self, target: int, blockers: list[Blocker] | str) -> None:
        self.target = target
        self.blockers = blockers if isinstance(blockers, list) else []
        detail = "; ".join(map(str, blockers)) if isinstance(blockers, list) else blockers
        super().__init__(f"cannot lower to ai.onnx opset {target}: {detail}")


class ModelFileError(Exception):
    """A model file that cannot be read or written; the message names the file."""


def pass_error_cause(exc: BaseException) -> BaseException:
    """The error inside the ``PassError`` s that onnx_ir's pass manager wraps it in."""
    while isinstance(exc, ir.passes.PassError) and exc.__cause__ is not None:
        exc = exc.__cause__
    return exc
