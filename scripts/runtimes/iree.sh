#!/usr/bin/env bash
# Creates or updates .venv-iree at the repo root: IREE's ONNX importer, compiler and CPU runtime,
# which tests/runtimes/run_iree.py runs rewritten models on (tests/test_runtimes_iree_tflite.py).
#   iree-base-compiler  iree-import-onnx, iree-compile (llvm-cpu)
#   iree-base-runtime   iree.runtime, local-task / local-sync CPU drivers
#   onnx                iree-import-onnx needs it in the same environment
# Idempotent (scripts/runtimes/venv.sh): a second run only checks the pins.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/runtimes/venv.sh
venv=.venv-iree
pins=("iree-base-compiler==3.13.0" "iree-base-runtime==3.13.0" "onnx==1.23.2" "numpy==2.4.6")

pinned_venv "$venv" "${pins[@]}"
"$venv/bin/python" -c "import iree.compiler, iree.runtime, onnx, numpy"
