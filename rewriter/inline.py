"""Inline model-local functions for targets whose runtime loads none.

OpenVINO, tract, IREE, tinygrad and onnx2tf fail on any call to a model-local function
(probed with a function whose body is one Mul: "No conversion rule found for operations:
local.F", "Unimplemented(F)", "failed to legalize operation 'torch.operator'", "'local' is
not a valid Domain"). For those targets (``Target.local_functions`` False) every call is
replaced by the function's body before the rewrite, by onnx_ir's ``InlinePass`` (which
resolves attribute references), after the functions nothing calls are dropped
(``RemoveUnusedFunctionsPass``) and the outputs a call leaves unnamed are named
(:class:`NameCallOutputsPass`); then ``NameFixPass`` keeps the inlined names apart from those
of subgraphs, and the opset imports nothing uses any more are dropped
(``RemoveUnusedOpsetsPass``: tinygrad refuses a model importing a domain it does not know).
What the inliner cannot do (a function importing another ai.onnx version than the model, a
graph-valued function attribute, calls in a cycle, a function returning one of its inputs as
the graph's) is refused with :class:`~rewriter.errors.TargetError`.
"""

from __future__ import annotations

import logging

import onnx_ir as ir
from onnx_ir.passes import common

from rewriter.errors import TargetError, pass_error_cause
from rewriter.graphs import INLINED_FROM
from rewriter.specialize import SpecializeFunctionsPass
from rewriter.targets import Target

__all__ = ["InlineFunctionsPass", "NameCallOutputsPass", "function_passes"]

logger = logging.getLogger(__name__)


class NameCallOutputsPass(ir.passes.InPlacePass):
    """Name every output a call to a model-local function leaves unnamed (``F(a) -> (y, "")``,
    valid ONNX): onnx_ir writes a node without its trailing unnamed outputs, which the checker
    then refuses for a function call, and its inliner gives an inlined node the empty name
    (a node with no output). The named output is computed and not used."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        graphs: list[ir.Graph | ir.Function] = [model.graph, *model.functions.values()]
        taken = {
            v.name
            for g in graphs
            for n in ir.traversal.RecursiveGraphIterator(g)
            for v in (*n.inputs, *n.outputs)
            if v is not None and v.name
        }
        taken |= {v.name for v in model.graph.inputs if v.name}
        modified = False
        for graph in graphs:
            for node in ir.traversal.RecursiveGraphIterator(graph):
                if node.op_identifier() not in model.functions:
                    continue
                for k, value in enumerate(node.outputs):
                    if value.name:
                        continue
                    name, i = f"{node.name or node.op_type}_unused_{k}", 0
                    while name in taken:
                        i += 1
                        name = f"{node.name or node.op_type}_unused_{k}_{i}"
                    value.name = name
                    taken.add(name)
                    modified = True
        return ir.passes.PassResult(model, modified=modified)


class InlineFunctionsPass(ir.passes.InPlacePass):
    """Inline every call to a model-local function and drop the functions, for ``target``."""

    def __init__(self, target: Target) -> None:
        super().__init__()
        self.target = target

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        if not model.functions:
            return ir.passes.PassResult(model, modified=False)
        # first: a function nothing calls may hold what the inliner cannot take
        common.RemoveUnusedFunctionsPass()(model)  # type: ignore[no-untyped-call]
        names = ", ".join(sorted(f"{d}.{n}" if d else n for d, n, _ in model.functions))
        interface = self._interface(model)
        for function in model.functions.values():  # messages name what the input model has
            label = f"function '{function.domain}.{function.name}'"
            for node in ir.traversal.RecursiveGraphIterator(function):
                node.meta[INLINED_FROM] = (node.name or "", label)
        try:
            common.InlinePass()(model)
        except (ValueError, ir.passes.InvariantError) as exc:  # what InlinePass raises
            raise self._refusal(names, pass_error_cause(exc)) from exc
        # the inliner keeps inlined names apart from the ones it has seen, not from those of
        # subgraphs it has not visited yet
        common.NameFixPass()(model)
        if self._interface(model) != interface:  # a function returning one of its inputs
            raise self._refusal(
                names,
                f"inlining renames the graph's inputs or outputs {interface} to "
                f"{self._interface(model)}",
            )
        common.RemoveUnusedFunctionsPass()(model)  # type: ignore[no-untyped-call]
        common.RemoveUnusedOpsetsPass()(model)  # tinygrad refuses an unknown domain's import
        logger.info(
            "inlined the model-local functions (%s): %s loads none", names, self.target.name
        )
        return ir.passes.PassResult(model, modified=True)

    @staticmethod
    def _interface(model: ir.Model) -> tuple[list[str | None], list[str | None]]:
        return [v.name for v in model.graph.inputs], [v.name for v in model.graph.outputs]

    def _refusal(self, names: str, cause: BaseException | str) -> TargetError:
        return TargetError(
            f"the {self.target.name} target loads no model-local function, and onnx_ir's "
            f"inliner cannot inline them ({names}): {' '.join(str(cause).split())}"
        )


def function_passes(target: Target, *, lower_opset: bool = False) -> list[ir.passes.PassBase]:
    """What runs on the model's functions before the rewrite, for ``target``: inlining them
    where the runtime loads none; else specialising them per call signature (with
    ``lower_opset``, also those taking attributes by reference). Unnamed call outputs are
    named first (:class:`NameCallOutputsPass`)."""
    if target.local_functions:
        return [NameCallOutputsPass(), SpecializeFunctionsPass(references=lower_opset)]
    return [NameCallOutputsPass(), InlineFunctionsPass(target)]
