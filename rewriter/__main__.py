"""``python -m rewriter`` runs the command line."""

import signal
import sys


def run() -> int:
    """The command line (``python -m rewriter`` and the ``cumprod-rewriter`` script); a SIGINT
    while its modules load exits as one later does: 130, one line, no traceback. The package
    itself imports nothing heavy (its names load on first use, ``rewriter/__init__.py``), so
    onnx, onnx_ir and onnxruntime are all imported here, under the guard."""
    try:
        from rewriter.cli import main
    except KeyboardInterrupt:
        print("interrupted (SIGINT): stopped before reading any file", file=sys.stderr)
        return 128 + int(signal.SIGINT)
    return main()


if __name__ == "__main__":
    raise SystemExit(run())
