#!/usr/bin/env bash
# Creates or updates .venv-tflite at the repo root: onnx2tf converts an ONNX model to a .tflite
# file, which tests/runtimes/run_tflite.py runs with the LiteRT interpreter
# (tests/test_runtimes_iree_tflite.py). The heavy, opt-in tier (CUMPROD_TFLITE=1): onnx2tf pins
# every dependency exactly (tensorflow 2.19.0, onnx 1.19.1, ai-edge-litert 2.1.0, numpy 1.26.4,
# onnxruntime 1.23.0, ...), about 1.5 GB installed, so it gets its own environment.
# Idempotent (scripts/runtimes/venv.sh): a second run only checks the pins. VENV=PATH builds
# it elsewhere (to time a fresh install; the tests then need CUMPROD_TFLITE_PYTHON=PATH/bin/python).
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/runtimes/venv.sh
venv=${VENV:-.venv-tflite}
pins=("onnx2tf==1.29.24" "tensorflow==2.19.0" "ai-edge-litert==2.1.0" "onnx==1.19.1" "numpy==1.26.4")

pinned_venv "$venv" "${pins[@]}"
# TensorFlow logs a few harmless lines at import: only a failing import is reported
TF_CPP_MIN_LOG_LEVEL=3 "$venv/bin/python" -c "import onnx2tf, ai_edge_litert.interpreter, onnx, numpy" \
    2>/dev/null || { echo "tflite.sh: $venv cannot import onnx2tf / ai_edge_litert" >&2; exit 1; }
