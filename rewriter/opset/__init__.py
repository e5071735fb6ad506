"""Lowering the model's ai.onnx opset to a target version N (``target_opset``).

The CumProd lowerings build their nodes at N directly (see ``Builder``). For every other
ai.onnx node, from the model's version down to N:

- the op's schema is the same at N: nothing to do;
- the schemas differ only in the types they allow (e.g. Relu-14 -> Relu-6 dropped bfloat16,
  Loop-21 -> Loop-16 only types), or the node uses nothing the older schema lacks (a Constant
  with ``value``, a Pad without ``axes``, a Reshape without ``allowzero``) and its meaning did
  not change: the node stays as it is, provided its element types are allowed at N (onnx's
  converter has no adapter for many of these, e.g. Relu 14 -> 13, Constant 13 -> 11);
- otherwise (the node uses an input or attribute the older schema lacks, or the op's meaning
  changed): onnx's own version converter (``onnx.version_converter``) adapts the node;
- the op does not exist at N, or its types are not allowed there (or not known, where the
  older schema allows fewer), or it needs onnx's converter and reads an initializer the graph
  also takes as an input (the converter would freeze its default): it blocks the conversion.

Every node is classified before anything is changed; blockers are reported together in one
:class:`OpsetError`. onnx's converter only adapts the main graph, so a node in a subgraph or a
function that would need it is a blocker. Weights stay in the IR while the converter runs
(initializers above 1 kB are lifted out as onnx_ir's shape inference does and put back after),
so external data keeps its folder. The output imports ai.onnx at exactly N (model and
functions) with the IR version that goes with N (``onnx.helper.find_min_ir_version_for``;
8 at least when the model has functions), never higher than the input's.
"""

from rewriter.errors import Blocker, OpsetError
from rewriter.opset.apply import TargetOpsetPass, apply_target_opset, ir_version_for
from rewriter.opset.check import MIN_TARGET_OPSET, OpsetPlan, check_target_opset

__all__ = [
    "MIN_TARGET_OPSET",
    "Blocker",
    "OpsetError",
    "OpsetPlan",
    "TargetOpsetPass",
    "apply_target_opset",
    "check_target_opset",
    "ir_version_for",
]
