#!/usr/bin/env bash
# Creates or updates .venv-tvm at the repo root: Apache TVM (Relax's ONNX frontend, compiled for
# the CPU with LLVM, run on its VirtualMachine); tests/runtimes/run_tvm.py runs rewritten models
# there (tests/test_runtimes_new.py).
# Idempotent (scripts/runtimes/venv.sh): a second run only checks the pins.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/runtimes/venv.sh
venv=.venv-tvm
pins=("apache-tvm==0.27.0" "onnx==1.23.2" "numpy==2.4.6")

pinned_venv "$venv" "${pins[@]}"
"$venv/bin/python" -c "import tvm, tvm.relax.frontend.onnx, onnx, numpy"
