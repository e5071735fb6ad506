"""Same graphs: does a refactor change any lowered graph, refusal or warning?

Lowers a one-CumProd model over a grid of cases (:func:`cases`) with two trees of the
project, the base commit's and this one, each in a child process, and compares the results
case by case: the SHA-256 of the serialized output model and the warnings logged, or the
refusal (its exception type and message). Prints the count compared and every difference;
exit status 1 when there is one.

    PYTHONPATH=$PWD .venv/bin/python scripts/tools/same_graphs.py [--base REV] [--jobs J]
        [--canonical]

``--canonical`` compares :func:`canonical_hash` instead: the graphs up to node order and
the names of values inside them (a refactor that builds the same dataflow in another order).
Each child computes both hashes, so a run reports both counts (the exit status follows the
one chosen).

The base tree is ``git archive REV rewriter`` (default HEAD) unpacked under /tmp, and its
results are kept there (keyed by commit and grid), so a second run lowers this tree only.
The grid (strategies and targets as this tree lists them; elements as in the cases below):

- lengths around every threshold: 1, 2, 15-17, 63-65, 255-257, 511-513, 1023-1025, 4096, 8193,
  every strategy and target, float32 and int32, the first axis of (n,) and the middle of
  (4, n, 8);
- the eight element types, ranks 1-3 with every axis, and the four directions;
- dims before and after the axis symbolic, the length known only at run time (with and
  without ``max_length``), and a run-time axis;
- ``auto`` (and ``cached`` and ``carry`` on a few targets) on shapes around its size
  conditions (slabs, bytes, rows, cache pieces);
- ``target_opset`` 11, 13, 14, 15, 18 and 21.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import logging
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
LENGTHS = (
    *(1, 2, 15, 16, 17, 63, 64, 65, 255, 256, 257, 511, 512, 513, 1023, 1024, 1025),
    *(4096, 8193),
)
TYPES = ("float", "float16", "bfloat16", "double", "int32", "int64", "uint32", "uint64")
DIRECTIONS = ((0, 0), (1, 0), (0, 1), (1, 1))  # (exclusive, reverse)
OPSETS = (11, 13, 14, 15, 18, 21)

# A case: (strategy, target, element type, dims, axis, exclusive, reverse, form, max_length,
# target_opset). dims: the static dims; form: "static", "symbolic" (every dim but the axis's
# a name), "run-time length" (the axis's dim a name), "run-time axis" (the axis an input).
Case = tuple[str, str, str, tuple[int, ...], int, int, int, str, "int | None", "int | None"]


def _layouts(n: int) -> Iterator[tuple[tuple[int, ...], int]]:
    """Ranks 1-3 with every axis, the scanned dim n and the others small."""
    yield (n,), 0
    for axis in range(2):
        yield tuple(n if k == axis else 3 for k in range(2)), axis
    for axis in range(3):
        yield tuple(n if k == axis else 2 + k for k in range(3)), axis


def cases(strategies: list[str], targets: list[str]) -> list[Case]:
    """The grid (module docstring), without repeats, in a fixed order."""
    out: list[Case] = []
    every = list(itertools.product(strategies, targets))
    for (s, t), n, dtype in itertools.product(every, LENGTHS, ("float", "int32")):
        out.append((s, t, dtype, (n,), 0, 0, 0, "static", None, None))
        out.append((s, t, dtype, (4, n, 8), 1, 0, 0, "static", None, None))
    for (s, t), dtype in itertools.product(every, TYPES):
        for dims, axis in _layouts(17):
            out.append((s, t, dtype, dims, axis, 0, 0, "static", None, None))
    for (s, t), (ex, rev), dtype in itertools.product(every, DIRECTIONS, ("float", "int64")):
        for dims, axis in _layouts(65):
            out.append((s, t, dtype, dims, axis, ex, rev, "static", None, None))
    forms = {  # (n, max_length); n is not in a run-time length's model
        "symbolic": ((2, None), (17, None), (65, None), (513, None), (8193, None)),
        "run-time length": ((513, None), (513, 100), (513, 600), (513, 10000)),
        "run-time axis": ((17, None), (513, 600), (8193, None)),
    }
    for (s, t), (form, bounds), (ex, rev) in itertools.product(
        every, forms.items(), ((0, 0), (1, 1))
    ):
        for (n, bound), (others, axis) in itertools.product(
            bounds, (((3,), 0), ((3,), 1), ((2, 4), 1))
        ):
            dims = (*others[:axis], n, *others[axis:])
            for dtype in ("float", "int32") if n in (17, 513) else ("float",):
                out.append((s, t, dtype, dims, axis, ex, rev, form, bound, None))
    sizes = [
        *(((slab,), 0) for slab in (3, 400, 800, 900, 1000, 1500, 2000, 5000)),
        *(((rows,), 1) for rows in (1, 2, 64, 4096)),
        *(((o, i), 1) for o, i in ((16, 16), (64, 64), (4, 2048), (2048, 4), (1, 9000))),
    ]
    pieces = [("cached", t) for t in ("onnxruntime", "spec", "tract")]
    pieces += [("carry", t) for t in ("onnxruntime", "tinygrad")]
    for s, t in [("auto", t) for t in targets] + pieces:
        types = ("float", "int64", "int32") if t == "openvino" else ("float", "int64")
        for n, (others, axis), dtype in itertools.product(LENGTHS, sizes, types):
            if s != "auto" and dtype != "float":
                continue
            dims = (*others[:axis], n, *others[axis:])
            for rev in (0, 1) if axis == 0 and dtype == "float" and s == "auto" else (0,):
                out.append((s, t, dtype, dims, axis, 0, rev, "static", None, None))
    for (s, t), opset in itertools.product(every, OPSETS):
        out.append((s, t, "float", (2, 65, 4), 1, 0, 0, "static", None, opset))
        out.append((s, t, "float", (2, 65, 4), 1, 1, 1, "symbolic", None, opset))
        out.append((s, t, "int64", (2, 65, 4), 1, 0, 0, "run-time length", 1000, opset))
        out.append((s, t, "float", (2, 65, 4), 1, 1, 0, "run-time axis", None, opset))
    return list(dict.fromkeys(out))


def _model(case: Case) -> object:
    """The one-CumProd model of ``case`` (opset 26)."""
    from onnx import TensorProto, helper

    _, _, dtype, dims, axis, exclusive, reverse, form, _, _ = case
    elem = getattr(TensorProto, dtype.upper())
    shape: list[int | str] = list(dims)
    if form == "symbolic":
        shape = [d if k == axis else f"d{k}" for k, d in enumerate(dims)]
    elif form == "run-time length":
        shape[axis] = "n"
    inputs = [helper.make_tensor_value_info("x", elem, shape)]
    initializers = []
    if form == "run-time axis":
        inputs.append(helper.make_tensor_value_info("axis", TensorProto.INT64, []))
    else:
        initializers.append(helper.make_tensor("axis", TensorProto.INT64, [], [axis]))
    node = helper.make_node(
        "CumProd", ["x", "axis"], ["y"], name="c", exclusive=exclusive, reverse=reverse
    )
    graph = helper.make_graph(
        [node], "g", inputs, [helper.make_tensor_value_info("y", elem, shape)], initializers
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26)], ir_version=13)


def _digest(*parts: object) -> str:
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()


def _tensor(tensor: Any) -> str:
    """A tensor by content: element type, dims and values (not its name, not its encoding)."""
    from onnx import numpy_helper

    array = numpy_helper.to_array(tensor)
    data = hashlib.sha256(array.tobytes()).hexdigest()
    return _digest("tensor", tensor.data_type, list(array.shape), data)


def _attribute(attr: Any, scope: dict[str, str], depth: int) -> object:
    """An attribute by name, type and value; tensors by content, subgraphs canonically."""
    from onnx import helper

    if attr.ref_attr_name:
        return [attr.name, attr.type, "ref", attr.ref_attr_name]
    value = helper.get_attribute_value(attr)
    if attr.type == attr.TENSOR:
        value = _tensor(value)
    elif attr.type == attr.TENSORS:
        value = [_tensor(t) for t in value]
    elif attr.type == attr.GRAPH:
        value = _graph(value, scope, depth + 1)
    elif attr.type == attr.GRAPHS:
        value = [_graph(g, scope, depth + 1) for g in value]
    elif attr.type in (attr.STRING, attr.STRINGS):
        value = [v.hex() for v in value] if isinstance(value, list) else value.hex()
    elif attr.type not in (attr.FLOAT, attr.INT, attr.FLOATS, attr.INTS):
        value = attr.SerializeToString(deterministic=True).hex()  # types this tool never meets
    return [attr.name, attr.type, value]


def _type(value_info: Any) -> str:
    return value_info.type.SerializeToString(deterministic=True).hex()


def _body(
    inputs: list[tuple[str, str]],
    constants: dict[str, str],
    nodes: Any,
    outputs: list[str],
    outer: dict[str, str],
    *,
    depth: int,
) -> object:
    """A Merkle hash of one graph body: a graph input is its nesting depth, position and type,
    an initializer its content, a node's output the hash of its op, domain, attributes,
    input hashes and output index; the body is its outputs in order and the sorted hashes of
    every node (so a dead or a duplicated node counts)."""
    scope = {**outer, **constants}
    scope.update({name: _digest("input", depth, k, kind) for k, (name, kind) in enumerate(inputs)})
    scope[""] = "absent"
    every = []
    for node in nodes:
        attributes = sorted((_attribute(a, scope, depth) for a in node.attribute), key=json.dumps)
        operands = [scope.get(name, f"unknown {name}") for name in node.input]
        n = len(node.output)
        key = _digest(node.op_type, node.domain, node.overload, attributes, operands, n)
        every.append(key)
        for index, name in enumerate(node.output):
            if name:
                scope[name] = _digest(key, index)
    return [[scope.get(name, f"unknown {name}") for name in outputs], sorted(every)]


def _graph(graph: Any, outer: dict[str, str], depth: int) -> str:
    """A (sub)graph: its inputs by position and type, its outputs in order with their types."""
    constants = {t.name: _tensor(t) for t in graph.initializer}
    inputs = [(v.name, _type(v)) for v in graph.input if v.name not in constants]
    outputs = [v.name for v in graph.output]
    body = _body(inputs, constants, graph.node, outputs, outer, depth=depth)
    return _digest(body, [_type(v) for v in graph.output])


def canonical_hash(model: Any) -> str:
    """The SHA-256 of ``model`` up to node order and the names of the values inside it: equal
    hashes mean the same ops in the same dataflow, with the same attributes and constants.
    The model's interface counts (its input and output names, types and order), and so do
    its opset imports, IR version and functions (each body hashed as a graph's)."""
    graph = model.graph
    functions = [
        [
            f.domain,
            f.name,
            f.overload,
            sorted([o.domain, o.version] for o in f.opset_import),
            list(f.attribute),
            [p.SerializeToString(deterministic=True).hex() for p in f.attribute_proto],
            _body([(n, "") for n in f.input], {}, f.node, list(f.output), {}, depth=0),
        ]
        for f in model.functions
    ]
    return _digest(
        model.ir_version,
        sorted([o.domain, o.version] for o in model.opset_import),
        [[v.name, _type(v)] for v in graph.input],
        [[v.name, _type(v)] for v in graph.output],
        _graph(graph, {}, 0),
        sorted(functions, key=json.dumps),
    )


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def lower_all(case_file: Path, part: int, parts: int) -> None:
    """Child: lower every ``parts``-th case from ``part``, one JSON result a line on stdout:
    the index, the byte hash and the canonical hash (or the refusal twice), the warnings
    (the tree lowered is the one first on PYTHONPATH)."""
    from rewriter.decompose import decompose_cumprod

    collect = _Collect()
    logging.getLogger().addHandler(collect)
    logging.getLogger().setLevel(logging.WARNING)
    for handler in logging.getLogger().handlers[:-1]:
        logging.getLogger().removeHandler(handler)
    for index, raw in enumerate(json.loads(case_file.read_text())):
        if index % parts != part:
            continue
        strategy, target, *_, bound, opset = raw
        collect.messages.clear()
        try:
            out = decompose_cumprod(
                _model(tuple(raw)),  # type: ignore[arg-type]
                strategy=strategy,
                target=target,
                max_length=bound,
                target_opset=opset,
            )
            exact = hashlib.sha256(out.SerializeToString()).hexdigest()  # type: ignore[union-attr]
            canonical = canonical_hash(out)
        except Exception as error:  # noqa: BLE001 (a refusal, or a crash: both compared)
            exact = canonical = f"{type(error).__name__}: {error}"
        print(json.dumps([index, exact, canonical, collect.messages]), flush=True)


def _run(tree: Path, case_file: Path, jobs: int) -> dict[int, list[object]]:
    """Every case lowered by ``tree``, in ``jobs`` children (each writing to a file of its
    own: a pipe left unread would stall it)."""
    env = dict(os.environ, PYTHONPATH=str(tree), PYTHONHASHSEED="0")  # set orders fixed
    script = str(Path(__file__).resolve())
    results: dict[int, list[object]] = {}
    with tempfile.TemporaryDirectory() as folder:
        outputs = [Path(folder) / f"part-{part}.jsonl" for part in range(jobs)]
        children = []
        for part, output in enumerate(outputs):
            with output.open("w") as file:
                children.append(
                    subprocess.Popen(
                        [sys.executable, script, "--child", str(case_file), str(part), str(jobs)],
                        env=env,
                        cwd=folder,  # no other tree on sys.path through the cwd
                        stdout=file,
                    )
                )
        for child in children:
            if child.wait():
                raise SystemExit(f"a child lowering with {tree} failed ({child.returncode})")
        for output in outputs:
            for line in output.read_text().splitlines():
                index, *result = json.loads(line)
                results[index] = result
    return results


def _base_tree(rev: str) -> tuple[str, Path]:
    """The commit ``rev`` names and its ``rewriter`` package unpacked under /tmp."""
    sha = subprocess.run(
        ["git", "rev-parse", "--verify", f"{rev}^{{commit}}"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    tree = Path(tempfile.gettempdir()) / f"same-graphs-{sha[:12]}"
    if not (tree / "rewriter").is_dir():
        archive = subprocess.run(
            ["git", "archive", sha, "rewriter"], cwd=ROOT, check=True, capture_output=True
        ).stdout
        tree.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile() as file:
            file.write(archive)
            file.seek(0)
            with tarfile.open(fileobj=file) as tar:
                tar.extractall(tree, filter="data")
    return sha, tree


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="HEAD", help="the commit to compare with (HEAD)")
    parser.add_argument("--jobs", type=int, default=1, help="children per tree (1)")
    parser.add_argument(
        "--canonical", action="store_true", help="compare graphs up to node order and names"
    )
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        lower_all(Path(args.child[0]), int(args.child[1]), int(args.child[2]))
        return 0
    from rewriter import STRATEGIES, TARGETS

    grid = cases(list(STRATEGIES), list(TARGETS))
    text = json.dumps(grid)
    key = hashlib.sha256(text.encode()).hexdigest()[:12] + "-both"
    sha, base = _base_tree(args.base)
    with (
        tempfile.NamedTemporaryFile("w", suffix=".json") as case_file,
        tempfile.TemporaryDirectory() as copy,
    ):
        # this tree as it is now, so that edits made while the base lowers do not count
        shutil.copytree(ROOT / "rewriter", Path(copy) / "rewriter")
        case_file.write(text)
        case_file.flush()
        kept = base / f"results-{key}.json"
        if kept.is_file():
            before = {int(k): v for k, v in json.loads(kept.read_text()).items()}
        else:
            before = _run(base, Path(case_file.name), args.jobs)
            kept.write_text(json.dumps(before))
        after = _run(Path(copy), Path(case_file.name), args.jobs)
    counts = {}
    for mode, field in (("byte-exact", 0), ("canonical", 1)):

        def result(results: dict[int, list[object]], k: int, field: int = field) -> object:
            one = results.get(k)
            return None if one is None else [one[field], one[2]]  # the hash, the warnings

        differences = [k for k in range(len(grid)) if result(before, k) != result(after, k)]
        counts[mode] = len(differences)
        if (mode == "canonical") == args.canonical:
            for k in differences:
                print(
                    f"{grid[k]}\n  {sha[:7]}: {result(before, k)}\n  this tree: {result(after, k)}"
                )
    for mode, count in counts.items():
        print(f"{len(grid)} cases compared against {sha[:7]} ({mode}): {count} differences")
    return 1 if counts["canonical" if args.canonical else "byte-exact"] else 0


if __name__ == "__main__":
    sys.exit(main())
