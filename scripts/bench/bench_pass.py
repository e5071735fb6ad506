"""The pass's own cost: time for 1,000 unnamed vs 1,000 named CumProd nodes, and the peak RSS
of lowering a model with 256 MiB of inline weights (each measured in a fresh process).

    python scripts/bench/bench_pass.py            # prints a small table (Markdown)
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper


def _chain_model(count: int, named: bool) -> onnx.ModelProto:
    nodes = [helper.make_node("Constant", [], ["axis"], value_int=1)]
    previous = "x"
    for k in range(count):
        out = f"v{k}"
        nodes.append(
            helper.make_node("CumProd", [previous, "axis"], [out], name=f"c{k}" if named else "")
        )
        previous = out
    nodes.append(helper.make_node("Identity", [previous], ["y"]))
    graph = helper.make_graph(
        nodes,
        "main",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26)])


def _weights_model(mib: int) -> onnx.ModelProto:
    weights = np.ones((mib * (1 << 20) // 4,), dtype=np.float32)
    nodes = [
        helper.make_node("Constant", [], ["axis"], value_int=0),
        helper.make_node("CumProd", ["x", "axis"], ["c"]),
        helper.make_node("ReduceSum", ["w"], ["s"], keepdims=0),
        helper.make_node("Add", ["c", "s"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "main",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
        [onnx.numpy_helper.from_array(weights, "w")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26)])


def _rss_mib(field: str) -> float:
    """VmRSS / VmHWM of this process from /proc (ru_maxrss would include the parent's
    memory at fork time)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def _child(kind: str, arg: str) -> None:
    import onnx_ir as ir

    import rewriter

    if kind == "weights":  # loaded from the file the parent wrote, as the command line does
        model = ir.load(arg)
    else:
        model = ir.serde.deserialize_model(_chain_model(int(arg), named=kind == "named"))
    before = _rss_mib("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")  # reset the high-water mark (VmHWM)
    start = time.perf_counter()
    result = rewriter.DecomposeCumProdPass()(model)
    seconds = time.perf_counter() - start
    assert result.modified and not any(n.op_type == "CumProd" for n in model.graph)
    peak = _rss_mib("VmHWM")
    print(json.dumps({"seconds": seconds, "rss_before_mib": before, "peak_mib": peak}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--mib", type=int, default=256)
    args = parser.parse_args()
    if args.child:
        _child(args.child[0], args.child[1])
        return
    rows = []
    # ru_maxrss is a high-water mark: the parent writes the weights model, so the child's
    # "before" is the loaded model, not the arrays it was built from.
    weights = Path(tempfile.mkdtemp()) / "weights.onnx"
    onnx.save(_weights_model(args.mib), weights)
    for kind, arg in (("unnamed", args.nodes), ("named", args.nodes), ("weights", args.mib)):
        child_arg = str(weights) if kind == "weights" else str(arg)
        out = subprocess.run(
            [sys.executable, __file__, "--child", kind, child_arg],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        rows.append((kind, arg, json.loads(out.strip().splitlines()[-1])))
    print("| case | pass time (s) | RSS before the pass (MiB) | peak RSS (MiB) |")
    print("|---|---|---|---|")
    for kind, arg, r in rows:
        what = f"{arg} {kind} CumProd nodes" if kind != "weights" else f"{arg} MiB inline weights"
        print(f"| {what} | {r['seconds']:.2f} | {r['rss_before_mib']:.0f} | {r['peak_mib']:.0f} |")


if __name__ == "__main__":
    main()
