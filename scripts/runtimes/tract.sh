#!/usr/bin/env bash
# Creates or updates .venv-tract at the repo root: tract, the Rust inference engine, through its Python bindings.
# tests/runtimes/run_tract.py runs rewritten models there (tests/test_runtimes.py).
# Idempotent (scripts/runtimes/venv.sh): a second run only checks the pins.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/runtimes/venv.sh
venv=.venv-tract
pins=("tract==0.23.9" "onnx==1.23.2" "numpy==2.4.6")

pinned_venv "$venv" "${pins[@]}"
"$venv/bin/python" -c "import tract, onnx, numpy"
