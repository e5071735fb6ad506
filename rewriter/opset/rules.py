"""What an ai.onnx node means at an older opset, beyond what the schemas' signatures say:
values and forms that changed meaning or appeared in a later version, attributes that change
nothing for a given node, and the forms the older version spells differently (used by
:mod:`rewriter.opset` when it lowers a model's opset)."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir

from rewriter.graphs import Located
from rewriter.site import constant_value
from rewriter.types import TypeTable

__all__ = ["constant_tensor", "meaning_lost", "no_effect", "split_sizes"]

# Attribute values that an op took only from some version on (its signature unchanged):
# (op, attribute) -> value -> the first version that has it.
_VALUES_SINCE: dict[tuple[str, str], dict[str, int]] = {
    ("Pad", "mode"): {"wrap": 19},
    ("Resize", "coordinate_transformation_mode"): {"half_pixel_symmetric": 19},
    ("ScatterElements", "reduction"): {"max": 18, "min": 18},
    ("ScatterND", "reduction"): {"max": 18, "min": 18},
}
# opset 22 changed their ceil_mode output size
_POOLS_22 = frozenset({"AveragePool", "LpPool", "MaxPool"})
_QDQ = frozenset({"QuantizeLinear", "DequantizeLinear"})  # per-axis from 13


def _pool_window_dropped(node: ir.Node, shape: ir.Shape | None) -> bool | None:
    """Whether a ceil_mode pool's last window starts in the right padding on some axis (which
    opset 22 drops and earlier opsets keep); None when the shape or padding is not known."""
    kernel = node.attributes.get_ints("kernel_shape")
    if shape is None or kernel is None:
        return None
    if node.attributes.get_string("auto_pad", "NOTSET") not in ("NOTSET", "VALID"):
        return None
    k = len(kernel)
    spatial = list(shape)[-k:]
    if len(spatial) != k or not all(isinstance(d, int) for d in spatial):
        return None
    strides = list(node.attributes.get_ints("strides") or [1] * k)
    dilations = list(node.attributes.get_ints("dilations") or [1] * k)
    pads = list(node.attributes.get_ints("pads") or [0] * (2 * k))
    for i, size in enumerate(spatial):
        assert isinstance(size, int)
        span = size + pads[i] + pads[i + k] - ((kernel[i] - 1) * dilations[i] + 1)
        if span < 0:
            continue
        count = -(-span // strides[i]) + 1  # ceil
        if (count - 1) * strides[i] >= size + pads[i]:
            return True
    return False


def meaning_lost(
    where: Located, then: onnx.defs.OpSchema, now: onnx.defs.OpSchema, types: TypeTable
) -> str | None:
    """Why this node, as written, would mean something else (or nothing) under the older
    schema although the schemas' signatures may agree; None when it keeps its meaning."""
    node = where.node
    for (op, name), since in _VALUES_SINCE.items():
        value = node.attributes.get_string(name) if node.op_type == op else None
        if value in since and then.since_version < since[value]:
            return f"{name}='{value}' exists from opset {since[value]}"
    first = node.inputs[0] if node.inputs else None
    dtype, shape = types.lookup(where.scope, first) if first is not None else (None, None)
    if (
        node.op_type in _POOLS_22
        and now.since_version >= 22 > then.since_version
        and node.attributes.get_int("ceil_mode", 0) == 1
        and _pool_window_dropped(node, shape) is not False
    ):
        return (
            "with ceil_mode=1, opset 22 drops a last window that starts in the right padding "
            "and earlier opsets keep it (another output size; the input's spatial dims must "
            "be known to show it does not happen)"
        )
    if node.op_type == "Mod" and now.since_version >= 28 > then.since_version:
        floating = dtype is None or dtype.is_floating_point()
        if floating and node.attributes.get_int("fmod", 0) == 0:
            return "a floor Mod (fmod=0) of floats exists from opset 28"
    if node.op_type == "BitShift" and now.since_version >= 28 > then.since_version:
        return _shift_undefined(where, dtype, types)
    if node.op_type in ("Cast", "CastLike") and now.since_version >= 24 > then.since_version:
        fnuz = _fnuz_saturated(where, dtype, types)
        if fnuz is not None:
            return fnuz
    if node.op_type in _QDQ and then.since_version < 13 <= now.since_version:
        scale = node.inputs[1] if len(node.inputs) > 1 else None
        _, shape = types.lookup(where.scope, scale) if scale is not None else (None, None)
        if shape is None or shape.rank() != 0:
            return "a scale that is not 0-D (per-axis quantization) exists from opset 13"
    return None


def _shift_undefined(where: Located, dtype: ir.DataType | None, types: TypeTable) -> str | None:
    """BitShift-28 gives 0 for a shift by the type's width or more (or a negative one);
    BitShift-11 leaves those undefined (onnxruntime 1.20 shifted 1 << 32 to 1). None when
    the shift is a constant whose every value is below the width."""
    shift = where.node.inputs[1] if len(where.node.inputs) > 1 else None
    amounts = constant_value(shift) if shift is not None else None
    if dtype is not None and amounts is not None:
        width = dtype.itemsize * 8
        if bool(((amounts >= 0) & (amounts < width)).all()):
            return None
    return (
        "BitShift-28 gives 0 for a shift by the type's width or more, which earlier "
        "versions leave undefined (the shift must be a constant below the width)"
    )


_FNUZ = frozenset({ir.DataType.FLOAT8E4M3FNUZ, ir.DataType.FLOAT8E5M2FNUZ})


def _fnuz_saturated(where: Located, dtype: ir.DataType | None, types: TypeTable) -> str | None:
    """Cast-24 / CastLike-24 saturate ±inf to ±FLT_MAX of float8e4m3fnuz / float8e5m2fnuz,
    where earlier versions give NaN; None when the cast cannot meet that case (another
    output type, saturate=0, or an input that is not a float)."""
    node = where.node
    out: ir.DataType | None
    if node.op_type == "Cast":
        to = node.attributes.get_int("to")
        out = ir.DataType(to) if to is not None else None
    else:
        like = node.inputs[1] if len(node.inputs) > 1 else None
        out, _ = types.lookup(where.scope, like) if like is not None else (None, None)
    if out is not None and out not in _FNUZ:
        return None
    if node.attributes.get_int("saturate", 1) == 0:
        return None
    if dtype is not None and not dtype.is_floating_point():
        return None
    return (
        f"{node.op_type}-24 saturates ±inf to the largest float8 FNUZ value, where earlier "
        "versions give NaN"
    )


_FLOAT8 = frozenset(
    {
        ir.DataType.FLOAT8E4M3FN,
        ir.DataType.FLOAT8E4M3FNUZ,
        ir.DataType.FLOAT8E5M2,
        ir.DataType.FLOAT8E5M2FNUZ,
    }
)


def no_effect(where: Located, attr: ir.Attr, types: TypeTable) -> bool:
    """Whether ``attr`` changes nothing for this node: ``saturate`` where the output is not a
    float8 type (it only clamps float8 conversions), pool ``dilations`` of all ones."""
    node = where.node
    if attr.name == "saturate" and node.op_type in ("Cast", "CastLike", "QuantizeLinear"):
        out = node.outputs[0] if node.outputs else None
        dtype, _ = types.lookup(where.scope, out) if out is not None else (None, None)
        return dtype is not None and dtype not in _FLOAT8
    if attr.name == "dilations" and node.op_type in ("AveragePool", "MaxPool", "LpPool"):
        return attr.type == ir.AttributeType.INTS and all(d == 1 for d in attr.value)
    return False


_CONSTANT_VALUES = {
    "value_float": ir.DataType.FLOAT,
    "value_floats": ir.DataType.FLOAT,
    "value_int": ir.DataType.INT64,
    "value_ints": ir.DataType.INT64,
    "value_string": ir.DataType.STRING,
    "value_strings": ir.DataType.STRING,
}


def constant_tensor(node: ir.Node) -> ir.TensorProtocol | None:
    """A Constant-12's ``value_*`` attribute as the tensor Constant-11's ``value`` holds (a
    0-D tensor for a single value, 1-D for a list); None for any other Constant."""
    if len(node.attributes) != 1:
        return None
    ((name, attr),) = node.attributes.items()
    dtype = _CONSTANT_VALUES.get(name)
    if dtype is None:
        return None
    value = attr.value
    if dtype == ir.DataType.STRING:
        strings = [value] if isinstance(value, str) else list(value)
        encoded = [v.encode() if isinstance(v, str) else bytes(v) for v in strings]
        data = np.array(encoded[0] if isinstance(value, str) else encoded, dtype=object)
        return ir.StringTensor(data)  # type: ignore[arg-type]
    return ir.tensor(value, dtype=dtype)


def split_sizes(where: Located, types: TypeTable) -> list[int] | None:
    """The sizes a Split-18's ``num_outputs`` gives its outputs (chunks of ceil(d / k), the
    last one smaller), when the split dim is static; else None."""
    node = where.node
    k = node.attributes.get_int("num_outputs")
    x = node.inputs[0] if node.inputs else None
    if k is None or x is None or len(node.inputs) > 1 or len(node.outputs) != k:
        return None
    _, shape = types.lookup(where.scope, x)
    axis = node.attributes.get_int("axis", 0)
    if shape is None or not -shape.rank() <= axis < shape.rank():
        return None
    d = shape[axis % shape.rank()]
    if not isinstance(d, int):
        return None
    chunk = -(-d // k)
    last = d - chunk * (k - 1)
    return [chunk] * (k - 1) + [last] if last >= 0 else None
