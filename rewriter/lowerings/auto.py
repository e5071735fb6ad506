"""``auto``: the one place that picks a lowering for a CumProd, from what is known statically.

Thresholds from ``scripts/bench.py`` (onnxruntime 1.32, CPU, 2 threads, 1M and 4M elements;
the run of 2026-11-30 whose table the README shows) and the study it grew from. The scanned
tensor is viewed as (o, n, i): o the product of the dims before the axis, n the axis length,
i the product after. "8-byte" means the compute type has 8-byte elements (int64, uint64,
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

Every one of these is exact for integers and within the sequential kernel's k - 1 ulps for
floats. They need the length n static (other dims may be symbolic). A length known only at
run time gets ``dynamic``: an If on the length at run time between ``scan`` (up to 512) and a
blocked scan with run-time padding, so no length is catastrophic. A float whose rank is
unknown gets ``logsum`` (it needs neither rank nor a static axis).
"""

from __future__ import annotations

from rewriter.lowerings import chain
from rewriter.site import CumProdSite

__all__ = ["pick"]

_WIDE = 8


def pick(site: CumProdSite, compute_itemsize: int) -> str:
    """The lowering ``auto`` uses for ``site`` whose exact lowerings compute in a type of
    ``compute_itemsize`` bytes."""
    if site.rank is None:
        return "logsum" if site.is_float else "loop"  # loop / scan then refuse: a clear error
    n = site.scan_length
    if n is None:
        return "dynamic"
    if n <= 1:
        return "chain"
    assert site.shape is not None and site.axis is not None
    dims = site.shape.dims
    wide = compute_itemsize >= _WIDE
    if all(d == 1 for d in dims[: site.axis]):  # the scanned axis is the outermost
        return "scan" if n <= (4096 if wide else 512) else "radix"
    last = all(d == 1 for d in dims[site.axis + 1 :])
    if n <= min(64 if not (wide or last) else 16, chain.MAX_LENGTH):
        return "chain"
    if last and not wide:
        return "scan" if n <= 512 else "blocked"
    return "radix"
