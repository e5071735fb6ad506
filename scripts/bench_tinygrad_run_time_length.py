"""tinygrad: the lowerings of a CumProd over a length known only at run time, padded to
``--max-length``, timed on tinygrad (what ``auto``'s tinygrad row for such lengths rests on).

For each max_length M, element type and axis (the last of (4, n), the first of (n, 4), n a
symbolic dim), the model is lowered with each strategy (``target="tinygrad"``,
``max_length=M``) and run in tinygrad's environment on n = M - 3: the first call on a fresh
``OnnxRunner`` (tinygrad compiles its kernels then: what a one-off run costs), then five
more calls on the same runner (median). Each result is checked against numpy. Wall clock:
the first call's time is mostly compilation (clang), so it moves with the machine's load;
compare strategies within one run.

Usage: python scripts/bench_tinygrad_run_time_length.py [--lengths 64,512]
    [--strategies doubling,carry,radix] [--out scripts/results/NAME]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TYPES = {"float32": 1, "int32": 6}  # onnx TensorProto element types


def make_models(folder: Path, lengths: list[int], strategies: list[str]) -> None:
    import onnx
    from onnx import TensorProto, helper

    sys.path.insert(0, str(ROOT))
    import rewriter

    for m in lengths:
        for dtype, elem in TYPES.items():
            for position, dims, axis in (("last", [4, "n"], 1), ("first", ["n", 4], 0)):
                graph = helper.make_graph(
                    [helper.make_node("CumProd", ["x", "axis"], ["y"])],
                    "g",
                    [helper.make_tensor_value_info("x", elem, dims)],
                    [helper.make_tensor_value_info("y", elem, dims)],
                    [helper.make_tensor("axis", TensorProto.INT64, [], [axis])],
                )
                model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26)])
                for strategy in strategies:
                    lowered = rewriter.decompose_cumprod(
                        model, target="tinygrad", max_length=m, strategy=strategy
                    )
                    onnx.save(lowered, folder / f"{dtype}_{position}_{m}_{strategy}.onnx")


def child(folder: Path) -> None:
    """In tinygrad's environment: time every model of ``folder``, one line each."""
    os.environ.setdefault("DEV", "CPU")
    import numpy as np
    from tinygrad.nn.onnx import OnnxRunner

    for path in sorted(folder.glob("*.onnx")):
        dtype, position, m, strategy = path.stem.split("_")
        n = int(m) - 3
        shape = (4, n) if position == "last" else (n, 4)
        rng = np.random.default_rng(0)
        x = (rng.integers(0, 2, shape) * 2 - 1).astype(dtype)  # ±1: exact in every order
        start = time.perf_counter()
        runner = OnnxRunner(path)
        y = runner({"x": x})["y"].numpy()
        first = time.perf_counter() - start
        ok = np.array_equal(y, np.cumprod(x, axis=1 if position == "last" else 0))
        later = []
        for _ in range(5):
            start = time.perf_counter()
            runner({"x": x})["y"].numpy()
            later.append(time.perf_counter() - start)
        print(
            f"| {dtype} | {position} | {m} | {strategy} | {first:.2f} | "
            f"{1e3 * float(np.median(later)):.1f} | {'ok' if ok else 'WRONG'} |",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lengths", default="64,512")
    parser.add_argument("--strategies", default="doubling,carry,radix")
    parser.add_argument("--out", help="write the table to OUT.md too")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(Path(args.child))
        return
    python = ROOT / ".venv-tinygrad" / "bin" / "python"
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        make_models(folder, [int(v) for v in args.lengths.split(",")], args.strategies.split(","))
        lines = [
            "| type | axis | max_length | strategy | first call s | later calls ms | result |",
            "|---|---|---|---|---|---|---|",
        ]
        print("\n".join(lines), flush=True)
        process = subprocess.run(
            [str(python), __file__, "--child", str(folder)],
            capture_output=True,
            text=True,
            check=True,
        )
        rows = [line for line in process.stdout.splitlines() if line.startswith("|")]
        print("\n".join(rows))
    if args.out:
        Path(f"{args.out}.md").write_text("\n".join([*lines, *rows]) + "\n")


if __name__ == "__main__":
    main()
