"""Runtimes and the kernels they lack: which element types a lowering computes in.

A lowering computes in a type the target runtime has kernels for, and casts back; the
results stay bit-exact (integers) or within the lowering's stated float bound:

- ``onnxruntime`` (default): runs on onnxruntime 1.20.1 and later. onnxruntime 1.20.1 has no
  Mul, Less, Where or CumSum for uint32 / uint64 (1.32 still lacks CumSum for both and Where
  for uint64), and next to nothing for bfloat16. uint32 and uint64 are multiplied as int64:
  the low 64 bits of a product do not depend on signedness, so ``Cast(uint64 -> int64)``,
  ``Mul``, ``Cast(int64 -> uint64)`` is bit-exact (two's-complement casts, as onnxruntime
  does them); uint32 results are masked with ``Mod(y, 2^32)`` before the cast back, so no
  out-of-range cast is relied on. Cost: two extra passes over memory (the casts), three for
  uint32. float16 / bfloat16 are computed in a wider float by every lowering anyway.
- ``spec``: any runtime with every kernel the ONNX spec lists: integers computed in their
  own type (no casts).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import onnx_ir as ir

__all__ = ["DEFAULT_TARGET", "TARGETS", "Target", "target_named"]


@dataclasses.dataclass(frozen=True)
class Target:
    """What a runtime can compute.

    Attributes:
        name: The name users pass (``target=``, ``--target``).
        integer_compute: Integer types that must be computed in another (wider or signed)
            integer type on this runtime.
        description: One line for ``--help`` and the README.
    """

    name: str
    integer_compute: Mapping[ir.DataType, ir.DataType]
    description: str

    def compute_type(self, dtype: ir.DataType) -> ir.DataType:
        return self.integer_compute.get(dtype, dtype)


TARGETS: dict[str, Target] = {
    target.name: target
    for target in (
        Target(
            "onnxruntime",
            {ir.DataType.UINT32: ir.DataType.INT64, ir.DataType.UINT64: ir.DataType.INT64},
            "onnxruntime 1.20.1 and later: uint32/uint64 multiplied as int64",
        ),
        Target("spec", {}, "every kernel the ONNX spec lists: integers in their own type"),
    )
}
DEFAULT_TARGET = "onnxruntime"


def target_named(name: str) -> Target:
    """The target called ``name``.

    Raises:
        ValueError: naming the targets there are.
    """
    if name not in TARGETS:
        raise ValueError(f"unknown target {name!r}; choose one of {', '.join(TARGETS)}")
    return TARGETS[name]
