"""``auto``: the one place that picks a lowering for a CumProd, per target, from what is
known statically.

``onnxruntime`` table: thresholds from ``scripts/bench.py`` (onnxruntime 1.32, CPU, 2 threads,
1M and 4M elements; the run of 2026-11-30 in ``docs/performance.md``). The scanned tensor is
viewed as (o, n, i). "8-byte" means the compute type has 8-byte elements (int64, uint64,
double, and uint32 computed as int64): onnxruntime moves those 2-4x slower through Transposes
and strided Split / Concat, which decides where Transpose-based lowerings pay.

=========  ========================================  =========================================
position   4-byte compute types (float32, float16,   8-byte compute types (int64, double, ...)
           bfloat16, int32)
=========  ========================================  =========================================
first o=1  n <= 512: scan; else radix                n <= 4096: scan; else radix
last i=1   n <= 16: chain; n <= 512: scan;           n <= 16: chain; else radix
           else blocked
middle     n <= 64: chain; else radix                n <= 16: chain; else radix
=========  ========================================  =========================================

A length known only at run time (a symbolic dim, a run-time axis, an unknown rank) gets
``dynamic``: an If on the length at run time between ``scan`` (up to 512) and a blocked scan
with run-time padding.

``static`` table (tract, IREE, TFLite, tinygrad, portable: runtimes without some control
flow, where the unrolled forms are also the fast ones): n <= 16: chain; else radix. A length
known only at run time: ``scan`` where the target has Scan, else ``doubling`` (which needs a
bound, ``max_length``).

``openvino`` table: as ``static`` (its Scan and Loop ran 10-67x its CumSum, radix 0.57-1x),
but a length known only at run time takes ``scan`` (OpenVINO runs Scan).

Every one of these is exact for integers and within the sequential kernel's k - 1 ulps for
floats.
"""

from __future__ import annotations

from rewriter.site import ScanSpec
from rewriter.targets import Target

__all__ = ["pick"]

_WIDE = 8
_CHAIN_UP_TO = 16


def _onnxruntime(spec: ScanSpec, compute_itemsize: int) -> str:
    n = spec.length
    if n is None:
        return "dynamic"
    if n <= 1:
        return "chain"
    wide = compute_itemsize >= _WIDE
    if spec.outer == 1:  # the scanned axis is the outermost
        return "scan" if n <= (4096 if wide else 512) else "radix"
    last = spec.inner == 1
    if n <= (64 if not (wide or last) else 16):
        return "chain"
    if last and not wide:
        return "scan" if n <= 512 else "blocked"
    return "radix"


def _static(spec: ScanSpec, target: Target) -> str:
    n = spec.length
    if n is None:
        return "scan" if "Scan" not in target.missing_ops else "doubling"
    return "chain" if n <= _CHAIN_UP_TO else "radix"


def pick(spec: ScanSpec, target: Target, compute_itemsize: int) -> str:
    """The lowering ``auto`` uses for ``spec`` on ``target``, whose exact lowerings compute
    in a type of ``compute_itemsize`` bytes."""
    if target.auto == "onnxruntime":
        return _onnxruntime(spec, compute_itemsize)
    return _static(spec, target)
