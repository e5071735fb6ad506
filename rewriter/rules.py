"""The pass as an onnxscript rewrite rule: lower CumProd alongside other rules.

::

    import onnxscript.rewriter
    from rewriter.rules import cumprod_rules

    model = onnxscript.rewriter.rewrite(model, pattern_rewrite_rules=cumprod_rules())
    # with other rules:
    rules = onnxscript.rewriter.RewriteRuleSet([cumprod_rule(), *other_rules])

The rule matches ``CumProd(x, axis)`` with any ``exclusive`` / ``reverse`` (the pattern does
not constrain attributes; the lowering reads them from the node), in the main graph, in If /
Loop / Scan bodies and in model-local functions (onnxscript visits all of them). It validates
the node as the pass does (``rewriter.site.inspect_cumprod``), picks the lowering with
``rewriter.lowerings.choose`` and emits it with ``rewriter.lowerings.lower`` through the
rewriter's op builder, at the ai.onnx version where the node lives. A check that fails
gives its reason (the pass's error message) in the match result (``MatchingTracer``,
``verbose``) and, once per node, as a logged warning; the node is left alone. The target's
warnings for a lowered node (``rewriter.decompose.warning_lines``) are logged as the pass
logs them.

Types: x's element type and shape are declared ones where x is a main-graph input or an
initializer (a runtime checks those); else they come from onnx shape inference on a copy of
the model, as in the pass (``rewriter.types.infer_types``), computed once per visited graph
that needs it; a declared shape counts only where inference confirms it. As the pass does, the
rule clears the declared shapes inference contradicts (stale ``value_info``) and those of
subgraph inputs on the way to a CumProd that it does not confirm (a Loop body's carried
value may change shape between iterations, and onnxruntime would fold the lowering's
``Shape`` of it from the declaration). The model's opset is not changed (the pass's
``target_opset`` has no counterpart here). Unlike the pass, a rule cannot specialise a
function per call signature: a function whose calls disagree on x's element type gets a
type-generic lowering (computed in x's own type), and an attribute given by reference is
refused; use the pass for such models.
"""

from __future__ import annotations

import dataclasses
import logging
import weakref
from collections.abc import Sequence
from typing import Any

import onnx_ir as ir
from onnxscript.rewriter import MatchResult, RewriteRule, RewriteRuleClassBase, RewriteRuleSet

from rewriter import lowerings
from rewriter.declarations import drop_unconfirmed_shapes
from rewriter.errors import CumProdError, InvalidCumProdError
from rewriter.graphs import Located, is_cumprod, walk_model
from rewriter.lower import warning_lines
from rewriter.site import CumProdSite, inspect_cumprod
from rewriter.targets import DEFAULT_TARGET, target_named
from rewriter.types import TypeTable, infer_types

__all__ = ["RuleBuilder", "cumprod_rule", "cumprod_rules"]

logger = logging.getLogger(__name__)


class RuleBuilder(lowerings.Builder):
    """Emits each node through an onnxscript rewriter's ``op`` (so the rewriter inserts
    them); subgraph bodies (:meth:`child`) are plain ``ir.Graph``s. Every output is named
    from the model's :class:`~rewriter.lowerings.NameSource`."""

    def __init__(self, op: Any, opset: int, names: lowerings.NameSource, prefix: str) -> None:
        super().__init__(opset, names, prefix)
        self._op = op

    def op_multi(
        self, op_type: str, *inputs: ir.Value | None, n_out: int, **attributes: object
    ) -> Sequence[ir.Value]:
        names = [self.fresh_name(op_type) for _ in range(n_out)]
        result = getattr(self._op, op_type)(*inputs, _outputs=names, **attributes)
        return [result] if isinstance(result, ir.Value) else list(result)


@dataclasses.dataclass
class _ModelFacts:
    """What the rule knows about the model during one graph visit."""

    model: ir.Model
    located: dict[ir.Node, Located]
    names: lowerings.NameSource
    types: TypeTable | None = None


class CumProdRule(RewriteRuleClassBase):
    """``CumProd(x, axis) -> <the lowering's subgraph>``; see the module docstring."""

    def __init__(
        self, strategy: str = "auto", *, target: str = DEFAULT_TARGET, max_length: int | None = None
    ) -> None:
        lowerings.check_strategy(strategy)
        self.target = target_named(target)
        self.max_length = lowerings.whole_number("max_length", max_length, 1)
        super().__init__(name=f"CumProdTo{strategy.capitalize()}")
        self.strategy = strategy
        # the model facts of the current graph visit (names, types), which rewrite, given no
        # model by onnxscript, reads too
        self._facts: _ModelFacts | None = None
        # the rewriter may check a node on every iteration: each warning once per model
        self._warned: set[str] = set()
        self._warned_model: weakref.ref[ir.Model] | None = None

    def pattern(self, op: Any, x: ir.Value, axis: ir.Value) -> ir.Value:
        return op.CumProd(x, axis, _outputs=["y"])  # type: ignore[no-any-return]

    def setup(self) -> None:
        # Called before each graph, subgraph and function is visited: facts gathered during
        # an earlier visit may be stale (the model has been rewritten since).
        self._facts = None

    def cleanup(self) -> None:
        self._facts = None

    def _model_facts(self, model: ir.Model, node: ir.Node) -> _ModelFacts:
        if self._warned_model is None or self._warned_model() is not model:
            self._warned.clear()  # a rule set reused for another model warns about it too
            self._warned_model = weakref.ref(model)
        facts = self._facts
        if facts is None or facts.model is not model or node not in facts.located:
            located = {w.node: w for w in walk_model(model) if is_cumprod(w.node)}
            facts = _ModelFacts(model, located, lowerings.NameSource.for_model(model))
            self._facts = facts
        return facts

    # onnxscript passes the pattern's bindings by name (the base declares *args, **kwargs).
    def check(  # type: ignore[override]
        self, context: Any, x: ir.Value, axis: ir.Value, **_: Any
    ) -> MatchResult:
        result = MatchResult()
        node: ir.Node = context.root
        facts = self._model_facts(context.model, node)
        where = facts.located.get(node)
        if where is None:  # not from this model's graphs and functions
            return result.fail(f"CumProd node '{node.name or ''}' is not in the model", node)
        if where.opset < 26:
            problem = f"CumProd needs ai.onnx opset >= 26, found {where.opset}"
            error = InvalidCumProdError(where.name, where.location, problem)
            return result.fail(self._left_in_place(error), node)
        try:
            site, lowering = self._plan(facts, where, x)
        except CumProdError as error:
            return result.fail(self._left_in_place(error), node)
        for line in warning_lines(site, lowering, self.target):
            self._warn_once(line)
        if facts.model.functions and not self.target.local_functions:
            self._warn_once(
                f"the model's functions stay functions, which {self.target.name} does not "
                "load: DecomposeCumProdPass inlines them"
            )
        return result

    def _plan(
        self, facts: _ModelFacts, where: Located, x: ir.Value
    ) -> tuple[CumProdSite, lowerings.Lowering]:
        """The node's site and lowering, from the visit's model facts: the same in
        :meth:`check` and :meth:`rewrite` (nothing is carried from one to the other).

        Raises:
            CumProdError: the node cannot be lowered (its message says why).
        """
        trusted = x.is_initializer() or (
            x.is_graph_input() and x.graph is facts.model.graph  # the main graph's
        )
        if trusted and x.dtype is not None and x.shape is not None:
            types = TypeTable(facts.model.graph)  # its declaration is checked at run time
        else:
            if facts.types is None:
                facts.types = infer_types(facts.model)
                drop_unconfirmed_shapes(facts.model, facts.types)
            types = facts.types
        site = inspect_cumprod(where, types)
        if self.max_length is not None and site.spec.max_length is None:
            spec = dataclasses.replace(site.spec, max_length=self.max_length)
            site = dataclasses.replace(site, spec=spec)
        return site, lowerings.choose(site, self.strategy, self.target)

    def _warn_once(self, message: str) -> None:
        if message not in self._warned:
            self._warned.add(message)
            logger.warning("%s", message)

    def _left_in_place(self, error: CumProdError) -> str:
        self._warn_once(f"{error}; the rule leaves this CumProd in place")
        return str(error)

    def rewrite(self, op: Any, x: ir.Value, axis: ir.Value, y: ir.Value, **_: Any) -> ir.Value:
        node = y.producer()
        facts = self._facts  # this visit's, as check saw them (nothing rewritten in between)
        assert node is not None and facts is not None, "rewrite without a passed check"
        site, lowering = self._plan(facts, facts.located[node], x)
        builder = RuleBuilder(op, site.opset, facts.names, node.name or "CumProd")
        return lowerings.lower(builder, site, lowering, self.target)


def cumprod_rule(
    strategy: str = "auto", *, target: str = DEFAULT_TARGET, max_length: int | None = None
) -> RewriteRule:
    """One onnxscript ``RewriteRule`` lowering every ai.onnx CumProd.

    Args:
        strategy: ``"auto"`` or a lowering name, as for the pass.
        target: The runtime the output is for, as for the pass.
        max_length: A bound on scan lengths known only at run time, as for the pass.
    """
    return CumProdRule.rule(strategy, target=target, max_length=max_length)  # type: ignore[no-untyped-call,no-any-return]


def cumprod_rules(
    strategy: str = "auto", *, target: str = DEFAULT_TARGET, max_length: int | None = None
) -> RewriteRuleSet:
    """:func:`cumprod_rule` as a ``RewriteRuleSet``, for
    ``onnxscript.rewriter.rewrite(model, pattern_rewrite_rules=cumprod_rules())``."""
    return RewriteRuleSet([cumprod_rule(strategy, target=target, max_length=max_length)])
