"""scripts/ci/check_docs.py fails on a README or page that mentions what does not exist, and
passes the project's own README (a tmp copy, edited one line at a time)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import load_script

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def check_docs():  # type: ignore[no-untyped-def]
    return load_script(ROOT / "scripts" / "ci" / "check_docs.py", "check_docs")


@pytest.fixture(scope="module")
def options(check_docs) -> set[str]:  # type: ignore[no-untyped-def]
    return check_docs.known_options(ROOT)


def _readme(tmp_path: Path, extra: str = "") -> Path:
    copy = tmp_path / "README.md"
    copy.write_text((ROOT / "README.md").read_text() + extra)
    return copy


def test_the_readme_as_it_is_passes(check_docs, options, tmp_path) -> None:  # type: ignore[no-untyped-def]
    assert check_docs.mention_failures(_readme(tmp_path), ROOT, options, base=ROOT) == []


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("Run `scripts/bench/no_such_script.py`.", "path scripts/bench/no_such_script.py"),
        ("See [the design](docs/no-such-page.md).", "link docs/no-such-page.md"),
        ("Pass `--no-such-option` to it.", "option --no-such-option"),
        ("Use `--strategy cached_tiles` there.", "strategy 'cached_tiles'"),
        ('Or `rewriter.decompose_cumprod(model, target="tensorrt")`.', "target 'tensorrt'"),
        ("`rewriter.lowerings.NO_SUCH_TABLE` holds it.", "rewriter.lowerings.NO_SUCH_TABLE"),
        ("\n| lowering | what |\n|---|---|\n| `tiled_cache` | gone |\n", "'tiled_cache'"),
    ],
)
def test_a_bad_line_fails_naming_it(check_docs, options, tmp_path, line, message) -> None:  # type: ignore[no-untyped-def]
    readme = _readme(tmp_path, "\n" + line + "\n")
    failures = check_docs.mention_failures(readme, ROOT, options, base=ROOT)
    assert len(failures) == 1 and message in failures[0], failures
    assert failures[0].startswith(f"{readme}:")  # the file and the line


def test_the_strategy_list_must_be_the_codes(check_docs, options, tmp_path) -> None:  # type: ignore[no-untyped-def]
    text = (ROOT / "README.md").read_text()
    marker = "<!-- strategies -->\n"
    assert marker in text
    head, tail = text.split(marker)
    first, rest = tail.split("\n", 1)
    dropped = first.replace("`dynamic`", "dynamic", 1)  # one name no longer listed
    readme = tmp_path / "README.md"
    readme.write_text(head + marker + dropped + "\n" + rest)
    (failure,) = check_docs.mention_failures(readme, ROOT, options, base=ROOT)
    assert "the list after <!-- strategies -->" in failure and "'dynamic'" in failure


def test_a_long_readme_and_a_long_docstring_fail(check_docs, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    assert check_docs.length_failures(_readme(tmp_path)) == []
    readme = _readme(tmp_path, "\n" * 251)
    (failure,) = check_docs.length_failures(readme)
    assert failure.startswith("README.md: ") and failure.endswith("lines (at most 250)")
    module = tmp_path / "rewriter" / "long.py"
    module.parent.mkdir()
    module.write_text('"""' + "a line\n" * 41 + '"""\n')
    (failure,) = check_docs.docstring_failures(tmp_path)
    assert failure.startswith("rewriter/long.py: module docstring of 41 lines")
    module.write_text('"""' + "a line\n" * 40 + '"""\n')  # 40 lines: the limit
    assert check_docs.docstring_failures(tmp_path) == []


def test_placeholders_globs_and_alternatives_match_paths(check_docs) -> None:  # type: ignore[no-untyped-def]
    exists = check_docs.path_exists
    assert exists(ROOT, "scripts/runtimes/NAME.sh")
    assert exists(ROOT, "tests/runtimes/run_NAME.py")
    assert exists(ROOT, "tests/test_runtimes*.py")
    assert exists(ROOT, "rewriter/{decompose,specialize}.py")
    assert exists(ROOT, "tests/test_cli.py::test_x")
    assert not exists(ROOT, "rewriter/{decompose,no_such}.py")
    assert not exists(ROOT, "scripts/runtimes/NAME.toml")


def test_a_results_file_named_but_not_kept_fails(check_docs, tmp_path) -> None:  # type: ignore[no-untyped-def]
    source = tmp_path / "rule.py"
    source.write_text(
        '"""r = 16: scripts/results/carry-radix-2026-12-03.md; blocks of 32 from 2000\n'
        "(bench-runtime-{openvino,iree}-2026-12-01-doubling-*); four (bench-2026-11-30-lost.md);\n"
        "each of bench-runtime-{openvino,tvm}-2026-12-01-doubling-* (tvm's is not kept).\n"
        '"""\n'
    )
    failures = check_docs.evidence_failures(ROOT, [source])
    assert failures == [
        f"{source}:2: results file bench-2026-11-30-lost.md not in scripts/results/",
        f"{source}:3: results file bench-runtime-{{openvino,tvm}}-2026-12-01-doubling-* not in "
        "scripts/results/",
    ]


def test_the_projects_rules_cite_results_it_keeps(check_docs) -> None:  # type: ignore[no-untyped-def]
    assert check_docs.evidence_failures(ROOT) == []
