#!/usr/bin/env bash
# Creates or updates .venv-iree at the repo root: IREE's ONNX importer, compiler and CPU runtime,
# which tests/runtimes/run_iree.py runs rewritten models on (tests/test_runtimes_iree_tflite.py).
#   iree-base-compiler  iree-import-onnx, iree-compile (llvm-cpu)
#   iree-base-runtime   iree.runtime, local-task / local-sync CPU drivers
#   onnx                iree-import-onnx needs it in the same environment
# Idempotent: a second run only checks the pins (a few seconds).
set -euo pipefail
cd "$(dirname "$0")/../.."
python=${PYTHON:-python3}
venv=.venv-iree
pins=("iree-base-compiler==3.13.0" "iree-base-runtime==3.13.0" "onnx==1.23.2" "numpy==2.4.6")

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
"$venv/bin/python" -c "import iree.compiler, iree.runtime, onnx, numpy"
