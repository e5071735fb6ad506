#!/usr/bin/env bash
# Creates or updates .venv-openvino at the repo root: OpenVINO's runtime (CPU plugin, reads .onnx itself).
# tests/runtimes/run_openvino.py runs rewritten models there (tests/test_runtimes.py).
# Idempotent: a second run only checks the pins (a few seconds).
set -euo pipefail
cd "$(dirname "$0")/../.."
python=${PYTHON:-python3}
venv=.venv-openvino
pins=("openvino==2026.4.1" "onnx==1.23.2" "numpy==2.4.6")

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
"$venv/bin/python" -c "import openvino, onnx, numpy"
