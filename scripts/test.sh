#!/usr/bin/env bash
# The project's test command (README, .ci/run): installs everything into .venv, then runs the
# static checks and the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}

[ -x .venv/bin/python ] || "$python" -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -e ".[test]"

echo "== ruff check";          .venv/bin/ruff check .
echo "== ruff format --check"; .venv/bin/ruff format --check .
echo "== mypy rewriter";       .venv/bin/mypy rewriter
echo "== pytest"
.venv/bin/python -m pytest -q "$@"
