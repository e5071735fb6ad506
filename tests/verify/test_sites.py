"""Each CumProd alone (``check_sites``): its lowered one-node model against numpy on
adversarial values, at the lengths where a lowering changes branch. Wrong lowerings are made
by editing the lowered model the check is given."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from onnx import TensorProto, helper

from rewriter.convert import lower_sites
from rewriter.decompose import DecomposeCumProdPass
from rewriter.verify import (
    OutputCheck,
    check_sites,
    numpy_cumprod,
)
from tests.helpers import cumprod_model
from tests.verify.models import loop_model, reroute, symbolic_model


@pytest.mark.parametrize("exclusive,reverse", [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_numpy_cumprod_attributes(exclusive: int, reverse: int) -> None:
    x = np.array([[2, 3, 5], [7, 11, 13]], np.int64)
    expected = {
        (0, 0): [[2, 6, 30], [7, 77, 1001]],
        (1, 0): [[1, 2, 6], [1, 7, 77]],
        (0, 1): [[30, 15, 5], [1001, 143, 13]],
        (1, 1): [[15, 5, 1], [143, 13, 1]],
    }[(exclusive, reverse)]
    got = numpy_cumprod(x, 1, bool(exclusive), bool(reverse), np.int64)
    np.testing.assert_array_equal(got, expected)


def _plans(model: onnx.ModelProto) -> list[object]:

    rewrite = DecomposeCumProdPass("auto")
    rewrite(ir.serde.deserialize_model(model))
    return list(rewrite.plans)


def _check(plans: list[object], max_length: int | None = None) -> list[OutputCheck]:
    """The site checks as the command runs them: each site lowered as the model was."""
    return check_sites(lower_sites(plans, max_length=max_length), max_length=max_length)


def test_sites_pass_for_every_type_with_both_attributes() -> None:
    for elem in (TensorProto.FLOAT16, TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.UINT64):
        plans = _plans(cumprod_model(elem, [3, 7], 1, exclusive=1, reverse=1))
        (check,) = _check(plans)
        assert check.ok and not check.detail, check


@pytest.mark.parametrize(
    "corrupt,expected",
    [
        ("cap", "overflow"),
        ("nan", "NaN where the reference is not"),
        ("wrap", "element(s) differ"),
    ],
)
def test_sites_catch_a_wrong_lowering(corrupt: str, expected: str) -> None:
    """check_sites runs each site's lowered model it is given: break one."""
    elem = TensorProto.INT64 if corrupt == "wrap" else TensorProto.FLOAT
    (site,) = lower_sites(_plans(cumprod_model(elem, [2, 6], 1)))
    lowered = site.lowered
    assert lowered is not None
    if corrupt == "cap":
        lowered.graph.initializer.append(helper.make_tensor("cap", TensorProto.FLOAT, [], [1e30]))
        reroute(lowered, "y", [helper.make_node("Min", ["y_inner", "cap"], ["y"])])
    elif corrupt == "nan":
        reroute(lowered, "y", [helper.make_node("Sqrt", ["y_inner"], ["y"])])
    else:  # int64 through int32
        reroute(
            lowered,
            "y",
            [
                helper.make_node("Cast", ["y_inner"], ["y32"], to=TensorProto.INT32),
                helper.make_node("Cast", ["y32"], ["y"], to=TensorProto.INT64),
            ],
        )
    (check,) = check_sites([site])
    assert not check.ok and expected in check.detail, check


@pytest.mark.parametrize("elem", [TensorProto.FLOAT, TensorProto.INT64])
def test_sites_run_a_symbolic_length_past_each_branch(
    monkeypatch: pytest.MonkeyPatch, elem: int
) -> None:
    """``dynamic`` takes another branch past 512 positions; with symbolic dims fed at 3 only,
    a long branch that forgets to multiply passed --verify. The sites now run at longer
    lengths too, and say at which shape a mismatch is."""
    from rewriter.lowerings import tree

    def forgetful(b, x3, v, levels, scan_blocks=False):  # type: ignore[no-untyped-def]
        return b.op("Identity", x3)  # the long branch returns its input

    plans = _plans(symbolic_model(elem, ["B", "N"], 1))
    (right,) = _check(plans)
    assert right.ok and not right.skipped, right
    monkeypatch.setattr(tree, "_tree", forgetful)
    (check,) = _check(plans)
    assert not check.ok and "shape [3, 513]" in check.detail, check


def test_sites_feed_negative_run_time_axes() -> None:
    """A lowering that treated a negative run-time axis as 0 passed the site check, which fed
    axes 0 .. rank - 1 only."""
    plans = _plans(symbolic_model(TensorProto.FLOAT, [2, 3, 4], None))
    (right,) = _check(plans)
    assert right.ok, right
    (site,) = lower_sites(plans)
    lowered = site.lowered
    assert lowered is not None
    lowered.graph.initializer.append(helper.make_tensor("zero", TensorProto.INT64, [], [0]))
    for node in lowered.graph.node:
        node.input[:] = ["axis_clamped" if i == "axis" else i for i in node.input]
    lowered.graph.node.insert(0, helper.make_node("Max", ["axis", "zero"], ["axis_clamped"]))
    (check,) = check_sites([site])
    assert not check.ok and "axis -" in check.detail, check


def test_a_site_that_cannot_run_is_reported_as_skipped() -> None:
    """Rank unknown (a Loop-carried value declared without shape): the site check cannot
    build its model; it says so, where it once printed ``[ok]``."""
    model = loop_model(lambda: [helper.make_node("CumProd", ["acc", "ax"], ["out"])], None)
    (check,) = _check(_plans(model))
    assert check.skipped and check.detail == "not checked: rank unknown", check


def test_sites_run_at_the_length_bound_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    """With max_length, a symbolic scan axis is also checked at the bound (the longest
    length the rewrite takes), not only below it."""
    import rewriter.verify.sites

    shapes: list[tuple[int, ...]] = []
    real = rewriter.verify.sites._site_shapes

    def recorded(*args: object, **kwargs: object) -> list[tuple[int, ...]]:
        out = real(*args, **kwargs)  # type: ignore[arg-type]
        shapes.extend(out)
        return out

    monkeypatch.setattr(rewriter.verify.sites, "_site_shapes", recorded)
    plans = _plans(symbolic_model(TensorProto.FLOAT, [2, "N"], 1))
    (check,) = _check(plans, max_length=40)
    assert check.ok, check
    assert (2, 40) in shapes and all(s[1] <= 40 for s in shapes), shapes
