#!/usr/bin/env bash
# Creates or updates one environment per real runtime that tests/test_runtimes*.py run the
# rewritten models on: scripts/runtimes/NAME.sh makes .venv-NAME. The default set is openvino,
# tract, tinygrad, iree, mnn and tvm; tflite (onnx2tf 2.x, Python >= 3.12) only with
# CUMPROD_TFLITE=1; ncnn (pnnx + ncnn, with torch 2.13.0's CPU build: 1.1 GB) only with
# CUMPROD_NCNN=1.
# Each script is idempotent and takes seconds when its environment is already there.
set -euo pipefail
cd "$(dirname "$0")/.."
runtimes=(openvino tract tinygrad iree mnn tvm)
[ "${CUMPROD_TFLITE:-0}" = 1 ] && runtimes+=(tflite)
[ "${CUMPROD_NCNN:-0}" = 1 ] && runtimes+=(ncnn)
for rt in "${runtimes[@]}"; do
    script=scripts/runtimes/$rt.sh
    [ -f "$script" ] || { echo "install_runtimes: $script is missing" >&2; exit 1; }
    echo "== runtime $rt"
    bash "$script"
done
