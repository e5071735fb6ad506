"""The package's modules import each other without a circle (issue 52: view -> chain ->
near_one -> view was one), counting imports inside functions too, which a circle often hides
in."""

from __future__ import annotations

import ast
from pathlib import Path

import rewriter

PACKAGE = Path(rewriter.__file__).parent


def _module(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, modules: set[str]) -> set[str]:
    """The package's modules ``path`` imports: ``from a.b import c`` is ``a.b.c`` where that
    is a module, else ``a.b``."""
    here = _module(path)
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = here.split(".")[: len(here.split(".")) - (path.name != "__init__.py")]
                package = package[: len(package) - node.level + 1]
                base = ".".join([*package, base] if base else package)
            found |= {
                f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names
            }
    return found & modules - {here}


def circle(graph: dict[str, set[str]]) -> list[str]:
    """One circle of ``graph`` as the modules along it (empty: none)."""
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> list[str]:
        if module in path:
            return [*path[path.index(module) :], module]
        if module in done:
            return []
        for other in sorted(graph[module]):
            if found := visit(other, [*path, module]):
                return found
        done.add(module)
        return []

    for module in sorted(graph):
        if found := visit(module, []):
            return found
    return []


def test_circle_finds_one() -> None:
    assert circle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert circle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) == []


def test_no_module_of_the_package_imports_itself_round_a_circle() -> None:
    paths = sorted(PACKAGE.rglob("*.py"))
    modules = {_module(path) for path in paths}
    graph = {_module(path): imports(path, modules) for path in paths}
    assert graph["rewriter.lowerings.auto"] >= {"rewriter.lowerings.tree", "rewriter.site"}
    assert circle(graph) == [], " -> ".join(circle(graph))
