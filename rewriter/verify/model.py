"""Whole-model verification: a rewritten model against its original, on the same feeds,
output by output, plus each CumProd's standalone check (:mod:`rewriter.verify.sites`)."""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnx_ir as ir

from rewriter import runtimes
from rewriter.verify.analysis import random_outputs
from rewriter.verify.compare import PRECISION, Comparison, compare
from rewriter.verify.feeds import (
    DEFAULT_DIM,
    UNNAMED_SIZES,
    _input_dim_names,
    random_inputs,
    symbolic_sizes,
)
from rewriter.verify.records import OutputCheck, VerifyResult, _failed, _listed, _one_line
from rewriter.verify.run import _ort_session, _run_original, _run_reference, _session_run
from rewriter.verify.sites import LoweredSite, check_sites

__all__ = ["plan_bound", "verify_model"]

logger = logging.getLogger("rewriter.verify")  # the name the command prints


def _type_text(type_proto: onnx.TypeProto) -> str:
    which = type_proto.WhichOneof("value")
    if which == "tensor_type":
        tensor = type_proto.tensor_type
        name = onnx.TensorProto.DataType.Name(tensor.elem_type).lower() if tensor.elem_type else "?"
        if not tensor.HasField("shape"):
            return name
        dims = [
            str(d.dim_value) if d.HasField("dim_value") else (d.dim_param or "?")
            for d in tensor.shape.dim
        ]
        return f"{name}[{', '.join(dims)}]"
    if which == "sequence_type":
        return f"seq({_type_text(type_proto.sequence_type.elem_type)})"
    return which or "?"


def _signature_checks(original: onnx.ModelProto, rewritten: onnx.ModelProto) -> list[OutputCheck]:
    """Outputs (count, names, order, declared element types and shapes) and inputs must match."""
    problems = []
    old = {o.name: o for o in original.graph.output}
    new = {o.name: o for o in rewritten.graph.output}
    if len(original.graph.output) != len(rewritten.graph.output):
        problems.append(
            _failed(
                "(outputs)",
                "",
                f"the rewritten model has {len(rewritten.graph.output)} output(s), the "
                f"original {len(original.graph.output)}",
            )
        )
    for name, value in old.items():
        if name not in new:
            problems.append(
                _failed(name, _type_text(value.type), "output missing from the rewritten model")
            )
    for name, value in new.items():
        if name not in old:
            problems.append(
                _failed(name, _type_text(value.type), "output not in the original model")
            )
    if [o.name for o in original.graph.output if o.name in new] != [
        o.name for o in rewritten.graph.output if o.name in old
    ]:
        problems.append(_failed("(outputs)", "", "outputs are in a different order"))
    for name, value in old.items():
        if name in new and new[name].type != value.type:
            problems.append(
                _failed(
                    name,
                    _type_text(value.type),
                    f"declared type {_type_text(new[name].type)}, the original "
                    f"{_type_text(value.type)}",
                )
            )
    init_old = {t.name for t in original.graph.initializer}
    init_new = {t.name for t in rewritten.graph.initializer}
    inputs_old = [(i.name, i.type) for i in original.graph.input if i.name not in init_old]
    inputs_new = [(i.name, i.type) for i in rewritten.graph.input if i.name not in init_new]
    if inputs_old != inputs_new:
        problems.append(_failed("(inputs)", "", "graph inputs differ from the original's"))
    return problems


def _declared_dims(value: onnx.ValueInfoProto) -> list[int | None] | None:
    tensor = value.type.tensor_type
    if value.type.WhichOneof("value") != "tensor_type" or not tensor.HasField("shape"):
        return None
    return [d.dim_value if d.HasField("dim_value") else None for d in tensor.shape.dim]


def _compare_value(
    actual: Any,
    expected: Any,
    bound: float,
    declared: list[int | None] | None,
    narrowest: int | None = None,
    *,
    values: bool = True,
) -> tuple[Comparison, str]:
    """Compare one output value (a tensor or a sequence of tensors); also its element type
    against the original's and its shape against the declared one. Without ``values``,
    only the element types and shapes (of an output no two runs agree on)."""
    if isinstance(expected, list) or isinstance(actual, list):
        if not (isinstance(expected, list) and isinstance(actual, list)):
            return Comparison(False, float("inf"), "a sequence on one side only"), "?"
        if len(actual) != len(expected):
            return (
                Comparison(False, float("inf"), f"{len(actual)} tensors, original {len(expected)}"),
                "?",
            )
        worst, name = Comparison(True, 0.0), "seq"
        for i, (a, e) in enumerate(zip(actual, expected)):
            result, name = _compare_value(a, e, bound, None, narrowest, values=values)
            if not result.ok:
                return Comparison(False, result.worst, f"tensor {i}: {result.detail}"), name
            if result.worst > worst.worst:
                worst = result
        return worst, f"seq({name})"
    act, exp = np.asarray(actual), np.asarray(expected)
    dtype_name = exp.dtype.name
    if act.dtype != exp.dtype:
        return (
            Comparison(False, float("inf"), f"element type {act.dtype}, the original {exp.dtype}"),
            dtype_name,
        )
    if declared is not None and (
        len(declared) != act.ndim
        or any(d is not None and d != n for d, n in zip(declared, act.shape))
    ):
        shown = ["?" if d is None else d for d in declared]
        return (
            Comparison(False, float("inf"), f"shape {act.shape} does not match declared {shown}"),
            dtype_name,
        )
    if not values:
        with contextlib.suppress(KeyError, TypeError, ValueError):
            dtype_name = ir.DataType(onnx.helper.np_dtype_to_tensor_dtype(exp.dtype)).name.lower()
        if act.shape != exp.shape:
            return Comparison(
                False, float("inf"), f"shape {act.shape}, the original {exp.shape}"
            ), dtype_name
        return Comparison(True, 0.0), dtype_name
    try:
        dtype = ir.DataType(onnx.helper.np_dtype_to_tensor_dtype(exp.dtype))
    except (KeyError, TypeError, ValueError):
        equal = act.shape == exp.shape and bool(np.all(act == exp))
        return Comparison(
            equal, 0.0 if equal else float("inf"), "" if equal else "differs"
        ), dtype_name
    if dtype not in PRECISION:
        return compare(act, exp, dtype, 0.0), dtype.name.lower()
    return compare(act, exp, dtype, _scaled(bound, dtype, narrowest)), dtype.name.lower()


def _scaled(bound: float, dtype: ir.DataType, narrowest: int | None) -> float:
    """A bound in ulps of the narrowest CumProd float type, in ulps of ``dtype`` (a float32
    output computed by a bfloat16 CumProd carries bfloat16's error)."""
    bits, _ = PRECISION[dtype]
    if narrowest is None or narrowest >= bits:
        return bound
    return bound * 2.0 ** (bits - narrowest)


def plan_bound(plan: Any, dims: Mapping[str, int]) -> float:
    """One CumProd's float bound in ulps: its lowering's stated bound plus the sequential
    reference's own (k - 1 ulps), for its scan length at the sizes fed (``dims``); 0 for a
    site of no known element type."""
    site = plan.site
    if site.dtype is None:
        return 0.0
    largest = max([DEFAULT_DIM, *dims.values()]) + UNNAMED_SIZES  # an unnamed dim's at most

    def size(dim: object) -> int:
        if isinstance(dim, int):
            return dim
        name = getattr(dim, "value", dim)
        return dims.get(str(name), DEFAULT_DIM) if name else largest

    k: int
    if site.shape is not None and site.axis is not None:
        k = size(site.shape[site.axis])
    elif site.shape is not None:
        k = max([size(d) for d in site.shape], default=DEFAULT_DIM)
    else:
        k = largest
    ks = np.array([max(k, 1)])
    return float(plan.lowering.max_ulps(site.dtype, ks)[0]) + max(k - 1, 0)


def _plans_of_outputs(model: onnx.ModelProto, plans: Sequence[Any]) -> dict[str, list[Any] | None]:
    """Per graph output, the CumProds it is computed from: those of the main graph on its
    way, matched by output name; None (all of them, as for the whole model) when the way
    passes a node with a subgraph or a call of a model-local function, whose CumProds
    cannot be told apart here."""
    local = {(f.domain, f.name) for f in model.functions}
    producer = {out: node for node in model.graph.node for out in node.output if out}
    main = {
        p.site.node.outputs[0].name: p
        for p in plans
        if p.site.node is not None
        and " > " not in p.site.location
        and p.site.location.startswith("graph '")
    }
    found: dict[str, list[Any] | None] = {}
    for output in model.graph.output:
        seen: set[int] = set()
        todo, opaque = [output.name], False
        reached: list[Any] = []
        while todo:
            name = todo.pop()
            node = producer.get(name)
            if node is None or id(node) in seen:
                continue
            seen.add(id(node))
            subgraphs = any(
                a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
                for a in node.attribute
            )
            opaque = opaque or subgraphs or (node.domain, node.op_type) in local
            reached.extend(main[out] for out in node.output if out in main)
            todo.extend(i for i in node.input if i)
        found[output.name] = None if opaque else reached
    return found


def verify_model(
    original: str | os.PathLike[str],
    rewritten: str | os.PathLike[str],
    *,
    bound_ulps: float,
    runs: int = 3,
    dims: Mapping[str, int] | None = None,
    seed: int = 0,
    plans: Sequence[Any] = (),
    sites: Sequence[LoweredSite] = (),
    target: str | None = None,
    max_length: int | None = None,
) -> VerifyResult:
    """Check ``rewritten`` against ``original``.

    1. Outputs: the same count, names, order, declared element types and shapes; the same
       graph inputs.
    2. Both run on ``runs`` random input sets plus a ``special`` and an ``extreme`` one (see
       :func:`random_inputs`), each symbolic dim of the inputs at its own size
       (:func:`symbolic_sizes`) and Loop trip counts given as inputs at 3; if the original
       fails on that, every dim not in ``dims`` at 3 and the trip counts at 1. The original
       runs in onnxruntime when it can load it, else in ``onnx.reference``; the rewritten
       model on the target's own runtime when it is installed here
       (:func:`rewriter.runtimes.runner_for`), else in onnxruntime. Each output must have
       the original's element type and its declared shape; integers must be equal; floats
       equal in NaN / inf / signed-zero positions and within ``bound_ulps`` elsewhere. A run
       the rewritten model fails and the original does not is a mismatch; an adversarial
       run the original itself fails is skipped. An output computed from random draws
       (:func:`random_outputs`: no two runs agree, seeded or not) has only its element type
       and shape compared: its check is ``skipped``, naming the nodes, and a warning is
       logged.
    3. Each of ``sites`` (the pass's ``.plans``, each with its one-node model lowered by the
       caller as the model was: :class:`~rewriter.verify.sites.LoweredSite`): the CumProd run
       standalone at its type, shape and attributes on adversarial values against numpy
       (:func:`~rewriter.verify.sites.check_sites`).

    ``plans`` (the pass's ``.plans``) bound each output by the CumProds it is computed from;
    ``target`` names the runtime the rewritten model runs on; ``max_length`` is the pass's.
    """
    original, rewritten = str(original), str(rewritten)
    original_proto = onnx.load(original, load_external_data=False)
    rewritten_proto = onnx.load(rewritten, load_external_data=False)
    problems = _signature_checks(original_proto, rewritten_proto)
    rng = np.random.default_rng(seed)
    try:
        reference_session = _ort_session(original)
        reference = "onnxruntime"
    except Exception:  # noqa: BLE001 - an ORT without CumProd: use the spec
        reference_session = None
        reference = "onnx.reference"
    runner = runtimes.runner_for(target) if target else None
    if runner is not None:
        runtime = str(target)

        def run_rewritten(feeds: dict[str, Any]) -> list[Any]:
            assert runner is not None
            return runner(Path(rewritten), feeds)
    else:
        missing = target in runtimes.RUNNERS and target is not None
        runtime = "onnxruntime" + (f" ({target} is not installed here)" if missing else "")
        try:
            session = _ort_session(rewritten)
        except Exception as exc:
            if reference_session is not None:
                raise
            # onnxruntime loads neither model (a bfloat16 Mul after the CumProd, say):
            # both run in onnx.reference
            runtime = f"onnx.reference (onnxruntime cannot load it either: {_one_line(exc, 90)})"
            session = None

        def run_rewritten(feeds: dict[str, Any]) -> list[Any]:
            if session is None:
                return _run_reference(rewritten, feeds)
            return _session_run(session, feeds)

    old_names = [o.name for o in original_proto.graph.output]
    new_names = [o.name for o in rewritten_proto.graph.output]
    declared = {o.name: _declared_dims(o) for o in original_proto.graph.output}

    def narrowest_of(chosen: Sequence[Any]) -> int | None:
        bits = [PRECISION[p.site.dtype][0] for p in chosen if p.site.dtype in PRECISION]
        return min(bits) if bits else None

    narrowest = narrowest_of(plans)
    # each output's bound from the CumProds it is computed from, where they can be told
    # apart (a short scan's output beside a long one's, a float32 output beside a bfloat16
    # CumProd); else the whole model's
    per_output = _plans_of_outputs(original_proto, plans) if plans else {}

    def bound_of(name: str) -> tuple[float, int | None]:
        chosen = per_output.get(name)
        if not chosen:
            return bound_ulps, narrowest
        return min(bound_ulps, max(plan_bound(p, sizes) for p in chosen)), narrowest_of(chosen)

    # outputs computed from random draws: only their types and shapes can be compared
    drawn = random_outputs(original_proto)
    if drawn:
        names = list(drawn)
        logger.warning(
            "--verify cannot compare the values of %s %s with the original's: they depend on "
            "%s, whose random values differ from run to run (and, seeded, between "
            "runtimes); only their types and shapes are compared",
            "output" if len(names) == 1 else "outputs",
            _listed([f"'{name}'" for name in names]),
            _listed(list(dict.fromkeys(d for ds in drawn.values() for d in ds))),
        )
    worst: dict[str, OutputCheck] = {}
    kinds = ["random"] * runs + ["special", "finite special", "extreme", "overflow", "underflow"]
    # odd integers: in every other feed an integer product is 0 from about 64 positions on
    # (a factor 0, or 64 factors of 2), so a wrong rewrite there went unseen (found by a
    # review from outside)
    kinds.append("odd")
    # First the richer feeds (each symbolic dim its own size, Loop trip counts 3); if the
    # original fails on them, the plain ones (every other dim 3, safe counts). A run-time
    # CumProd axis is fed 0 and -1 by turns.
    sizes, richer = symbolic_sizes(original_proto, dims), True
    for index, kind in enumerate(kinds):
        last = index % 2 == 1
        feeds = random_inputs(original_proto, rng, sizes, kind, richer, last_axis=last)
        try:
            expected = _run_original(reference_session, original, feeds)
        except Exception as exc:
            if kind == "random" and richer:
                sizes, richer = dict(dims or {}), False
                feeds = random_inputs(original_proto, rng, sizes, kind, richer, last_axis=last)
                try:
                    expected = _run_original(reference_session, original, feeds)
                except Exception as plain_exc:
                    raise RuntimeError(
                        f"the original model fails on random inputs: {_one_line(plain_exc)}"
                    ) from plain_exc
            elif kind == "random":
                raise RuntimeError(
                    f"the original model fails on random inputs: {_one_line(exc)}"
                ) from exc
            else:
                continue
        try:
            actual = run_rewritten(feeds)
        except Exception as exc:  # noqa: BLE001 - reported as a mismatch
            problems.append(
                _failed(
                    "(run)",
                    "",
                    f"the rewritten model fails on {kind} inputs where the original runs: "
                    f"{_one_line(exc)}",
                )
            )
            continue
        got = dict(zip(new_names, actual))
        for name, exp in zip(old_names, expected):
            if name not in got:
                continue
            if name in drawn:
                _compare_drawn(
                    worst,
                    name,
                    got[name],
                    exp,
                    declared=declared[name],
                    kind=kind,
                    draws=drawn[name],
                )
                continue
            bound_here, narrowest_here = bound_of(name)
            result, dtype_name = _compare_value(
                got[name], exp, bound_here, declared[name], narrowest_here
            )
            detail = f"{kind} inputs: {result.detail}" if result.detail else ""
            previous = worst.get(name)
            if previous is None or (
                previous.ok and (not result.ok or result.worst > previous.worst)
            ):
                bound = 0.0
                if dtype_name.startswith(("float", "double", "bfloat")):
                    bound = bound_here
                    with contextlib.suppress(KeyError):
                        dtype = ir.DataType[dtype_name.upper()]
                        bound = _scaled(bound_here, dtype, narrowest_here)
                worst[name] = OutputCheck(name, dtype_name, result.ok, result.worst, bound, detail)
    outputs = tuple(problems) + tuple(worst[n] for n in old_names if n in worst)
    checked = tuple(check_sites(sites, dims=dims, seed=seed, max_length=max_length))
    ok = all(o.ok for o in outputs) and all(s.ok for s in checked)
    shown = {name: sizes.get(name, DEFAULT_DIM) for name in symbolic_sizes(original_proto)}
    known = set(_input_dim_names(original_proto))
    known.update(d for p in plans for d in p.site.spec.dims or () if isinstance(d, str))
    unmatched = tuple(name for name in dims or {} if name not in known)
    return VerifyResult(ok, runs, reference, outputs, checked, runtime, shown, richer, unmatched)


def _compare_drawn(
    worst: dict[str, OutputCheck],
    name: str,
    actual: Any,
    expected: Any,
    *,
    declared: list[int | None] | None,
    kind: str,
    draws: Sequence[str],
) -> None:
    """Record in ``worst`` how an output computed from random ``draws`` compared: a
    different element type or shape is a mismatch, else the check is skipped, saying why."""
    result, dtype_name = _compare_value(actual, expected, 0.0, declared, values=False)
    previous = worst.get(name)
    if not result.ok:
        if previous is None or previous.ok:
            detail = f"{kind} inputs: {result.detail}"
            worst[name] = OutputCheck(name, dtype_name, False, result.worst, 0.0, detail)
    elif previous is None:
        why = (
            f"values not compared: they depend on {_listed(list(draws))}, random from run to "
            "run (and, seeded, between runtimes); type and shape compared"
        )
        worst[name] = OutputCheck(name, dtype_name, True, 0.0, 0.0, why, skipped=True)
