# Sourced by scripts/runtimes/NAME.sh: pinned_venv VENV PIN... creates or updates VENV at the
# repo root with exactly these pins. Idempotent: when every pin is already installed it only
# checks them (a few seconds).
pinned_venv() {
    local venv=$1
    shift
    [ -x "$venv/bin/python" ] || "${PYTHON:-python3}" -m venv "$venv"
    if ! "$venv/bin/python" - "$@" <<'PY' 2>/dev/null; then
import sys
from importlib.metadata import version
for pin in sys.argv[1:]:
    name, want = pin.split("==")
    assert version(name) == want, pin
PY
        "$venv/bin/python" -m pip install -q --disable-pip-version-check "$@"
    fi
}
