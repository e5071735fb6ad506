"""float32 CumProd of factors near 1: each lowering's error against onnxruntime's native kernel.

Products of factors within about 2^-12 of 1 round one way: the exact product 1 + a + b + ab
loses the cross term ab. The native kernel's running product soon drifts away from 1 and its
roundings stop being one-sided; a product tree's in-block partials start at 1 in every
block, so with float32 block totals and carries its error grew with n instead of about
sqrt(n) (README, Guarantees).

Part 1 runs the tool (onnxruntime, default target) on x = 1 + N(0, sigma) and prints worst /
mean errors in float32 ulps of the float64 product, for ``auto``, ``scan``, ``logsum`` and the trees
beside the native kernel. Part 2 is the numpy prototype of the fix the tool now has
(``rewriter/lowerings/wide.py``, since 2026-12-04): block totals of r = 16 taken from x in
float64 and scanned in float64, each block's float32 in-block prefix then multiplied by its
carry rounded to float32 (``c32 * f32(P64)``, the tool's form), or by the float64 carry and
rounded once (``f32(c * P64)``), beside numpy's sequential float32 product and a float32 tree
of the same blocks (the trees before the fix).

    .venv/bin/python scripts/accuracy_near_one.py
"""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper

import rewriter


def ulps(y: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """Error of float32 ``y`` in float32 ulps of the float64 ``exact``."""
    return np.abs(y.astype(np.float64) - exact) / np.spacing(np.abs(exact).astype(np.float32))


def run(model: object, x: np.ndarray) -> np.ndarray:
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(model.SerializeToString(), options)  # type: ignore[attr-defined]
    return np.asarray(session.run(None, {"x": x})[0])


def cumprod_model(shape: tuple[int, int], axis: int) -> object:
    graph = helper.make_graph(
        [helper.make_node("CumProd", ["x", "axis"], ["y"])],
        "near_one",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor("axis", TensorProto.INT64, [], [axis])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26)])


def stats(y: np.ndarray, exact: np.ndarray) -> str:
    u = ulps(y, exact)
    return f"{u.max():7.1f} / {u.mean():6.1f}"


def tool_table() -> None:
    strategies = ("auto", "scan", "logsum", "carry", "blocked", "radix", "tiled", "doubling")
    header = " | ".join(("shape", "axis", "native", *strategies))
    print(f"| {header} |  (worst / mean ulps, sigma 1e-4)")
    for shape, axis in (((4, 20000), 1), ((20000, 4), 0), ((16, 1000), 1), ((4, 4000), 1)):
        x = (1 + np.random.default_rng(1).normal(0, 1e-4, shape)).astype(np.float32)
        exact = np.cumprod(x.astype(np.float64), axis=axis)
        model = cumprod_model(shape, axis)
        cells = [stats(run(model, x), exact)]
        for strategy in strategies:
            lowered = rewriter.decompose_cumprod(model, strategy=strategy)
            cells.append(stats(run(lowered, x), exact))
        print(f"| {shape} | {axis} | " + " | ".join(cells) + " |")


def prototype_table(r: int = 16) -> None:
    print(f"\n| n | sigma | sequential | tree f32 | c32 * f32(P64) | f32(c * P64) |  (r = {r})")
    rng = np.random.default_rng(0)
    for n in (64, 512, 4096, 20000):
        for sigma in (1e-4, 1e-2, 0.5):
            rows, m = max(1, 200000 // n), -(-n // r)
            x = (1 + rng.normal(0, sigma, (rows, n))).astype(np.float32)
            exact = np.cumprod(x.astype(np.float64), axis=1)
            pad = np.ones((rows, m * r - n), np.float32)
            blocks = np.concatenate([x, pad], 1).reshape(rows, m, r)
            c = np.cumprod(blocks, axis=2)
            first = np.ones((rows, 1))
            p32 = np.concatenate([first, np.cumprod(c[:, :, -1], axis=1)[:, :-1]], 1)
            t64 = np.prod(blocks.astype(np.float64), axis=2)
            p64 = np.concatenate([first, np.cumprod(t64, axis=1)[:, :-1]], 1)
            trees = [
                c * p32.astype(np.float32)[:, :, None],
                c * p64.astype(np.float32)[:, :, None],
                (c * p64[:, :, None]).astype(np.float32),
            ]
            cells = [np.cumprod(x, axis=1)] + [y.reshape(rows, -1)[:, :n] for y in trees]
            print(f"| {n} | {sigma} | " + " | ".join(stats(y, exact) for y in cells) + " |")


if __name__ == "__main__":
    tool_table()
    prototype_table()
