"""Peak memory of rewriting a model whose weights total about SIZE_GIB.

Builds y = CumProd(x * w_0 * w_1 ..., 1) with float32 initializers w_i stored in one external
data file, or with ``--inline`` inside the model file (in a child process), then runs
``cumprod-rewriter`` on it in another child and reports that child's own peak resident memory
(ru_maxrss from wait4), also as a multiple of the weights' size. The parent imports nothing
heavy: a forked child's ru_maxrss starts from its parent's size.
Usage: python scripts/bench/measure_memory.py [--inline] [SIZE_GIB]
"""

from __future__ import annotations

import os
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


def main() -> None:
    if len(sys.argv) == 5 and sys.argv[1] == "--build":
        build(Path(sys.argv[2]), float(sys.argv[3]), sys.argv[4] == "inline")
        return
    args = sys.argv[1:]
    inline = "--inline" in args
    args = [a for a in args if a != "--inline"]
    size = float(args[0]) if args else 1.0
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        how = "inline" if inline else "external"
        subprocess.run([sys.executable, __file__, "--build", tmp, str(size), how], check=True)
        source = folder / "big.onnx"
        data = (source if inline else folder / "big.onnx.data").stat().st_size
        start = time.perf_counter()
        child = subprocess.Popen(
            [sys.executable, "-m", "rewriter", str(source), "-o", str(folder / "out" / "big.onnx")]
        )
        _, status, usage = os.wait4(child.pid, 0)  # this child's own rusage
        child.returncode = os.waitstatus_to_exitcode(status)
        if child.returncode:
            raise SystemExit(f"the rewrite failed with exit status {child.returncode}")
        seconds = time.perf_counter() - start
        peak_kib = usage.ru_maxrss
        written = sum(p.stat().st_size for p in (folder / "out").iterdir())
    peak = peak_kib * 1024
    print(
        f"weights {data / (1 << 20):.0f} MiB ({how}), output {written / (1 << 20):.0f} MiB, "
        f"peak RSS of the rewrite {peak / (1 << 20):.0f} MiB ({peak / data:.2f}x the "
        f"weights), {seconds:.1f} s"
    )


if __name__ == "__main__":
    main()
