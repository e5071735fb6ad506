"""``auto``: the one place that picks a lowering for a CumProd, per target, from what is
known statically.

``onnxruntime`` table: from ``scripts/bench.py`` (onnxruntime 1.32, CPU, one intra-op thread,
the calling thread's CPU time; float32, float64, int32, int64; 1M and 4M elements; the run of
2026-11-30 in ``docs/performance.md``). The scanned tensor is viewed as (o, n, i). "8-byte"
means the compute type has 8-byte elements (int64, uint64, double, and uint32 computed as
int64): onnxruntime moves those slower through Transposes and strided Split / Concat.

=========  ========================================  =========================================
position   4-byte compute types (float32, float16,   8-byte compute types (int64, double, ...)
           bfloat16, int32)
=========  ========================================  =========================================
first o=1  n <= 512: scan; else radix                n <= 512, or n <= 4096 with i >= 1024:
                                                     scan; else radix
last i=1   n <= 16: scan; n <= 8192: tiled;          n <= 16: scan; else radix
           else blocked
middle     n <= 64: chain; n <= 512 with o * i >=    as for 4-byte types
           8192: scan; else radix
=========  ========================================  =========================================

The first and middle axes stay several times native: ``docs/performance.md`` has the
figures and the measured floor.

A length known only at run time (a symbolic dim, a run-time axis, an unknown rank) gets
``dynamic``: an If on the length at run time between ``scan`` (up to 512) and a blocked scan
with run-time padding.

``static`` table (tract, IREE, TFLite, tinygrad, portable: runtimes without some control
flow, where the unrolled forms are also the fast ones): n <= 16: chain; else radix (with a
run-time axis over static dims, n is the longest dim, and x is padded to it). A length known
only at run time: ``scan`` where the target has Scan, else ``doubling`` (which needs a bound,
``max_length``).

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
    if spec.outer == 1:  # the scanned axis is the outermost: Scan slabs are contiguous
        # 8-byte types: the Scan's per-step cost pays off to 4096 steps on 1024-element slabs
        slab = spec.inner or 0
        if n <= 512 or (wide and n <= 4096 and slab >= 1024):
            return "scan"
        return "radix"
    if spec.inner == 1:  # the last axis
        if n <= 16:
            return "scan"
        if wide:
            return "radix"
        return "tiled" if n <= 8192 else "blocked"
    if n <= 64:  # a middle axis
        return "chain"
    slab = (spec.outer or 0) * (spec.inner or 0)
    return "scan" if n <= 512 and slab >= 8192 else "radix"


def _static(spec: ScanSpec, target: Target) -> str:
    n = spec.length
    if n is None and spec.dims is not None and all(isinstance(d, int) for d in spec.dims):
        n = spec.max_length  # a run-time axis over static dims: the longest dim bounds n
    if n is None:
        return "scan" if "Scan" not in target.missing_ops else "doubling"
    return "chain" if n <= _CHAIN_UP_TO else "radix"


def pick(spec: ScanSpec, target: Target, compute_itemsize: int) -> str:
    """The lowering ``auto`` uses for ``spec`` on ``target``, whose exact lowerings compute
    in a type of ``compute_itemsize`` bytes."""
    if target.auto == "onnxruntime":
        return _onnxruntime(spec, compute_itemsize)
    return _static(spec, target)
