#!/usr/bin/env bash
# Creates or updates .venv-ncnn at the repo root: Tencent's pnnx (converts an ONNX model to
# ncnn's .param / .bin; it needs PyTorch) and ncnn's Python binding, which runs the result;
# tests/runtimes/run_ncnn.py runs rewritten models there (tests/test_runtimes_ncnn.py).
# The opt-in tier (CUMPROD_NCNN=1 in scripts/install_runtimes.sh): with PyTorch it is about
# 1 GB (torch 2.13.0's CPU build; pnnx's own dependency on plain `torch` would take a CUDA
# build of several GB). Idempotent (scripts/runtimes/venv.sh): a second run only checks the pins.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/runtimes/venv.sh
venv=.venv-ncnn
pins=("torch==2.13.0" "pnnx==20261020" "ncnn==1.0.20261020" "onnx==1.23.2" "numpy==2.4.6")

pinned_venv "$venv" "${pins[@]}"
"$venv/bin/python" -c "import pnnx, ncnn, torch, onnx, numpy" \
    || { echo "ncnn.sh: $venv cannot import pnnx / ncnn / torch" >&2; exit 1; }
