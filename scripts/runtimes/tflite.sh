#!/usr/bin/env bash
# Creates or updates .venv-tflite at the repo root: onnx2tf 2.6 converts an ONNX model to a
# .tflite file with its default backend, flatbuffer_direct (which writes the file itself, no
# TensorFlow), and tests/runtimes/run_tflite.py runs it with the LiteRT interpreter
# (tests/test_runtimes_iree_tflite.py, tests/test_runtimes_new.py). onnx2tf pins every
# dependency exactly (onnx 1.20.1, onnxruntime 1.26.0, ai-edge-litert 2.1.2, numpy 2.2.6, ...)
# and every 2.x needs Python >= 3.12: PYTHON, else python3.12 on PATH, else pyenv's 3.12.
# The opt-in tier (CUMPROD_TFLITE=1). CUMPROD_TFLITE_TF=1 adds onnx2tf's TensorFlow extra
# (tensorflow 2.21, its tflite_backend="tf_converter", about 1.5 GB more).
# Idempotent (scripts/runtimes/venv.sh): a second run only checks the pins. VENV=PATH builds
# it elsewhere (the tests then need CUMPROD_TFLITE_PYTHON=PATH/bin/python).
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/runtimes/venv.sh
venv=${VENV:-.venv-tflite}
if [ -z "${PYTHON:-}" ]; then
    for candidate in python3.12 "$HOME"/.pyenv/versions/3.12*/bin/python; do
        if "$candidate" -c 'import sys; assert sys.version_info >= (3, 12)' 2>/dev/null; then
            PYTHON=$candidate
            break
        fi
    done
    [ -n "${PYTHON:-}" ] || { echo "tflite.sh: onnx2tf 2.x needs Python >= 3.12 (set PYTHON)" >&2; exit 1; }
    export PYTHON
fi
pins=("onnx2tf==2.6.9" "ai-edge-litert==2.1.2" "onnx==1.20.1" "numpy==2.2.6")
[ "${CUMPROD_TFLITE_TF:-0}" = 1 ] && pins+=("tensorflow==2.21.0" "tf-keras==2.21.0")

pinned_venv "$venv" "${pins[@]}"
"$venv/bin/python" -c "import onnx2tf, ai_edge_litert.interpreter, onnx, numpy" \
    || { echo "tflite.sh: $venv cannot import onnx2tf / ai_edge_litert" >&2; exit 1; }
