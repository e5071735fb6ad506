"""The docs check scripts/test.sh runs beside ruff: the README and docs say only what exists.

    python scripts/ci/check_docs.py [--readme FILE]

Checks, each failure one line naming the file (and line) and what is wrong:
- README.md has at most 250 lines;
- every module docstring under rewriter/ has at most 40 lines;
- every project path the README and docs/*.md mention (``rewriter/...``, ``tests/...``,
  ``scripts/...``, ``docs/...``, ``.ci/...``; ``*``, ``{a,b}`` and UPPERCASE placeholders
  match any name) and every image or relative link exists;
- every ``rewriter.x.y`` name they mention imports;
- every ``--option`` they mention is one of the command line's (``rewriter.cli``), of a
  script under scripts/ (its ``add_argument``) or of the tools in ``EXTERNAL_OPTIONS``;
- every strategy and target named with ``--strategy`` / ``strategy=`` / ``--target`` /
  ``target=``, or in the first column of a table headed "strategy", "lowering" or
  "target", is in ``rewriter.lowerings.STRATEGIES`` / ``rewriter.targets.TARGETS``; and the
  backticked names on the line after ``<!-- strategies -->`` / in the table after
  ``<!-- targets -->`` are exactly those (one place the docs list them);
- docs/performance.md is what scripts/bench/report.py generates from its results files;
- every results file that rewriter/'s code or a docs page names (a dated name such as
  ``bench-2026-12-05-round29.md``; ``{a,b}``: each of them; ``*`` and ``{name}``: any part) is
  in scripts/results/: a rule's evidence is in the tree, not only in git's history.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import itertools
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README_LINES = 250
DOCSTRING_LINES = 40
PROJECT_DIRS = ("rewriter", "tests", "scripts", "docs", ".ci")
# Options of tools other than ours that the docs mention (pytest, pip, git, iree-compile).
EXTERNAL_OPTIONS = {"--dist", "--help", "--disable-pip-version-check", "--co", "--follow"}
EXTERNAL_PREFIXES = ("--iree-",)

_CODE = re.compile(r"`([^`\n]+)`")
_PATH = re.compile(
    r"(?<![\w./:-])((?:" + "|".join(re.escape(d) for d in PROJECT_DIRS) + r")/"
    r"[\w./*{},<>-]*)"
)
_LINK = re.compile(r"\]\(([^)\s]+)\)")
_DOTTED = re.compile(r"(?<![\w.])(rewriter(?:\.\w+)+)")
_OPTION = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)")
_PLACEHOLDER = re.compile(r"<[^>]*>|(?<![A-Za-z0-9])[A-Z]{2,}[A-Z0-9]*(?![a-z0-9])")
_RESULT = re.compile(
    r"(?<![\w{},*.-])([a-z][\w{},*-]*-20\d\d-\d\d-\d\d[\w{},*-]*(?:\.(?:md|json))?)"
)
_NAMED = re.compile(r"(--strategy|--target|strategy=|target=)[ \"']*([a-z][a-z0-9_]*)")


def _brace_expand(text: str) -> list[str]:
    match = re.search(r"\{([^{}]*)\}", text)
    if not match:
        return [text]
    return [
        expanded
        for option in match.group(1).split(",")
        for expanded in _brace_expand(text[: match.start()] + option + text[match.end() :])
    ]


def path_exists(root: Path, mention: str) -> bool:
    """Whether a mentioned path names something in the tree (a pytest id's file part, a
    glob, ``{a,b}`` alternatives, UPPERCASE words or ``<...>`` as placeholders)."""
    mention = mention.split("::", maxsplit=1)[0].rstrip(".,:;)")
    for variant in _brace_expand(mention):
        pattern = re.sub(
            r"<[^>]*>|(?<![A-Za-z0-9])[A-Z]{2,}[A-Z0-9]*(?![a-z0-9])", "*", variant
        ).rstrip("/")
        if not (any(root.glob(pattern)) if "*" in pattern else (root / pattern).exists()):
            return False
    return True


def docstring_failures(root: Path) -> list[str]:
    failures = []
    for path in sorted((root / "rewriter").rglob("*.py")):
        name = str(path.relative_to(root))
        doc = ast.get_docstring(ast.parse(path.read_text()), clean=False)
        lines = len(doc.splitlines()) if doc else 0
        if lines > DOCSTRING_LINES:
            failures.append(
                f"{name}: module docstring of {lines} lines (at most "
                f"{DOCSTRING_LINES}; history belongs to git log)"
            )
    return failures


def known_options(root: Path) -> set[str]:
    from rewriter import cli

    options = {o for o in cli._parser()._option_string_actions if o.startswith("--")}
    for script in (root / "scripts").rglob("*.py"):
        options |= set(re.findall(r"[\"'](--[a-z][a-z0-9-]*)[\"']", script.read_text()))
    return options | EXTERNAL_OPTIONS


def _imports(dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for attribute in parts[cut:]:
                obj = getattr(obj, attribute)
        except AttributeError:
            return False
        return True
    return False


def _table_first_column(lines: list[str], start: int) -> list[tuple[int, str]]:
    """(line number, first cell) of the table whose header is at ``start``."""
    cells = []
    for number in itertools.count(start + 2):
        if number >= len(lines) or not lines[number].startswith("|"):
            break
        cells.append((number, lines[number].split("|")[1]))
    return cells


def mention_failures(
    path: Path, root: Path, options: set[str], base: Path | None = None
) -> list[str]:
    """What ``path`` mentions that does not exist; its links are relative to ``base``
    (default: its folder)."""
    from rewriter.lowerings import STRATEGIES
    from rewriter.targets import TARGETS

    strategies = set(STRATEGIES)
    named = {
        "--strategy": strategies,
        "strategy=": strategies,
        "--target": set(TARGETS),
        "target=": set(TARGETS),
    }
    text = path.read_text()
    lines = text.splitlines()
    where = str(path.relative_to(root)) if path.is_relative_to(root) else str(path)
    failures = []

    def fail(number: int, message: str) -> None:
        failures.append(f"{where}:{number + 1}: {message}")

    in_code = False
    for number, line in enumerate(lines):
        if line.startswith("```"):
            in_code = not in_code
        spans = [line] if in_code else _CODE.findall(line)
        code = " ".join(spans)
        for mention in _PATH.findall(code):
            if not path_exists(root, mention):
                fail(number, f"path {mention} does not exist")
        for link in _LINK.findall(_CODE.sub("", line)) if not in_code else ():
            if (
                not re.match(r"[a-z]+:|#", link)
                and not ((base or path.parent) / link.split("#")[0]).exists()
            ):
                fail(number, f"link {link} does not exist")
        for dotted in _DOTTED.findall(code):
            if not _imports(dotted.rstrip(".")):
                fail(number, f"{dotted} does not import")
        for option in _OPTION.findall(code):
            if option not in options and not option.startswith(EXTERNAL_PREFIXES):
                fail(number, f"option {option} is not one of the command line's or a script's")
        for flag, name in (m for span in spans for m in _NAMED.findall(span)):
            if name not in named[flag] and not name.isupper():
                fail(number, f"{flag.strip('=-')} {name!r} is not one of {sorted(named[flag])}")
        header = line.lower().split("|")[1].strip() if line.startswith("|") else ""
        kind = (
            "strategy"
            if header in ("strategy", "lowering")
            else "target"
            if header == "target"
            else None
        )
        if kind:
            valid = strategies if kind == "strategy" else set(TARGETS)
            for row, cell in _table_first_column(lines, number):
                for name in _CODE.findall(cell):
                    if name not in valid:
                        fail(row, f"{kind} {name!r} in the table is not one of {sorted(valid)}")
        for marker, valid in (
            ("<!-- strategies -->", strategies),
            ("<!-- targets -->", set(TARGETS)),
        ):
            if line.strip() != marker:
                continue
            if marker == "<!-- targets -->":
                rows = _table_first_column(lines, number + 1)
                listed = {n for _, cell in rows for n in _CODE.findall(cell)[:1]}
            else:
                listed = set(_CODE.findall(lines[number + 1]))
            if listed != valid:
                fail(
                    number,
                    f"the list after {marker} names {sorted(listed)}, the code has {sorted(valid)}",
                )
    return failures


def performance_failures(root: Path) -> list[str]:
    spec = importlib.util.spec_from_file_location("report", root / "scripts/bench/report.py")
    assert spec is not None and spec.loader is not None
    report = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(report)
    if report.main(["--check"]) != 0:
        return ["docs/performance.md: not what scripts/bench/report.py generates; run it"]
    return []


def evidence_failures(root: Path, sources: list[Path] | None = None) -> list[str]:
    """One failure per results file named in ``sources`` (default: rewriter/'s modules and
    docs/*.md) that scripts/results/ does not hold."""
    if sources is None:
        sources = sorted((root / "rewriter").rglob("*.py")) + sorted((root / "docs").glob("*.md"))
    failures = []
    for path in sources:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            for name in _RESULT.findall(line):
                pattern = re.sub(r"\{[a-z]+\}", "*", name)  # a format field: any part
                if not pattern.endswith((".md", ".json", "*")):
                    pattern += "*"  # a name without its extension
                if not path_exists(root, f"scripts/results/{pattern}"):
                    failures.append(f"{path}:{number}: results file {name} not in scripts/results/")
    return failures


def length_failures(readme: Path) -> list[str]:
    count = len(readme.read_text().splitlines())
    return (
        [f"{readme.name}: {count} lines (at most {README_LINES})"] if count > README_LINES else []
    )


def check(root: Path, readme: Path) -> list[str]:
    failures = length_failures(readme)
    failures += docstring_failures(root)
    options = known_options(root)
    failures += mention_failures(readme, root, options, base=root)
    for page in sorted((root / "docs").glob("*.md")):
        failures += mention_failures(page, root, options)
    failures += performance_failures(root)
    failures += evidence_failures(root)
    return failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--readme",
        type=Path,
        default=ROOT / "README.md",
        help="the README to check (default: the project's)",
    )
    args = parser.parse_args(argv)
    failures = check(ROOT, args.readme.resolve())
    for failure in failures:
        print(failure)
    print(f"docs check: {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
