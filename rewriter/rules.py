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
logs them, each once per model and rule however often the rewriter checks the node.

State: the rule object holds only its configuration and no rewrite changes it. What it
learns about a model (located CumProds, names in use, the visit's inferred types, warnings
given) is kept per rule in ``model.meta`` (unserialized; the last visit's facts stay there);
``check``'s plan for a node reaches ``rewrite`` (given no model by onnxscript) in the node's
``meta``, taken off before the node is replaced. One rule set serves several models at once.

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
class _Visit:
    """What the rule knows about the model during one visit of one of its graphs, subgraphs
    or functions (``scope``): the located CumProd nodes, the names in use, the types once
    needed, and the nodes checked so far. onnxscript checks each node once per visit, so a
    node checked again means a new visit (the model may have changed since)."""

    scope: ir.Graph | ir.Function
    located: dict[ir.Node, Located]
    names: lowerings.NameSource
    types: TypeTable | None = None
    checked: set[ir.Node] = dataclasses.field(default_factory=set)


@dataclasses.dataclass
class _Record:
    """What one rule keeps about one model, in the model's ``meta`` (never serialized): the
    current visit's facts and the warnings already given."""

    visit: _Visit | None = None
    warned: set[str] = dataclasses.field(default_factory=set)


@dataclasses.dataclass(frozen=True)
class _Plan:
    """What :meth:`CumProdRule.check` decided for a node, carried to :meth:`~CumProdRule.rewrite`
    in the node's ``meta`` (the node is replaced right after)."""

    site: CumProdSite
    lowering: lowerings.Lowering
    names: lowerings.NameSource


# model.meta[_RECORDS]: each rule's record about the model (weakly keyed: a rule set dropped
# takes its records along); node.meta[_PLAN]: the node's plan, between check and rewrite
_RECORDS = "rewriter.rules.records"
_PLAN = "rewriter.rules.plan"


class CumProdRule(RewriteRuleClassBase):
    """``CumProd(x, axis) -> <the lowering's subgraph>``; see the module docstring. Its
    attributes are its configuration only: a model's facts are a :class:`_Record` in
    ``model.meta``, a node's plan a :class:`_Plan` in ``node.meta``."""

    def __init__(
        self, strategy: str = "auto", *, target: str = DEFAULT_TARGET, max_length: int | None = None
    ) -> None:
        lowerings.check_strategy(strategy)
        self.target = target_named(target)
        self.max_length = lowerings.whole_number("max_length", max_length, 1)
        super().__init__(name=f"CumProdTo{strategy.capitalize()}")
        self.strategy = strategy

    def pattern(self, op: Any, x: ir.Value, axis: ir.Value) -> ir.Value:
        return op.CumProd(x, axis, _outputs=["y"])  # type: ignore[no-any-return]

    def _record(self, model: ir.Model) -> _Record:
        """This rule's record about ``model`` (each warning once per model and rule)."""
        records: weakref.WeakKeyDictionary[CumProdRule, _Record] | None
        records = model.meta.get(_RECORDS)
        if records is None:
            records = model.meta[_RECORDS] = weakref.WeakKeyDictionary()
        record = records.get(self)
        if record is None:
            record = records[self] = _Record()
        return record

    def _visit(self, record: _Record, context: Any) -> _Visit:
        """The facts of the current visit of ``context.graph_or_function``: gathered anew for
        another graph or function, for a node checked before in this one (a new visit: the
        model may have been rewritten since) or for a node not in the model's last walk."""
        model, node, scope = context.model, context.root, context.graph_or_function
        visit = record.visit
        if (
            visit is None
            or visit.scope is not scope
            or node in visit.checked
            or node not in visit.located
        ):
            located = {w.node: w for w in walk_model(model) if is_cumprod(w.node)}
            visit = _Visit(scope, located, lowerings.NameSource.for_model(model))
            record.visit = visit
        visit.checked.add(node)
        return visit

    # onnxscript passes the pattern's bindings by name (the base declares *args, **kwargs).
    def check(  # type: ignore[override]
        self, context: Any, x: ir.Value, axis: ir.Value, **_: Any
    ) -> MatchResult:
        result = MatchResult()
        node: ir.Node = context.root
        model: ir.Model = context.model
        record = self._record(model)
        visit = self._visit(record, context)
        where = visit.located.get(node)
        if where is None:  # not from this model's graphs and functions
            return result.fail(f"CumProd node '{node.name or ''}' is not in the model", node)
        if where.opset < 26:
            problem = f"CumProd needs ai.onnx opset >= 26, found {where.opset}"
            error = InvalidCumProdError(where.name, where.location, problem)
            return result.fail(_left_in_place(record, error), node)
        try:
            site = self._site(model, visit, where, x)
            lowering = lowerings.choose(site, self.strategy, self.target)
        except CumProdError as error:
            return result.fail(_left_in_place(record, error), node)
        for line in warning_lines(site, lowering, self.target):
            _warn_once(record, line)
        if model.functions and not self.target.local_functions:
            _warn_once(
                record,
                f"the model's functions stay functions, which {self.target.name} does not "
                "load: DecomposeCumProdPass inlines them",
            )
        node.meta[_PLAN] = _Plan(site, lowering, visit.names)
        return result

    def _site(self, model: ir.Model, visit: _Visit, where: Located, x: ir.Value) -> CumProdSite:
        """The node's site, from the visit's types (inferred at most once per visit).

        Raises:
            CumProdError: the node cannot be lowered (its message says why).
        """
        trusted = x.is_initializer() or (
            x.is_graph_input() and x.graph is model.graph  # the main graph's
        )
        if trusted and x.dtype is not None and x.shape is not None:
            types = TypeTable(model.graph)  # its declaration is checked at run time
        else:
            if visit.types is None:
                visit.types = infer_types(model)
                drop_unconfirmed_shapes(model, visit.types)
            types = visit.types
        site = inspect_cumprod(where, types)
        if self.max_length is not None and site.spec.max_length is None:
            spec = dataclasses.replace(site.spec, max_length=self.max_length)
            site = dataclasses.replace(site, spec=spec)
        return site

    def rewrite(self, op: Any, x: ir.Value, axis: ir.Value, y: ir.Value, **_: Any) -> ir.Value:
        node = y.producer()
        assert node is not None, "rewrite without a matched node"
        plan = node.meta.pop(_PLAN, None)  # check's, just before (onnxscript calls it first)
        assert isinstance(plan, _Plan), "rewrite without a passed check"
        builder = RuleBuilder(op, plan.site.opset, plan.names, node.name or "CumProd")
        return lowerings.lower(builder, plan.site, plan.lowering, self.target)


def _warn_once(record: _Record, message: str) -> None:
    if message not in record.warned:
        record.warned.add(message)
        logger.warning("%s", message)


def _left_in_place(record: _Record, error: CumProdError) -> str:
    _warn_once(record, f"{error}; the rule leaves this CumProd in place")
    return str(error)


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
