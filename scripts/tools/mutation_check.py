"""Mutation check: do the tests notice deliberate bugs?

Copies the project (the ``rewriter`` package, the tests, pyproject.toml) to a temporary
folder and applies one deliberate bug at a time to the copy's ``rewriter``, with PYTHONPATH
pointing at the copy. Each mutant runs first the one test that killed it last time
(:data:`KILLERS`, mutation_killers.json beside this script, rewritten by every run), then the
tests of the module it touches (:func:`module_tests`: its own test file or those
:data:`TESTED_BY` lists, else its package's test folder, else the test files that import it),
then the whole fast tier (``pytest -m "not slow"``), each stage only if the previous one
passed. A mutant is *killed* when a test that passes on the unchanged code fails: the first
failing test is run again with the mutation undone, and one that fails there too is
deselected (and listed), so it cannot kill a mutant. Prints a table mutant -> killed (by
which stage) / survived; exit status 1 when a mutant survives (or a
mutation no longer applies: the code it targets moved).

    .venv/bin/python scripts/tools/mutation_check.py [--only NAME ...] [--sample N [--seed S]]
        [--jobs J] [--keep]

``--jobs J`` runs J mutants at once, each in its own copy of the project.

``--sample N`` runs N mutants drawn with ``random.Random(S)`` (S printed, default 0), for a
check on every CI run; the whole run is the check before a release.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import dataclasses
import functools
import json
import os
import queue
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COPIED = ("rewriter", "tests", "scripts", "docs", "pyproject.toml", "README.md")
# scripts/results stays (900 KB): test_auto checks each table row's evidence file there
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", ".hypothesis")
# The test that last killed each mutant (mutant name -> pytest node id), tried before the
# module's tests: one test instead of a file. Written by every run; a stale entry (the test
# renamed, or passing now) only costs that one test's time.
KILLERS = Path(__file__).with_name("mutation_killers.json")


sys.path.insert(0, str(Path(__file__).resolve().parent))  # mutants.py, the data, beside it
from mutants import MUTANTS, TESTED_BY, Mutant  # noqa: E402


def _copy_project(into: Path) -> None:
    for name in COPIED:
        source = ROOT / name
        if not source.exists():
            continue
        if source.is_dir():
            shutil.copytree(source, into / name, ignore=IGNORED)
        else:
            shutil.copy2(source, into / name)


@functools.cache
def _imports(path: Path) -> frozenset[str]:
    """The dotted names a test file imports (``from a.b import c``: a.b and a.b.c)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return frozenset(found)


def module_tests(module: str, root: Path = ROOT) -> list[str]:
    """The test files of the module at ``module`` (a path like ``rewriter/io/plan.py``), as
    paths relative to ``root``: those :data:`TESTED_BY` names, else its own test file
    (``tests/test_cli.py`` for ``rewriter/cli.py``, ``tests/lowerings/test_tree.py`` for
    ``rewriter/lowerings/tree.py``), else its subpackage's test folder (``tests/io/`` for
    ``rewriter/io/plan.py``), else every test file that imports it; empty when none does (the
    mutant goes to the fast tier at once)."""
    parts = Path(module).with_suffix("").parts[1:]  # without "rewriter"
    if parts and parts[-1] == "__init__":
        parts = parts[:-1]
    listed = [t for t in TESTED_BY.get(module, ()) if (root / t).exists()]
    if listed:
        return listed
    own = Path("tests", *parts[:-1], f"test_{parts[-1]}.py") if parts else None
    if own is not None and (root / own).is_file():
        return [own.as_posix()]
    if len(parts) > 1 and (root / "tests" / parts[0]).is_dir():
        return [f"tests/{parts[0]}/"]
    dotted = ".".join(("rewriter", *parts))
    return [
        str(test.relative_to(root))
        for test in sorted((root / "tests").rglob("test_*.py"))
        if dotted in _imports(test)
    ]


def sample(mutants: list[Mutant], count: int, seed: int) -> list[Mutant]:
    """``count`` mutants drawn without repeats by ``random.Random(seed)``, in list order."""
    chosen = set(random.Random(seed).sample(range(len(mutants)), min(count, len(mutants))))
    return [m for i, m in enumerate(mutants) if i in chosen]


def _environment(project: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(project)
    env.pop("CI", None)  # derandomized hypothesis: every run sees the same examples
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _check_import(project: Path) -> None:
    """The copy, not the installed project, is what the tests import."""
    out = subprocess.run(
        [sys.executable, "-c", "import rewriter; print(rewriter.__file__)"],
        cwd=project,
        env=_environment(project),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    if not out.startswith(str(project)):
        sys.exit(f"the tests would import {out}, not the copy in {project}")


def _run_tests(
    project: Path,
    targets: list[str],
    deselect: list[str],
    *,
    stop_first: bool,
    report: Path,
    timeout: int,
) -> tuple[int, list[str], float]:
    """pytest on ``targets`` (test files or folders; none: the whole fast tier), fast tier
    only: (pytest's exit status, the failed test ids, seconds)."""
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-m",
        "not slow",
        "-p",
        "no:cacheprovider",
        f"--junitxml={report}",
        "-o",
        "addopts=",
        # it checks the mutants' own text, which every applied mutant changes: no kill
        "--ignore=tests/test_mutation_check.py",
        *targets,
    ]
    if stop_first:
        command.append("-x")
    if not targets or len(targets) > 2 or any(t.endswith("/") for t in targets):
        command += ["-n", "auto"]  # many files: one worker per core (-x stops them all)
    for test in deselect:
        command += ["--deselect", test]
    report.unlink(missing_ok=True)  # never read a previous run's
    start = time.monotonic()
    try:
        result = subprocess.run(
            command,
            cwd=project,
            env=_environment(project),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        code = result.returncode
    except subprocess.TimeoutExpired:
        return -1, ["(timed out)"], time.monotonic() - start
    # 5: no test collected (every test of the targets deselected or slow): nothing killed
    return (0 if code == 5 else code), _failed(report), time.monotonic() - start


def _failed(report: Path) -> list[str]:
    if not report.exists():
        return []
    failed = []
    for case in ET.parse(report).getroot().iter("testcase"):
        if case.find("failure") is not None or case.find("error") is not None:
            module = case.get("classname", "").replace(".", "/")
            failed.append(f"{module}.py::{case.get('name')}")
    return failed


@dataclasses.dataclass
class _Applied:
    """One mutant applied to the copy; :meth:`undone` puts the unchanged text back for a
    while (to run one test on the unchanged code)."""

    project: Path
    mutant: Mutant
    original: str

    @contextlib.contextmanager
    def undone(self) -> Iterator[None]:
        target = self.project / self.mutant.path
        target.write_text(self.original)
        try:
            yield
        finally:
            target.write_text(self.original.replace(self.mutant.old, self.mutant.new))


def _verdict(
    applied: _Applied,
    failing_unchanged: set[str],
    work: Path,
    timeout: int,
    killers: dict[str, str],
    *,
    passing_unchanged: frozenset[str] = frozenset(),
) -> tuple[str, str, float]:
    """(verdict, the test that killed it, seconds) of one applied mutant: the test that killed
    it last time (``killers``), then its module's tests, then the fast tier, each only if the
    previous stage passed, each with ``-x``. A test that fails is run
    again on the unchanged code (unless it is in ``passing_unchanged``, the recorded killers
    that passed there at the start): one that fails there too goes to ``failing_unchanged``
    (deselected from then on) and the run is repeated without it."""
    project = applied.project
    total = 0.0
    recorded = killers.get(applied.mutant.name, "")
    known = [recorded] if recorded and (project / recorded.split("::")[0]).is_file() else []
    stages = [
        ("recorded", known),
        ("module", module_tests(applied.mutant.path, project)),
        ("tier", []),
    ]
    for stage, targets in stages:
        if stage != "tier" and not targets:
            continue
        while True:
            code, failures, seconds = _run_tests(
                project,
                targets,
                sorted(failing_unchanged),
                stop_first=True,
                report=work / "mutant.xml",
                timeout=timeout,
            )
            total += seconds
            if code == 0:
                break
            if not failures or failures == ["(timed out)"]:
                return f"killed ({stage})", f"exit {code}", total
            killer = failures[0]
            if killer in passing_unchanged:
                return f"killed ({stage})", killer, total
            with applied.undone():
                unchanged, _, seconds = _run_tests(
                    project,
                    [killer],
                    [],
                    stop_first=True,
                    report=work / "check.xml",
                    timeout=timeout,
                )
            total += seconds
            if unchanged == 0:
                return f"killed ({stage})", killer, total
            print(f"    fails unchanged too, deselected from now on: {killer}", flush=True)
            failing_unchanged.add(killer)
    return "SURVIVED", "", total


def _passing_unchanged(
    project: Path, mutants: list[Mutant], killers: dict[str, str], work: Path, timeout: int
) -> frozenset[str]:
    """The recorded killers of ``mutants`` that pass on the unchanged code, in one pytest run
    (a recorded kill then needs no run with its mutation undone)."""
    tests = sorted({killers[m.name] for m in mutants if m.name in killers})
    tests = [t for t in tests if (project / t.split("::")[0]).is_file()]
    if not tests:
        return frozenset()
    report = work / "unchanged.xml"
    code, failed, seconds = _run_tests(
        project, tests, [], stop_first=False, report=report, timeout=timeout
    )
    if code != 0 and not failed:
        return frozenset()  # no report (a collection error): every kill is checked alone
    print(
        f"  {len(tests) - len(failed)} of {len(tests)} recorded killers pass unchanged, "
        f"{seconds:.0f} s",
        flush=True,
    )
    return frozenset(tests) - set(failed)


def _read_killers() -> dict[str, str]:
    if not KILLERS.is_file():
        return {}
    return {str(k): str(v) for k, v in json.loads(KILLERS.read_text()).items()}


def _write_killers(killers: dict[str, str]) -> None:
    """The record, in the mutants' order, the names of mutants no longer listed left out."""
    names = [m.name for m in MUTANTS if m.name in killers]
    text = json.dumps({n: killers[n] for n in names}, indent=1, ensure_ascii=False)
    KILLERS.write_text(text + "\n")


def _run_mutant(
    mutant: Mutant, project: Path, killers: dict[str, str], common: _Shared
) -> tuple[str, str, str, float]:
    """One mutant applied to ``project`` (a copy no other job uses meanwhile), judged, and
    undone: (name, verdict, the test that killed it, seconds)."""
    target = project / mutant.path
    original = target.read_text() if target.is_file() else ""
    if original.count(mutant.old) != 1:
        return (mutant.name, "NOT APPLIED", "the code it targets changed", 0.0)
    target.write_text(original.replace(mutant.old, mutant.new))
    try:
        verdict, by, seconds = _verdict(
            _Applied(project, mutant, original),
            common.failing_unchanged,
            project.parent / f"{project.name}-reports",
            common.timeout,
            killers,
            passing_unchanged=common.passing_unchanged,
        )
    finally:
        target.write_text(original)
    with common.lock:
        if verdict.startswith("killed") and "::" in by and killers.get(mutant.name) != by:
            killers[mutant.name] = by
            _write_killers(killers)
        print(f"  {verdict:15}  {seconds:5.0f} s  {mutant.name}", flush=True)
    return (mutant.name, verdict, by, seconds)


@dataclasses.dataclass
class _Shared:
    """What the jobs share: the tests that fail unchanged, the recorded killers that pass."""

    timeout: int
    passing_unchanged: frozenset[str]
    failing_unchanged: set[str] = dataclasses.field(default_factory=set)
    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="mutants whose name contains one of these")
    parser.add_argument("--sample", type=int, help="run this many mutants, drawn at random")
    parser.add_argument("--seed", type=int, default=0, help="the sample's seed (default 0)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary copy")
    parser.add_argument("--timeout", type=int, default=1800, help="seconds per pytest run")
    parser.add_argument(
        "--jobs", type=int, default=1, help="mutants run at once, each in its own copy"
    )
    args = parser.parse_args()
    mutants = [m for m in MUTANTS if not args.only or any(s in m.name for s in args.only)]
    if args.sample is not None:
        mutants = sample(mutants, args.sample, args.seed)
        print(f"a sample of {len(mutants)} mutants, seed {args.seed}")

    work = Path(tempfile.mkdtemp(prefix="cumprod-mutation-"))
    started = time.monotonic()
    try:
        copies: queue.Queue[Path] = queue.Queue()
        for k in range(max(1, args.jobs)):
            project = work / f"project{k}"
            project.mkdir()
            (work / f"project{k}-reports").mkdir()
            _copy_project(project)
            _check_import(project)
            copies.put(project)
        killers = _read_killers()
        first = work / "project0"
        common = _Shared(
            args.timeout, _passing_unchanged(first, mutants, killers, work, args.timeout)
        )

        def job(mutant: Mutant) -> tuple[str, str, str, float]:
            project = copies.get()
            try:
                return _run_mutant(mutant, project, killers, common)
            finally:
                copies.put(project)

        with ThreadPoolExecutor(max(1, args.jobs)) as pool:
            rows = list(pool.map(job, mutants))

        width = max([len(r[0]) for r in rows], default=6)
        print()
        print(f"{'mutant':{width}}  {'verdict':15}  seconds  first failing test")
        for name, verdict, by, seconds in rows:
            print(f"{name:{width}}  {verdict:15}  {seconds:7.0f}  {by}")
        survived = [r for r in rows if not r[1].startswith("killed")]
        minutes = (time.monotonic() - started) / 60
        print(f"\n{len(rows) - len(survived)} of {len(rows)} mutants killed, {minutes:.1f} min")
        return 1 if survived else 0
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
