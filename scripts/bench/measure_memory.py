"""Peak memory of rewriting a model whose weights total about SIZE_GIB.

Builds y = CumProd(x * w_0 * w_1 ..., 1) with float32 initializers w_i stored in one external
data file, or with ``--inline`` inside the model file (in a child process), then runs
``cumprod-rewriter`` on it in another child and reports that child's own peak resident memory
(ru_maxrss from wait4), also as a multiple of the weights' size. The parent imports nothing
heavy: a forked child's ru_maxrss starts from its parent's size.

``--tree DIR`` (repeatable) runs the rewrite with DIR first on PYTHONPATH (a checkout of
another commit, for a side-by-side figure on one model); ``--out FILE`` appends the figures
to FILE as a markdown table (the convention: ``scripts/results/memory-<date>-<what>.md``).
Usage: python scripts/bench/measure_memory.py [--inline] [--tree DIR]... [--out FILE] [SIZE_GIB]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHUNK = 64 << 20  # bytes per initializer


def build(folder: Path, size_gib: float, inline: bool = False) -> Path:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    count = max(1, round(size_gib * (1 << 30) / CHUNK))
    n = CHUNK // 4
    nodes, inits = [], []
    previous = "x"
    for i in range(count):
        inits.append(numpy_helper.from_array(np.full((1, n), 1.0, np.float32), f"w{i}"))
        nodes.append(helper.make_node("Mul", [previous, f"w{i}"], [f"m{i}"]))
        previous = f"m{i}"
    inits.append(helper.make_tensor("axis", TensorProto.INT64, [], [1]))
    nodes.append(helper.make_node("CumProd", [previous, "axis"], ["y"], name="scan"))
    graph = helper.make_graph(
        nodes,
        "weights",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, n])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, n])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26)])
    path = folder / "big.onnx"
    if inline:
        onnx.save(model, path)
    else:
        onnx.save(model, path, save_as_external_data=True, location="big.onnx.data")
    return path


def _rewrite(source: Path, output: Path, tree: str | None) -> tuple[int, float]:
    """Run the CLI on ``source`` in a child; its own peak RSS in bytes and its seconds."""
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = os.pathsep.join([tree, env.get("PYTHONPATH", "")])
    where = subprocess.run(  # the package the child imports (not the working folder's)
        [sys.executable, "-c", "import rewriter; print(rewriter.__file__)"],
        env=env,
        cwd=source.parent,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    print(f"rewriting with {where}")
    start = time.perf_counter()
    child = subprocess.Popen(
        [sys.executable, "-m", "rewriter", str(source), "-o", str(output)],
        env=env,
        cwd=source.parent,
    )
    _, status, usage = os.wait4(child.pid, 0)  # this child's own rusage
    code = os.waitstatus_to_exitcode(status)
    if code:
        raise SystemExit(f"the rewrite failed with exit status {code}")
    return usage.ru_maxrss * 1024, time.perf_counter() - start


def main() -> None:
    if len(sys.argv) == 5 and sys.argv[1] == "--build":
        build(Path(sys.argv[2]), float(sys.argv[3]), sys.argv[4] == "inline")
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("size", nargs="?", type=float, default=1.0, help="GiB of weights")
    parser.add_argument("--inline", action="store_true", help="weights inside the model file")
    parser.add_argument("--tree", action="append", default=[], help="code tree to run")
    parser.add_argument("--out", type=Path, help="markdown file to append the figures to")
    args = parser.parse_args()
    how = "inline" if args.inline else "external"
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        subprocess.run([sys.executable, __file__, "--build", tmp, str(args.size), how], check=True)
        source = folder / "big.onnx"
        data = (source if args.inline else folder / "big.onnx.data").stat().st_size
        for tree in args.tree or [None]:
            out = folder / "out"
            shutil.rmtree(out, ignore_errors=True)
            peak, seconds = _rewrite(source, out / "big.onnx", tree)
            written = sum(p.stat().st_size for p in out.iterdir())
            line = (
                f"weights {data / (1 << 20):.0f} MiB ({how}), output {written / (1 << 20):.0f} "
                f"MiB, peak RSS of the rewrite {peak / (1 << 20):.0f} MiB ({peak / data:.2f}x "
                f"the weights), {seconds:.1f} s"
            )
            print(f"{tree or 'installed'}: {line}" if args.tree else line)
            rows.append(
                f"| {tree or 'installed'} | {data / (1 << 20):.0f} ({how}) | "
                f"{written / (1 << 20):.0f} | {peak / (1 << 20):.0f} | {peak / data:.2f} | "
                f"{seconds:.1f} |"
            )
    if args.out is not None:
        new = not args.out.exists()
        with open(args.out, "a") as report:
            if new:
                report.write(
                    "| code | weights MiB | output MiB | peak RSS MiB | peak / weights "
                    "| seconds |\n|---|---|---|---|---|---|\n"
                )
            report.write("\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
