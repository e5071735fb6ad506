"""Benchmark: each lowering against onnxruntime's native CumProd, in one process.

For every grid cell (element type, total size, scan length n, axis position, attributes) it
builds one opset-26 model with a single CumProd, runs it natively, runs the same model
rewritten by each lowering (and by ``auto``), and numpy.cumprod, on the same data. Sessions use
a fixed intra-op thread count; after a warm-up the runs are interleaved (one run of each
contender per round) and the median of the rounds is taken. The figures that count are the
ratios to native measured in the same run; absolute times on shared machines are noisy.

Also: float32 accuracy (max / median ulp against a float64 reference) on data whose products
stay in range and on data with zeros; session-creation time and node count per lowering; the
pass's own time per CumProd node on a model with 1,000 of them.

Usage: python scripts/bench/bench.py [--quick] [--threads 2] [--rounds 21] [--out bench]
Writes bench.md and bench.json (``--out`` prefix).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import platform
import random
import statistics
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import onnx
import onnx.compose
import onnx.numpy_helper
import onnx_ir as ir
import onnxruntime as ort
from onnx import TensorProto, helper

import rewriter
from rewriter.lowerings import LOWERINGS, doubling, loop, near_one
from rewriter.lowerings import tree as carry
from rewriter.targets import TARGETS
from rewriter.verify import ulp_error

DTYPES = {
    "float32": TensorProto.FLOAT,
    "int64": TensorProto.INT64,
    "int32": TensorProto.INT32,
    "float64": TensorProto.DOUBLE,
    "float16": TensorProto.FLOAT16,
}


def model_for(
    elem_type: int,
    shape: tuple[int, ...],
    axis: int,
    exclusive: int,
    reverse: int,
    *,
    symbolic: bool = False,
) -> onnx.ModelProto:
    """One CumProd at opset 26; ``symbolic``: every dim declared symbolic (d0, d1, ...)."""
    node = helper.make_node(
        "CumProd", ["x", "axis"], ["y"], name="cumprod", exclusive=exclusive, reverse=reverse
    )
    dims: list[int | str] = [f"d{k}" for k in range(len(shape))] if symbolic else list(shape)
    graph = helper.make_graph(
        [node],
        "bench",
        [helper.make_tensor_value_info("x", elem_type, dims)],
        [helper.make_tensor_value_info("y", elem_type, dims)],
        [helper.make_tensor("axis", TensorProto.INT64, [], [axis])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26)])


# The benchmark grid: the defaults of --dtypes, --totals (units of 2^20 elements), --lengths
# and --positions.
GRID_DTYPES = "float32,float64,int32,int64"
GRID_TOTALS = "1,4"
GRID_LENGTHS = "8,64,512,4096,65536"
GRID_POSITIONS = "last,first,middle"


VIEWS: dict[tuple[int, int, str], tuple[int, int, int]] = {}  # --views: cells off the grid


def view_cell(view: tuple[int, int, int]) -> tuple[int, int, str]:
    """The cell (total, n, position) of an (o, n, i) view, registered in :data:`VIEWS` so
    that :func:`shape_for` gives the view's own shape: the first axis where o = 1, the last
    where i = 1, else the middle one."""
    o, n, i = view
    position = "first" if o == 1 else "last" if i == 1 else "middle"
    cell = (o * n * i, n, position)
    VIEWS[cell] = view
    return cell


def shape_for(total: int, n: int, position: str) -> tuple[tuple[int, ...], int]:
    """The grid's shape and axis for a cell; a cell of ``--views`` (:data:`VIEWS`) has its
    own."""
    if (total, n, position) in VIEWS:
        o, _, i = VIEWS[(total, n, position)]
        shape = tuple(d for d in (o, n, i) if d != 1) if o == 1 or i == 1 else (o, n, i)
        return shape, 0 if o == 1 else 1
    return grid_shape(total, n, position)


def grid_shape(total: int, n: int, position: str) -> tuple[tuple[int, ...], int]:
    """The grid's shape and axis for a cell: (n, rest), (rest, n), or (a, n, rest / a), a
    being a power of two near the square root of rest."""
    rest = max(total // n, 1)
    if position == "last":
        return (rest, n), 1
    if position == "first":
        return (n, rest), 0
    a = 1 << (int(np.log2(rest)) // 2)
    return (a, n, rest // a), 1


_POOL: list[int] = []


def session(model: onnx.ModelProto, threads: int) -> tuple[ort.InferenceSession, float]:
    """A session on one intra-op pool shared by all sessions of the process (``threads``
    threads): with a pool per session, the idle pools' spinning threads steal the cores
    from the one running and distort interleaved timings 2-10x."""
    if not _POOL:
        from onnxruntime.capi import _pybind_state

        _pybind_state.set_global_thread_pool_sizes(threads, 1)
        _POOL.append(threads)
    options = ort.SessionOptions()
    options.use_per_session_threads = False
    options.log_severity_level = 3
    start = time.perf_counter()
    sess = ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    return sess, time.perf_counter() - start


def data_for(
    elem_type: int, shape: tuple[int, ...], rng: np.random.Generator, zeros: float = 0.0
) -> np.ndarray:
    if elem_type in (TensorProto.INT64, TensorProto.INT32):
        return rng.integers(-3, 4, shape).astype(helper.tensor_dtype_to_np_dtype(elem_type))
    # |x| in [2^-s, 2^s], s shrinking with the scanned length (the largest dim here) so that the
    # running products stay normal: subnormal arithmetic is 10-100x slower on x86 and would
    # time the data, not the lowering.
    spread = min(1.0, 24.0 / float(np.sqrt(max(shape))))
    x = np.exp2(rng.uniform(-spread, spread, shape)) * rng.choice([-1.0, 1.0], shape)
    if zeros:
        x[rng.random(shape) < zeros] = 0.0
    return x.astype(helper.tensor_dtype_to_np_dtype(elem_type))


# The clock ``interleaved`` reads: wall time, or the calling thread's CPU time (--clock).
CLOCK: dict[str, Callable[[], float]] = {"now": time.perf_counter}


def interleaved(
    contenders: dict[str, Callable[[], object]], rounds: int, max_seconds: float = 60.0
) -> dict[str, float]:
    """Median seconds per run of each contender. Each round runs the contenders in a shuffled
    order, each a few times back to back (keeping the median of the later runs: a warm,
    steady state); rounds stop at ``rounds`` or after ``max_seconds`` (at least 7 rounds)."""
    repeat = {}
    for name, fn in contenders.items():
        start = time.perf_counter()
        for _ in range(2):
            fn()
        per_run = (time.perf_counter() - start) / 2
        repeat[name] = 6 if per_run < 0.01 else (4 if per_run < 0.05 else 2)
    times: dict[str, list[float]] = {name: [] for name in contenders}
    order = list(contenders)
    rng = random.Random(0)
    began = time.perf_counter()
    for done in range(rounds):
        rng.shuffle(order)
        for name in order:
            runs = []
            for _ in range(repeat[name]):
                start = CLOCK["now"]()
                contenders[name]()
                runs.append(CLOCK["now"]() - start)
            times[name].append(statistics.median(runs[repeat[name] // 2 :]))
        if done >= 6 and time.perf_counter() - began > max_seconds:
            break
    return {name: statistics.median(t) for name, t in times.items()}


def run_graphs(
    models: dict[str, onnx.ModelProto],
    check: dict[str, np.ndarray],
    feed: dict[str, np.ndarray],
    rounds: int,
) -> tuple[dict[str, np.ndarray], dict[str, float]]:
    """A held-out round's cell: each model's first output on ``check`` (to compare before
    timing), and its median seconds per run on ``feed`` (:func:`interleaved`, one thread)."""
    runs: dict[str, Callable[[], object]] = {}
    outputs = {}
    for label, model in models.items():
        sess, _ = session(model, 1)
        outputs[label] = sess.run(None, check)[0]
        runs[label] = lambda s=sess: s.run(None, feed)
    return outputs, interleaved(runs, rounds)


def rule_verdict(
    ratios: list[float], rule: tuple[float, float, int], label: str
) -> tuple[str, bool]:
    """A held-out round's verdict: the median of ``ratios`` (new / old time per cell) at most
    ``rule[0]`` with at most ``rule[2]`` cells above ``rule[1]``; one line, and whether it
    holds."""
    most, above, allowed = rule
    median = statistics.median(ratios)
    high = sum(r > above for r in ratios)
    holds = median <= most and high <= allowed
    line = (
        f"{label}: median {median:.3f}, {min(ratios):.2f}-{max(ratios):.2f}, {high} of "
        f"{len(ratios)} above {above}: the rule (median <= {most}, at most {allowed} above "
        f"{above}) " + ("holds" if holds else "does not hold")
    )
    return line, holds


def count_nodes(model: onnx.ModelProto) -> int:
    def walk(nodes: list[onnx.NodeProto]) -> int:
        total = 0
        for node in nodes:
            total += 1
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.GRAPH:
                    total += walk(list(attr.g.node))
        return total

    return walk(list(model.graph.node))


def strategies_for(elem_type: int, chosen: list[str] | None = None) -> list[str]:
    names = chosen or ["auto", *LOWERINGS]
    return [s for s in names if not (s.startswith("logsum") and elem_type in _INTS)]


_INTS = (TensorProto.INT64, TensorProto.INT32)


@contextlib.contextmanager
def float32_carries() -> Iterator[None]:
    """The trees as before ``rewriter/lowerings/wide.py`` and ``near_one.py``: block totals
    and carries in float32 (:func:`offset_totals` without the offset totals: the plain
    ones), and ``doubling`` blocked only from ``doubling.BLOCKED_FROM``."""
    saved_wanted, saved_above = near_one.wanted, doubling.ACCURATE_BLOCKED_ABOVE
    near_one.wanted = lambda v: False  # type: ignore[assignment]
    doubling.ACCURATE_BLOCKED_ABOVE = 1 << 62
    try:
        with offset_totals():
            yield
    finally:
        near_one.wanted = saved_wanted  # type: ignore[assignment]
        doubling.ACCURATE_BLOCKED_ABOVE = saved_above


@contextlib.contextmanager
def offset_totals() -> Iterator[None]:
    """The float32 trees with float32 carries and ``near_one.py``'s offset totals, as on the
    targets that compute no float64 (``carry_dtype`` None where the trees read it)."""
    saved = [(m, m.carry_dtype) for m in (carry,)]
    for module, _ in saved:
        module.carry_dtype = lambda v: None  # type: ignore[assignment]
    try:
        yield
    finally:
        for module, fn in saved:
            module.carry_dtype = fn  # type: ignore[assignment]


def lowered(model: onnx.ModelProto, strategy: str) -> onnx.ModelProto | None:
    """The model rewritten by ``strategy``, or None where it refuses (chain past its cap)."""
    try:
        return rewriter.decompose_cumprod(model, strategy=strategy)  # type: ignore[return-value]
    except rewriter.StrategyError:
        return None


def _view(shape: tuple[int, ...], axis: int) -> tuple[int, int, int]:
    return (
        int(np.prod(shape[:axis], dtype=np.int64)),
        shape[axis],
        int(np.prod(shape[axis + 1 :], dtype=np.int64)),
    )


def bench_cell(
    cell: tuple[str, int, int, str, int, int],
    *,
    threads: int,
    rounds: int,
    rng: np.random.Generator,
    symbolic: bool = False,
    chosen: list[str] | None = None,
    max_seconds: float = 60.0,
) -> dict[str, object]:
    """One grid cell: (dtype name, total elements, scan length, axis position, exclusive,
    reverse)."""
    dtype_name, total, n, position, exclusive, reverse = cell
    elem_type = DTYPES[dtype_name]
    shape, axis = shape_for(total, n, position)
    model = model_for(elem_type, shape, axis, exclusive, reverse, symbolic=symbolic)
    x = data_for(elem_type, shape, rng)
    native, native_create = session(model, threads)
    contenders: dict[str, Callable[[], object]] = {"native": lambda: native.run(None, {"x": x})}
    info: dict[str, dict[str, object]] = {"native": {"create_ms": native_create * 1e3, "nodes": 1}}
    for strategy in strategies_for(elem_type, chosen):
        start = time.perf_counter()
        rewritten = lowered(model, strategy)
        pass_ms = (time.perf_counter() - start) * 1e3
        if rewritten is None or (strategy == "loop" and n >= 4096):
            continue  # refused; loop at 4096+ takes seconds per cell (88x at 65536, field notes)
        sess, created = session(rewritten, threads)
        contenders[strategy] = lambda s=sess: s.run(None, {"x": x})
        info[strategy] = {
            "create_ms": created * 1e3,
            "pass_ms": pass_ms,
            "nodes": count_nodes(rewritten),
            "picks": strategy,
        }
        if strategy == "auto":
            info[strategy]["picks"] = "dynamic" if symbolic else _auto_pick(model)
    # One pass over memory: a Mul by 1 (reads x, writes a tensor of its size). Any lowering
    # here needs a few of these (separate, multiply, assemble): the measured unit of its floor.
    one_pass, _ = session(_one_pass_model(elem_type, shape), threads)
    contenders["pass"] = lambda: one_pass.run(None, {"x": x})
    np_x = x

    def run_numpy() -> object:
        xx = np.flip(np_x, axis) if reverse else np_x
        y = np.cumprod(xx, axis=axis, dtype=xx.dtype)
        return y

    contenders["numpy"] = run_numpy
    medians = interleaved(contenders, rounds, max_seconds)
    base = medians["native"]
    return {
        "dtype": onnx.helper.tensor_dtype_to_np_dtype(elem_type).name,
        "total": total,
        "n": n,
        "position": position,
        "shape": list(shape),
        "exclusive": exclusive,
        "reverse": reverse,
        "symbolic": symbolic,
        "native_ms": base * 1e3,
        "ratio": {k: v / base for k, v in medians.items() if k != "native"},
        "info": info,
    }


def _one_pass_model(elem_type: int, shape: tuple[int, ...]) -> onnx.ModelProto:
    one = helper.make_tensor("one", elem_type, [], [1])
    graph = helper.make_graph(
        [helper.make_node("Mul", ["x", "one"], ["y"])],
        "one_pass",
        [helper.make_tensor_value_info("x", elem_type, list(shape))],
        [helper.make_tensor_value_info("y", elem_type, list(shape))],
        [one],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])


def _graph_model(
    nodes: list[onnx.NodeProto],
    elem_type: int,
    shape: tuple[int, ...],
    initializers: list[onnx.TensorProto],
    opset: int = 21,
) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes,
        "floor",
        [helper.make_tensor_value_info("x", elem_type, list(shape))],
        [helper.make_tensor_value_info("y", elem_type, None)],
        initializers,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _split_concat(
    elem_type: int, shape: tuple[int, ...], view: list[int], parts: int
) -> onnx.ModelProto:
    """x viewed as ``view``, cut into ``parts`` slices along axis 1 and put back."""
    names = [f"s{k}" for k in range(parts)]
    return _graph_model(
        [
            helper.make_node("Reshape", ["x", "view"], ["v"]),
            helper.make_node("Split", ["v"], names, axis=1, num_outputs=parts),
            helper.make_node("Concat", names, ["y"], axis=1),
        ],
        elem_type,
        shape,
        [helper.make_tensor("view", TensorProto.INT64, [len(view)], view)],
    )


def floor_models(elem_type: int, shape: tuple[int, ...], axis: int) -> dict[str, onnx.ModelProto]:
    """The data movement and launches every exact lowering here needs at least, as models:

    - ``mul``: one elementwise pass (onnxruntime drops a Mul by 1, so this is the copy into
      the output: one read and one write of the tensor);
    - ``mul x*x``: one multiplying pass (x times itself: what each level's products cost);
    - ``split+concat``: the tensor cut into 8 slices along the axis and put back (the
      unrolled lowerings' data movement at their first level);
    - ``transpose``: the axis moved to the front (the Scan-based lowerings do it twice; a
      pair would be cancelled by onnxruntime's transpose optimizer);
    - ``transpose back`` (o > 1): the (n, o, i) tensor that a Scan leaves moved back to
      (o, n, i): the other Transpose, timed apart (onnxruntime's two directions differ: int64
      (524288, 8) took about 5 ms to the front and 37 ms back);
    - ``64 launches``: 64 chained Muls on a 16-element tensor (onnxruntime's cost per node);
    - ``scan 512 steps``: a Scan of 512 steps over 16-element slabs (its cost per step);
    - ``fine split+concat``: the (o * n / r, r, i) view cut into its r = min(n, 16) slices
      along axis 1 and put back: the data movement of one level of any unrolled lowering at
      the cell's own run length i (neighbours along the axis are i elements apart, so every
      scheme that separates them moves N / i runs of i elements, in and out); on narrow runs
      (``carry.narrow``: the last axis, i = 1, or runs of at most 24 bytes in 2^21 elements or
      more) r = min(n, 4), the cheapest r measured there;
    - ``scan n steps``: a Scan over the cell's own n positions, each step one Mul of an
      (o * i) slab and the copy out (the sequential route without its Transposes);
    - ``n-way split+concat`` (r < n <= :data:`NWAY_UP_TO`): the (o, n, i) view cut into its
      n slices and put back: the data movement of the one-level unrolled route (``chain``);
    - ``chain whole`` (n <= :data:`NWAY_UP_TO`) and ``blocked whole`` (r < n): one level
      of the route as one graph without its serial dependence (:func:`_level_model`):
      the Split, each slice multiplied by its neighbour (two tensors read, as the route's
      Muls read the running product and the slice), for ``blocked whole`` each product
      multiplied by a carry of its shape, and the Concat (and the Reshape into the
      output), run together, so that their memory traffic meets in the caches as in the
      route itself;
    - ``blocked level 2`` (r < n): the scan of the m = ceil(n / r) block totals that the
      blocked route needs after its first level, at least: the (o, m, i) totals cut into
      min(m, r) slices, each but the first and the last multiplied by its neighbour (the scan
      is exclusive), put back (:func:`_level_model` without the carries; its input has
      1/r of x's elements: :func:`floor_feeds`);
    - ``blocked levels 3+`` (m > r): the same for every further level the totals' scan
      recurses into (:func:`upper_level_lengths`: ceil(m / r), then ceil of that / r, ...,
      down to r or fewer), all in one graph (:func:`_levels_model`), each level's input
      its own;
    - ``scan whole`` and ``scan whole (axes)`` (middle and last axes): the Scan route as one
      graph, with its Transposes or with the Scan's own axes (:func:`_scan_route_model`);
    - ``blocked whole (pieces)`` (sixteenth round; where ``cached`` cuts x): ``blocked
      whole`` on each of ``cached``'s pieces (tiles of rows, or chunks of an outermost axis:
      :func:`_piece`), one Scan step per piece (:func:`_pieces_model`);
    - float32 (twenty-fifth round): a float32 tree on onnxruntime takes its block totals from
      x in float64 and scans them in float64 (``rewriter/lowerings/wide.py``; float32 totals
      rounded factors near 1 one way, an error growing with n; exact totals need every factor
      in float64). So ``blocked level 2`` and ``blocked levels 3+`` run in float64 there;
      ``cast x`` is x cast to float64 (the least of that pass: every factor cast once); and
      ``blocked whole (wide, F)`` and ``blocked whole (pieces, wide, F)`` are ``blocked
      whole`` and ``blocked whole (pieces)`` with the totals taken in the same graph (inside
      each piece, as in ``cached``), in each form F the route may take (:func:`_wide_forms`:
      ``reduce``, a Cast of the view and a ReduceProd, for r > ``Target.reduce_totals_above``, and
      ``slices``, the level's slices cast and multiplied).
    """
    one = helper.make_tensor("one", elem_type, [], [1])
    outer, n, inner = _view(shape, axis)
    small = helper.make_tensor("small", TensorProto.INT64, [1], [16])
    zero = helper.make_tensor("zero", TensorProto.INT64, [1], [0])
    flat = helper.make_tensor("flat", TensorProto.INT64, [1], [-1])
    chained = [
        helper.make_node("Reshape", ["x", "flat"], ["xf"]),
        helper.make_node("Slice", ["xf", "zero", "small"], ["c0"]),
    ]
    chained += [helper.make_node("Mul", [f"c{k}", "c0"], [f"c{k + 1}"]) for k in range(64)]
    chained.append(helper.make_node("Identity", ["c64"], ["y"]))
    body = _step_body(elem_type, [16])
    steps = helper.make_tensor("steps", TensorProto.INT64, [1], [512 * 16])
    slabs = helper.make_tensor("slabs", TensorProto.INT64, [2], [512, 16])
    ones16 = helper.make_tensor("ones16", elem_type, [16], [1] * 16)
    models = {
        "mul": _graph_model(
            [helper.make_node("Mul", ["x", "one"], ["y"])], elem_type, shape, [one]
        ),
        "mul x*x": _graph_model([helper.make_node("Mul", ["x", "x"], ["y"])], elem_type, shape, []),
        "transpose": _swap_model(elem_type, shape, [outer, n, inner]),
        "64 launches": _graph_model(chained, elem_type, shape, [one, zero, small, flat]),
        "scan 512 steps": _graph_model(
            [
                helper.make_node("Reshape", ["x", "flat"], ["xf"]),
                helper.make_node("Slice", ["xf", "zero", "steps"], ["xs"]),
                helper.make_node("Reshape", ["xs", "slabs"], ["x2"]),
                helper.make_node(
                    "Scan", ["ones16", "x2"], ["tot", "y"], body=body, num_scan_inputs=1
                ),
            ],
            elem_type,
            shape,
            [flat, zero, steps, slabs, ones16],
        ),
    }
    compute = loop.compute_dtype(ir.DataType(elem_type))
    assert compute is not None
    r = _first_radix((outer, n, inner), compute)
    fine = [outer * n // r, r, inner]
    models["fine split+concat"] = _split_concat(elem_type, shape, fine, r)
    if r < n <= NWAY_UP_TO:
        # the one-level unrolled route (chain): every one of the n positions its own slice
        models["n-way split+concat"] = _split_concat(elem_type, shape, [outer, n, inner], n)
    slab = outer * inner
    cell_body = _step_body(elem_type, [slab])
    models["scan n steps"] = _graph_model(
        [
            helper.make_node("Reshape", ["x", "rows"], ["x2"]),
            helper.make_node(
                "Scan", ["ones", "x2"], ["tot", "y"], body=cell_body, num_scan_inputs=1
            ),
        ],
        elem_type,
        shape,
        [
            helper.make_tensor("rows", TensorProto.INT64, [2], [n, slab]),
            onnx.numpy_helper.from_array(
                np.ones(slab, helper.tensor_dtype_to_np_dtype(elem_type)), "ones"
            ),
        ],
    )
    if n % 8 == 0:
        models["split+concat"] = _split_concat(elem_type, shape, [outer, 8, n // 8, inner], 8)
    if n <= NWAY_UP_TO:
        models["chain whole"] = _level_model(elem_type, shape, [outer, n, inner], n, carries=False)
    if r < n:
        models["blocked whole"] = _level_model(elem_type, shape, fine, r, carries=True)
        # a float32 tree on onnxruntime takes its block totals from x in float64 and scans
        # them in float64 (rewriter/lowerings/wide.py): those passes are the route's too
        wide = _wide_forms(elem_type, r)
        above = TensorProto.DOUBLE if wide else elem_type
        if wide:
            models["cast x"] = _cast_model(shape)
        for form in wide:
            models[f"blocked whole (wide, {form})"] = _level_model(
                elem_type, shape, fine, r, carries=True, wide=form
            )
        m = -(-n // r)
        r2 = min(m, r)
        totals = (outer, m // r2 * r2, inner)  # the totals, cut to a multiple of r2
        models["blocked level 2"] = _level_model(
            above, totals, [outer * (m // r2), r2, inner], r2, carries=False, exclusive=True
        )
        upper = upper_level_lengths(m, r)
        if upper:
            models["blocked levels 3+"] = _levels_model(above, outer, upper, inner, r)
    if outer > 1:
        models["transpose back"] = _swap_model(elem_type, shape, [n, outer, inner])
    if axis != 0:
        models["scan whole"] = _scan_route_model(elem_type, shape, axis, scan_axes=False)
        models["scan whole (axes)"] = _scan_route_model(elem_type, shape, axis, scan_axes=True)
    return models


def _step_body(elem_type: int, slab: list[int]) -> onnx.GraphProto:
    """A Scan step of the sequential route: the state times the slice, as the next state and
    (through an Identity: the copy out) as the scan output. Without the Identity, one value
    as both outputs, onnxruntime 1.32 gave wrong results."""
    return helper.make_graph(
        [helper.make_node("Mul", ["st", "it"], ["p"]), helper.make_node("Identity", ["p"], ["q"])],
        "body",
        [
            helper.make_tensor_value_info("st", elem_type, slab),
            helper.make_tensor_value_info("it", elem_type, slab),
        ],
        [
            helper.make_tensor_value_info("p", elem_type, slab),
            helper.make_tensor_value_info("q", elem_type, slab),
        ],
    )


def _scan_route_model(
    elem_type: int, shape: tuple[int, ...], axis: int, *, scan_axes: bool
) -> onnx.ModelProto:
    """The Scan route on a middle or the last axis as one graph: x's axis moved to the front
    (Transpose), a Scan of one Mul of the (o, i) slab and its copy out per step, and the
    Transpose back into the output; ``scan_axes``: no Transposes, the Scan's own
    ``scan_input_axes`` / ``scan_output_axes`` instead (onnxruntime transposes inside). The
    route's whole graph: there is nothing to leave out (:func:`_step_body`)."""
    rank = len(shape)
    perm = [axis, *(k for k in range(rank) if k != axis)]
    slab = [d for k, d in enumerate(shape) if k != axis]
    body = _step_body(elem_type, slab)
    ones = onnx.numpy_helper.from_array(
        np.ones(slab, helper.tensor_dtype_to_np_dtype(elem_type)), "ones"
    )
    if scan_axes:
        nodes = [
            helper.make_node(
                "Scan",
                ["ones", "x"],
                ["tot", "y"],
                body=body,
                num_scan_inputs=1,
                scan_input_axes=[axis],
                scan_output_axes=[axis],
            )
        ]
    else:
        back = [perm.index(k) for k in range(rank)]
        nodes = [
            helper.make_node("Transpose", ["x"], ["front"], perm=perm),
            helper.make_node(
                "Scan", ["ones", "front"], ["tot", "ys"], body=body, num_scan_inputs=1
            ),
            helper.make_node("Transpose", ["ys"], ["y"], perm=back),
        ]
    return _graph_model(nodes, elem_type, shape, [ones])


def _swap_model(elem_type: int, shape: tuple[int, ...], view: list[int]) -> onnx.ModelProto:
    """x viewed as ``view`` (3-D) with its first two axes swapped."""
    return _graph_model(
        [
            helper.make_node("Reshape", ["x", "view"], ["v"]),
            helper.make_node("Transpose", ["v"], ["y"], perm=[1, 0, 2]),
        ],
        elem_type,
        shape,
        [helper.make_tensor("view", TensorProto.INT64, [3], view)],
    )


def upper_level_lengths(m: int, r: int) -> list[int]:
    """The lengths scanned after the second level when the m block totals are themselves
    scanned in blocks of r (the second level has m > r): ceil(m / r), ceil of that / r, ...,
    the last one r or fewer (and more than 1: a single total's exclusive scan is a one)."""
    lengths: list[int] = []
    while m > r:
        m = -(-m // r)
        if m > 1:
            lengths.append(m)
    return lengths


def _levels_model(
    elem_type: int, outer: int, lengths: list[int], inner: int, r: int
) -> onnx.ModelProto:
    """The levels of ``lengths`` as one graph: per level an input (o, L, i) (cut to a multiple
    of min(L, r)), the :func:`_level_model` without carries of its exclusive scan, and an
    output; the levels do not depend on each other (so at least as cheap as the route's)."""
    inputs, outputs, nodes, initializers = [], [], [], []
    for level, length in enumerate(lengths, start=3):
        parts = min(length, r)
        cut = length // parts * parts
        model = _level_model(
            elem_type,
            (outer, cut, inner),
            [outer * (cut // parts), parts, inner],
            parts,
            carries=False,
            exclusive=True,
        )
        graph = onnx.compose.add_prefix_graph(model.graph, f"l{level}_")
        inputs += graph.input
        outputs += graph.output
        nodes += graph.node
        initializers += graph.initializer
    graph = helper.make_graph(nodes, "floor", inputs, outputs, initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])


def floor_feeds(model: onnx.ModelProto, x: np.ndarray) -> dict[str, np.ndarray]:
    """The feeds of a floor model: x, or for each input smaller than x (``blocked level
    2``, ``blocked levels 3+``, the carry of ``blocked whole``) x's first elements in the
    input's shape and element type (float64 for a float32 tree's totals), a contiguous array
    of its own."""
    feeds = {}
    for value in model.graph.input:
        dims = [d.dim_value for d in value.type.tensor_type.shape.dim]
        if list(x.shape) == dims:
            feeds[value.name] = x
            continue
        size = int(np.prod(dims, dtype=np.int64))
        dtype = helper.tensor_dtype_to_np_dtype(value.type.tensor_type.elem_type)
        feeds[value.name] = np.ascontiguousarray(x.reshape(-1)[:size].reshape(dims), dtype)
    return feeds


def _level_model(
    elem_type: int,
    shape: tuple[int, ...],
    view: list[int],
    parts: int,
    *,
    carries: bool,
    exclusive: bool = False,
    halves: bool = False,
    wide: str | None = None,
) -> onnx.ModelProto:
    """One level of an unrolled route as one graph, without its serial dependence: x viewed
    as ``view`` and cut into ``parts`` slices along axis 1, each slice but the first
    multiplied by the slice before it (the route multiplies it by the running product: two
    tensors read, one written), the products put back, then (``carries``) each product
    multiplied by a carry (a graph input ``carry`` of one slice's shape, as the route
    multiplies each of its slices by the block carries) before they are put back, and the
    Reshape to x's shape into the output; with ``wide`` too, the seeded form the float32
    trees take since the twenty-eighth round: the carry multiplies the first slice only (the
    route starts each block's chain from it), r Muls instead of 2r - 1. The route's reads,
    writes and launches, run together, so that their memory traffic meets in the caches as
    the route's does.
    ``exclusive``: the last slice is not multiplied (an exclusive scan's n outputs are the
    ones and the first n - 1 products). ``halves``: the slices cut in two steps, the view's
    two halves first, as ``carry``'s ``halves`` (``cached``'s 4-byte tiles of 2 MiB or more
    with runs of 32-64 bytes, nineteenth round). ``wide``: also the block totals in float64,
    as a second output ``t64``, in the same graph, in one of a float32 tree's two forms on
    onnxruntime (:func:`_wide_totals_nodes`; ``rewriter.lowerings.wide.block_totals``).

    Until the fourteenth round each slice was multiplied by itself (one tensor read): that
    left out a read per Mul, 3-15 % of a middle-axis ``chain`` (docs/performance.md)."""
    names = [f"s{k}" for k in range(parts)]
    nodes = [helper.make_node("Reshape", ["x", "view"], ["v"])]
    if halves:
        half = parts // 2
        nodes.append(helper.make_node("Split", ["v"], ["h0", "h1"], axis=1, num_outputs=2))
        nodes += [
            helper.make_node(
                "Split", [h], names[k * half : (k + 1) * half], axis=1, num_outputs=half
            )
            for k, h in enumerate(("h0", "h1"))
        ]
    else:
        nodes.append(helper.make_node("Split", ["v"], names, axis=1, num_outputs=parts))
    if wide:  # before the products, as the route's (the graph's last nodes stay its own)
        nodes += _wide_totals_nodes(wide, "v", names, "t64")
    multiplied = range(1, parts - 1 if exclusive else parts)
    nodes += [helper.make_node("Mul", [names[k - 1], names[k]], [f"p{k}"]) for k in multiplied]
    products = [f"p{k}" if k in multiplied else names[k] for k in range(parts)]
    if carries:
        if wide and exclusive:  # seeded (twenty-eighth round): the carry, then it times s0
            carried = ["carry", "q1", *products[1 : parts - 1]]
            nodes.append(helper.make_node("Mul", [names[0], "carry"], ["q1"]))
        elif wide:  # seeded: the carry times the first slice only
            carried = ["q0", *products[1:]]
            nodes.append(helper.make_node("Mul", [names[0], "carry"], ["q0"]))
        else:
            carried = [f"q{k}" for k in range(parts)]
            nodes += [helper.make_node("Mul", [p, "carry"], [q]) for p, q in zip(products, carried)]
        nodes += [
            helper.make_node("Concat", carried, ["c"], axis=1),
            helper.make_node("Reshape", ["c", "shape"], ["y"]),
        ]
    else:
        nodes.append(helper.make_node("Concat", products, ["y"], axis=1))
    model = _graph_model(
        nodes,
        elem_type,
        shape,
        [
            helper.make_tensor("view", TensorProto.INT64, [len(view)], view),
            helper.make_tensor("shape", TensorProto.INT64, [len(shape)], list(shape)),
        ],
    )
    if carries:
        slab = [view[0], 1, *view[2:]]
        model.graph.input.append(helper.make_tensor_value_info("carry", elem_type, slab))
    if wide:
        model.graph.output.append(helper.make_tensor_value_info("t64", TensorProto.DOUBLE, None))
    if wide == "reduce":
        model.graph.initializer.append(helper.make_tensor("axis1", TensorProto.INT64, [1], [1]))
    return model


def _wide_forms(elem_type: int, r: int) -> list[str]:
    """The forms in which a float32 tree on onnxruntime may take its block totals of r
    positions in float64 (:func:`_wide_totals_nodes`): ``slices`` always (the route's form
    for r <= ``Target.reduce_totals_above``), ``reduce`` past that (the route's form there); none
    for other types (their trees compute in their own type)."""
    if elem_type != TensorProto.FLOAT:
        return []
    above = TARGETS["onnxruntime"].reduce_totals_above
    return ["reduce", "slices"] if above is not None and r > above else ["slices"]


def _wide_totals_nodes(form: str, view: str, slices: list[str], out: str) -> list[onnx.NodeProto]:
    """The block totals of the (o * m, r, i) ``view`` in float64 (``out``, (o * m, 1, i)),
    in a float32 tree's ``form`` (``wide.block_totals``): ``reduce``, the view cast to
    float64 and a ReduceProd along axis 1 (needs an initializer ``axis1``, [1]); ``slices``,
    the view's r ``slices`` each cast and multiplied in turn."""
    if form == "reduce":
        return [
            helper.make_node("Cast", [view], [f"{out}_cast"], to=TensorProto.DOUBLE),
            helper.make_node("ReduceProd", [f"{out}_cast", "axis1"], [out], keepdims=1),
        ]
    casts = [f"{out}_c{k}" for k in range(len(slices))]
    nodes = [
        helper.make_node("Cast", [piece], [cast], to=TensorProto.DOUBLE)
        for piece, cast in zip(slices, casts, strict=True)
    ]
    running = casts[0]
    for k, cast in enumerate(casts[1:], start=1):
        product = out if k == len(casts) - 1 else f"{out}_p{k}"
        nodes.append(helper.make_node("Mul", [running, cast], [product]))
        running = product
    return nodes


def _cast_model(shape: tuple[int, ...]) -> onnx.ModelProto:
    """float32 x cast to float64: the pass every form of a float32 tree's float64 block
    totals makes at least (each factor cast once)."""
    model = _graph_model(
        [helper.make_node("Cast", ["x"], ["y"], to=TensorProto.DOUBLE)],
        TensorProto.FLOAT,
        shape,
        [],
    )
    model.graph.output[0].type.tensor_type.elem_type = TensorProto.DOUBLE
    return model


def _first_radix(dims: tuple[int, int, int], compute: ir.DataType) -> int:
    """r of ``carry``'s first level on the (o, n, i) view ``dims`` (n itself where n <= r)."""
    target = TARGETS["onnxruntime"]
    return min(dims[1], target.carry_radix[carry.narrow(dims, compute, target)])


def _pieces_model(
    elem_type: int, shape: tuple[int, ...], piece: onnx.ModelProto, pieces: int
) -> onnx.ModelProto:
    """``piece`` (a floor model of one piece of x) run on each of x's ``pieces`` pieces along
    its first axis, one Scan step per piece, as ``cached`` runs ``carry``: its graph inputs
    but x (the carries) read from the outer graph, the pieces' results put back in x's
    shape. Where the piece ends in a Reshape of its Concat, the body's output is the Concat
    itself, as in ``cached`` since the nineteenth round (onnxruntime copies a Reshape's
    result into the Scan's output; a Concat writes there in place). A piece's float64 block
    totals (``t64``: :func:`_level_model`'s ``wide``) leave as a second scan output."""
    body = onnx.GraphProto()
    body.CopyFrom(piece.graph)
    body.name = "piece"
    (x,) = [value for value in body.input if value.name == "x"]
    others = [value for value in body.input if value.name != "x"]
    del body.input[:]
    body.input.append(x)
    dims = out_dims = [d.dim_value for d in x.type.tensor_type.shape.dim]
    last = body.node[-1]
    if last.op_type == "Reshape" and body.node[-2].op_type == "Concat":
        (view,) = [t for t in piece.graph.initializer if t.name == "view"]
        body.node[-2].output[0] = last.output[0]  # the Concat of the view's slices
        body.node.remove(last)
        out_dims = [int(d) for d in onnx.numpy_helper.to_array(view)]
    kept = [value for value in body.output if value.name != "y"]  # t64 (``wide``)
    extra = [value.name for value in kept]
    del body.output[:]
    body.output.append(helper.make_tensor_value_info("y", elem_type, out_dims))
    body.output.extend(kept)
    model = _graph_model(
        [
            helper.make_node("Reshape", ["x", "pieces"], ["xp"]),
            helper.make_node("Scan", ["xp"], ["yp", *extra], body=body, num_scan_inputs=1),
            helper.make_node("Reshape", ["yp", "whole"], ["y"]),
        ],
        elem_type,
        shape,
        [
            helper.make_tensor("pieces", TensorProto.INT64, [len(dims) + 1], [pieces, *dims]),
            helper.make_tensor("whole", TensorProto.INT64, [len(shape)], list(shape)),
        ],
    )
    model.graph.input.extend(others)
    model.graph.output.extend(
        helper.make_tensor_value_info(name, TensorProto.DOUBLE, None) for name in extra
    )
    return model


NWAY_UP_TO = 4096  # the n-way split+concat model is built up to this n (session time)


def route_floors(row: dict[str, object], position: str) -> dict[str, float]:
    """Each route's least cost in µs, from the floor models timed in the cell's rounds:

    - ``chain`` (one level, any n): the n slices out and back (``n-way split+concat``; the
      fine one where n <= r), one multiplying pass and n - 1 node launches (``64 launches``
      / 64 each); past :data:`NWAY_UP_TO` the multiplying pass and the launches only;
    - ``blocked`` (two levels or more): one level's data movement (``fine split+concat``),
      two multiplying passes (in-block products, then the carries) and one copy (``mul``:
      the interleaved blocks leave through a Reshape, which onnxruntime copies into a graph
      output);
    - ``scan``: n Scan steps, plus the Transposes there and back that a middle or the last
      axis needs (``transpose`` and ``transpose back``; runs without the latter: twice
      ``transpose``).

    ``chain`` and ``blocked`` take the larger of that sum and the route's level timed as one
    graph (``chain whole``, ``blocked whole``), when the cell has it; ``blocked`` then adds
    the scan of its block totals (``blocked level 2`` and ``blocked levels 3+``), when the
    cell has them. ``pieces`` (the blocked route in ``cached``'s pieces, where it cuts x):
    ``blocked whole (pieces)`` and the same scan of the block totals (timed on the whole
    tensor's totals, not in pieces). ``scan`` takes the larger of its parts' sum and the
    cheaper of its whole graphs (``scan whole``, ``scan whole (axes)``), when the cell has
    them (middle and last axes).

    A float32 cell timed with the float64 totals (``cast x``, twenty-fifth round): the trees
    are those with them, as ``auto`` builds them on onnxruntime: ``blocked`` adds ``cast x``
    to its parts' sum and takes the cheaper form of ``blocked whole (wide, F)`` as its whole
    level, ``pieces`` the cheaper of ``blocked whole (pieces, wide, F)``. ``chain`` and
    ``scan`` multiply each output's factors in order (the sequential kernel's error):
    nothing to add.
    """
    us: dict[str, float] = row["us"]  # type: ignore[assignment]
    n = int(row["n"])  # type: ignore[call-overload]
    totals = us.get("blocked level 2", 0.0) + us.get("blocked levels 3+", 0.0)
    launches = (n - 1) * us["64 launches"] / 64
    move = us.get("n-way split+concat", us["fine split+concat"] if n <= 16 else 0.0)
    scan = us["scan n steps"]
    if position != "first":
        scan += us["transpose"] + us.get("transpose back", us["transpose"])
    wholes = [us[k] for k in ("scan whole", "scan whole (axes)") if k in us]
    wide = "cast x" in us
    levels = [k for k in us if k.startswith("blocked whole (wide")] if wide else ["blocked whole"]
    pieces = [
        us[k]
        for k in us
        if k.startswith("blocked whole (pieces, wide" if wide else "blocked whole (pieces)")
    ]
    return {
        "chain": max(move + us["mul x*x"] + launches, us.get("chain whole", 0.0)),
        "blocked": max(
            us["fine split+concat"] + 2 * us["mul x*x"] + us["mul"] + us.get("cast x", 0.0),
            min((us[k] for k in levels if k in us), default=0.0),
        )
        + totals,
        "scan": max(scan, min(wholes)) if wholes else scan,
        **({"pieces": min(pieces) + totals} if pieces else {}),
    }


def floor_of(row: dict[str, object], position: str) -> tuple[float, str]:
    """The cheapest route's least cost in µs (:func:`route_floors`), and that route."""
    routes = route_floors(row, position)
    route = min(routes, key=routes.__getitem__)
    return routes[route], route


def floors(
    cells: list[tuple[str, int, int, str]],
    *,
    threads: int,
    rounds: int,
    max_seconds: float,
    strategies: list[str] | None = None,
) -> list[dict[str, object]]:
    """Time of each floor model (:func:`floor_models`) and of the lowerings in
    ``strategies`` (default: auto) against native, per cell, in the same rounds."""
    rng = np.random.default_rng(1)
    out = []
    for dtype_name, total, n, position in cells:
        elem_type = DTYPES[dtype_name]
        shape, axis = shape_for(total, n, position)
        x = data_for(elem_type, shape, rng)
        model = model_for(elem_type, shape, axis, 0, 0)
        native, _ = session(model, threads)
        feed = {"x": x}
        contenders: dict[str, Callable[[], object]] = {
            "native": lambda s=native, f=feed: s.run(None, f)
        }
        for name, floor_model in floor_models(elem_type, shape, axis).items():
            sess, _ = session(floor_model, threads)
            own = floor_feeds(floor_model, x)
            contenders[name] = lambda s=sess, f=own: s.run(None, f)
        picks = {}
        for strategy in strategies or ["auto"]:
            rewritten = lowered(model, strategy)
            if rewritten is None:
                continue
            sess, _ = session(rewritten, threads)
            contenders[strategy] = lambda s=sess, f=feed: s.run(None, f)
            picks[strategy] = _auto_pick(model) if strategy == "auto" else strategy
        medians = interleaved(contenders, rounds, max_seconds)
        row: dict[str, object] = {
            "dtype": dtype_name,
            "total": total,
            "n": n,
            "position": position,
            "shape": list(shape),
            "native_us": medians["native"] * 1e6,
            "us": {k: v * 1e6 for k, v in medians.items() if k != "native"},
            "picks": picks,
        }
        row["routes_us"] = route_floors(row, position)
        row["floor_us"], row["floor_route"] = floor_of(row, position)
        print(row, flush=True)
        out.append(row)
    return out


def _auto_pick(model: onnx.ModelProto) -> str:
    """The lowering ``auto`` picks on onnxruntime for the model's one CumProd (the pass's own
    plan, so this follows ``auto``'s table whatever its signature)."""
    rewrite = rewriter.DecomposeCumProdPass("auto")
    rewrite(ir.serde.deserialize_model(model))
    (plan,) = rewrite.plans
    return plan.lowering.name


def accuracy(
    n: int, rows: int, zeros: float, rng: np.random.Generator
) -> dict[str, dict[str, float]]:
    shape = (rows, n)
    model = model_for(TensorProto.FLOAT, shape, 1, 0, 0)
    x = data_for(TensorProto.FLOAT, shape, rng, zeros)
    reference = np.cumprod(x.astype(np.float64), axis=1)
    results = {}
    sessions = {"native": session(model, 2)[0]}
    for strategy in strategies_for(TensorProto.FLOAT, ["auto", *LOWERINGS]):
        rewritten = lowered(model, strategy)
        if rewritten is not None:
            sessions[strategy] = session(rewritten, 2)[0]
    for name, sess in sessions.items():
        y = sess.run(None, {"x": x})[0]
        errors = ulp_error(y, reference, ir.DataType.FLOAT).astype(np.float64)
        results[name] = {"max_ulp": float(errors.max()), "median_ulp": float(np.median(errors))}
    return results


def pass_time(count: int = 1000) -> float:
    nodes, outputs = [], []
    for i in range(count):
        nodes.append(
            helper.make_node("CumProd", ["x", "axis"], [f"y{i}"], name=f"c{i}", exclusive=i % 2)
        )
        outputs.append(helper.make_tensor_value_info(f"y{i}", TensorProto.FLOAT, [4, 16]))
    graph = helper.make_graph(
        nodes,
        "many",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])],
        outputs,
        [helper.make_tensor("axis", TensorProto.INT64, [], [1])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26)])
    start = time.perf_counter()
    rewriter.decompose_cumprod(model)
    return (time.perf_counter() - start) / count


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def int_list(text: str) -> list[int]:
    return [int(v) for v in text.split(",") if v]


def _totals(args: argparse.Namespace) -> list[int]:
    if args.elements:
        return int_list(args.elements)
    return [t << 20 for t in int_list(args.totals)]


def _view_of(text: str) -> tuple[int, int, int]:
    o, n, i = (int(d) for d in text.split("x"))
    return o, n, i


def size_label(total: int) -> str:
    """2^20 elements as 1M; an exact count (--elements) as it is."""
    return f"{total >> 20}M" if total % (1 << 20) == 0 else f"{total:,}"


def main() -> None:
    global NWAY_UP_TO  # noqa: PLW0603 - --nway-up-to sets it for the run (floor_models)
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a small grid, for a smoke run")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--max-seconds", type=float, default=60.0, help="per cell")
    parser.add_argument("--out", default="bench")
    parser.add_argument(
        "--clock",
        choices=("wall", "thread"),
        default="wall",
        help="thread: CPU time of the calling thread (with --threads 1 onnxruntime runs every "
        "kernel on it), which leaves out the time other processes hold the core",
    )
    parser.add_argument(
        "--from-json",
        nargs="+",
        help="only re-render the markdown of earlier runs (merged; with --floors, the median "
        "of the runs' ratios per cell)",
    )
    parser.add_argument(
        "--band",
        nargs="+",
        help="with --floors --from-json: runs of some of those cells timed again (e.g. with "
        "more rounds), merged the same way, whose rows replace theirs; the markdown ends "
        "with how native's time moved between the runs and the band, and the runs' verdicts",
    )
    parser.add_argument(
        "--band-cells",
        action="store_true",
        help="with --floors --from-json: print, one line per cell, the options that select "
        "each cell near 4x (bench.band_cells) instead of writing the markdown",
    )
    parser.add_argument("--dtypes", default=GRID_DTYPES)
    parser.add_argument("--totals", default=GRID_TOTALS, help="total elements, in units of 2^20")
    parser.add_argument(
        "--elements",
        help="total elements, exactly (comma-separated; overrides --totals): e.g. 1000000, "
        "whose row counts are not powers of two",
    )
    parser.add_argument("--lengths", default=GRID_LENGTHS)
    parser.add_argument("--positions", default=GRID_POSITIONS)
    parser.add_argument(
        "--attributes", action="store_true", help="also exclusive=reverse=1 on the last axis"
    )
    parser.add_argument(
        "--strategies",
        help="comma-separated contenders (default: auto and every lowering)",
    )
    parser.add_argument(
        "--no-extras", action="store_true", help="skip the accuracy table and the pass time"
    )
    parser.add_argument(
        "--floors",
        action="store_true",
        help="only time the floor models (the least data movement and launches a lowering "
        "needs) against native, on the grid's cells (--positions)",
    )
    parser.add_argument(
        "--views",
        help="with --floors: cells of these (o, n, i) views instead of the grid's, e.g. "
        "12x3000x40,1x4096x1000 (o = 1: the first axis; i = 1: the last; else the middle)",
    )
    parser.add_argument(
        "--nway-up-to",
        type=int,
        default=NWAY_UP_TO,
        help="with --floors: build the n-way split+concat model up to this n (default "
        f"{NWAY_UP_TO}; past it the chain route's floor leaves out its data movement)",
    )
    parser.add_argument(
        "--symbolic",
        action="store_true",
        help="a small grid whose dims are all declared symbolic (auto then picks 'dynamic')",
    )
    args = parser.parse_args()
    if args.views and not args.floors:
        parser.error("--views is for --floors")
    if args.from_json and args.floors:
        rows = merge_floor_runs([json.loads(Path(f).read_text()) for f in args.from_json])
        if args.band_cells:
            for row in band_cells(rows):
                print(band_arguments(row))
            return
        note = ""
        if args.band:
            band = merge_floor_runs([json.loads(Path(f).read_text()) for f in args.band])
            note = band_drift(rows, band)
            rows = overlay_floor_rows(rows, band)
        _write_floors(rows, args.out, note)
        return
    if args.from_json:
        parts = [json.loads(Path(f).read_text()) for f in args.from_json]
        result = dict(parts[0])
        result["cells"] = [c for part in parts for c in part["cells"]]
        for part in parts:
            for key in ("accuracy", "pass_seconds_per_node"):
                if part.get(key) is not None:
                    result[key] = part[key]
        Path(f"{args.out}.json").write_text(json.dumps(result, indent=1))
        Path(f"{args.out}.md").write_text(markdown(result))
        print(markdown(result))
        return
    if args.clock == "thread":
        if args.threads != 1:
            parser.error("--clock thread measures one thread: use it with --threads 1")
        CLOCK["now"] = time.thread_time
    if args.floors:
        floor_cells = [
            (dt, t, n, pos)
            for dt in args.dtypes.split(",")
            for t in _totals(args)
            for n in int_list(args.lengths)
            for pos in args.positions.split(",")
        ]
        NWAY_UP_TO = args.nway_up_to
        if args.views:
            floor_cells = [
                (dt, *view_cell(_view_of(v)))
                for dt in args.dtypes.split(",")
                for v in args.views.split(",")
            ]
        rows = floors(
            floor_cells,
            threads=args.threads,
            rounds=args.rounds,
            max_seconds=args.max_seconds,
            strategies=args.strategies.split(",") if args.strategies else None,
        )
        _write_floors(rows, args.out)
        return
    rng = np.random.default_rng(0)
    chosen = args.strategies.split(",") if args.strategies else None
    dtypes = args.dtypes.split(",")
    totals = [1 << 20] if args.quick else _totals(args)
    lengths = [8, 512, 65536] if args.quick else int_list(args.lengths)
    positions = args.positions.split(",")
    cells = []
    if args.symbolic:
        rows = [
            (dt, 1 << 20, n, pos, 0, 0)
            for dt in ("float32", "int64")
            for n in (8, 512, 65536)
            for pos in ("last", "first")
        ]
        for spec in rows:
            cell = bench_cell(
                spec, threads=args.threads, rounds=args.rounds, rng=rng, symbolic=True
            )
            ratios = {k: round(v, 2) for k, v in cell["ratio"].items()}  # type: ignore[union-attr]
            print(f"{spec}: native {cell['native_ms']:.2f} ms; {ratios}", flush=True)
        return
    grid = [
        (dt, total, n, pos, 0, 0)
        for dt in dtypes
        for total in totals
        for n in lengths
        for pos in positions
    ]
    if args.attributes:
        grid += [(dt, 1 << 20, n, "last", 1, 1) for dt in dtypes for n in lengths]
    for spec in grid:
        cell = bench_cell(
            spec,
            threads=args.threads,
            rounds=args.rounds,
            rng=rng,
            chosen=chosen,
            max_seconds=args.max_seconds,
        )
        cells.append(cell)
        Path(f"{args.out}.cells.json").write_text(json.dumps(cells))  # survives a crash below
        dt, total, n, pos, ex, rev = spec
        ratios = " ".join(f"{k}={v:.2f}" for k, v in cell["ratio"].items())  # type: ignore[union-attr]
        print(
            f"{dt} N={total} n={n} {pos} ex={ex} rev={rev}: "
            f"native {cell['native_ms']:.2f} ms; {ratios}",
            flush=True,
        )
    acc = None
    per_node = None
    if not args.no_extras:
        acc = {
            "nonzero": accuracy(4096, 64, 0.0, rng),
            "zeros": accuracy(4096, 64, 0.01, rng),
        }
        per_node = pass_time(100 if args.quick else 1000)
    result = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": {
            "cpu": cpu_name(),
            "cores": __import__("os").cpu_count(),
            "python": platform.python_version(),
            "load_average": __import__("os").getloadavg(),
        },
        "versions": {
            "onnxruntime": ort.__version__,
            "onnx": onnx.__version__,
            "numpy": np.__version__,
            "onnx_ir": ir.__version__,
        },
        "threads": args.threads,
        "clock": args.clock,
        "rounds": args.rounds,
        "cells": cells,
        "accuracy": acc,
        "pass_seconds_per_node": per_node,
    }
    Path(f"{args.out}.json").write_text(json.dumps(result, indent=1))
    Path(f"{args.out}.md").write_text(markdown(result))
    print(markdown(result))


GOAL_WORST = 4.0  # issue 13: no cell worse than 4x native
GOAL_MEDIAN = 2.0  # ... and 2x native at the median


def _write_floors(rows: list[dict], out: str, note: str = "") -> None:
    Path(f"{out}.json").write_text(json.dumps(rows, indent=1))
    text = floors_markdown(rows, note)
    Path(f"{out}.md").write_text(text)
    print(text)


def _cell(row: dict) -> tuple:
    """A floor row's cell: (type, total, n, position)."""
    return (row["dtype"], row["total"], row["n"], row["position"])


def merge_floor_runs(runs: list[list[dict]]) -> list[dict]:
    """Floor rows of several runs of the same cells, one row per cell: each contender's
    ratio to native is the median over the runs that timed it (native's µs the median of
    native's), and the route floors are recomputed from those. A single run's cell can move
    10-20 % between runs; the median of three runs moves less."""
    by_cell: dict[tuple, list[dict]] = {}
    for run in runs:
        for row in run:
            by_cell.setdefault(_cell(row), []).append(row)
    merged = []
    for rows in by_cell.values():
        native = statistics.median(r["native_us"] for r in rows)
        names = dict.fromkeys(k for r in rows for k in r["us"])
        row = dict(rows[0])
        row["native_us"] = native
        row["runs"] = len(rows)
        row["us"] = {
            k: native * statistics.median(r["us"][k] / r["native_us"] for r in rows if k in r["us"])
            for k in names
        }
        row["routes_us"] = route_floors(row, str(row["position"]))
        row["floor_us"], row["floor_route"] = floor_of(row, str(row["position"]))
        merged.append(row)
    return merged


BAND_AUTO = (3.4, 4.8)  # the band: auto's ratio to native within this range ...
BAND_FLOOR = (3.4, 4.5)  # ... or the floor's within this one (fourteenth round on)


def band_cells(rows: list[dict]) -> list[dict]:
    """The rows whose verdict against 4x a single run may not settle: ``auto`` within
    :data:`BAND_AUTO` of native, or the floor within :data:`BAND_FLOOR` (the cells timed
    again, one per call with more rounds, for ``--band``)."""
    picked = []
    for r in rows:
        auto = r["us"].get("auto")
        floor = r["floor_us"] / r["native_us"]
        near = auto is not None and BAND_AUTO[0] <= auto / r["native_us"] <= BAND_AUTO[1]
        if near or BAND_FLOOR[0] <= floor <= BAND_FLOOR[1]:
            picked.append(r)
    return picked


def band_arguments(row: dict) -> str:
    """bench.py's options that select ``row``'s cell alone."""
    shape, _ = grid_shape(row["total"], row["n"], row["position"])
    if list(shape) != row["shape"]:  # a --views cell
        o, n, i = _view(tuple(row["shape"]), 0 if row["position"] == "first" else 1)
        return f"--dtypes {row['dtype']} --views {o}x{n}x{i}"
    total = row["total"]
    size = f"--totals {total >> 20}" if total % (1 << 20) == 0 else f"--elements {total}"
    return f"--dtypes {row['dtype']} {size} --lengths {row['n']} --positions {row['position']}"


def overlay_floor_rows(rows: list[dict], band: list[dict]) -> list[dict]:
    """``rows`` with each cell that ``band`` also has replaced by the band's row, in the
    order of ``rows`` (the band: the cells near 4x timed again with more rounds; the
    verdicts then take its medians for those cells and the grid's for the rest)."""
    again = {_cell(r): r for r in band}
    return [again.get(_cell(r), r) for r in rows]


def band_drift(rows: list[dict], band: list[dict]) -> str:
    """One line on the machine's state between the floors runs ``rows`` and the ``band``
    timed after them: native's µs in the band over its µs in the runs, per band cell
    (1.00 where nothing changed; above 1, the band ran in a slower state), and the verdicts
    of the runs alone. The band's rows replace the runs' (:func:`overlay_floor_rows`), so a
    state that changed in between changes the verdicts with it (the twentieth round's
    third run: up to 1.75x, and the three cells the runs left not explained were met or
    explained in the band)."""
    runs = {_cell(r): r for r in rows}
    ratios = [b["native_us"] / runs[_cell(b)]["native_us"] for b in band if _cell(b) in runs]
    if not ratios:
        return ""
    return (
        f"the band's native time over the floors runs' on its {len(ratios)} cells: median "
        f"{statistics.median(ratios):.2f}× ({min(ratios):.2f}-{max(ratios):.2f}×); "
        f"the floors runs alone: {verdict_counts(rows)}"
    )


def verdict_counts(rows: list[dict]) -> str:
    """How many cells of ``rows`` get each verdict (:func:`floor_verdict`)."""
    verdicts = [floor_verdict(r).split(" (")[0] for r in rows]
    return ", ".join(f"{verdicts.count(v)} {v}" for v in dict.fromkeys(verdicts))


def floors_summary(rows: list[dict]) -> str:
    """One line: each contender's median / worst ratio to native over ``rows`` with the
    cells within 2x and 4x, and how many floors are below 2x (the median goal needs half
    the cells there)."""
    parts = []
    for name in (k for k in ("auto",) if any(k in r["us"] for r in rows)):
        ratios = [r["us"][name] / r["native_us"] for r in rows if name in r["us"]]
        within = [sum(x <= goal for x in ratios) for goal in (GOAL_MEDIAN, GOAL_WORST)]
        parts.append(
            f"{name} {statistics.median(ratios):.2f}× / {max(ratios):.2f}× "
            f"({within[0]} within 2×, {within[1]} within 4×)"
        )
    below = sum(r["floor_us"] / r["native_us"] < GOAL_MEDIAN for r in rows)
    return "; ".join([*parts, f"{below} of {len(rows)} floors below 2×"])


def floor_verdict(row: dict) -> str:
    """Whether the cell meets the goal's 4x, is explained by its floor (the cheapest route's
    least cost is itself 4x native or more), or neither."""
    auto = row["us"].get("auto")
    floor = row["floor_us"] / row["native_us"]
    if auto is not None and auto / row["native_us"] <= GOAL_WORST:
        return "meets 4×"
    if floor >= GOAL_WORST:
        return "explained"
    return f"not explained (floor {floor:.1f}×)"


def floors_markdown(rows: list[dict], note: str = "") -> str:
    """The floor rows' table, the verdict counts and :func:`floors_summary`; ``note``, a
    line after them (:func:`band_drift`)."""
    names = list(dict.fromkeys(k for r in rows for k in r["us"]))
    lines = [
        "| type | N | n | axis | native µs | "
        + " | ".join(names)
        + " | chain least | blocked least | scan least | pieces least | floor (route) "
        + "| auto / floor | verdict |",
        "|" + "---|" * (12 + len(names)),
    ]
    for r in rows:
        cells = " | ".join(
            f"{r['us'][k]:.0f} ({r['us'][k] / r['native_us']:.2f}×)" if k in r["us"] else "-"
            for k in names
        )
        auto = r["us"].get("auto")
        over = f"{auto / r['floor_us']:.2f}" if auto is not None else "-"
        least = " | ".join(
            f"{r['routes_us'][k] / r['native_us']:.2f}×" if k in r["routes_us"] else "-"
            for k in ("chain", "blocked", "scan", "pieces")
        )
        axis = str(r["position"])
        if list(grid_shape(r["total"], r["n"], axis)[0]) != r["shape"]:
            axis += " " + "×".join(str(d) for d in r["shape"])  # a --views cell
        lines.append(
            f"| {r['dtype']} | {size_label(r['total'])} | {r['n']} | {axis} | "
            f"{r['native_us']:.0f} | {cells} | {least} | {r['floor_us'] / r['native_us']:.2f}× "
            f"({r['floor_route']}) | {over} | {floor_verdict(r)} |"
        )
    lines += ["", verdict_counts(rows), "", floors_summary(rows), ""]
    if note:
        lines += [note, ""]
    return "\n".join(lines) + "\n"


def _summary(cells: list[dict], name: str) -> str:
    values = [c["ratio"][name] for c in cells if name in c["ratio"]]
    if not values:
        return "-"
    return f"{statistics.median(values):.2f}× / {max(values):.2f}×"


def markdown(result: dict) -> str:
    cells = result["cells"]
    names = list(dict.fromkeys(k for c in cells for k in c["ratio"]))
    lines = [
        f"Benchmark {result['date']}, {result['machine']}, {result['versions']}, "
        f"{result['threads']} threads, {result.get('clock', 'wall')} clock, "
        f"median of up to {result['rounds']} interleaved rounds.",
        "",
    ]
    picks = "auto picks" if any("auto" in c["info"] for c in cells) else None
    head = ["type", "N", "n", "axis", "ex,rev", "native ms", *names] + ([picks] if picks else [])
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "---|" * len(head))
    for c in cells:
        ratios = " | ".join(f"{c['ratio'][k]:.2f}×" if k in c["ratio"] else "-" for k in names)
        pick = f" | {c['info']['auto'].get('picks', '?')}" if picks and "auto" in c["info"] else ""
        lines.append(
            f"| {c['dtype']} | {size_label(c['total'])} | {c['n']} | {c['position']} | "
            f"{c['exclusive']},{c['reverse']} | {c['native_ms']:.2f} | {ratios}{pick} |"
        )
    lines += ["", "Median / worst ratio to native:", ""]
    groups: dict[str, list[dict]] = {"all cells": cells}
    for c in cells:
        width = "8-byte" if c["dtype"] in ("int64", "float64") else "4-byte"
        groups.setdefault(f"{width} {c['position']}", []).append(c)
    shown = [k for k in ("auto",) if k in names] or names[:1]
    lines.append("| cells | count | " + " | ".join(shown) + " |")
    lines.append("|---|---|" + "---|" * len(shown))
    for label, group in groups.items():
        row = " | ".join(_summary(group, k) for k in shown)
        lines.append(f"| {label} | {len(group)} | {row} |")
    lines.append("")
    if result.get("accuracy"):
        acc_all = result["accuracy"]
        lines.append("| float32 accuracy, n=4096 | " + " | ".join(acc_all["nonzero"]) + " |")
        lines.append("|---|" + "---|" * len(acc_all["nonzero"]))
        for kind, acc in acc_all.items():
            lines.append(
                f"| {kind}: max / median ulp | "
                + " | ".join(f"{v['max_ulp']:.3g} / {v['median_ulp']:.3g}" for v in acc.values())
                + " |"
            )
        lines.append("")
    if result.get("pass_seconds_per_node"):
        lines += [
            f"Pass time: {result['pass_seconds_per_node'] * 1e3:.2f} ms per CumProd node "
            "(model with 1,000 nodes).",
            "",
        ]
    longest = [c for c in cells if c["n"] == max(x["n"] for x in cells)]
    lines.append(
        f"| n={longest[0]['n'] if longest else '-'}: nodes / session creation ms / pass ms | "
        + " | ".join(names)
        + " |"
    )
    lines.append("|---|" + "---|" * len(names))
    for c in longest:
        info = c["info"]
        row = " | ".join(
            f"{info[k]['nodes']} / {info[k]['create_ms']:.1f} / {info[k].get('pass_ms', 0):.1f}"
            if k in info
            else "-"
            for k in names
        )
        lines.append(
            f"| {c['dtype']} {size_label(c['total'])} {c['position']} "
            f"ex,rev={c['exclusive']},{c['reverse']} | {row} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
