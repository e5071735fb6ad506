#!/usr/bin/env bash
# Creates or updates .venv-mnn at the repo root: Alibaba's MNN, its ONNX converter (the library
# `_tools`, called by tests/runtimes/run_mnn.py in a child process) and its `MNN.nn` runtime.
# tests/runtimes/run_mnn.py runs rewritten models there (tests/test_runtimes_new.py).
# Never run the `mnnconvert` console script this package installs: it pip-installs packages
# into whichever Python is first on PATH and posts a usage log. The library does neither.
# Idempotent (scripts/runtimes/venv.sh): a second run only checks the pins.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/runtimes/venv.sh
venv=.venv-mnn
pins=("mnn==3.6.1" "onnx==1.23.2" "numpy==2.4.6")

pinned_venv "$venv" "${pins[@]}"
"$venv/bin/python" -c "import MNN, _tools, onnx, numpy"
