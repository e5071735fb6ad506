"""``auto``: the one place that picks a lowering for a CumProd, per target, from what is
known statically.

``onnxruntime`` table: from ``scripts/bench.py`` (onnxruntime 1.32, CPU, one intra-op thread,
the calling thread's CPU time; float32, float64, int32, int64; 1M and 4M elements; the run of
2026-11-30 in ``docs/performance.md``), checked again against every lowering on the whole grid
on 2026-12-02 (``scripts/results/bench-2026-12-02-every``: no cell where another lowering was
consistently faster than the pick; "Eleventh round" in ``docs/performance.md``) and on
2026-12-03 (``bench-2026-12-03-round14-every``, "Fourteenth round"). The scanned
tensor is viewed as (o, n, i). "8-byte" means the compute type has 8-byte elements (int64,
uint64, double, and uint32 computed as int64): onnxruntime moves those slower through
Transposes and strided Split / Concat.

=========  ========================================  =========================================
position   4-byte compute types (float32, float16,   8-byte compute types (int64, double, ...)
           bfloat16, int32)
=========  ========================================  =========================================
first o=1  n <= 512, or i >= 1000 in more than 4    n <= 512, or i >= 400 in more than 4
           MiB: scan; else carry (in reverse:        MiB: scan; else carry (in reverse:
           i >= 2000)                                i >= 800)
last i=1   n < 64: scan; 64: tiled; else carry;      n < 8: scan; else carry;
           but scan to n = 128 where carry pads       but scan to n = 128 where carry pads
middle     n <= 512, or n <= 1024 with o * i >=      as for 4-byte types
           2048: chain; else carry
=========  ========================================  =========================================

float32 computations (float32, float16 and bfloat16 inputs) take float64 block totals and
carries in their trees since 2026-12-04 (:mod:`.wide`: accuracy), which cost 1.2-2.1x the
float32 carries' time (``scripts/results/bench-wide-carries-2026-12-04*``), so for them: the
last axis takes ``scan`` up to n = 256 (never ``tiled``) where ``cached`` does not apply
(scan 0.53-1.25x native against tiled's 0.83-1.39x at n = 64, and 0.49-1.17x against carry's
0.84-1.34x at 128 and 256, on 10^6 - 6 * 10^6 elements; in 16 MiB or more ``cached`` took
0.77-1.06x); a middle axis's chain stays a chain from n = 512 in 16 MiB or more (it took
0.65-0.80x ``cached``'s time on 7 cells of 16-24 MiB, n = 512-1000).

Where that gives ``carry`` in a tensor of 4 MiB or more (16 MiB on a last axis until the
twenty-seventh round, below; still for a single row and a float32 last axis to n = 256)
that cuts into pieces of at most 4 MiB (single rows 16 MiB: below), ``cached`` runs carry on
those pieces inside a Scan, so that each level's passes stay in cache: tiles of rows (o;
:func:`.cached.tile_rows`, about 2 MiB, two tiles at least) on middle and last axes, chunks
of positions (:func:`.cached.chunk_length`, about 4 MiB) on a first axis, whose Scan carries
the product so far. See "Sixteenth round" in ``docs/performance.md`` for the figures. First
axes took it from 16 MiB until the twentieth round; since the seventeenth round's seeded
chunks, on 36 held-out first axes of 4-12 MiB (n = 4096-65536, every type; the rule
declared first) it took 0.76-1.05x carry's time (4-byte median 0.85x-0.88x in two runs,
8-byte 0.85x), and 0.76-0.95x on the grid's eight 1M first cells of n = 4096 and 65536
("Twentieth round").
A tile is one row where a row takes more than 2 MiB; in place of carry such rows may take up
to 16 MiB (twenty-seventh round, the rule declared first: on ten held-out middle and last
axes, every type, with rows of 4-8 MiB ``cached`` took 0.64-0.87x carry's time, median
0.79x; on eight with rows of 8-16 MiB 0.82-0.92x, median 0.85x; no grid cell has such rows).
A last axis takes it from 4 MiB too since that round (a second held-out round, its rule
declared first: on ten held-out last axes of 8-16 MiB, every type, 0.69-1.03x carry's time,
median 0.84x; on eight of 4-8 MiB 0.76-0.97x, median 0.91x; on the grid's sixteen 1M last
cells where the table gives carry 0.79-0.97x in three floors runs, median 0.85x). Not a
single row (one row is cut in chunks, not tiles: not timed), nor a float32 last axis to
n = 256, where the Scan takes carry's place under 16 MiB and was not timed against it.
Other routes keep the pieces to 4 MiB. Where the table gives ``tiled`` (an int32 last axis of
n = 64), ``cached`` from 8 MiB (that round's fourth held-out round, the rule declared first:
on eight int32 last axes of n = 64 and 17-64 MiB 0.66-0.78x tiled's time, median 0.74x; on
eight of 8-16 MiB 0.70-0.87x, median 0.78x).
Where it gives ``chain`` on a middle axis from n = 512 in a tensor of 16 MiB or more whose
pieces fit the same way, ``cached`` as well: past n = 512 (slabs of 2048 elements or more;
seventeenth round) on 12 held-out cells of 16-24 MiB, n = 600-1024, every type, it took
0.83-0.97x chain's time (median 0.89x), with sessions of 4-6 ms to create against 21-41 ms; at
n = 512 (eighteenth round) on 6 held-out cells of 16-20 MiB 0.83-0.94x (median 0.87x), but at
n = 384-480 0.71-1.12x (8 cells, two above 1.05), where the chain stays. On the grid's four 4M
middle n = 512 cells (16-32 MiB) the two tie: 0.91-1.05x in five runs of each (ten of the
4-byte ones), with a tenth of the chain's nodes. Under 16 MiB the chain stays too: on the
grid's 1M middle n = 512 cells (4-8 MiB) ``cached`` took 1.04-1.28x chain's time.
Where it gives ``scan`` on an int32 first axis, forward, with slabs of 1000-1499 elements in a
tensor of 16 MiB or more, ``cached`` as well (twenty-sixth round, the rule declared first: on
8 held-out cells of 16-31 MiB 0.82-1.06x scan's time, median 0.935x; under 14 MiB it lost,
1.04-1.18x on five cells, and from slabs of 1500 on too, 1.03-1.32x on six in the
twenty-first round). Not for float32, whose ``cached`` takes float64 carries (7.7x native
against scan's 4.0x on (4096, 1024)), nor 8-byte types (1.15-1.21x scan's time in the
twenty-first round's pilot); in reverse scan takes only slabs of 2000 or more. (Timed on
plain CumProd; an exclusive one takes it too.)

``carry`` (radix's unrolled blocks with the carries multiplied into the slices) replaced
``radix`` on the first and middle axes (the 34 cells of the 2026-11-30 floors run where radix
was the pick, 1M / 4M, n = 512-65536: 0.44-1.08x radix's time, median 0.87x; float32 1M
middle n = 4096 6.6x native against 10.7x, n = 65536 3.1x against 6.7x). Middle axes keep
``chain`` to n = 512 (it was 64, then 256): at n = 128 and 256, 1M and 4M, float32 / float64
/ int32 / int64, it took 4.4-7.1x native against carry's 5.2-10.1x and scan's 5.5-11.8x; at
n = 512 (the same 8 cells, where carry or, on slabs of 8192 elements, scan was the pick)
0.76-0.93x the old pick's time; at 2048 and 4096 1.01-1.97x in 4 of 5 cells, with sessions
of 74-227 ms to create. Past 512, up to chain's 1024, it wins on large slabs (o * i, the
elements of one position): in ``scripts/results/bench-2026-12-01-middle-heldout`` (10^6 -
8 * 10^6 elements, n = 600-1024, every type, 80 cells) chain took 0.64-0.97x carry's time on
slabs of 2496 elements or more (but 1.05-1.06x for 4-byte types at (32, 1024, 122)), and
1.03-1.72x below 1000; between, 0.83-1.41x (8-byte types mostly below 1, 4-byte above). The
cut is 2048 for every type; over the 80 cells auto went from 5.87x / 9.49x native (the table
before, same runs) to 5.01x / 9.88x (the 9.88x is carry in both, timed at 8.98x as the old
pick), and a 1024-chain takes 26-40 ms to create a session (carry 3-4 ms).
On the last
axis ``carry`` takes r = 4 (the Split there moves single elements, and each of its r slices
reads every cache line of the input): it took over the last axis from ``radix`` (8-byte
types, n >= 8) and from ``tiled`` / ``blocked`` (4-byte types, n > 64). In
``scripts/results/bench-2026-11-30-last-carry`` (last axis, 1M and 4M, n = 8-65536, plain
and exclusive + reverse; old table in the same rounds) the last-axis cells went from 1.63x /
4.55x native (median / worst) to 1.24x / 2.96x; 8-byte n >= 64 took 0.60-0.68x of radix's
time (n = 8: 0.87-1.04x of scan's), 4-byte n >= 512 0.64-0.87x of tiled's / blocked's; at
n = 64 carry took 0.96-1.10x of tiled's time, so tiled and, below, scan stay.
Off the grid's lengths (``scripts/results/bench-2026-11-30-round5-lengths*``: n = 17-128 on
2^20, 4 * 2^20 and 10^6 elements) the unrolled routes pay for padding. Where carry's levels pad
(n = 17, 33, 40, 56, 65, 100; r = 4) ``scan`` took 0.24-0.66x the time of the faster of tiled /
carry for 4-byte types on 2^20 and 10^6 elements (0.37-1.14x on 4 * 2^20) and 0.53-0.96x
carry's for 8-byte types (0.68-1.23x on 4 * 2^20). Below 64, 4-byte types take scan whatever
the padding (n = 48: 0.85-0.87x tiled's; 1.17-1.19x carry's on 4 * 2^20). Where carry pads
nothing (n = 48, 128) the 8-byte Scan took 0.95-3.30x carry's time, so carry stays there. Over
these 88 cells the old table's picks, timed in the same runs, were 1.64x / 4.20x native (median
/ worst; 2^20 and 4 * 2^20) and 1.40x / 2.79x (10^6); this table's 1.26x / 2.92x and 0.99x /
1.67x. The grid's lengths get the same picks as before.
On a first axis past n = 512 a Scan step costs about 1 us whatever its slab, so on large
slabs it beats carry's passes: in ``scripts/results/bench-2026-12-01-first-heldout`` (first
axis, 10^6, 2 * 10^6, 4 * 2^20 and 10^7 elements, n = 1000-8192, every type) the table picks
the faster of scan and carry in every cell but where they are within noise (at most 1.26x
the faster's time, median 1.00x), and the 64 cells went from 5.01x / 8.07x native (the
table before, same runs) to 3.39x / 7.97x. In reverse onnxruntime's Scan steps cost more
(float32 (2000, 1000): 1.43x the forward Scan's time; carry the same both ways), so the slab
must be twice as large. The first and middle axes stay several times native:
``docs/performance.md`` has the figures and the measured floors.

A length known only at run time (a symbolic dim, a run-time axis, an unknown rank) gets
``dynamic``: an If on the length at run time between ``scan`` (up to 512) and a blocked scan
with run-time padding.

The other runtimes' tables come from ``scripts/bench_runtime.py --runtime NAME`` (each
lowering against that runtime's own CumSum on the same shape; first, middle and last
axis, n = 8, 64, 512, 4096, 1M elements; the runs of 2026-11-30 and -12-01 in
``scripts/results/bench-runtime-*``). Below, "run-time n" is a length known only at run
time; a run-time axis over static dims is lowered at the longest dim (the axis is then
unknown, so only the ``static`` rule applies).

``static`` (portable): n <= 16: chain; else radix. Run-time n: ``scan`` where the target
has Scan, else ``doubling`` (which needs a bound, ``max_length``).

``tinygrad``: as ``static``, but ``carry`` where static takes radix over a static length:
carry took 0.36-1.10x radix's time (median 0.96x) in all 28 cells measured with n > 16
(float32 / int32, 2^20 elements, n = 64-4096, every axis; 0.36-0.60x at n = 512 on the first
and middle axes): ``scripts/results/bench-runtime-tinygrad-2026-12-01-{middle,other}`` and
``...-2026-11-30-round4-last``. Over those cells radix took 0.31x / 10.72x tinygrad's CumSum
(median / worst), carry 0.17x / 10.75x. A length known only at run time takes ``carry``
padded to ``max_length`` too (it took ``doubling``, as ``static`` does): x of (4, n) or
(n, 4), n = max_length - 3, float32 / int32, first call (compile and run) and later calls
(``scripts/bench_tinygrad_run_time_length.py``, results
``scripts/results/tinygrad-run-time-length-2026-12-01.md``): at max_length 512 doubling
28-44 s / 324-388 ms, carry 2.3-8.1 s / 64-153 ms, radix 3.2-5.9 s / 68-115 ms; at 64
doubling 2.0-4.2 s, carry 0.7-1.3 s, radix 0.5-1.1 s.

``openvino``: the last axis takes ``doubling`` (n = 64-4096: 2.8-9.1x its CumSum against
radix's 9.5-16.6x; n = 8: 1.7x against chain's 3.1x; from n = 2000 in blocks of 32, see
``doubling.BLOCKED_FROM``; float32 from n = 65, ``doubling.ACCURATE_BLOCKED_ABOVE``); other
axes n <= 512 ``chain``, then radix. The cut was n = 64, from runs at load average 3-5 where
radix took 0.50-0.56x chain's time at n = 512; at load average 1
(``scripts/results/bench-runtime-openvino-2026-12-01-*``: n = 17-5000, 2^20 and 10^6
elements, first and middle axis) chain took 0.31-0.92x radix's time in all 36 cells with 64
< n <= 512, and at n = 1000 0.48-0.58x (first) and 0.88-1.07x (middle); but OpenVINO's
compile time grows with its nodes: 0.2-0.35 s at n = 512 and 0.5-1.2 s at 1000, against
radix's 0.02-0.04 s. Run-time n: ``scan`` (OpenVINO runs Scan; its Scan and Loop are 10-67x
its CumSum on the last axis, so a static length is better). With the offset totals
(2026-12-04, :mod:`.near_one`, for accuracy) float32 ``doubling`` took 5.1-5.9x CumSum at n =
128-4096, still below the other accurate lowerings (``scan`` 5.8-13.1x, ``tiled`` 6.4-8.4x,
``carry`` 9.9-10.3x; ``scripts/results/bench-runtime-openvino-2026-12-04-near-one-2``).

``tract``: last axis: n <= 64 ``chain``; to n = 8192, where the unrolled levels pad nothing
(n = r^k * q, q <= r), ``radix`` for float32 (r = 8; 1.42-1.49x CumSum against scan's
1.58-2.11x) and ``carry`` for 8-byte types (r = 4; 1.59-4.56x against 1.67-6.22x), else
``scan`` (padded levels cost tract a Pad and a Slice each: at n = 65-4097 padded radix /
carry took 1.0-1.6x scan's time); int32 takes ``scan`` there too, but ``carry`` where it
pads nothing from n = 1024: tract's Scan on an int32 last axis is slow at powers of two
(its Transposes; ``scripts/results/bench-runtime-tract-2026-12-01-int32-last*``, 2^20 and
10^6 elements: scan 9.4-12.1x CumSum at n = 1024-8192 against 6.0-7.0x at 3000 and 5000),
where carry took 0.58-0.70x its time (n = 1024, 2048, 4096, 8192; at 512 1.02-1.17x, and
where carry pads, n = 1000, 3000, 5000, 8193, 1.07-1.48x). On 2026-11-30
(``...-round5-last*``, ``...-round5-long4``) carry had taken 1.00-1.06x scan's time at 2048
and 4096: per day, the machine moves these figures.
Since the float64 carries (2026-12-04, :mod:`.wide`) float32 takes the int32 rule up to
8192: radix went from 1.49-1.50x CumSum to 2.64-2.77x at n = 512-8192, against carry's
2.10-2.16x and scan's 1.60-2.70x (``...-2026-12-04-wide-carries``; float32 carries timed
in the same rounds).
Beyond 8192 (few rows, so Scan's n steps dominate): ``radix`` for float32 (not measured
again with float64 carries), ``carry`` for the other types (1.45-1.49x and 2.07-6.25x
against scan's 3.7-25.7x at n = 16384 and 65536).
``tiled``, the float32 pick before (1.03-1.29x on 2^20 elements), falls off a cliff at other
row counts (7.35x at 15625 x 64 and 6.68x at 1953 x 512, 1e6 elements), so it is not used.
Runs: ``scripts/results/bench-runtime-tract-2026-11-30-round5-*`` (2^20 and 1e6 elements, n
= 8-65536, padded lengths). Other axes: ``scan`` to n = 512 (first: 1.3-6.3x against radix's
2.4-6.9x; middle: 1.1-5.3x against 2.4-9.1x; at n = 8 against chain's 1.8-7.4x); beyond,
float32 takes ``carry`` (0.38-0.96x radix's time in all 13 float32 cells measured with
n = 1000-4096), but ``scan`` up to n = 1024 where carry's levels pad (carry took 1.08-1.61x
scan's time at n = 600 and 1000, 0.64-0.76x at 1024, where it pads nothing:
``...-2026-12-01-other-2e20-b`` and ``-other{,-1e6}``) and the other types keep scan to
n = 1024 (0.62-1.04x radix's time at 1000 and 1024), then radix (scan 0.92-1.22x radix's
time at 2000 / 2048, 0.98-1.6x at 4096):
``scripts/results/bench-runtime-tract-2026-12-01-other*`` (2^20 and 10^6 elements) and
``...-2026-11-30-middle``. A first axis takes ``scan`` at any n on slabs of 1500 elements or
more (float32) or 900 (other types): its slices are views of x, while the unrolled levels
move the data; in ``...-2026-12-01-first-{2e6,4e6,8e6}`` (n = 2000-8192 on 2·10^6 - 8·10^6
elements, slabs of 488-4000) the Scan took 0.54-0.98x the old pick's time on slabs of 976 or
more (float32 from 1953 only: at 976-1000 0.99-1.07x carry's), 0.96-1.67x on 488: over those
28 cells 2.48x / 5.00x tract's CumSum (median / worst) -> 2.06x / 4.98x (one run each).
Run-time n: ``scan``.

``iree``: last axis, 4-byte compute types: ``doubling`` (1.3-6.8x its CumSum against
chain / radix's 2.2-7.9x; from n = 128 in blocks of 32, ``doubling.BLOCKED_FROM``, float32
from 65: 0.69-0.93x float32's and 2.7-4.3x int32's CumSum at n = 128-8192; float32 with the
offset totals, :mod:`.near_one`, 1.15-1.51x at 128-4096 against chain's 1.9-2.4x and carry's
3.5-4.6x, ``...-2026-12-04-near-one-2``; IREE compiled it
for 8-byte types neither blocked nor plain with Pad shifts; with the Concat shifts
(``Target.pad_shifts``) it did on 2026-12-05, float64
0.90-0.96x radix's time at n = 512 / 4096 and int64 2.2-2.3x, ``...-2026-12-05-round29``,
the rule kept); 8-byte: ``chain`` up to n = 64 (3.1-5.4x against
radix's 3.6-6.7x), then radix; a single row only up to n = 32 (IREE refuses to load the chain's one
dispatch of n bindings beyond).
Other axes n <= 256: ``chain``, then ``carry``. At n = 64 chain took 0.27-0.52x its CumSum
(first) against radix's 1.1-2.0x, and 0.49-1.26x (middle) against 1.0-2.6x; at n = 100-512
(``scripts/results/bench-runtime-iree-2026-12-01-probe{,2}``, 2^20 elements) 0.15-0.72x
radix's time in all 32 cells, but IREE's compile time grows with it: 1.8-5.2 s at n = 100,
2.9-8.3 s at 256, 5.3-17.1 s at 512, against radix's and carry's 1.2-3.2 s; so the cut is
256. Beyond, carry took 0.62-1.12x radix's time at n = 512-4096 (0.86x at the median, 21 of
24 cells below 1). Run-time n: ``doubling`` (IREE's Scan ignores directions;
``max_length`` needed; float32 with its offset windows, 1.45-1.76x the plain form's time,
``scripts/results/bench-runtime-iree-2026-12-04-run-time-windows``).

``tflite`` (onnx2tf 1.29): static dims with n <= 16: chain; else ``doubling``, static
length or not (a run-time one needs ``max_length``): with a symbolic dim it runs on the 2-D
view at any opset (``chain`` takes that view only from opset 18). ``radix`` converts but
its results are wrong on TFLite (static dims with inner > 1, and special values on the last
axis: the opt-in tier of tests/test_runtimes_iree_tflite.py); not timed there.

Every one of these is exact for integers and within the sequential kernel's k - 1 ulps for
floats.
"""

from __future__ import annotations

import math

import onnx_ir as ir

from rewriter.lowerings import cached, carry, chain, radix
from rewriter.site import ScanSpec
from rewriter.targets import Target

__all__ = ["pick"]

_WIDE = 8  # bytes per element of an "8-byte" compute type
_CHAIN_UP_TO = 16  # static: chain, then radix
# onnxruntime
_SCAN_FIRST_UP_TO = 512  # first axis: Scan, then carry; but Scan on slabs of ...
_SCAN_SLAB = 1000  # ... this many elements or more (4-byte types) ...
_WIDE_SCAN_SLAB = 400  # ... or this many (8-byte types), twice as many in reverse, ...
_SCAN_TENSOR_BYTES = 4 << 20  # ... in a tensor of more than this many bytes
_SCAN_LAST_BELOW = 64  # last axis, 4-byte types: Scan below this n ...
_WIDE_SCAN_LAST_BELOW = 8  # ... 8-byte types
_TILED_LAST_UP_TO = 64  # last axis, 4-byte types: tiled from _SCAN_LAST_BELOW to here
_PADDED_SCAN_UP_TO = 128  # last axis: Scan where carry would pad
_MIDDLE_CHAIN_UP_TO = 512  # middle axes: chain, then carry; but chain to its MAX_LENGTH ...
_MIDDLE_LONG_CHAIN_SLAB = 2048  # ... where o * i, the elements per position, is this or more
_CACHED_FROM_BYTES = 4 << 20  # carry on cache-sized pieces in tensors this large ...
_CACHED_LAST_FROM_BYTES = 4 << 20  # ... on a last axis, in tiles (16 MiB before round 27) ...
_CACHED_OTHER_FROM_BYTES = 16 << 20  # ... or this large (a chain; some last axes)
_CACHED_PIECE_UP_TO = 4 << 20  # ... whose pieces (a row may be more than cached.TILE_BYTES) fit
_CACHED_ROW_UP_TO = 16 << 20  # ... or, in place of carry, single rows of up to this
_CACHED_CHAIN_FROM = 512  # ... and in place of a middle axis's chain this long, from 16 MiB
_CACHED_INT32_SCAN_SLAB_BELOW = 1500  # ... and of an int32 first axis's scan on slabs under
_CACHED_INT32_SCAN_FROM_BYTES = 16 << 20  # ... this (forward), in tensors this large
_CACHED_TILED_FROM_BYTES = 8 << 20  # ... and of tiled's int32 last axis (n = 64) from this
_WIDE_CARRIES_SCAN_LAST_UP_TO = 256  # float32 last axis: Scan, not float64 carries, to here
# the other runtimes
_TRACT_SCAN_UP_TO = 8192  # last axis
_TRACT_INT32_CARRY_FROM = 1024  # last axis, int32: carry where it pads nothing from here
_TRACT_CHAIN_LAST_UP_TO = 64  # last axis
_TRACT_FLOAT_SCAN_UP_TO = 512  # first and middle axes, float32: Scan, then carry
_TRACT_FLOAT_PADDED_SCAN_UP_TO = 1024  # ... but Scan to here where carry's levels pad
_TRACT_SCAN_OTHER_UP_TO = 1024  # first and middle axes, other types: Scan, then radix
_TRACT_FLOAT_SCAN_SLAB = 1500  # first axis, float32: Scan at any n on slabs this large
_TRACT_SCAN_OTHER_SLAB = 900  # first axis, other types: the same
_OPENVINO_CHAIN_UP_TO = 512  # first and middle axes
_IREE_CHAIN_UP_TO = 256  # first and middle axes
_IREE_WIDE_CHAIN_LAST_UP_TO = 64  # last axis, 8-byte types: chain, then radix
# ... but a single row (outer = 1, or not known) only to 32: IREE 3.13 compiled an 8-byte chain
# over one row of n = 33-64 into one dispatch of n bindings, then refused to load it
# ("binding count 33 > 32"); with two rows or more it ran.
_IREE_WIDE_CHAIN_ONE_ROW_UP_TO = 32


def _carry_pads(n: int, last_axis: bool = False) -> bool:
    """Whether ``carry``'s levels pad a length of n (each padded level: a Pad and a Slice)."""
    return radix.pads(n, carry.carry_levels(n, narrow_runs=last_axis))


def _onnxruntime(spec: ScanSpec, compute_itemsize: int, wide_carries: bool = False) -> str:
    """``wide_carries``: the trees compute float32 with float64 carries (:mod:`.wide`), which
    costs them a Cast and a product over x, so the sequential routes win more often."""
    pick = _onnxruntime_route(spec, compute_itemsize, wide_carries)
    o, n, i = spec.outer, spec.length, spec.inner
    if o is None or n is None or i is None:
        return pick
    # a middle axis's chain from n = 512: cached too, in tensors of 16 MiB or more (but not
    # with float64 carries: the chain took 0.65-0.80x cached's time on 7 float32 cells)
    chain_to_cache = pick == "chain" and n >= _CACHED_CHAIN_FROM and not wide_carries
    # an int32 first axis's scan from 16 MiB on slabs under 1500 elements: forward only, as
    # scan takes such a tensor from slabs of _SCAN_SLAB (1000; in reverse 2000; n <= 512
    # needs 8192)
    scan_to_cache = (
        pick == "scan"
        and o == 1
        and spec.dtype == ir.DataType.INT32
        and i < _CACHED_INT32_SCAN_SLAB_BELOW
        and o * n * i * compute_itemsize >= _CACHED_INT32_SCAN_FROM_BYTES
    )
    # tiled's row (an int32 last axis of n = 64): cached from 8 MiB (twenty-seventh round)
    tiled_to_cache = pick == "tiled" and o * n * i * compute_itemsize >= _CACHED_TILED_FROM_BYTES
    if pick != "carry" and not (chain_to_cache or scan_to_cache or tiled_to_cache):
        return pick
    # carry on pieces that stay in cache (tiles of rows, or chunks of an outermost axis), in
    # a tensor that does not
    piece = cached.pieces((o, n, i), compute_itemsize)
    # in place of carry, tiles of one row each of up to 16 MiB (twenty-seventh round; only
    # a tile of one row takes more than 4 MiB: chunks take at most cached.CHUNK_BYTES)
    up_to = _CACHED_ROW_UP_TO if pick == "carry" else _CACHED_PIECE_UP_TO
    fits = piece is not None and math.prod(piece[0]) * compute_itemsize <= up_to
    # carry from 4 MiB (a last axis since the twenty-seventh round, 16 MiB before); from 16
    # MiB a chain, a float32 last axis to n = 256 (the Scan takes carry's place under 16 MiB,
    # below, and cached was not timed against it) and a single row (chunks, not tiles)
    untimed_last = i == 1 and (o == 1 or (wide_carries and n <= _WIDE_CARRIES_SCAN_LAST_UP_TO))
    least = _CACHED_LAST_FROM_BYTES if i == 1 else _CACHED_FROM_BYTES
    if chain_to_cache or untimed_last:
        least = _CACHED_OTHER_FROM_BYTES
    if fits and o * n * i * compute_itemsize >= least:
        return "cached"
    if wide_carries and pick == "carry" and i == 1 and n <= _WIDE_CARRIES_SCAN_LAST_UP_TO:
        return "scan"  # float32 last axis, not in pieces: the Scan beat float64 carries
    return pick


def _onnxruntime_route(spec: ScanSpec, compute_itemsize: int, wide_carries: bool = False) -> str:
    n = spec.length
    if n is None:
        return "dynamic"
    if n <= 1:
        return "chain"
    wide = compute_itemsize >= _WIDE
    if spec.outer == 1:  # the scanned axis is the outermost: Scan slabs are contiguous
        # a Scan step costs about 1 µs (more in reverse): on large slabs of a tensor past
        # 4 MiB that is less than carry's passes
        slab = spec.inner or 0
        least = (_WIDE_SCAN_SLAB if wide else _SCAN_SLAB) * (2 if spec.reverse else 1)
        large = slab >= least and n * slab * compute_itemsize > _SCAN_TENSOR_BYTES
        return "scan" if n <= _SCAN_FIRST_UP_TO or large else "carry"
    if spec.inner == 1:  # the last axis
        padded = n <= _PADDED_SCAN_UP_TO and _carry_pads(n, last_axis=True)
        if n < (_WIDE_SCAN_LAST_BELOW if wide else _SCAN_LAST_BELOW) or padded:
            return "scan"
        tiled = not wide and not wide_carries and n <= _TILED_LAST_UP_TO
        return "tiled" if tiled else "carry"
    # a middle axis: past 512 the chain's launches pay off on large slabs only
    slab = (spec.outer or 0) * (spec.inner or 0)
    long_chain = n <= chain.MAX_LENGTH and slab >= _MIDDLE_LONG_CHAIN_SLAB
    return "chain" if n <= _MIDDLE_CHAIN_UP_TO or long_chain else "carry"


def _bounded_length(spec: ScanSpec) -> int | None:
    """n, or for a run-time axis over static dims the longest dim (x is padded to it)."""
    if spec.length is None and spec.static_dims:
        return spec.max_length
    return spec.length


def _static(spec: ScanSpec, target: Target, compute: ir.DataType | None) -> str:
    n = _bounded_length(spec)
    if n is None:
        return "scan" if "Scan" not in target.missing_ops else "doubling"
    return "chain" if n <= _CHAIN_UP_TO else "radix"


def _openvino(spec: ScanSpec, target: Target, compute: ir.DataType | None) -> str:
    n = spec.length
    if n is not None and n > 1 and spec.inner is not None:
        if spec.inner == 1:
            return "doubling"
        if n <= _OPENVINO_CHAIN_UP_TO:
            return "chain"
    return _static(spec, target, compute)


def _tinygrad(spec: ScanSpec, target: Target, compute: ir.DataType | None) -> str:
    n = spec.length
    if n is not None and n > _CHAIN_UP_TO and spec.inner is not None:
        return "carry"
    if n is None and not spec.static_dims and spec.max_length is not None:
        return "carry"  # padded to the bound: doubling compiled 5-10x longer
    return _static(spec, target, compute)


def _tract(spec: ScanSpec, target: Target, compute: ir.DataType | None) -> str:
    n = spec.length
    if n is not None and n > 1 and spec.inner is not None:
        if spec.inner != 1:  # first and middle axes
            float32 = compute == ir.DataType.FLOAT
            large = _TRACT_FLOAT_SCAN_SLAB if float32 else _TRACT_SCAN_OTHER_SLAB
            if spec.outer == 1 and spec.inner >= large:  # a Scan's slices of x are views
                return "scan"
            if float32:
                padded = n <= _TRACT_FLOAT_PADDED_SCAN_UP_TO and _carry_pads(n)
                return "scan" if n <= _TRACT_FLOAT_SCAN_UP_TO or padded else "carry"
            return "scan" if n <= _TRACT_SCAN_OTHER_UP_TO else "radix"
        if n <= _TRACT_CHAIN_LAST_UP_TO:
            return "chain"
        if n > _TRACT_SCAN_UP_TO:  # few rows: Scan's n steps cost more than unrolled levels
            return "radix" if compute == ir.DataType.FLOAT else "carry"
        if compute == ir.DataType.FLOAT and not target.float64:  # float32 carries
            return "scan" if radix.pads(n, radix.radix_levels(n, last_axis=True)) else "radix"
        # int32, and float32 with float64 carries (radix 2.64-2.77x CumSum at n = 512-8192,
        # carry 2.10-2.16x, scan 1.60-2.70x): the int32 rule
        wide = compute is not None and compute.itemsize >= _WIDE
        if (wide or n >= _TRACT_INT32_CARRY_FROM) and not _carry_pads(n, last_axis=True):
            return "carry"
        return "scan"
    return _static(spec, target, compute)


def _iree(spec: ScanSpec, target: Target, compute: ir.DataType | None) -> str:
    n = spec.length
    if n is not None and n > 1 and spec.inner is not None:
        wide = compute is not None and compute.itemsize >= _WIDE
        if spec.inner == 1:
            if not wide:
                return "doubling"
            rows = spec.outer if spec.outer is not None else 1
            up_to = _IREE_WIDE_CHAIN_LAST_UP_TO if rows > 1 else _IREE_WIDE_CHAIN_ONE_ROW_UP_TO
            return "chain" if n <= up_to else "radix"
        return "chain" if n <= _IREE_CHAIN_UP_TO else "carry"
    return _static(spec, target, compute)


def _tflite(spec: ScanSpec, target: Target, compute: ir.DataType | None) -> str:
    n = _bounded_length(spec)
    if spec.static_dims and n is not None and n <= _CHAIN_UP_TO:
        return "chain"
    return "doubling"  # radix's padded blocks come out wrong from onnx2tf (see below)


_TABLES = {
    "static": _static,
    "openvino": _openvino,
    "tinygrad": _tinygrad,
    "tract": _tract,
    "iree": _iree,
    "tflite": _tflite,
}


def pick(spec: ScanSpec, target: Target, compute: ir.DataType | None) -> str:
    """The lowering ``auto`` uses for ``spec`` on ``target``, whose exact lowerings compute
    in ``compute`` (None: the element type is not known)."""
    if target.auto == "onnxruntime":
        itemsize = int(compute.itemsize) if compute is not None else 4
        wide_carries = compute == ir.DataType.FLOAT and target.float64
        return _onnxruntime(spec, itemsize, wide_carries)
    return _TABLES[target.auto](spec, target, compute)
