"""Every example in the README runs: its Python blocks, and each command of its command-line
block on a copy of the bundled example model."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
EXAMPLE = ROOT / "rewriter" / "examples" / "example.onnx"


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README, flags=re.DOTALL)


PYTHON = _blocks("python")
COMMANDS = [
    line.split("#")[0].strip()
    for block in _blocks("bash")
    for line in block.splitlines()
    if line.startswith("cumprod-rewriter ")
]


def test_the_readme_has_examples() -> None:
    assert PYTHON and len(COMMANDS) >= 4


@pytest.mark.parametrize("code", PYTHON, ids=[f"python-{i}" for i in range(len(PYTHON))])
def test_python_example_runs(code: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    exec(compile(code, "README.md", "exec"), {})


@pytest.mark.parametrize("command", COMMANDS)
def test_command_line_example_runs(command: str, tmp_path: Path) -> None:
    shutil.copy(EXAMPLE, tmp_path / "model.onnx")
    (tmp_path / "models").mkdir()
    shutil.copy(EXAMPLE, tmp_path / "models" / "a.onnx")
    args = shlex.split(command)[1:]
    done = subprocess.run(
        [sys.executable, "-m", "rewriter", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "model.onnx").read_bytes() == EXAMPLE.read_bytes()  # input untouched
