"""Runtimes: what each lacks or gets wrong, as data; the lowerings and ``auto`` read it.

A target says which ops the output may not use, which quirks to route around, which
element types must be computed in another type, and which results the runtime cannot
compute exactly (the pass then warns, naming the node and the runtime). Each fact comes from
runs on the runtime; docs/targets.md gives the evidence, tests/test_runtimes*.py and
tests/test_runtime_tables.py run it:

- ``onnxruntime`` (default): 1.20.1 and later. uint32 / uint64 have no Mul, Less, Where or
  CumSum there, so they are multiplied as int64 (the low 64 bits of a product do not depend
  on signedness; uint32 results are masked with ``Mod(y, 2^32)`` before the cast back).
- ``spec``: any runtime with every kernel the ONNX spec lists: integers in their own type.
- ``openvino``: Loop and Scan load; no If (two If-guarded Scans in one model gave garbage on
  the first inference; a slab of ones guards them instead). Its CPU plugin holds int64 /
  uint64 in 32 bits and float64 in float32 in every op (warned; no graph can fix it); a Cast
  uint32 -> int64 is wrong, so integers are computed in their own type. Exp(NaN) is +inf,
  and a zero-iteration Loop's stacked output keeps shape (0, 0, 0).
- ``tract``: no Loop; two If nodes in one model fail to load (no If is built); no bfloat16
  (warned); a shape computed from a run-time value fails at load, so a run-time axis becomes
  a Gather-select over the axes; Slice with step -1 over a symbolic dim fails.
- ``iree``: Scan ignores its directions and breaks on symbolic lengths, Loop with scan
  outputs is not lowered: neither is used (a length known only at run time needs
  ``max_length``). A run-time axis becomes a Gather-select; float64 needs
  ``--iree-input-demote-f64-to-f32=false``; subnormal results flush to zero; opset 13 and
  later only.
- ``tflite`` (onnx2tf 2.6.9, LiteRT): no Loop, Scan or bfloat16; int64 / uint64 computed in
  int32, float64 and uint32 not run (warned); a ones tensor Expand-ed from a constant is
  folded away (``constant_ones``); rank-3 tensors are re-laid out (``symbolic_rank3``).
- ``tinygrad``: no Loop, no Scan; its If runs both branches, so no If is built; int32 /
  int64 multiplied as uint32 / uint64 (its C backend: signed overflow is undefined).
- ``mnn``, ``tvm``, ``ncnn``: no Loop / Scan / If; MNN's integers and TVM's symbolic-dim
  arithmetic, ncnn's everything but float32: warned or refused per node (docs/targets.md).
- ``portable``: the strictest profile, for runtimes we cannot run here (TensorRT, CoreML,
  NPUs): no Loop, Scan or If, no float64 compute of our own (a float64 model stays float64).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping
from typing import Any

import onnx_ir as ir

__all__ = ["DEFAULT_TARGET", "TARGETS", "Limit", "Target", "target_named"]

_I64, _U64, _U32 = ir.DataType.INT64, ir.DataType.UINT64, ir.DataType.UINT32
_F64 = ir.DataType.DOUBLE
_UINT_AS_INT64 = {_U32: _I64, _U64: _I64}


@dataclasses.dataclass(frozen=True)
class Limit:
    """A result the runtime itself cannot compute exactly, for inputs of ``types``."""

    types: frozenset[ir.DataType]
    message: str


@dataclasses.dataclass(frozen=True)
class Target:
    """What a runtime can compute.

    Attributes:
        name: The name users pass (``target=``, ``--target``).
        description: One line for ``--help`` and the README.
        integer_compute: Integer types that must be computed in another integer type.
        missing_ops: ai.onnx ops the output must not contain (Loop, Scan, If).
        avoided_ops: Those of ``missing_ops`` the runtime has but that go wrong in what we
            would build with them (OpenVINO's If): messages say "does not use", not "lacks".
        scan_directions: Whether Scan honours ``scan_input/output_directions``.
        slice_negative_step: Whether Slice with step -1 works over a symbolic dim.
        float64: Whether the runtime computes float64 in float64.
        runtime_view: Whether a Reshape may take a shape computed from a run-time value (the
            axis input): else a run-time axis computes the lowering at every axis and
            picks one with Gather (no control flow).
        auto: Which of ``auto``'s tables picks the lowering (:mod:`rewriter.lowerings.auto`).
        limits: Results the runtime cannot compute exactly (a warning per node).
        constant_ones: Whether a ones tensor ``Expand(1, Shape(s))`` (the exclusive scan's
            first output) may be built from a constant: else it is ``Cast(Equal(c, c))`` with
            ``c = Less(s, s)``, which no converter can fold (onnx2tf folds the Expand over
            static shapes into a graph constant it then cannot use).
        symbolic_rank3: Whether rank-3 views convert right: else (onnx2tf re-lays out rank
            3-5 tensors channel-last and then pads, slices and splits the wrong axis when it
            cannot see the dims, or when two of them are equal: a static (1, 4, 4) came out
            transposed) the view is the 2-D ``(outer, n * inner)`` for the lowerings that
            take one (``doubling``, ``chain``), static dims or not.
        loop_exclusive_min_opset: The lowest ai.onnx opset at which the ``loop`` lowering of
            an exclusive scan over a length known only at run time runs right (OpenVINO
            2026.4: 14; below it, it returns uninitialised memory); below it that strategy
            is refused.
        min_opset: The lowest ai.onnx opset the runtime's importer takes (a lower
            ``target_opset`` is refused).
        wrong_lowerings: Lowerings whose output converts or loads but computes wrong
            values there (or is untested and built the same way), with why: refused.
        unloadable_lowerings: Lowerings whose output the runtime fails to load (or, untried,
            built of the same ops), with why: refused.
        loop_empty_length: Whether a zero-iteration Loop's stacked output can be given its
            shape (0, o, i) by a Reshape. OpenVINO 2026.4 returns it as (0, 0, 0) and the
            Reshape after it keeps that shape (a lone Reshape of a (0, 0, 0) tensor does
            not): the ``loop`` lowering's result had shape (0, 0, 0) for an empty middle
            axis. There the Loop runs over x with a slab of ones before it when the length
            may be 0.
        bounded_lengths: Whether the runtime loads a Pad or a Reshape whose sizes are
            computed from a length known only at run time (what the lowerings that take such
            a length through ``max_length`` build). tract 0.23 does not ("Undetermined
            symbol in expression", "shape input is variable"): those lowerings are refused
            there for such lengths.
        run_time_checks: Whether a Reshape to a shape that does not fit the data, and a
            Gather index out of range, fail at run time: the guards that make an input longer
            than ``max_length``, or a run-time axis out of range, fail like the native op.
            Else (IREE 3.13 checks neither) such inputs give wrong values: a warning per node
            that takes either. None: not known (``portable``, whose runtimes are not run
            here): the warning says the runtime may not check.
        padded_lowerings: Of the lowerings that take a length known only at run time
            through the bound ``max_length`` (``Lowering.length``), the ones that compile
            and run there; None: all of them. IREE 3.13 compiles no ``chain`` over such a
            length ("'linalg.generic' op write affecting operations on global resources are
            restricted to workgroup distributed contexts") and fails at run time on
            ``radix`` and ``carry`` over one along the last axis ("mismatching contracting
            dimension"): only ``doubling`` (``auto``'s pick there) is taken.
        exclusive_cumsum: Whether ``CumSum(exclusive=1)`` gives the sum of the elements
            before each one when some are infinite: IREE 3.13 computed it as the inclusive
            sum minus x (NaN where x is -inf, i.e. log|0|): ``logsum`` is
            refused for exclusive scans there.
        scan_in_scan: Whether a Scan inside a Scan body converts and runs right: else a
            CumProd in a Scan body takes no Scan (OpenVINO 2026.4 failed to convert one
            there: "Check 'ov::as_type_ptr<op::v0::TensorIterator>(node)'").
        symbols_in_if: Whether the runtime resolves the model's symbolic dims inside an If
            branch: tract 0.23 does not ("Undetermined symbol in expression: N+1" at run
            time, from the lowering's Slice by a length known only at run time; a Slice by
            ``Shape(x)`` fails the same way without CumProd), so a CumProd there whose
            length is known only at run time is warned about (it works where the length
            is static).
        lowers_in_scan: Whether a CumProd inside a Scan body can be lowered at all: tract 0.23
            carried a nested Scan's state from one outer step to the next (wrong values) and
            failed to load an exclusive chain there ("Inconsistent concat"): refused.
        pad_shifts: Whether ``doubling`` may shift an 8-byte tensor by a Pad with ones:
            else by a Concat of a ones slab (IREE 3.13 does not compile the Pad of an 8-byte
            tensor with a dim known only at run time in some graphs: "'stream.yield' op used
            resource not listed in explicit captures", seen for an exclusive scan over a
            run-time axis, and for 8-byte ``doubling`` over static dims; 4-byte types
            compile).
        chain_max_length: The longest axis ``chain`` unrolls (n + 2 nodes); longer ones are
            refused: on middle axes of large slabs it ran faster than ``carry`` up to 1024,
            not past it (bench-2026-12-01-middle-heldout.md).
        carry_radix: ``carry``'s r per level, ``(elsewhere, on narrow runs)``: 16 (r = 8 and
            32 took 1.07x and 1.04x its time, medians on first / middle axes,
            carry-radix-16-2026-12-06.md), 4 on the runs ``narrow_runs`` calls narrow.
        radix_r: ``radix``'s r per level, ``(r, up to n, r beyond)``: 8 on the last axis and
            up to n = 512, 16 beyond (16 took 0.91x 8's time there; 8 and 16 tie below on
            onnxruntime, radix-r-2026-12-06.md).
        blocked_one_level_up_to: ``blocked`` takes one level of blocks up to this length,
            two beyond (B^levels * m about n with B ~ m). Where ``auto`` takes it (OpenVINO,
            float32, first / middle n = 256-1024, last 1024-8192) two levels compiled and ran
            as one did, with more nodes (compile-openvino-float32-2026-12-06-quiet-summary.md,
            ``blocked_2lv``, at first 1024, middle 256 and last 8192).
        tree_chain_up_to: A product tree that scans its blocks with Scan (``blocked``,
            ``dynamic``) still unrolls a top level of at most this many blocks as a chain.
        dynamic_scan_up_to: ``dynamic`` takes the plain Scan up to this length (as fast as
            anything there, bench-2026-12-05-round29.md), beyond it the tree padded at run
            time with the levels ``dynamic_levels``.
        dynamic_levels: The block sizes of ``dynamic``'s tree beyond ``dynamic_scan_up_to``.
        masked_block: ``masked``'s tile side B: a tile of B times the elements per level, the
            blocks' count scanned by the same scheme (compile-tinygrad-masked-2026-12-06.md).
        masked_one_tile_up_to: ``masked`` takes one tile of side n (one ReduceProd) up to this
            length, blocks of ``masked_block`` beyond: on tinygrad at n = 256 one tile
            compiled 1.05-1.07x CumSum's time against 2.11-2.16x for B = 64 and ran 1.25x
            (float32) / 0.96x (int32) carry's time
            (compile-tinygrad-2026-12-06-middle256-quiet-summary.md).
        doubling_blocked_from: The static length from which ``doubling`` runs in blocks of
            32 (measured faster there: OpenVINO from 2000, IREE from 128,
            ``bench-runtime-{openvino,iree}-2026-12-01-doubling-*``); None: never for speed.
        shape_arithmetic: Whether the runtime's importer computes with values read from
            ``Shape(x)`` over symbolic dims: TVM 0.27's Relax frontend fails on a Mul, Less
            or Sub of them ("cannot handle ShapeExpr inputs"), so there a CumProd with a
            symbolic dim is refused unless its lowering only reshapes to them (``chain``
            over a static length, at most one symbolic dim on each side of the axis).
        element_types: The element types the runtime computes right (None: every type): a
            CumProd of another type is refused (ncnn computes float32 only, and reads
            pnnx's int32 constants as float bits, so integer graphs come out wrong).
        axis_input: Whether a run-time axis may be lowered (a Gather-select over the axes,
            which needs integer Gather and Cast: ncnn has neither right): else refused.
        max_ir_version: The highest IR version the runtime's importer takes (pnnx: 13); a
            rewritten model above it is given this one where its opsets allow (opset 26
            needs 13), else refused.
        local_functions: Whether the runtime loads model-local functions: else every call
            is inlined before the rewrite (:mod:`rewriter.inline`; OpenVINO 2026.4, tract
            0.23, IREE 3.13, tinygrad and onnx2tf fail on any call to one).
        reduce_prod_wraps: Whether an integer ReduceProd wraps around like Mul (the product
            modulo 2^bits, in any order), which ``masked`` needs for integers: onnxruntime
            1.32's saturates to INT_MAX / INT_MIN over a middle axis; checked on tinygrad
            (tests/lowerings/test_masked.py); not known elsewhere (False).
        where_keeps_negative_zero: Whether a broadcasting float Where returns a selected -0.0
            as -0.0, which ``masked`` needs for floats: onnxruntime 1.32 returns +0.0 (a
            (1, 64, 64, 1) mask over a (4, 1, 64, 1) x); checked on tinygrad; not known
            elsewhere (False).
        loop_with_cumprods: What goes wrong when one Loop body holds two or more lowered
            CumProds (None: nothing known), warned per Loop: OpenVINO 2026.4.1 returned the
            final value of a carried tensor growing through a Concat one step short ((1, 5)
            for (1, 6)) with every strategy, and right with either CumProd alone
            (tests/test_structures_runtimes.py::test_openvino_growing_loop_concat).
        bfloat16_math: Whether the runtime has bfloat16 Mul and Expand kernels, which a
            type-generic lowering (x's element type not known statically) uses when x is
            bfloat16 at run time: onnxruntime 1.20.1 and 1.32 have none ("NOT_IMPLEMENTED
            ... Expand(13)" at load), so such a node is warned about there.
        scan_over_x: Whether a first-axis scan runs its Scan over x itself (no view, no
            Reshape back into a graph output, which onnxruntime copies): measured faster on
            onnxruntime; on tract 1.2-2.2x the view's time (float32, large slabs, rank-1
            slices), so false elsewhere (the view).
        cache_pieces: ``(tile, chunk)``: the most bytes of ``cached``'s tiles of rows and of
            its chunks of an outermost axis (``carry`` on cache-sized pieces, one Scan step
            each: 0.52-0.92x carry's time on 4-32 MiB, against-2026-12-06-without-cached.md);
            None: ``cached`` is not offered (measured and tested on onnxruntime only).
        cache_least: ``(tile, chunk)``: pieces under 1 / tile of the most tile bytes, or
            1 / chunk of the most chunk bytes, are not cut (``carry`` on the whole view): an
            eighth of 2 MiB cuts every view the 1 MiB tiles measured before cut.
        narrow_runs: ``(bytes, elements)``: ``carry`` takes r = 4 on runs of i elements of at
            most this many bytes in tensors of at least this many elements (and on the last
            axis), r = 16 elsewhere (results/carry-radix-2026-12-03; below 2^21 elements
            r = 4 gained nothing).
        reduce_totals_above: Blocks of more positions than this take their float64 totals
            (``wide.block_totals``) by a ReduceProd of the blocks cast, fewer from their
            slices cast and multiplied: onnxruntime 1.32's ReduceProd over blocks of 4 took
            3.3x the slices' time (float32 (262144, 4, 1)), 0.66x on (4096, 16, 16). None:
            always from the slices (tract's float64 ReduceProd made radix 2.1-6.6x and carry
            1.0-5.0x slower, float32, 2^20 elements, n = 512 and 4096).
    """

    name: str
    description: str
    integer_compute: Mapping[ir.DataType, ir.DataType] = dataclasses.field(default_factory=dict)
    missing_ops: frozenset[str] = frozenset()
    avoided_ops: frozenset[str] = frozenset()
    scan_directions: bool = True
    slice_negative_step: bool = True
    float64: bool = True
    runtime_view: bool = True
    auto: str = "onnxruntime"
    limits: tuple[Limit, ...] = ()
    constant_ones: bool = True
    symbolic_rank3: bool = True
    loop_exclusive_min_opset: int = 0
    min_opset: int = 11
    wrong_lowerings: tuple[tuple[str, str], ...] = ()
    unloadable_lowerings: tuple[tuple[str, str], ...] = ()
    loop_empty_length: bool = True
    bounded_lengths: bool = True
    run_time_checks: bool | None = True
    padded_lowerings: frozenset[str] | None = None
    exclusive_cumsum: bool = True
    scan_in_scan: bool = True
    lowers_in_scan: bool = True
    symbols_in_if: bool = True
    pad_shifts: bool = True
    local_functions: bool = True
    chain_max_length: int = 1024
    carry_radix: tuple[int, int] = (16, 4)
    radix_r: tuple[int, int, int] = (8, 512, 16)
    blocked_one_level_up_to: int = 8192
    tree_chain_up_to: int = 16
    dynamic_scan_up_to: int = 512
    dynamic_levels: tuple[int, ...] = (32, 32)
    masked_block: int = 64
    masked_one_tile_up_to: int = 0
    doubling_blocked_from: int | None = None
    bfloat16_math: bool = True
    shape_arithmetic: bool = True
    element_types: frozenset[ir.DataType] | None = None
    axis_input: bool = True
    max_ir_version: int | None = None
    loop_with_cumprods: str | None = None
    reduce_prod_wraps: bool = False
    where_keeps_negative_zero: bool = False
    scan_over_x: bool = False
    cache_pieces: tuple[int, int] | None = None
    cache_least: tuple[int, int] = (8, 4)
    narrow_runs: tuple[int, int] = (24, 1 << 21)
    reduce_totals_above: int | None = None

    def compute_type(self, dtype: ir.DataType | None) -> ir.DataType | None:
        return None if dtype is None else self.integer_compute.get(dtype, dtype)

    def wrong_reason(self, lowering: str) -> str | None:
        """What goes wrong with ``lowering`` here, for its refusal ("computes wrong values on
        tflite: ...", "fails to load on ncnn: ..."); None: nothing, as far as known."""
        wrong = dict(self.wrong_lowerings).get(lowering)
        if wrong is not None:
            return f"computes wrong values on {self.name}: {wrong}"
        unloadable = dict(self.unloadable_lowerings).get(lowering)
        return None if unloadable is None else f"fails to load on {self.name}: {unloadable}"

    def limit_for(self, dtype: ir.DataType | None) -> Limit | None:
        return next((lim for lim in self.limits if dtype in lim.types), None)

    def lacking(self, ops: Collection[str]) -> str:
        """``ops`` (of ``missing_ops``) for a refusal: "If and Scan, which iree lacks", "If,
        which the openvino target does not use", or both parts ("Scan, which tinygrad
        lacks, and If, which the tinygrad target does not use")."""
        lacked = " and ".join(sorted(set(ops) - self.avoided_ops))
        avoided = " and ".join(sorted(set(ops) & self.avoided_ops))
        parts = [f"{lacked}, which {self.name} lacks"] if lacked else []
        if avoided:  # the runtime has them (tinygrad's If runs both branches): not "lacks"
            parts.append(f"{avoided}, which the {self.name} target does not use")
        return ", and ".join(parts)

    def lacked_loops(self) -> frozenset[str]:
        """Loop and Scan where the runtime has neither (``missing_ops`` but not avoided): a
        model's own one cannot run there. If is left out: tract, IREE and TFLite ran the
        model's own If, though this tool builds none for them."""
        return frozenset({"Loop", "Scan"} & (self.missing_ops - self.avoided_ops))

    def in_scan_body(self) -> Target:
        """This target as it applies inside a Scan body: where the runtime takes no nested
        Scan (``scan_in_scan``), Scan is one of its missing ops."""
        if self.scan_in_scan or "Scan" in self.missing_ops:
            return self
        scan = frozenset({"Scan"})
        return dataclasses.replace(
            self, missing_ops=self.missing_ops | scan, avoided_ops=self.avoided_ops | scan
        )


_NO_CONTROL_FLOW = frozenset({"Loop", "Scan", "If"})


def _compiled(name: str, description: str, **facts: Any) -> Target:
    """A target whose runtime compiles the graph the way most do: no Loop, Scan or If, no
    shape computed from a run-time value (``runtime_view``), no model-local functions;
    ``facts``: its other fields, or these overridden."""
    shared = {"missing_ops": _NO_CONTROL_FLOW, "runtime_view": False, "local_functions": False}
    return Target(name, description, **{**shared, **facts})


_CACHE_PIECES = (2 << 20, 4 << 20)  # onnxruntime: 2 MiB tiles, 4 MiB chunks

TARGETS: dict[str, Target] = {
    target.name: target
    for target in (
        Target(
            "onnxruntime",
            "onnxruntime 1.20.1 and later, at an opset it imports (--target-opset 21 for "
            "1.20): uint32/uint64 multiplied as int64",
            integer_compute=_UINT_AS_INT64,
            bfloat16_math=False,
            scan_over_x=True,
            cache_pieces=_CACHE_PIECES,
            reduce_totals_above=4,
        ),
        Target(  # onnxruntime's table and forms, integers in their own type
            "spec",
            "every kernel the ONNX spec lists: integers in their own type",
            scan_over_x=True,
            cache_pieces=_CACHE_PIECES,
            reduce_totals_above=4,
        ),
        Target(
            "openvino",
            "OpenVINO: int64 past 2^31 and float64 are not exact there (warned)",
            float64=False,  # computed in float32: logsum's float64 compute would be inexact
            # Two If-guarded Scans over symbolic lengths in one model: the first inference
            # after compiling returned garbage for one of them (OpenVINO 2026.4.1).
            missing_ops=frozenset({"If"}),
            avoided_ops=frozenset({"If"}),
            auto="openvino",
            loop_with_cumprods="OpenVINO may return a carried value that grows through the "
            "Loop one step short (seen with two lowered CumProds in one body): check the Loop's "
            "outputs on OpenVINO",
            doubling_blocked_from=2000,
            loop_exclusive_min_opset=14,
            loop_empty_length=False,
            wrong_lowerings=(
                ("logsum", "its Exp gives +inf for NaN, so a NaN would come out as inf"),
            ),
            scan_in_scan=False,
            local_functions=False,
            limits=(
                Limit(
                    frozenset({_I64, _U64}),
                    "OpenVINO's CPU plugin holds int64 / uint64 in 32 bits: values and "
                    "products past 2^31 are wrong there",
                ),
                Limit(frozenset({_F64}), "OpenVINO computes float64 in float32"),
                # Its own Cast(float32 -> bfloat16) rounds toward zero in a model with a
                # symbolic dim (2026.4.1; to nearest over static shapes): the lowering's one
                # rounding of the float32 product is that Cast, and no older op rounds for it.
                Limit(
                    frozenset({ir.DataType.BFLOAT16}),
                    "OpenVINO's Cast to bfloat16 truncates where shapes are dynamic: results "
                    "there can be up to 1 ulp off (0.5 where every dim is static)",
                ),
            ),
        ),
        Target(
            "tract",
            "tract: no Loop, at most one If (none used); a run-time axis becomes a "
            "Gather-select over the axes; no bfloat16",
            missing_ops=frozenset({"Loop", "If"}),
            slice_negative_step=False,
            runtime_view=False,
            bounded_lengths=False,
            scan_in_scan=False,
            lowers_in_scan=False,
            symbols_in_if=False,
            local_functions=False,
            auto="tract",
            limits=(Limit(frozenset({ir.DataType.BFLOAT16}), "tract has no bfloat16 at all"),),
        ),
        _compiled(
            "iree",
            "IREE (llvm-cpu): no Loop or Scan (Scan ignores directions, breaks on symbolic "
            "lengths); lengths known only at run time need --max-length",
            min_opset=13,  # Unsqueeze-11 / ReduceProd-11 fail to import
            scan_directions=False,
            auto="iree",
            doubling_blocked_from=128,
            run_time_checks=False,
            padded_lowerings=frozenset({"doubling"}),
            exclusive_cumsum=False,
            pad_shifts=False,
            limits=(
                Limit(
                    frozenset({ir.DataType.FLOAT, ir.DataType.FLOAT16, ir.DataType.BFLOAT16}),
                    "IREE (llvm-cpu) flushes subnormal results to zero",
                ),
            ),
        ),
        _compiled(
            "tflite",
            "TFLite via onnx2tf 2.6 (flatbuffer_direct, LiteRT): no Loop or Scan; int64 "
            "computed in int32, no float64 or bfloat16 (warned); float16 runs as float32",
            missing_ops=frozenset({"Loop", "Scan"}),
            float64=False,
            auto="tflite",
            wrong_lowerings=(
                ("radix", "static dims with inner > 1, and special values on the last axis"),
                ("carry", "radix's blocks with the carries moved, not run there"),
            ),
            limits=(
                Limit(frozenset({ir.DataType.BFLOAT16}), "onnx2tf converts no bfloat16 at all"),
                # a lone int64 Mul(x, x) at x = 100000 gave 1410065408 (onnx2tf 2.6.9)
                Limit(
                    frozenset({_I64, _U64}),
                    "onnx2tf 2.6's flatbuffer_direct backend computes int64 in int32: "
                    "values and products past 2^31 are wrong there",
                ),
                Limit(
                    frozenset({_F64}),
                    "LiteRT has no float64 Concatenation or Pad: a float64 CumProd does not "
                    "run there (onnx2tf 2.6, flatbuffer_direct)",
                ),
                Limit(
                    frozenset({_U32}),
                    "LiteRT has no uint32 Less, Pad or Gather: a uint32 CumProd does not run "
                    "there (onnx2tf 2.6, flatbuffer_direct)",
                ),
                # onnx2tf 2.6.9: x = [-1.06, 0.70, 1, 0, -0, -1.09] (float16, symbolic dims,
                # doubling) gave +0 where the product is -0
                Limit(
                    frozenset({ir.DataType.FLOAT, ir.DataType.FLOAT16}),
                    "TFLite (XNNPACK) flushes subnormal results to zero, and onnx2tf 2.6's "
                    "output over a length known only at run time can give a zero result the "
                    "wrong sign",
                ),
            ),
            constant_ones=False,
            symbolic_rank3=False,
        ),
        Target(
            "tinygrad",
            "tinygrad: no Loop or Scan; its If runs both branches",
            integer_compute={ir.DataType.INT32: _U32, _I64: _U64},
            missing_ops=frozenset({"Loop", "Scan", "If"}),
            avoided_ops=frozenset({"If"}),
            auto="tinygrad",
            local_functions=False,
            reduce_prod_wraps=True,
            where_keeps_negative_zero=True,
            masked_one_tile_up_to=256,
        ),
        _compiled(
            "mnn",
            "MNN 3.6 (its converter, CPU): integers computed as int32 in float32 and "
            "float64 as float32 (warned); no Loop, Scan or If; lengths known only at run "
            "time need --max-length",
            float64=False,
            auto="mnn",
            # a Reshape to a shape the data does not fit logs "code=3 in onForward" and
            # returns an empty output; a Gather index out of range is clamped
            run_time_checks=False,
            limits=(
                Limit(
                    frozenset({_I64, _U64, _U32, ir.DataType.INT32}),
                    "MNN holds every integer in int32 and multiplies int32 in float32: "
                    "products past 2^24 and values past 2^31 are wrong there",
                ),
                Limit(frozenset({_F64}), "MNN computes float64 in float32"),
                Limit(
                    frozenset({ir.DataType.BFLOAT16}),
                    "MNN has no bfloat16: a model that casts to it returns no outputs",
                ),
            ),
        ),
        _compiled(
            "tvm",
            "Apache TVM 0.27 (Relax, llvm): no Loop, Scan or If; symbolic dims only for a "
            "static length up to 16 with one symbolic dim each side of the axis",
            # portable's table: radix within 1.25x of the fastest run time in 7 of 8 cells, and
            # no lowering 1.25x faster on both run and compile time in any class of cells
            # (scripts/results/bench-runtime-tvm-2026-12-06-auto.md)
            auto="static",
            shape_arithmetic=False,
        ),
        _compiled(
            "ncnn",
            "ncnn 1.0 via pnnx (pnnx and ncnn 20261020): float32, a constant axis, 'chain' "
            "only (a static length up to 1024; symbolic dims as for tvm); IR 13",
            float64=False,
            auto="ncnn",
            shape_arithmetic=False,
            element_types=frozenset({ir.DataType.FLOAT}),
            axis_input=False,
            max_ir_version=13,  # pnnx 20261020: "max supported IR version: 13"
            # the others need Loop, Scan or If, and masked float64 and a Where keeping -0.0
            unloadable_lowerings=tuple(
                (
                    name,
                    "ncnn has no layer for the Pad with a value, Less, Where or Cast it builds "
                    "('layer ... not exists or registered' at load)",
                )
                for name in ("logsum", "radix", "doubling", "carry")
            ),
        ),
        _compiled(
            "portable",
            "strictest: no Loop, Scan, If or float64 compute (TensorRT, CoreML, NPUs)",
            float64=False,
            auto="static",
            run_time_checks=None,
        ),
    )
}
DEFAULT_TARGET = "onnxruntime"


def target_named(name: str) -> Target:
    """The target called ``name``.

    Raises:
        ValueError: naming the targets there are.
    """
    if name not in TARGETS:
        raise ValueError(f"unknown target {name!r}; choose one of {', '.join(TARGETS)}")
    return TARGETS[name]
