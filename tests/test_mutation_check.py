"""Every deliberate bug of ``scripts/tools/mutation_check.py`` still applies: its text occurs
exactly once in the file it names. Code that moves leaves a mutant that no longer applies;
the harness says so only when that mutant is run (five had gone stale after one day's
refactors, found by hand), so the fast tier checks them all at once."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _mutants() -> list[object]:
    spec = importlib.util.spec_from_file_location(
        "mutation_check", ROOT / "scripts" / "tools" / "mutation_check.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["mutation_check"] = module
    spec.loader.exec_module(module)
    return list(module.MUTANTS)


MUTANTS = _mutants()


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.name for m in MUTANTS])  # type: ignore[attr-defined]
def test_the_mutant_applies_once(mutant: object) -> None:
    text = (ROOT / mutant.path).read_text()  # type: ignore[attr-defined]
    assert text.count(mutant.old) == 1, (mutant.name, mutant.path)  # type: ignore[attr-defined]
    assert mutant.old != mutant.new  # type: ignore[attr-defined]
