"""``scripts/tools/same_graphs.py --canonical``: two graphs that differ only in node order and
value names hash the same; a changed attribute, swapped inputs, another constant, an extra
node (on an output path or dead), a changed subgraph or a renamed model output each hash
differently."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import onnx
import pytest

from tests.helpers import load_script

ROOT = Path(__file__).resolve().parent.parent


def _tool() -> ModuleType:
    return load_script(ROOT / "scripts" / "tools" / "same_graphs.py", "same_graphs")


TOOL = _tool()

BASE = """
<ir_version: 10, opset_import: ["" : 18]>
g (float[N, 4] x, float[4] w) => (float[N, 4] y, float[N, 4] z) <float[1] one = {1.0}> {
    a = Mul (x, w)
    b = Sub (x, one)
    c = Div (a, b)
    y = Relu (c)
    z = Softmax <axis = 1> (b)
}
"""
# BASE with the nodes in another valid order and every inner value renamed
REORDERED = """
<ir_version: 10, opset_import: ["" : 18]>
g (float[N, 4] x, float[4] w) => (float[N, 4] y, float[N, 4] z) <float[1] k = {1.0}> {
    q = Sub (x, k)
    z = Softmax <axis = 1> (q)
    p = Mul (x, w)
    r = Div (p, q)
    y = Relu (r)
}
"""
CHANGED = {
    "attribute": ("Softmax <axis = 1>", "Softmax <axis = 0>"),
    "swapped inputs": ("Div (a, b)", "Div (b, a)"),
    "constant": ("{1.0}", "{2.0}"),
    "op": ("Relu (c)", "Abs (c)"),
    "extra node on an output path": ("y = Relu (c)", "e = Relu (c)\n    y = Neg (e)"),
    "dead node": ("y = Relu (c)", "y = Relu (c)\n    dead = Neg (c)"),
    "duplicated node": ("y = Relu (c)", "y = Relu (c)\n    twice = Relu (c)"),
    "output order": ("(float[N, 4] y, float[N, 4] z)", "(float[N, 4] z, float[N, 4] y)"),
    "output name": ("float[N, 4] z)", "float[N, 4] s)"),
    "output shape": ("float[N, 4] y,", "float[N, 5] y,"),
    "opset": ('"" : 18', '"" : 17'),
}

LOOP = """
<ir_version: 10, opset_import: ["" : 18]>
g (float[4] x) => (float[4] y) {
    n = Constant <value = int64 {3}> ()
    t = Constant <value = bool {1}> ()
    y = Loop (n, t, x) <body = b (int64 i, bool c, float[4] s) => (bool c2, float[4] s2) {
        c2 = Identity (c)
        s2 = Mul (s, x)
    }>
}
"""


def _hash(text: str) -> str:
    return TOOL.canonical_hash(onnx.parser.parse_model(text))


def test_node_order_and_value_names_do_not_count() -> None:
    assert _hash(BASE) == _hash(REORDERED)
    assert _hash(BASE) == _hash(
        BASE.replace("one", "uno").replace("c)", "cc)").replace(" c ", " cc ")
    )


@pytest.mark.parametrize("change", CHANGED)
def test_a_change_counts(change: str) -> None:
    old, new = CHANGED[change]
    assert old in BASE
    assert _hash(BASE.replace(old, new)) != _hash(BASE)


def test_subgraphs_are_hashed_canonically() -> None:
    renamed = LOOP.replace("s2", "out").replace("(s,", "(acc,").replace(" s)", " acc)")
    assert _hash(LOOP) == _hash(renamed)
    # the body multiplies by the outer x; by its own loop-carried value it computes a power
    assert _hash(LOOP) != _hash(LOOP.replace("Mul (s, x)", "Mul (s, s)"))
    assert _hash(LOOP) != _hash(LOOP.replace("int64 {3}", "int64 {4}"))


def test_an_outer_input_is_not_the_body_input_at_its_position() -> None:
    # the outer m and the body's iteration number i: both input 0, both int64 scalars
    outer = LOOP.replace("(float[4] x)", "(int64 m, float[4] x)").replace(
        "s2 = Mul (s, x)", "f = CastLike (m, s)\n        s2 = Mul (s, f)"
    )
    assert _hash(outer) != _hash(outer.replace("CastLike (m, s)", "CastLike (i, s)"))
