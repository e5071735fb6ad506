"""Inline model-local functions for targets whose runtime loads none.

OpenVINO, tract, IREE, tinygrad and onnx2tf fail on any call to a model-local function
(probed with a function whose body is one Mul: "No conversion rule found for operations:
local.F", "Unimplemented(F)", "failed to legalize operation 'torch.operator'", "'local' is
not a valid Domain"). For those targets (``Target.local_functions`` False) every call is
replaced by the function's body before the rewrite, by onnx_ir's ``InlinePass`` (which
resolves attribute references and names the inlined values uniquely), and functions nothing
calls are dropped (``RemoveUnusedFunctionsPass``), with the opset imports nothing uses any
more (``RemoveUnusedOpsetsPass``: tinygrad refuses a model importing a domain it does not
know, "'local' is not a valid Domain"). What the inliner cannot do (a function
importing another ai.onnx version than the model, a graph-valued function attribute, calls
in a cycle) is refused with :class:`~rewriter.errors.TargetError`.
"""

from __future__ import annotations

import logging

import onnx_ir as ir
from onnx_ir.passes import common

from rewriter.errors import TargetError
from rewriter.specialize import SpecializeFunctionsPass
from rewriter.targets import Target

__all__ = ["InlineFunctionsPass", "function_passes"]

logger = logging.getLogger(__name__)


class InlineFunctionsPass(ir.passes.InPlacePass):
    """Inline every call to a model-local function and drop the functions, for ``target``."""

    def __init__(self, target: Target) -> None:
        super().__init__()
        self.target = target

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        if not model.functions:
            return ir.passes.PassResult(model, modified=False)
        names = ", ".join(sorted(f"{d}.{n}" if d else n for d, n, _ in model.functions))
        try:
            common.InlinePass()(model)
        except (ValueError, ir.passes.PassError) as exc:
            cause: BaseException = exc
            while isinstance(cause, ir.passes.PassError) and cause.__cause__ is not None:
                cause = cause.__cause__
            raise TargetError(
                f"the {self.target.name} target loads no model-local function, and onnx_ir's "
                f"inliner cannot inline them ({names}): {' '.join(str(cause).split())}"
            ) from exc
        common.RemoveUnusedFunctionsPass()(model)  # type: ignore[no-untyped-call]
        common.RemoveUnusedOpsetsPass()(model)  # tinygrad refuses an unknown domain's import
        logger.info(
            "inlined the model-local functions (%s): %s loads none", names, self.target.name
        )
        return ir.passes.PassResult(model, modified=True)


def function_passes(target: Target) -> list[ir.passes.PassBase]:
    """What runs on the model's functions before the rewrite, for ``target``: inlining them
    where the runtime loads none; else specialising them per call signature."""
    if target.local_functions:
        return [SpecializeFunctionsPass()]
    return [InlineFunctionsPass(target)]
