"""torch.cumprod's types, shared by both exporters' translations: the result type (``dtype=``
when given, else int64 for bool and integer inputs), the type the CumProd runs in, and the
wrap of an int64 result to a narrower integer width (``Mod``, never an out-of-range Cast)."""

from __future__ import annotations

import onnx_ir as ir

from rewriter import lowerings
from rewriter.site import FLOAT_TYPES

__all__ = ["FITS_INT32", "LOCATION", "NARROW_INTS", "compute_dtype", "result_dtype", "wrap"]

LOCATION = "aten::cumprod (torch.onnx.export)"
# Integer types torch.cumprod can return that CumProd does not take: computed in int64 and
# wrapped to their width.
NARROW_INTS = {
    ir.DataType.UINT8: (8, False),
    ir.DataType.INT8: (8, True),
    ir.DataType.INT16: (16, True),
    ir.DataType.UINT16: (16, False),
    ir.DataType.INT32: (32, True),
}
# Integer types whose every value an int32 holds (a Cast to int32 is then in range).
FITS_INT32 = {
    ir.DataType.BOOL,
    ir.DataType.UINT8,
    ir.DataType.INT8,
    ir.DataType.INT16,
    ir.DataType.UINT16,
    ir.DataType.INT32,
}


def result_dtype(x_dtype: ir.DataType, dtype: int | None) -> ir.DataType:
    """torch.cumprod's output type: ``dtype`` when given, else int64 for bool and integer
    inputs and the input's own type for floats."""
    if dtype is not None and dtype >= 0:
        return ir.DataType(dtype)
    return x_dtype if x_dtype in FLOAT_TYPES else ir.DataType.INT64


def compute_dtype(x_dtype: ir.DataType, out: ir.DataType) -> ir.DataType:
    """The type the CumProd runs in for torch's result type ``out``. torch casts to ``dtype``
    first. An integer result narrower than the input's integer type is computed in int64
    from the whole input: the low bits of a product depend only on the low bits of its
    factors, so wrapping at the end (:func:`wrap`) is the same."""
    if out in NARROW_INTS and not (out == ir.DataType.INT32 and x_dtype in FITS_INT32):
        return ir.DataType.INT64
    return out


def wrap(b: lowerings.Builder, y: ir.Value, dtype: ir.DataType) -> ir.Value:
    """int64 ``y`` reduced to the width of ``dtype`` (two's complement), then cast (in range)."""
    bits, signed = NARROW_INTS[dtype]
    low = b.op("Mod", y, b.const(1 << bits))  # in [0, 2^bits): Mod takes the divisor's sign
    if signed:
        half = b.const(1 << (bits - 1))
        low = b.op("Where", b.op("Less", low, half), low, b.op("Sub", low, b.const(1 << bits)))
    return b.cast(low, dtype)
