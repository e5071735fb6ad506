"""``scripts/tools/mutation_check.py``: every deliberate bug still applies (its text occurs exactly
once in the file it names: code that moves leaves a mutant that no longer applies, and the
harness says so only when that mutant is run), each mutant is first run against the tests of
the module it touches (its own test file, its folder, else its importers), and ``--sample``
draws a seeded sample."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from tests.helpers import load_script

ROOT = Path(__file__).resolve().parent.parent


def _harness() -> ModuleType:
    return load_script(ROOT / "scripts" / "tools" / "mutation_check.py", "mutation_check")


HARNESS = _harness()
MUTANTS = list(HARNESS.MUTANTS)


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.name for m in MUTANTS])
def test_the_mutant_applies_once(mutant: object) -> None:
    text = (ROOT / mutant.path).read_text()  # type: ignore[attr-defined]
    assert text.count(mutant.old) == 1, (mutant.name, mutant.path)  # type: ignore[attr-defined]
    assert mutant.old != mutant.new  # type: ignore[attr-defined]


def test_a_module_is_tested_by_its_file_its_folder_or_its_importers(tmp_path: Path) -> None:
    for path, text in {
        "rewriter/io/plan.py": "",
        "rewriter/lowerings/carry.py": "",
        "rewriter/lowerings/chain.py": "",
        "rewriter/cli.py": "",
        "rewriter/site.py": "",
        "rewriter/lonely.py": "",
        "tests/io/test_anything.py": "",
        "tests/lowerings/test_carry.py": "",
        "tests/lowerings/test_branches.py": "",
        "tests/test_cli.py": "",
        "tests/test_uses_site.py": "from rewriter.site import inspect_cumprod\n",
        "tests/test_uses_site_too.py": "import rewriter.site\n",
        "tests/test_other.py": "from rewriter import cli\nimport rewriter.sitex\n",
    }.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    tests = HARNESS.module_tests
    assert tests("rewriter/io/plan.py", tmp_path) == ["tests/io/"]
    assert tests("rewriter/lowerings/carry.py", tmp_path) == ["tests/lowerings/test_carry.py"]
    assert tests("rewriter/lowerings/chain.py", tmp_path) == ["tests/lowerings/"]
    assert tests("rewriter/cli.py", tmp_path) == ["tests/test_cli.py"]
    assert tests("rewriter/site.py", tmp_path) == [
        "tests/test_uses_site.py",
        "tests/test_uses_site_too.py",
    ]
    assert tests("rewriter/lonely.py", tmp_path) == []  # straight to the fast tier


def test_every_mutant_has_tests_of_its_module_that_exist() -> None:
    """Every mutant's first stage is a few test files, not the fast tier: its module's."""
    assert HARNESS.module_tests("rewriter/verify/compare.py") == ["tests/verify/"]
    assert HARNESS.module_tests("rewriter/io/atomic.py") == ["tests/io/"]
    for listed in HARNESS.TESTED_BY.values():
        for target in listed:
            assert (ROOT / target).exists(), target
    for mutant in MUTANTS:
        for target in HARNESS.module_tests(mutant.path):
            assert (ROOT / target).exists(), (mutant.name, target)
        assert HARNESS.module_tests(mutant.path), mutant.name


def test_a_sample_is_seeded_distinct_and_in_list_order() -> None:
    first = HARNESS.sample(MUTANTS, 10, 7)
    assert first == HARNESS.sample(MUTANTS, 10, 7)
    assert len({m.name for m in first}) == 10
    assert first == [m for m in MUTANTS if m in first]
    assert HARNESS.sample(MUTANTS, 10, 8) != first
    assert HARNESS.sample(MUTANTS, len(MUTANTS) + 5, 0) == MUTANTS


def test_each_recorded_killer_names_a_mutant_and_a_test_file() -> None:
    """The record of the test that last killed each mutant (tried first): a renamed mutant or
    a moved test file leaves an entry that costs time and kills nothing."""
    names = {m.name for m in MUTANTS}
    for name, test in HARNESS._read_killers().items():
        assert name in names, name
        assert (ROOT / test.split("::")[0]).is_file(), (name, test)


def test_every_module_has_its_tests_by_its_path() -> None:
    """A maintainer finds the tests of any module under rewriter/ from its path alone: its own
    file (tests/test_NAME.py, tests/PACKAGE/test_NAME.py), its package's test folder, or the
    files TESTED_BY names for it; never only by searching the tests for its imports."""
    root = HARNESS.ROOT
    for path in sorted((root / "rewriter").rglob("*.py")):
        module = path.relative_to(root).as_posix()
        if path.name == "__init__.py" and module not in HARNESS.TESTED_BY:
            continue  # a package's own tests are its folder's
        parts = Path(module).with_suffix("").parts[1:]
        own = Path("tests", *parts[:-1], f"test_{parts[-1]}.py")
        folder = root / "tests" / parts[0] if len(parts) > 1 else None
        by_path = (
            module in HARNESS.TESTED_BY
            or (root / own).is_file()
            or bool(folder and folder.is_dir())
        )
        assert by_path, f"{module}: no tests/{own.name}, no folder, not in TESTED_BY"
        assert all((root / t).exists() for t in HARNESS.module_tests(module, root)), module
