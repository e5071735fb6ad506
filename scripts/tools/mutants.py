"""The mutation check's data: each deliberate bug (:class:`Mutant`: a text in a file of
the package and what replaces it) and, for the modules whose behaviour is tested by files
named for a concern, which test files those are (:data:`TESTED_BY`).
``scripts/tools/mutation_check.py`` runs them; ``tests/test_mutation_check.py`` checks that
each mutant still applies."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Mutant:
    name: str
    path: str  # in the package copy
    old: str  # must occur exactly once
    new: str


MUTANTS = [
    Mutant(
        "shift_exclusive: shift by 0, not 1 (off by one)",
        "rewriter/lowerings/builder.py",
        "        return self.slice_axis(padded, 1, 0, -1)\n",
        "        return self.slice_axis(padded, 1, 1, 1 << 62)\n",
    ),
    Mutant(
        "tree: the block carries not multiplied back (radix, blocked)",
        "rewriter/lowerings/tree.py",
        '            y = b.op("Mul", inner, carry)\n',
        "            y = inner\n",
    ),
    Mutant(
        "logsum: sign of -0.0 lost (no Reciprocal term)",
        "rewriter/lowerings/logsum.py",
        'b.op("Or", b.op("Less", x3, zero), b.op("Less", b.op("Reciprocal", x3), zero))',
        'b.op("Less", x3, zero)',
    ),
    Mutant(
        "lower: uint32 wraparound masked to 2^31, not 2^32",
        "rewriter/lowerings/__init__.py",
        '        y = b.op("Mod", y, b.const(1 << 32))',
        '        y = b.op("Mod", y, b.const(1 << 31))',
    ),
    Mutant(
        "view._runtime_dims: negative run-time axis not normalised",
        "rewriter/lowerings/view.py",
        '    pos = b.op("Mod", b.op("Add", raw, rank), rank)\n',
        "    pos = raw\n",
    ),
    Mutant(
        "bounds: the exact kernels' stated bound doubled (loop.max_ulps)",
        "rewriter/lowerings/loop.py",
        "    return k1 * (1 + 2.0**-20)\n",
        "    return 2 * k1 * (1 + 2.0**-20)\n",
    ),
    Mutant(
        "scan_front: no input flip for reverse where Scan ignores directions",
        "rewriter/lowerings/scan.py",
        "    if flip:\n        x = b.flip(x, 0)\n",
        "",
    ),
    Mutant(
        "tree: the block carries scanned inclusively",
        "rewriter/lowerings/tree.py",
        "            exclusive=True,\n            levels=rest,\n",
        "            exclusive=exclusive,\n            levels=rest,\n",
    ),
    Mutant(
        "tree: the float64 block carries scanned inclusively",
        "rewriter/lowerings/tree.py",
        "        carry = above(totals, wide_view(b, v, wide), ",
        "        carry = (lambda t, w, f: scan3(b, t, (o, m, i), w, exclusive=exclusive, "
        "levels=rest, seed=f, scan_blocks=scan_blocks, carry_each=carry_each))(totals, "
        "wide_view(b, v, wide), ",
    ),
    Mutant(
        "tree: the seed left out of the float64 carries",
        "rewriter/lowerings/tree.py",
        "None if seed is None else b.cast(seed, wide))\n",
        "None)\n",
    ),
    Mutant(
        "wide.block_totals: a block's last slice left out of its float64 total",
        "rewriter/lowerings/wide.py",
        "        for piece in slices[1:]:\n",
        "        for piece in slices[1:-1]:\n",
    ),
    Mutant(
        "wide.block_totals: the product over the wrong axis",
        "rewriter/lowerings/wide.py",
        "b.cast(blocks, wide), 1, keepdims=1)",
        "b.cast(blocks, wide), 2, keepdims=1)",
    ),
    Mutant(
        "Builder.reduce: the axes attribute off by one (below opset 18)",
        "rewriter/lowerings/builder.py",
        "return self.op(op_type, x, axes=[axis], keepdims=keepdims)",
        "return self.op(op_type, x, axes=[axis - 1], keepdims=keepdims)",
    ),
    Mutant(
        "near_one: the offset totals taken whatever the factors (no check)",
        "rewriter/lowerings/near_one.py",
        '    return b.op("Where", near, b.op("Add", offset, v.one), plain)\n',
        '    return b.op("Add", offset, v.one)\n',
    ),
    Mutant(
        "near_one: never taken (the plain float32 totals everywhere)",
        "rewriter/lowerings/near_one.py",
        "    return v.dtype == ir.DataType.FLOAT\n",
        "    return False\n",
    ),
    Mutant(
        "near_one: a pair's cross term left out",
        "rewriter/lowerings/near_one.py",
        '    return b.op("Add", b.op("Add", a, c), b.op("Mul", a, c))\n',
        '    return b.op("Add", a, c)\n',
    ),
    Mutant(
        "near_one: the slices' distances checked on the first slice only",
        "rewriter/lowerings/near_one.py",
        '    distance = b.op("Max", *[b.op("Abs", offset) for offset in offsets])\n',
        '    distance = b.op("Abs", offsets[0])\n',
    ),
    Mutant(
        "near_one: the blocks' distances reduced over the wrong axis",
        "rewriter/lowerings/near_one.py",
        '        distance = b.reduce("ReduceMax", distance, 1, keepdims=1)\n',
        '        distance = b.reduce("ReduceMax", distance, 2, keepdims=1)\n',
    ),
    Mutant(
        "Builder.reduce: the axes input off by one (from opset 18)",
        "rewriter/lowerings/builder.py",
        "self.const([axis]), keepdims=keepdims)",
        "self.const([axis - 1]), keepdims=keepdims)",
    ),
    Mutant(
        "near_one: the 2-D view's distances checked on the first half only",
        "rewriter/lowerings/near_one.py",
        '            distance = b.op("Max", *b.split(distance, 1, 2, size=width * run))\n',
        "            distance = b.split(distance, 1, 2, size=width * run)[0]\n",
    ),
    Mutant(
        "near_one.windows: each position's distance its own factor's (not the window's)",
        "rewriter/lowerings/near_one.py",
        '        distance = b.op("Max", distance, shift(distance, s, zero))\n',
        "",
    ),
    Mutant(
        "near_one.windows: the offsets shifted in with ones (a factor 2 before the start)",
        "rewriter/lowerings/near_one.py",
        "        offset = _combine(b, offset, shift(offset, s, zero))\n",
        "        offset = _combine(b, offset, shift(offset, s, v.one))\n",
    ),
    Mutant(
        "near_one.windows: the plain fallback one factor (its products not formed)",
        "rewriter/lowerings/near_one.py",
        '        y = b.op("Mul", y, shift(y, s, v.one))\n',
        "",
    ),
    Mutant(
        "doubling: plain doubling without the offset windows (run-time lengths)",
        "rewriter/lowerings/doubling.py",
        "    if near_one.wanted(v) and bound > ACCURATE_BLOCKED_ABOVE:\n",
        "    if False:\n",
    ),
    Mutant(
        "doubling: float32 not blocked for accuracy (its plain form's error grows with n)",
        "rewriter/lowerings/doubling.py",
        "    return v.dtype == ir.DataType.FLOAT and n > ACCURATE_BLOCKED_ABOVE\n",
        "    return False\n",
    ),
    Mutant(
        "tree: the float64 carries do not start the blocks' chains (carry, radix)",
        "rewriter/lowerings/tree.py",
        "            start = b.reshape(carry, shape_of(b, om, 1, i))\n",
        "            start = None\n",
    ),
    Mutant(
        "tree: the float64 carries do not start the blocks' Scan (blocked)",
        "rewriter/lowerings/tree.py",
        "slice_rank=2, init=init)\n",
        "slice_rank=2)\n",
    ),
    Mutant(
        "View.pad_ones_after (carry, radix): padded with zeros, not ones (wrong only in reverse)",
        "rewriter/lowerings/view.py",
        "0, count, 0]), self.one)",
        '0, count, 0]), b.op("Sub", self.one, self.one))',
    ),
    Mutant(
        "doubling._blocked: block totals from the last position in reverse too",
        "rewriter/lowerings/doubling.py",
        "    totals = b.slice_axis(yb, 1, last * w, (last + 1) * w)\n",
        "    totals = b.slice_axis(yb, 1, (BLOCK - 1) * w, BLOCK * w)\n",
    ),
    Mutant(
        "doubling._blocked: on the 2-D view the carries not tiled over the block (one column each)",
        "rewriter/lowerings/doubling.py",
        '    y = b.op("Mul", yb, b.op("Tile", carries, b.const([1, BLOCK])))\n',
        '    y = b.op("Mul", yb, b.op("Tile", carries, b.const([1, 1])))\n',
    ),
    Mutant(
        "doubling._blocked: the block carries inclusive",
        "rewriter/lowerings/doubling.py",
        "    carries = _shift(b, _steps(b, totals, across, m), 1, across)\n",
        "    carries = _steps(b, totals, across, m)\n",
    ),
    Mutant(
        "inline: no NameFixPass after the inliner",
        "rewriter/inline.py",
        "        common.NameFixPass()(model)\n",
        "",
    ),
    Mutant(
        "inline: unnamed call outputs left unnamed",
        "rewriter/inline.py",
        "                    value.name = name\n",
        "                    pass\n",
    ),
    Mutant(
        "types: unconfirmed declared dims of computed values kept",
        "rewriter/declarations.py",
        "    for computed, inferred in unconfirmed_computed_shapes(model, types):\n",
        "    for computed, inferred in unconfirmed_computed_shapes(model, types)[:0]:\n",
    ),
    # found by a mutation review of opset / opset_rules / site / verify (2026-12-02)
    Mutant(
        "opset: a target above the model's own opset taken",
        "rewriter/opset/check.py",
        "if not MIN_TARGET_OPSET <= target <= current:",
        "if not MIN_TARGET_OPSET <= target:",
    ),
    Mutant(
        "opset: Split-18 num_outputs path skips the type check",
        "rewriter/opset/check.py",
        "                bad = _types_not_allowed(\n"
        "                    where,\n"
        "                    then,\n",
        "                bad = None and _types_not_allowed(\n"
        "                    where,\n"
        "                    then,\n",
    ),
    Mutant(
        "opset: a type the older op does not allow not refused",
        "rewriter/opset/check.py",
        'elif name.startswith("tensor(") and name not in allowed:',
        "elif False:",
    ),
    Mutant(
        "opset: initializers left as graph inputs after onnx's converter",
        "rewriter/opset/apply.py",
        "        if name not in inputs:\n            graph.inputs.remove(value)",
        "        pass",
    ),
    Mutant(
        "opset.rules: Pad wrap taken from opset 18",
        "rewriter/opset/rules.py",
        '("Pad", "mode"): {"wrap": 19}',
        '("Pad", "mode"): {"wrap": 18}',
    ),
    Mutant(
        "opset.rules: Mod of an unknown type taken as not float",
        "rewriter/opset/rules.py",
        "floating = dtype is None or dtype.is_floating_point()",
        "floating = dtype is not None and dtype.is_floating_point()",
    ),
    Mutant(
        "opset.rules: QDQ scale of unknown rank taken as 0-D",
        "rewriter/opset/rules.py",
        "if shape is None or shape.rank() != 0:",
        "if shape is not None and shape.rank() != 0:",
    ),
    Mutant(
        "opset.rules: dilations dropped when any (not all) is 1",
        "rewriter/opset/rules.py",
        "all(d == 1 for d in attr.value)",
        "any(d == 1 for d in attr.value)",
    ),
    Mutant(
        "site: an overridable initializer axis taken as a constant",
        "rewriter/site.py",
        "    if value.is_graph_input():\n        return None\n",
        "",
    ),
    Mutant(
        "site: a declared axis rank not checked",
        "rewriter/site.py",
        "if axis_shape is not None and axis_shape.rank() != 0:",
        "if False:",
    ),
    Mutant(
        "verify: the sign of a zero not compared",
        "rewriter/verify/compare.py",
        "((act != ref_t) | (np.signbit(act) != np.signbit(ref_t)))",
        "(act != ref_t)",
    ),
    Mutant(
        "verify: integers compared through float64",
        "rewriter/verify/compare.py",
        "        differ = int(np.count_nonzero(actual != reference))\n",
        "        differ = int(np.count_nonzero(\n"
        "            actual.astype(np.float64) != reference.astype(np.float64)\n"
        "        ))\n",
    ),
    Mutant(
        "opset.rules: Split's default axis taken as -1",
        "rewriter/opset/rules.py",
        'axis = node.attributes.get_int("axis", 0)\n    if shape is None',
        'axis = node.attributes.get_int("axis", -1)\n    if shape is None',
    ),
    Mutant(
        "specialize: a specialisation may take the name of a function of the model",
        "rewriter/specialize.py",
        "                    while (function.domain, name, function.overload) in model.functions:\n"
        '                        name += "_"\n',
        "",
    ),
    Mutant(
        "specialize: an attribute's value left out of the call signature",
        "rewriter/specialize.py",
        '    return f"{attr.type.name}:{value!r}"',
        '    return f"{attr.type.name}"',
    ),
    Mutant(
        "verify: an ulp twice too large",
        "rewriter/verify/compare.py",
        "(exponent - (bits - 1)).astype(np.int64)",
        "(exponent - (bits - 2)).astype(np.int64)",
    ),
    Mutant(
        "verify: sites not run at max_length itself",
        "rewriter/verify/sites.py",
        "lengths = [k for k in lengths if k <= max_length]",
        "lengths = [k for k in lengths if k < max_length]",
    ),
    Mutant(
        "verify: the sites' verdict left out of the overall one",
        "rewriter/verify/model.py",
        "ok = all(o.ok for o in outputs) and all(s.ok for s in checked)",
        "ok = all(o.ok for o in outputs)",
    ),
    Mutant(
        "verify: an output's element type not compared",
        "rewriter/verify/model.py",
        "    if act.dtype != exp.dtype:\n        return (",
        "    if False:\n        return (",
    ),
    Mutant(
        "view: the static factor of a mixed dim product dropped",
        "rewriter/lowerings/view.py",
        "        result: ir.Value | None = None if known == 1 else b.const([known])",
        "        result: ir.Value | None = None",
    ),
    Mutant(
        "loop: the guarded slab of ones not sliced off below opset 14 (an If instead)",
        "rewriter/lowerings/loop.py",
        "    if b.opset >= 14 or (v.static_length or 0) > 0 or guarded:\n",
        "    if b.opset >= 14 or (v.static_length or 0) > 0:\n",
    ),
    Mutant(
        "view.ones_like: the data-dependent ones as Not(Less(x, x))",
        "rewriter/lowerings/view.py",
        '    true = b.op("Equal", test, test)\n',
        '    true = b.op("Not", test)\n',
    ),
    Mutant(
        "dynamic: the blocked branch from n = 512, not 513",
        "rewriter/lowerings/tree.py",
        "b.const([most + 1]))\n",
        "b.const([most]))\n",
    ),
    Mutant(
        "decompose: a CumProd under opset 25 taken",
        "rewriter/lower.py",
        "        if where.opset < 26:\n",
        "        if where.opset < 25:\n",
    ),
    Mutant(
        "decompose: an overridable axis initializer dropped once nothing reads it",
        "rewriter/lower.py",
        "    if axis.uses() or axis.is_graph_input() or axis.is_graph_output():\n",
        "    if axis.uses() or axis.is_graph_output():\n",
    ),
    Mutant(
        "types: stale declared dims of body inputs kept around an inner If",
        "rewriter/declarations.py",
        "(sub, node) for node in ir.traversal.RecursiveGraphIterator(top) for sub",
        "(sub, node) for node in top for sub",
    ),
    Mutant(
        "inline: an unnamed call output named like an unread graph input",
        "rewriter/inline.py",
        "        taken |= {v.name for v in model.graph.inputs if v.name}\n",
        "        pass\n",
    ),
    Mutant(
        "types: the element types a function declares for its inputs not read",
        "rewriter/serde.py",
        "value.type = ir.TensorType(ir.DataType(info.type.tensor_type.elem_type))",
        "pass",
    ),
    Mutant(
        "types: a function input's declared type not propagated through the body",
        "rewriter/types.py",
        "            known[vi.name] = vi.type\n",
        "            pass\n",
    ),
    Mutant(
        "types: stale declared dims of a Loop body input inside a function kept",
        "rewriter/declarations.py",
        "    scopes += [(function_scope(f), f.graph) for f in model.functions.values()]\n"
        "    unconfirmed: list[tuple[ir.Value, list[int | None] | None]] = []\n",
        "    unconfirmed: list[tuple[ir.Value, list[int | None] | None]] = []\n",
    ),
    Mutant(
        "opset: functions called through a reached function taken as never called",
        "rewriter/opset/check.py",
        "                pending.append(model.functions[key])\n",
        "                pass\n",
    ),
    # a mutation review of cli / convert / io (2026-12-02): the survivors, now tested
    Mutant(
        "cli: --verify 0 accepted (_positive off by one)",
        "rewriter/cli.py",
        "    if value < 1:\n",
        "    if value < 0:\n",
    ),
    Mutant(
        "cli: --in-place with -o accepted (-o ignored, the input rewritten)",
        "rewriter/cli.py",
        '        if args.output:\n            parser.error("--in-place',
        '        if False:\n            parser.error("--in-place',
    ),
    Mutant(
        "cli: the --report path not checked before the run",
        "rewriter/cli.py",
        ", report=report_path)",
        ", report=None)",
    ),
    Mutant(
        "convert: convert_file does not check its own write plan (library)",
        "rewriter/convert.py",
        "        io.check_write_plan([(source, destination)], in_place=True)\n",
        "",
    ),
    Mutant(
        "convert: a new output does not take the input's mode",
        "rewriter/convert.py",
        "mode_from=source, training_info=kept",
        "mode_from=None, training_info=kept",
    ),
    Mutant(
        "convert: a file without CumProd copied over itself (in place)",
        "rewriter/convert.py",
        "            if output is not None and not io.same_file(output, source):\n",
        "            if output is not None:\n",
    ),
    Mutant(
        "convert: our own .nocumprod.onnx outputs taken by a folder scan",
        "rewriter/convert.py",
        "if path.name.lower().endswith(OUTPUT_SUFFIX) or not path.is_file():",
        "if not path.is_file():",
    ),
    Mutant(
        "io: hard links not recognised (no inode key)",
        "rewriter/io/plan.py",
        '        keys.add(("inode", st.st_dev, st.st_ino))\n',
        "        pass\n",
    ),
    Mutant(
        "io: an input's external data accepted as output when in_place",
        "rewriter/io/plan.py",
        "            if key in data:\n",
        "            if key in data and not in_place:\n",
    ),
    Mutant(
        "io: another model's data file not looked for (-o over it allowed)",
        "rewriter/io/plan.py",
        "        reader = None if keys & own else _data_owner(target, scanned)",
        "        reader = None",
    ),
    Mutant(
        "io: a data file reached through a link not matched (resolved path only)",
        "rewriter/io/plan.py",
        "                    for key in _identities(file):\n"
        "                        readers.setdefault(key, []).append((file, model))\n",
        "                    readers.setdefault(('path', str(file)), []).append((file, model))\n",
    ),
    Mutant(
        "verify: outputs from random draws compared as any other",
        "rewriter/verify/model.py",
        "    drawn = random_outputs(original_proto)\n",
        "    drawn: dict[str, list[str]] = {}\n",
    ),
    Mutant(
        "verify: Shape / Size of a value shaped by a draw taken as fixed",
        "rewriter/verify/analysis.py",
        ' and not node_subgraphs(node) else "any"\n',
        ' else "follows"\n',
    ),
    Mutant(
        "verify: Shape / Size of a draw taken as random",
        "rewriter/verify/analysis.py",
        '            if rule == "shape only":\n',
        "            if False:\n",
    ),
    Mutant(
        "io: an unreadable model in the folder: every kept data file called unreferenced",
        "rewriter/io/plan.py",
        "    if unknown and unreadable:\n",
        "    if False:\n",
    ),
    Mutant(
        "tract: a run-time length in an If branch not warned about",
        "rewriter/targets.py",
        "            symbols_in_if=False,\n",
        "            symbols_in_if=True,\n",
    ),
    Mutant(
        "io: external data one byte too short accepted",
        "rewriter/io/load.py",
        "        if size < end:\n",
        "        if size < end - 1:\n",
    ),
    Mutant(
        "io: the model committed before its data files",
        "rewriter/io/atomic.py",
        "        for staged, name, _ in staged_data:\n"
        "            os.replace(staged, folder / name)\n"
        "            moved.append(folder / name)\n"
        "        os.replace(staged_model, target)\n",
        "        os.replace(staged_model, target)\n"
        "        for staged, name, _ in staged_data:\n"
        "            os.replace(staged, folder / name)\n"
        "            moved.append(folder / name)\n",
    ),
    Mutant(
        "io: the report written directly, not staged",
        "rewriter/io/atomic.py",
        "    with _staging(target) as stage:\n"
        "        staged = stage / target.name\n"
        "        try:\n"
        "            staged.write_text(text)\n"
        "        except OSError as exc:\n"
        '            raise ModelFileError(f"{target}: cannot write: {exc.strerror or exc}")'
        " from exc\n"
        "        _commit(target, staged, [], None, is_model=False)\n",
        "    try:\n"
        "        target.write_text(text)\n"
        "    except OSError as exc:\n"
        '        raise ModelFileError(f"{target}: cannot write: {exc.strerror or exc}") from exc\n',
    ),
    Mutant(
        "io: a new data file takes the loosest input data file's mode",
        "rewriter/io/atomic.py",
        "return min(files, key=",
        "return max(files, key=",
    ),
    Mutant(
        "checker: small external initializers left for onnx's checker to find",
        "rewriter/checker.py",
        "lifted = tensor.nbytes > _c_api_utils._BIG_TENSOR_SIZE_LIMIT",
        "lifted = True",
    ),
    Mutant(
        "checker: subgraph initializers taken as lifted by onnx_ir",
        "rewriter/checker.py",
        "if initializer and not for_save and graph is model.graph and lifted:",
        "if initializer and not for_save and lifted:",
    ),
    Mutant(
        "checker: external tensor attributes left as file references",
        "rewriter/checker.py",
        "        if not isinstance(tensor, ir.ExternalTensor):\n"
        "            return tensor\n"
        "        if initializer and for_save",
        "        if not isinstance(tensor, ir.ExternalTensor) or not initializer:\n"
        "            return tensor\n"
        "        if initializer and for_save",
    ),
    Mutant(
        "io: save leaves external tensor attributes pointing at the input's data",
        "rewriter/io/atomic.py",
        "with tensors_in_memory(model, for_save=True):",
        "with contextlib.nullcontext():",
    ),
    Mutant(
        "io: function bodies' external tensors get no data folder",
        "rewriter/io/load.py",
        "for graph in (model.graph, *(f.graph for f in model.functions.values())):",
        "for graph in (model.graph,):",
    ),
    Mutant(
        "io: linked data not pointed at its real path",
        "rewriter/io/load.py",
        "        _follow_links(model, path, linked)\n",
        "        pass\n",
    ),
    Mutant(
        "io: a data file with hard links left to onnx_ir, which refuses it",
        "rewriter/io/load.py",
        "return (path.parent / location).stat().st_nlink > 1",
        "return False",
    ),
    Mutant(
        "types: a call's function key ignores its overload",
        "rewriter/types.py",
        "return (node_or_function.domain, node_or_function.op_type, node_or_function.overload)",
        'return (node_or_function.domain, node_or_function.op_type, "")',
    ),
    Mutant(
        "io: function bodies' subgraphs not walked for external data",
        "rewriter/protos.py",
        "    for function in proto.functions:\n        yield from _subgraphs(function.node)\n",
        "",
    ),
    Mutant(
        "io: training_info not walked for external data",
        "rewriter/protos.py",
        "    for info in proto.training_info if training else ():",
        "    for info in ():",
    ),
    Mutant(
        "checker: function-subgraph initializers left to ir.save, which does not move them",
        "rewriter/checker.py",
        "if initializer and for_save and id(graph) in saved:",
        "if initializer and for_save:",
    ),
    Mutant(
        "convert: training_info written with its input-relative data locations",
        "rewriter/convert.py",
        "kept = io.training_info(source)",
        'kept = __import__("onnx").load(str(source), load_external_data=False).training_info',
    ),
    Mutant(
        "verify: bfloat16 feeds and outputs given to onnxruntime's session.run",
        "rewriter/verify/model.py",
        "            return _session_run(session, feeds)\n",
        "            return list(session.run(None, feeds))\n",
    ),
    Mutant(
        "io: a string initializer over 256 bytes moved to the data file",
        "rewriter/io/atomic.py",
        "    return max([256, *sizes])",
        "    return 256",
    ),
    Mutant(
        "convert: a folder scan takes .onnx in lower case only",
        "rewriter/convert.py",
        'if path.suffix.lower() != ".onnx" or io.is_staging(rel):',
        'if path.suffix != ".onnx" or io.is_staging(rel):',
    ),
    Mutant(
        "convert: a folder scan takes data files named *.onnx for models",
        "rewriter/convert.py",
        "if path.resolve() not in data)",
        "if path.resolve() or data)",
    ),
    Mutant(
        "io: any '..' in a data location refused",
        "rewriter/io/load.py",
        'if os.path.normpath(location).split(os.sep)[0] == "..":',
        'if ".." in Path(location).parts:',
    ),
    Mutant(
        "decompose: training_info's nodes kept under a lower target opset",
        "rewriter/decompose.py",
        "if nodes and target_opset is not None and target_opset != opset:",
        "if False:",
    ),
    Mutant(
        "decompose: a CumProd kept in training_info not warned about",
        "rewriter/decompose.py",
        "    if cumprods:\n        logger.warning(",
        "    if False:\n        logger.warning(",
    ),
    Mutant(
        "io: 'several inputs' names the output twice",
        "rewriter/io/plan.py",
        '({outputs[key][1]} and "\n                    f"{source}); nothing written"',
        '({target} and "\n                    f"{target}); nothing written"',
    ),
    Mutant(
        "io: two jobs with one output told apart by the output's Path identity",
        "rewriter/io/plan.py",
        "if key in outputs and outputs[key][0] != job:",
        "if key in outputs and jobs[outputs[key][0]][1] is not target:",
    ),
    Mutant(
        "verify: onnx.reference's own CumProd (bfloat16 rounded every step)",
        "rewriter/verify/run.py",
        "evaluator = ReferenceEvaluator(path, new_ops=[_reference_cumprod()])",
        "evaluator = ReferenceEvaluator(path)",
    ),
    Mutant(
        "verify: a rewrite onnxruntime cannot load stops verify",
        "rewriter/verify/model.py",
        "            if reference_session is not None:\n                raise\n",
        "            if True:\n                raise\n",
    ),
    Mutant(
        "verify: a run-time CumProd axis always fed 0",
        "rewriter/verify/model.py",
        "        last = index % 2 == 1\n",
        "        last = False\n",
    ),
    Mutant(
        "verify: no overflow / underflow feeds",
        "rewriter/verify/model.py",
        '["special", "finite special", "extreme", "overflow", "underflow"]',
        '["special", "finite special", "extreme"]',
    ),
    Mutant(
        "verify: no finite special feed",
        "rewriter/verify/model.py",
        '["special", "finite special", "extreme", "overflow", "underflow"]',
        '["special", "extreme", "overflow", "underflow"]',
    ),
    Mutant(
        "verify: NaN not first in the special feed",
        "rewriter/verify/feeds.py",
        "once = np.array([np.nan, *rng.permutation([*others, rng.choice([-sub, sub])])])",
        "once = np.array([*others, np.nan, rng.choice([-sub, sub])])",
    ),
    Mutant(
        "verify: unnamed dims all fed 3",
        "rewriter/verify/feeds.py",
        "        unnamed = itertools.cycle(range(top + 1, top + 1 + UNNAMED_SIZES))\n",
        "        unnamed = None\n",
    ),
    Mutant(
        "verify: a zero met by a same-sign subnormal is an infinity/zero mismatch",
        "rewriter/verify/compare.py",
        "special = np.isinf(ref_t) | ((ref_t == 0) & ~near_zero)",
        "special = np.isinf(ref_t) | (ref_t == 0)",
    ),
    Mutant(
        "types: an output that is also a graph input loses its shape before inference",
        "rewriter/types.py",
        'if value.type.HasField("tensor_type") and value.name not in given:',
        'if value.type.HasField("tensor_type"):',
    ),
    Mutant(
        "decompose: a ModelProto's unreachable external data left to a FileNotFoundError",
        "rewriter/decompose.py",
        "    _refuse_unreachable_external_data(model)\n    opset",
        "    opset",
    ),
    Mutant(
        "verify: every output held to the whole model's bound",
        "rewriter/verify/model.py",
        "        chosen = per_output.get(name)\n",
        "        chosen = None\n",
    ),
    Mutant(
        "verify: a scan along an unnamed dim bounded as if 3 long",
        "rewriter/verify/model.py",
        "return dims.get(str(name), DEFAULT_DIM) if name else largest",
        "return dims.get(str(name), DEFAULT_DIM) if name else DEFAULT_DIM",
    ),
    Mutant(
        "io: a data link to any folder accepted",
        "rewriter/io/load.py",
        "if not any(real.is_relative_to(root) for root in roots):",
        "if False:",
    ),
    Mutant(
        "io: a model file with linked data checked by onnx's checker on the file",
        "rewriter/io/load.py",
        "    if any(\n        _through_link(",
        "    if False and any(\n        _through_link(",
    ),
    Mutant(
        "io: external initializers' doc_string and metadata not given back",
        "rewriter/io/atomic.py",
        "        _describe_initializers(proto, described)\n",
        "",
    ),
    Mutant(
        "io: sibling subgraphs' differing initializer descriptions mixed",
        "rewriter/io/atomic.py",
        'if found[0] != ("", {}) and all(other == found[0] for other in found)',
        'if found[0] != ("", {})',
    ),
    Mutant(
        "opset.rules: a BitShift-28 shift by the width or more taken below 28",
        "rewriter/opset/rules.py",
        "if bool(((amounts >= 0) & (amounts < width)).all()):",
        "if bool(((amounts >= 0) & (amounts <= width)).all()):",
    ),
    Mutant(
        "opset.rules: a saturating FNUZ Cast-24 relabelled below 24",
        "rewriter/opset/rules.py",
        'if node.attributes.get_int("saturate", 1) == 0:',
        'if node.attributes.get_int("saturate", 0) == 0:',
    ),
    Mutant(
        "opset: a function importing an older ai.onnx raised to the target",
        "rewriter/opset/check.py",
        "        if where.opset < target:  # a function",
        "        if False:  # a function",
    ),
    Mutant(
        "decompose: an invalid input's opset refusal not reported as the input's",
        "rewriter/decompose.py",
        "if isinstance(cause, OpsetError) and (before := _checker_problem(model)):",
        "if False:",
    ),
    Mutant(
        "targets: tinygrad given the empty-or-not If (its If runs both branches)",
        "rewriter/targets.py",
        'missing_ops=frozenset({"Loop", "Scan", "If"}),\n'
        '            avoided_ops=frozenset({"If"}),\n'
        '            auto="tinygrad"',
        'missing_ops=frozenset({"Loop", "Scan"}),\n            auto="tinygrad"',
    ),
    Mutant(
        "decompose: the model's own Loop on a target without Loop not warned about",
        "rewriter/lower.py",
        "[*own_loop_warnings(model, self.target), ",
        "[*own_loop_warnings(model, self.target)[:0], ",
    ),
    Mutant(
        "lower: a Loop holding two CumProds not warned about on OpenVINO",
        "rewriter/lower.py",
        "        if count >= 2:",
        "        if count >= 3:",
    ),
    Mutant(
        "lowerings: a refusal inside the model's own Loop silent about it",
        "rewriter/lowerings/__init__.py",
        "    if inside:\n",
        "    if False:\n",
    ),
    Mutant(
        "types: a Loop body's carried value keeps its declared rank",
        "rewriter/declarations.py",
        "                if declared is None:\n"
        "                    continue\n                # the rank",
        "                if declared is None or all(d is None for d in declared):\n"
        "                    continue\n                # the rank",
    ),
    Mutant(
        "declarations: Scan body outputs in function bodies get no rank",
        "rewriter/declarations.py",
        "_give_scan_outputs_rank(function.graph, _declared_inference(model, function, types))",
        "pass",
    ),
    Mutant(
        "types: a Loop's count and condition lose their shapes too",
        "rewriter/declarations.py",
        'fixed = 2 if owner.op_type == "Loop" else 0',
        "fixed = 0",
    ),
    Mutant(
        "decompose: a lowering's unused helper nodes left in the graph",
        "rewriter/lower.py",
        "            graph.remove(node, safe=True)  # a helper value",
        "            pass  # a helper value",
    ),
    Mutant(
        "view: the length guard kept where Reshape checks nothing (IREE read it back wrong)",
        "rewriter/lowerings/view.py",
        "    if v.target.run_time_checks is False:\n        return n",
        "    if False:\n        return n",
    ),
    Mutant(
        "cli: --report without the warnings about each file",
        "rewriter/cli.py",
        "        report.warnings = collector.messages",
        "        report.warnings = []",
    ),
    Mutant(
        "cli: a batch's files that did not verify left out of the final list",
        "rewriter/cli.py",
        "        for r in (*failed, *mismatched):",
        "        for r in failed:",
    ),
    Mutant(
        "decompose: a checker refusal without the node onnx names on a later line",
        "rewriter/decompose.py",
        "    if node := _CHECKER_NODE.search(text):",
        "    if node := None:",
    ),
    Mutant(
        "types: unconfirmed shapes blanked also off the way to a CumProd",
        "rewriter/declarations.py",
        "        if id(computed) not in cone:\n            continue\n"
        "        value = _inner_of_output(model, computed, types)",
        "        value = _inner_of_output(model, computed, types)",
    ),
    Mutant(
        "types: the cone stops at a function's inputs (not back to its calls)",
        "rewriter/declarations.py",
        "            for call in calls.get(functions[id(value.graph)], []):\n"
        "                todo.extend(call.inputs)",
        "            pass",
    ),
    Mutant(
        "types: the cone stops at a subgraph's inputs (not back to its node's)",
        "rewriter/declarations.py",
        "            todo.extend(owner[id(value.graph)].inputs)\n",
        "",
    ),
    Mutant(
        "types: the cone does not follow the bodies a node on the way runs",
        "rewriter/declarations.py",
        "            todo.extend(body.outputs)\n",
        "            pass\n",
    ),
    Mutant(
        "types: stale shapes dropped only on the way to a CumProd",
        "rewriter/declarations.py",
        "    for stale in stale_shapes(model, types):\n",
        "    for stale in [v for v in stale_shapes(model, types) if id(v) in cone]:\n",
    ),
    Mutant(
        "cli: the warning collector left on the library's logger after main()",
        "rewriter/cli.py",
        "        logger.removeHandler(collector)\n",
        "",
    ),
    Mutant(
        "cli: the file tag left on the root handlers after main()",
        "rewriter/cli.py",
        "            handler.removeFilter(tag)\n",
        "",
    ),
    Mutant(
        "rules: a reused rule set silent about the leftovers of every model after the first",
        "rewriter/rules.py",
        "            record = records[self] = _Record()\n",
        "            record = records[self] = _Record("
        'warned=self.__dict__.setdefault("_w", set()))\n',
    ),
    Mutant(
        "rules: a model rewritten again read through the facts of its last visit",
        "rewriter/rules.py",
        "            or node in visit.checked\n",
        "",
    ),
    Mutant(
        "rules: the plan left on the node after its rewrite",
        "rewriter/rules.py",
        "        plan = node.meta.pop(_PLAN, None)",
        "        plan = node.meta.get(_PLAN, None)",
    ),
    Mutant(
        "cli: -v's level left on the root logger after main()",
        "rewriter/cli.py",
        "        root.setLevel(levels[0])\n",
        "",
    ),
    Mutant(
        "cli: -v not applied where the root logger already has handlers",
        "rewriter/cli.py",
        "    root.setLevel(logging.DEBUG if verbose else logging.WARNING)\n",
        "    if added is not None:\n"
        "        root.setLevel(logging.DEBUG if verbose else logging.WARNING)\n",
    ),
    Mutant(
        "decompose: a lowering's unused helper nodes left in its If branches",
        "rewriter/lower.py",
        "                _drop_unused(sub, list(sub))\n",
        "                pass\n",
    ),
    Mutant(
        "constant_if: the taken branch's initializers left behind",
        "rewriter/constant_if.py",
        "    _move_initializers(branch, graph, node, body)\n",
        "",
    ),
    Mutant(
        "constant_if: the inlined nodes' names not made unique",
        "rewriter/constant_if.py",
        "        common.NameFixPass()(model)\n",
        "        pass\n",
    ),
    Mutant(
        "constant_if: a main-graph If whose branches hold a CumProd left to onnxruntime",
        "rewriter/constant_if.py",
        "        if not read and not any(holds_cumprod(b) for b in branches):\n",
        "        if not read:\n",
    ),
    Mutant(
        "graphs: an inlined node placed where the inliner put it",
        "rewriter/graphs.py",
        '        where = f"{origin[1]} (inlined into {place.path})" if origin else place.path\n',
        "        where = place.path\n",
    ),
    Mutant(
        "carry: narrow runs of more than one element take r = 16",
        "rewriter/lowerings/tree.py",
        "        and i * dtype.itemsize <= most_bytes\n",
        "        and False\n",
    ),
    Mutant(
        "io: a --report in a missing folder refused",
        "rewriter/io/plan.py",
        "    while not folder.exists() and folder != folder.parent:\n",
        "    while False:\n",
    ),
    Mutant(
        "cli: the report without the --dim names a file lacks",
        "rewriter/cli.py",
        "        report.warnings = collector.messages + _dim_warnings(report)\n",
        "        report.warnings = collector.messages\n",
    ),
    Mutant(
        "cached: each tile scanned as one long row (its rows run into each other)",
        "rewriter/lowerings/cached.py",
        "    tiles = b.reshape(x3, b.const([o // rows, rows, n, i]))\n",
        "    tiles = b.reshape(x3, b.const([o // rows, 1, rows * n, i]))\n",
    ),
    Mutant(
        "cached: tiles under a quarter of the tile size left uncut (the 1 MiB tiles' rule)",
        "rewriter/targets.py",
        "    cache_least: tuple[int, int] = (8, 4)\n",
        "    cache_least: tuple[int, int] = (4, 4)\n",
    ),
    Mutant(
        "cached: a single tile of every row allowed",
        "rewriter/lowerings/cached.py",
        "    most = min(count // 2, max(1, limit // unit))\n",
        "    most = min(count, max(1, limit // unit))\n",
    ),
    Mutant(
        "cached: an exclusive chunk passes on its product without its own last factor",
        "rewriter/lowerings/cached.py",
        '        after = body.op("Mul", after, body.slice_axis(chunk, 1, edge, edge + 1))\n',
        "        pass\n",
    ),
    Mutant(
        "cached: a reversed chunk passes on the product at its end, not its start",
        "rewriter/lowerings/cached.py",
        "    edge = 0 if v.reverse else length - 1  # the chunk's last position in scan order\n",
        "    edge = length - 1\n",
    ),
    Mutant(
        "carry: a seed left out of the last level's chain",
        "rewriter/lowerings/tree.py",
        "v, exclusive=exclusive, seed=seed)\n",
        "v, exclusive=exclusive)\n",
    ),
    Mutant(
        "carry: a seed left out of the block totals' scan",
        "rewriter/lowerings/tree.py",
        "shape_of(b, o, m, i)), v, seed)\n",
        "shape_of(b, o, m, i)), v, None)\n",
    ),
    Mutant(
        "cached: an exclusive one-position chunk's state output as itself",
        "rewriter/lowerings/cached.py",
        '        out = body.op("Identity", state)\n',
        "        pass\n",
    ),
    Mutant(
        "cached: the tiles' runs judged narrow on the tile",
        "rewriter/lowerings/cached.py",
        "    narrow_runs = tree.narrow((o, n, i), v.dtype, v.target)",
        "    narrow_runs = tree.narrow((rows, n, i), v.dtype, v.target)",
    ),
    Mutant(
        "cached: the tiles' result viewed as the tile (a Reshape copied into the Scan's output)",
        "rewriter/lowerings/cached.py",
        "    out = tree.build_carry(body, tile, inside, narrow_runs=narrow_runs, blocks=True)\n",
        "    out = tree.build_carry(body, tile, inside, narrow_runs=narrow_runs)\n"
        "    out.type, out.shape = ir.TensorType(v.dtype), ir.Shape([rows, n, i])\n",
    ),
    Mutant(
        "cached: a chunk's state sliced from its blocks as if they were the chunk",
        "rewriter/lowerings/cached.py",
        "    whole = out if out.shape == [1, length, i] else body.reshape(out, body.const([1,"
        " length, i]))\n",
        "    whole = out\n",
    ),
    Mutant(
        "carry: the blocks' shape from r = 16 whatever the runs",
        "rewriter/lowerings/tree.py",
        "        r = levels[0] if levels and n % levels[0] == 0 else n",
        "        r = 16 if levels and n % 16 == 0 else n",
    ),
    Mutant(
        "cached: the chunks' runs judged narrow on the chunk",
        "rewriter/lowerings/cached.py",
        "    narrow_runs = tree.narrow((1, n, i), v.dtype, v.target)",
        "    narrow_runs = tree.narrow((1, length, i), v.dtype, v.target)",
    ),
    Mutant(
        "near_one: offset totals taken on factors within 1 / (4r) of 1, not 1 / (8r)",
        "rewriter/lowerings/near_one.py",
        "    limit = b.const(np.array(1 / (8 * size), dtype=np.float32))\n",
        "    limit = b.const(np.array(1 / (4 * size), dtype=np.float32))\n",
    ),
    Mutant(
        "auto: a large first-axis slab scans from 100 elements, not 1000",
        "rewriter/lowerings/auto.csv",
        "first 4-byte slab>=1000 bytes>4M forward,",
        "first 4-byte slab>=100 bytes>4M forward,",
    ),
    Mutant(
        "auto: bytes>=X in auto.csv read as bytes>X",
        "rewriter/lowerings/auto.py",
        '("bytes", ">="): ("over_bytes", lambda v: v - 1)',
        '("bytes", ">="): ("over_bytes", lambda v: v)',
    ),
    Mutant(
        "auto: a condition set twice in auto.csv, the last kept",
        "rewriter/lowerings/auto.py",
        "        if field in fields:\n",
        "        if False:\n",
    ),
    Mutant(
        "auto: a row's size condition ignored",
        "rewriter/lowerings/auto.py",
        "            and (not self.over_bytes or f.nbytes > self.over_bytes)\n",
        "",
    ),
    Mutant(
        "auto: cached's rows take any piece size",
        "rewriter/lowerings/auto.py",
        "            and (not self.piece_up_to or 0 < f.piece_bytes <= self.piece_up_to)\n",
        "",
    ),
    Mutant(
        "auto: a refused row picked all the same",
        "rewriter/lowerings/auto.py",
        "        if reason is None:\n            return row.lowering, refused\n",
        "        if True:\n            return row.lowering, refused\n",
    ),
    Mutant(
        "auto: IREE's middle chain to 256 again",
        "rewriter/lowerings/auto.csv",
        "iree,chain,middle n=2..32,",
        "iree,chain,middle n=2..256,",
    ),
    Mutant(
        "auto: the direction of a row ignored",
        "rewriter/lowerings/auto.py",
        '            and self.direction in (None, "reverse" if f.reverse else "forward")\n',
        "",
    ),
    Mutant(
        "lowerings: the build opset's refusals skipped",
        "rewriter/lowerings/__init__.py",
        "    return None if opset is None else _refused_at(lowering, spec, target, opset)\n",
        "    return None\n",
    ),
]


# The tests of a module whose behaviour is tested (also) by files named for a concern rather
# than for the module (tests/test_NAME.py, tests/PACKAGE/test_NAME.py): these instead.
TESTED_BY = {
    "rewriter/cli.py": ("tests/test_cli.py", "tests/io/test_file_safety_in_process.py"),
    "rewriter/io/atomic.py": ("tests/io/",),
    "rewriter/verify/model.py": ("tests/verify/",),
    "rewriter/__main__.py": ("tests/test_cli.py", "tests/test_readme.py"),
    "rewriter/convert.py": (
        "tests/test_cli.py",
        "tests/io/test_file_safety_in_process.py",
        "tests/io/test_atomic.py",
    ),
    "rewriter/errors.py": ("tests/test_bad_input.py", "tests/test_cli.py"),
    "rewriter/protos.py": ("tests/test_graphs.py",),
    "rewriter/checker.py": (
        "tests/io/test_external_data_places.py",
        "tests/opset/test_apply.py",
        "tests/test_decompose.py",
    ),
    "rewriter/inline.py": ("tests/test_inline.py",),
    "rewriter/types.py": (
        "tests/test_types.py",
        "tests/test_declarations.py",
        "tests/test_specialize.py",
        "tests/test_structures.py",
    ),
    "rewriter/site.py": (
        "tests/test_site.py",
        "tests/test_bad_input.py",
        "tests/lowerings/test_scan.py",
        "tests/lowerings/test_masked.py",
    ),
    "rewriter/lower.py": (
        "tests/test_lower.py",
        "tests/test_decompose.py",
        "tests/test_targets.py",
        "tests/test_structures.py",
    ),
    "rewriter/declarations.py": ("tests/test_declarations.py", "tests/test_structures.py"),
    "rewriter/serde.py": (
        "tests/test_serde.py",
        "tests/test_types.py",
        "tests/test_structure_interface.py",
    ),
    "rewriter/lowerings/__init__.py": (
        "tests/lowerings/test_auto.py",
        "tests/test_targets.py",
        "tests/lowerings/test_branches.py",
    ),
    "rewriter/lowerings/tree.py": (
        "tests/lowerings/test_tree.py",
        "tests/lowerings/test_tree_accuracy.py",
        "tests/lowerings/test_branches.py",
    ),
    "rewriter/lowerings/builder.py": (
        "tests/lowerings/test_builder.py",
        "tests/lowerings/test_branches.py",
    ),
    "rewriter/lowerings/doubling.py": (
        "tests/lowerings/test_doubling.py",
        "tests/lowerings/test_near_one.py",
        "tests/lowerings/test_tree_accuracy.py",
        "tests/lowerings/test_branches.py",
    ),
    "rewriter/lowerings/logsum.py": (
        "tests/lowerings/test_logsum.py",
        "tests/test_special_values.py",
    ),
    "rewriter/lowerings/loop.py": (
        "tests/lowerings/test_loop.py",
        "tests/lowerings/test_branches.py",
    ),
    "rewriter/lowerings/near_one.py": (
        "tests/lowerings/test_near_one.py",
        "tests/lowerings/test_tree_accuracy.py",
    ),
    "rewriter/lowerings/wide.py": (
        "tests/lowerings/test_wide.py",
        "tests/lowerings/test_tree_accuracy.py",
    ),
}
