"""Walking a model: every node of the main graph, its subgraphs at any depth and every
model-local function, with a readable location and the ai.onnx opset in force there; every
graph of it; what counts as a CumProd; and names no graph of it uses."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator

import onnx
import onnx_ir as ir

from rewriter.types import function_scope

__all__ = [
    "INLINED_FROM",
    "ONNX_DOMAINS",
    "Located",
    "NameSource",
    "ai_onnx_opset",
    "graphs_of",
    "is_cumprod",
    "walk_model",
]

ONNX_DOMAINS = ("", "ai.onnx")
# node.meta key: (name, function) of a node before inlining (set by rewriter.inline; onnx_ir's
# inliner copies a node's meta into each inlined copy, whose name may be a new one)
INLINED_FROM = "cumprod_rewriter.inlined_from"


@dataclasses.dataclass(frozen=True)
class Located:
    """A node and where it is.

    Attributes:
        node: The node.
        location: ``graph 'main' > Loop 'l' body > If 'c' then_branch`` or
            ``function 'dom.F' > ...``.
        opset: The ai.onnx version imported by the graph or function that holds it.
        scope: The type-table scope: "" for the main graph, the function's otherwise.
        depth: 0 for a node of the main graph or a function body, 1 + the depth of the
            node whose attribute holds its subgraph otherwise.
        in_scan: Whether the node is inside a Scan body (at any depth).
        in_if: Whether the node is inside an If branch (at any depth).

    For a node inlined from a model-local function (for a runtime that loads none) the
    location is ``function 'dom.F' (inlined into graph 'main')``, and :attr:`name` its name
    in the function: the inliner names a second copy anew (``cp_2``), a name the input
    model does not have.
    """

    node: ir.Node
    location: str
    opset: int
    scope: str
    depth: int = 0
    in_scan: bool = False
    in_if: bool = False

    @property
    def name(self) -> str:
        """The node's name in the input model."""
        origin = self.node.meta.get(INLINED_FROM)
        return origin[0] if origin else self.node.name or ""


def ai_onnx_opset(opset_imports: dict[str, int], default: int = 0) -> int:
    return opset_imports.get("", opset_imports.get("ai.onnx", default))


def is_cumprod(node: ir.Node | onnx.NodeProto) -> bool:
    """Whether ``node`` (onnx_ir or protobuf) is an ai.onnx CumProd."""
    return node.op_type == "CumProd" and node.domain in ONNX_DOMAINS


def holds_cumprod(graph: ir.Graph | ir.Function) -> bool:
    """Whether ``graph`` (or a function body), or a subgraph at any depth in it, has a CumProd."""
    return any(is_cumprod(n) for n in ir.traversal.RecursiveGraphIterator(graph))


def graphs_of(model: ir.Model) -> Iterator[ir.Graph]:
    """The main graph, every function's body, and their subgraphs at any depth."""
    roots: list[ir.Graph] = [model.graph]
    roots.extend(function.graph for function in model.functions.values())  # type: ignore[attr-defined]
    for root in roots:
        yield root
        yield from root.subgraphs()


class NameSource:
    """Hands out value and node names not used anywhere in the model, in constant time
    per name (a counter per base name, as onnx_ir's ``NameFixPass`` does)."""

    def __init__(self, used: Iterable[str]) -> None:
        self._used = set(used)
        self._next: dict[str, int] = {}

    def fresh(self, base: str) -> str:
        i = self._next.get(base, 0)
        while (name := f"{base}_{i}") in self._used:
            i += 1
        self._next[base] = i + 1
        self._used.add(name)
        return name

    @classmethod
    def for_model(cls, model: ir.Model) -> NameSource:
        """Every name in the model: values, nodes and initializers of every graph, subgraph
        and function (:func:`graphs_of`)."""
        used: set[str] = set()
        for graph in graphs_of(model):
            used.update(v.name or "" for v in graph.inputs)
            used.update(graph.initializers)
            for node in graph:
                used.add(node.name or "")
                used.update(v.name or "" for v in node.outputs)
                used.update(v.name or "" for v in node.inputs if v is not None)
        return cls(used)


@dataclasses.dataclass(frozen=True)
class _Place:
    """Where a graph is: its path from the root and what holds it."""

    path: str
    depth: int = 0
    in_scan: bool = False
    in_if: bool = False


def _walk(root: ir.Graph, path: str) -> Iterator[tuple[ir.Node, _Place]]:
    """Every node of ``root`` and of its subgraphs at any depth (onnx_ir's
    ``RecursiveGraphIterator``: a node before its subgraphs' nodes), each with the place of
    the graph that holds it."""
    places = {id(root): _Place(path)}
    for node in ir.traversal.RecursiveGraphIterator(root):
        place = places[id(node.graph)]
        yield node, place
        scan = place.in_scan or (node.op_type == "Scan" and node.domain in ONNX_DOMAINS)
        branch = place.in_if or (node.op_type == "If" and node.domain in ONNX_DOMAINS)
        for attr in node.attributes.values():
            if attr.type == ir.AttributeType.GRAPH:
                subgraphs = [attr.as_graph()]
            elif attr.type == ir.AttributeType.GRAPHS:
                subgraphs = list(attr.as_graphs())
            else:
                continue
            where = f"{place.path} > {node.op_type} '{node.name or ''}' {attr.name}"
            for sub in subgraphs:
                places[id(sub)] = _Place(where, place.depth + 1, scan, branch)


def walk_model(model: ir.Model) -> Iterator[Located]:
    """Every node of ``model``, main graph first, then each function, in order."""
    main_opset = ai_onnx_opset(model.opset_imports)
    for node, place in _walk(model.graph, f"graph '{model.graph.name or 'main'}'"):
        origin = node.meta.get(INLINED_FROM)
        where = f"{origin[1]} (inlined into {place.path})" if origin else place.path
        yield Located(node, where, main_opset, "", place.depth, place.in_scan, place.in_if)
    for function in model.functions.values():
        opset = ai_onnx_opset(function.opset_imports, main_opset)
        root = f"function '{function.domain}.{function.name}'"
        scope = function_scope(function)
        for node, place in _walk(function.graph, root):  # type: ignore[attr-defined]
            yield Located(node, place.path, opset, scope, place.depth, place.in_scan, place.in_if)
