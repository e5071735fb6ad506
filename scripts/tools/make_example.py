"""Writes rewriter/examples/example.onnx: a small model with four CumProd nodes (opset 26).

- alphas_cumprod = CumProd(1 - betas, 0)                        diffusion noise schedule
- weights = v * CumProd(1 - v, -1, exclusive=1)                 stick-breaking mixture weights
- strides = CumProd(dims, 0, exclusive=1, reverse=1)            int64 row-major strides
- transmittance = CumProd(1 - alpha, axis), axis a run-time input   NeRF-style, run-time axis
"""

from __future__ import annotations

from pathlib import Path

import onnx

TEXT = """
<ir_version: 11, opset_import: ["" : 26], producer_name: "cumprod-rewriter example">
example (float[T] betas, float[B, K] v, int64[R] dims, float[B, S] alpha, int64 axis)
    => (float[T] alphas_cumprod, float[B, K] weights, int64[R] strides, float[B, S] transmittance) {
    one = Constant <value = float {1.0}> ()
    zero_axis = Constant <value = int64 {0}> ()
    last_axis = Constant <value = int64 {-1}> ()
    alphas = Sub (one, betas)
    alphas_cumprod = CumProd (alphas, zero_axis)
    remaining = Sub (one, v)
    before = CumProd <exclusive = 1> (remaining, last_axis)
    weights = Mul (v, before)
    strides = CumProd <exclusive = 1, reverse = 1> (dims, zero_axis)
    clear = Sub (one, alpha)
    transmittance = CumProd (clear, axis)
}
"""


def main() -> None:
    model = onnx.parser.parse_model(TEXT)
    for i, node in enumerate(model.graph.node):
        node.name = f"{node.op_type.lower()}_{i}"
    onnx.checker.check_model(model, full_check=True)
    target = Path(__file__).resolve().parents[2] / "rewriter" / "examples" / "example.onnx"
    onnx.save(model, target)
    print(f"wrote {target}")


if __name__ == "__main__":
    main()
