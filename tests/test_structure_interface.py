"""A rewrite keeps the model's interface through every entry point (issue 56, item 5): graph
input and output names, element types and declared shapes stay as they were, for the
structures the generator of tests/test_structure_fuzz.py builds, given as an onnx_ir.Model
(``decompose_cumprod`` and ``DecomposeCumProdPass``) and on the command line. The protobuf
entry point is checked on every generated model there."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import pytest

import rewriter
from rewriter.errors import CumProdError
from tests.test_structure_fuzz import Spec, _Builder, random_spec
from tests.test_structures import interface

BATCH = 24


def generated() -> list[tuple[int, Spec, onnx.ModelProto]]:
    """A seeded batch of generated models the full checker takes, one in three with x also
    a graph output (declared with its true dims: a graph input with two declarations)."""
    rng = np.random.default_rng(5656)
    found = []
    for k in range(BATCH):
        spec = dataclasses.replace(random_spec(rng), x_is_output=k % 3 == 0)
        model, _ = _Builder(spec, reference=False).build()
        try:
            onnx.checker.check_model(model, full_check=True)
        except Exception:  # noqa: BLE001 - a model onnx refuses: not one to rewrite
            continue
        found.append((k, spec, model))
    assert len(found) >= BATCH // 2
    return found


MODELS = generated()


def ir_interface(model: ir.Model) -> list[tuple[str | None, ir.DataType | None, object]]:
    return [(v.name, v.dtype, v.shape) for v in [*model.graph.inputs, *model.graph.outputs]]


@pytest.mark.parametrize(("k", "spec", "model"), MODELS, ids=[f"model{k}" for k, _, _ in MODELS])
@pytest.mark.parametrize("entry", ["decompose_cumprod", "pass"])
def test_onnx_ir_model_keeps_its_interface(
    k: int, spec: Spec, model: onnx.ModelProto, entry: str
) -> None:
    """The onnx_ir entry points: the model's inputs and outputs as onnx_ir holds them, and
    serialized, are what they were (bar a refusal, which leaves the model as it was)."""
    given = ir.serde.deserialize_model(model)
    before = ir_interface(given)
    proto_before = interface(ir.serde.serialize_model(given).graph)
    logging.disable(logging.WARNING)
    try:
        if entry == "pass":
            rewriter.DecomposeCumProdPass()(given)
        else:
            rewriter.decompose_cumprod(given)
    except CumProdError:
        pass
    finally:
        logging.disable(logging.NOTSET)
    assert ir_interface(given) == before, spec
    assert interface(ir.serde.serialize_model(given).graph) == proto_before, spec


@pytest.mark.parametrize(
    ("k", "spec", "model"), MODELS[:8], ids=[f"model{k}" for k, _, _ in MODELS[:8]]
)
def test_command_line_keeps_the_interface(
    k: int, spec: Spec, model: onnx.ModelProto, tmp_path: Path
) -> None:
    """``cumprod-rewriter in.onnx -o out.onnx`` (its ``main``, in this process): the written
    model's graph inputs and outputs are the file's, as serialized protos."""
    from rewriter.cli import main

    source, written = tmp_path / "in.onnx", tmp_path / "out.onnx"
    onnx.save(model, source)
    code = main([str(source), "-o", str(written), "-q"])
    if code != 0:
        assert not written.exists(), f"exit code {code} but an output was written"
        pytest.skip(f"the command refused this model (exit code {code})")
    assert interface(onnx.load(written).graph) == interface(model.graph), spec
