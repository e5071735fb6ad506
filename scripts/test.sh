#!/usr/bin/env bash
# The project's test command (README, .ci/run): installs everything, then runs the static
# checks and the whole test suite.
#   .venv          the project with its test extra, and torch for tests/pytorch/test_dynamo.py
#   .venv-ort120   onnxruntime 1.20.1 + onnx 1.17.0, a runtime without CumProd (max opset 21)
#                  that tests/test_legacy_runtime.py runs the rewritten models on
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
step() { echo "== $1 (at ${SECONDS}s)"; }   # the elapsed time shows where CI's time goes
trap 'echo "== end, exit status $? (at ${SECONDS}s)"' EXIT
pip_install() { "$1" -m pip install -q --disable-pip-version-check "${@:2}"; }

step "install .venv"
[ -x .venv/bin/python ] || "$python" -m venv .venv
pip_install .venv/bin/python -e ".[test]"
pip_install .venv/bin/python "torch==2.13.0"   # tests/pytorch/test_dynamo.py (the [torch] extra)
step "install .venv-ort120"
[ -x .venv-ort120/bin/python ] || "$python" -m venv .venv-ort120
pip_install .venv-ort120/bin/python "onnxruntime==1.20.1" "onnx==1.17.0" "numpy>=1.26,<3"
step "install the runtimes"
bash scripts/install_runtimes.sh   # .venv-openvino, -tract, -tinygrad, -iree, -mnn, -tvm: tests/test_runtimes*.py

step "ruff check";            .venv/bin/ruff check .
step "ruff format --check";   .venv/bin/ruff format --check .
step "mypy rewriter";         .venv/bin/mypy rewriter
step "docs check";            .venv/bin/python scripts/ci/check_docs.py
# The mutation sample: CUMPROD_MUTANTS mutants (10 by default; 0 skips it), a day's draw
# (MUTATION_SEED overrides the date); a survivor fails the run. Each mutant runs first
# against its module's tests, then the fast tier only if they all pass.
if [ "${CUMPROD_MUTANTS:-10}" != 0 ]; then
    step "mutation sample"
    .venv/bin/python scripts/tools/mutation_check.py --jobs 2 --sample "${CUMPROD_MUTANTS:-10}" \
        --seed "${MUTATION_SEED:-$(date -u +%Y%m%d)}"
fi
step pytest
# One worker per core; a test file stays on one worker (its module fixtures run once): the
# three real-runtime files, about two thirds of the time, then run side by side. IREE's
# compiled modules are kept between runs in ~/.cache/cumprod-rewriter/iree, keyed by the
# compiler's version, flags and graph (tests/runtimes/run_iree.py; CUMPROD_IREE_CACHE=0
# compiles every one, as a first run does).
.venv/bin/python -m pytest -q -n auto --dist loadfile "$@"
