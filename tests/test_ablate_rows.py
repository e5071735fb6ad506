"""scripts/bench/ablate_rows.py: the ratio of the pick without a row to the pick with it,
over the cells of a run where leaving the row out changes the pick."""

from __future__ import annotations

from pathlib import Path

import pytest

from rewriter.lowerings import auto
from tests.helpers import load_script

ROOT = Path(__file__).resolve().parents[1]


def _cell(n: int, times: dict[str, float]) -> dict:
    return {
        "dtype": "float32",
        "n": n,
        "position": "last",
        "shape": [4096 // n, n],
        "axis": 1,
        "models": {name: {"s": s} for name, s in times.items()},
    }


def test_a_row_is_judged_by_the_cells_it_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    ablate = load_script(ROOT / "scripts/bench/ablate_rows.py", "ablate_rows")
    rows = (
        auto.Row("chain", "short last axes", at=frozenset({auto.LAST}), n=(2, 64)),
        auto.Row("scan", "never reached by these cells", at=frozenset({auto.FIRST})),
        *auto.TABLES["static"],
    )
    monkeypatch.setitem(auto.TABLES, "tract", rows)
    # n = 64: chain with the row, radix (static's past 16) without; n = 8: chain either way
    cells = [_cell(64, {"chain": 2.0, "radix": 3.0}), _cell(8, {"chain": 1.0, "radix": 9.0})]
    results = ablate.ablate("tract", cells)
    assert [(k, ratios) for k, _, ratios in results] == [
        (0, [(1.5, "float32 last n = 64: radix")]),
        (1, []),
    ]
    table = ablate.report("tract", results)
    assert "| 0 | chain | short last axes | 1 | 1.50 (1.50-1.50) | yes |" in table
    assert "| 1 | scan | never reached by these cells | 0 | – | not reached here |" in table
