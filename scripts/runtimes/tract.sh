#!/usr/bin/env bash
# Creates or updates .venv-tract at the repo root: tract, the Rust inference engine, through its Python bindings.
# tests/runtimes/run_tract.py runs rewritten models there (tests/test_runtimes.py).
# Idempotent: a second run only checks the pins (a few seconds).
set -euo pipefail
cd "$(dirname "$0")/../.."
python=${PYTHON:-python3}
venv=.venv-tract
pins=("tract==0.23.9" "onnx==1.23.2" "numpy==2.4.6")

[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
if ! "$venv/bin/python" - "${pins[@]}" <<'PY' 2>/dev/null; then
import sys
from importlib.metadata import version
for pin in sys.argv[1:]:
    name, want = pin.split("==")
    assert version(name) == want, pin
PY
    "$venv/bin/python" -m pip install -q --disable-pip-version-check "${pins[@]}"
fi
"$venv/bin/python" -c "import tract, onnx, numpy"
