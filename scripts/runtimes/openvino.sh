#!/usr/bin/env bash
# Creates or updates .venv-openvino at the repo root: OpenVINO's runtime (CPU plugin, reads .onnx itself).
# tests/runtimes/run_openvino.py runs rewritten models there (tests/test_runtimes.py).
# Idempotent (scripts/runtimes/venv.sh): a second run only checks the pins.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/runtimes/venv.sh
venv=.venv-openvino
pins=("openvino==2026.4.1" "onnx==1.23.2" "numpy==2.4.6")

pinned_venv "$venv" "${pins[@]}"
"$venv/bin/python" -c "import openvino, onnx, numpy"
