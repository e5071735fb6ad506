#!/usr/bin/env bash
# Creates or updates .venv-tinygrad at the repo root: tinygrad and its ONNX runner; its CPU device compiles kernels with clang.
# tests/runtimes/run_tinygrad.py runs rewritten models there (tests/test_runtimes.py).
# Idempotent (scripts/runtimes/venv.sh): a second run only checks the pins.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/runtimes/venv.sh
venv=.venv-tinygrad
pins=("tinygrad==0.14.0" "onnx==1.23.2" "numpy==2.4.6")
if ! command -v clang >/dev/null; then  # from apt; the package lists are fetched only if needed
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -q clang >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q clang >/dev/null; }
fi
pinned_venv "$venv" "${pins[@]}"
"$venv/bin/python" -c "import tinygrad.nn.onnx, onnx, numpy"
