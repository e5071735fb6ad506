"""Give every model-local function that computes a CumProd one call signature (and, before
the opset is lowered, every function that takes an attribute by reference).

A function body is shared by all its calls, but a CumProd's lowering depends on its
attributes (which a function may take from its own attributes by reference, ``ref_attr_name``)
and on x's element type (which may differ between calls). So, for every function that
contains a CumProd directly or through the functions it calls::

    F called with signatures s_1 .. s_k  ->  F_1 .. F_k, each F_j = F with the attribute
    references of s_j resolved, every call with s_j pointed at F_j

A signature is the element types of the call's inputs and the values of the function's
attributes at the call (its defaults where the call gives none). With one signature F is
replaced in place and keeps its name; with several, each specialization is named
``F__<k>`` in F's domain (no ``overload``, which needs IR 10 and is not read by every
runtime). Callers are handled before callees, so a function called from a specialized
function gets the signature of that caller. Shapes are not part of the signature: the
lowerings take whatever dims the call sites do not agree on at run time.

A function with a CumProd that nothing calls gets its attribute defaults resolved; its
element types stay unknown, so its CumProd gets a type-generic lowering.
"""

from __future__ import annotations

import logging

import onnx_ir as ir
from onnx_ir import _cloner

from rewriter.graphs import holds_cumprod
from rewriter.types import (
    FunctionKey,
    call_sites,
    function_scope,
    functions_in_call_order,
    infer_function_types,
    infer_types,
)

__all__ = ["SpecializeFunctionsPass", "functions_to_specialize"]

logger = logging.getLogger(__name__)

Signature = tuple[tuple[int, ...], tuple[tuple[str, str], ...]]


def _has_reference(graph: ir.Graph | ir.Function) -> bool:
    return any(
        attr.is_ref()
        for n in ir.traversal.RecursiveGraphIterator(graph)
        for attr in n.attributes.values()
    )


def functions_to_specialize(model: ir.Model, *, references: bool = False) -> set[FunctionKey]:
    """Functions that compute a CumProd (with ``references``: or that take an attribute by
    reference), directly or through functions they call."""
    found = {
        key
        for key, f in model.functions.items()
        if holds_cumprod(f) or (references and _has_reference(f))
    }
    changed = True
    while changed:
        changed = False
        for key, function in model.functions.items():
            if key not in found and any(k in found for _, k in call_sites(model, function)):
                found.add(key)
                changed = True
    return found


def _attr_map(function: ir.Function, node: ir.Node | None) -> dict[str, ir.Attr]:
    """The function's attribute values at a call: the call's, else the declared defaults."""
    values = {
        name: attr
        for name, attr in function.attributes.items()
        if attr.type != ir.AttributeType.UNDEFINED and attr.value is not None
    }
    if node is not None:
        values.update({k: a for k, a in node.attributes.items() if k in function.attributes})
    return values


def _attr_repr(attr: ir.Attr) -> str:
    if attr.is_ref():
        return f"ref:{attr.ref_attr_name}"
    value = attr.value
    if isinstance(value, (ir.Graph, list, tuple)) and attr.type in (
        ir.AttributeType.GRAPH,
        ir.AttributeType.GRAPHS,
    ):
        return f"graph:{id(value)}"
    if attr.type == ir.AttributeType.TENSOR:
        return f"tensor:{attr.as_tensor().numpy().tobytes().hex()}"
    return f"{attr.type.name}:{value!r}"


def _specialized(function: ir.Function, attrs: dict[str, ir.Attr], name: str) -> ir.Function:
    """A copy of ``function`` named ``name`` with its attribute references resolved."""
    cloner = _cloner.Cloner(attr_map=attrs, value_map={}, metadata_props={}, resolve_ref_attrs=True)
    graph = cloner.clone_graph(function._graph)
    return ir.Function(
        domain=function.domain,
        name=name,
        overload=function.overload,
        graph=graph,
        attributes=list(function.attributes.values()),
    )


class SpecializeFunctionsPass(ir.passes.InPlacePass):
    """Give each model-local function with a CumProd one call signature (see the module
    docstring): resolved attribute references, one element type per input.

    With ``references`` (for a lower opset: an older form of a node is chosen by its
    attribute values) also every function that takes an attribute by reference."""

    def __init__(self, *, references: bool = False) -> None:
        super().__init__()
        self.references = references

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        needs = functions_to_specialize(model, references=self.references)
        if not needs:
            return ir.passes.PassResult(model, modified=False)
        order = functions_in_call_order(model)
        # The main graph's types do not change here (a call renamed to its specialisation
        # keeps its output types): inferred once; function bodies after each step.
        types = infer_types(model)
        # Where calls to functions with a CumProd can be: the main graph and the
        # specializations made so far (a function without CumProd calls none of them).
        graphs: list[tuple[str, ir.Graph | ir.Function]] = [("", model.graph)]
        modified = False
        for key in order:
            if key not in needs:
                continue
            function = model.functions[key]
            # Every call to it, from the main graph and from functions already settled.
            sites: dict[Signature, list[ir.Node]] = {}
            for scope, graph in graphs:
                for node, called in call_sites(model, graph):
                    if called != key:
                        continue
                    in_types = [
                        types.get_proto(scope, v.name or "") if v is not None else None
                        for v in node.inputs
                    ]
                    elems = tuple(
                        t.tensor_type.elem_type
                        if t is not None and t.HasField("tensor_type")
                        else 0
                        for t in in_types
                    )
                    attrs = _attr_map(function, node)
                    sig = (elems, tuple(sorted((k, _attr_repr(a)) for k, a in attrs.items())))
                    sites.setdefault(sig, []).append(node)
            del model.functions[key]
            signatures = list(sites) or [((), ())]
            for index, sig in enumerate(signatures):
                calls = sites.get(sig, [])
                name = function.name
                if len(signatures) > 1:
                    name = f"{function.name}__{index}"
                    while (function.domain, name, function.overload) in model.functions:
                        name += "_"
                attrs = _attr_map(function, calls[0] if calls else None)
                instance = _specialized(function, attrs, name)
                model.functions[(instance.domain, instance.name, instance.overload)] = instance
                for node in calls:
                    node.op_type = name
                scope = function_scope(instance)
                graphs.append((scope, instance))
                logger.debug(
                    "function %s.%s: %d call(s) with signature %s -> %s",
                    function.domain,
                    function.name,
                    len(calls),
                    sig,
                    name,
                )
            modified = True
            # Types inside the new instances, for the calls they make.
            infer_function_types(model, types)
        return ir.passes.PassResult(model, modified=modified)
