"""``cumprod-rewriter``: lower CumProd in .onnx files (a thin layer over rewriter.convert)."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import logging
import os
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import FrameType

from rewriter import convert, io
from rewriter.lowerings import STRATEGIES
from rewriter.targets import DEFAULT_TARGET, TARGETS

__all__ = ["main"]

logger = logging.getLogger("rewriter")
VERIFY_RUNS = 3  # --verify without N

EXIT_OK, EXIT_MISMATCH, EXIT_ERROR = 0, 1, 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cumprod-rewriter",
        description="Replace every ONNX CumProd (opset 26) with an equivalent subgraph of older "
        "ops, so the model runs where CumProd does not.",
        epilog="Exit status: 0 success (also when a file has no CumProd), 1 --verify found a "
        "mismatch, 2 bad usage, a refused output or a file that could not be processed, "
        "130 / 143 interrupted by SIGINT / SIGTERM (nothing half-written).",
    )
    parser.add_argument(
        "inputs", nargs="+", metavar="INPUT", help=".onnx files or folders (searched recursively)"
    )
    parser.add_argument(
        "-o",
        "--output",
        metavar="OUTPUT",
        help="output file (one input) or folder (an existing folder, a path ending in '/', "
        "several inputs or a folder input; same layout); never an input or its data file; "
        f"default: beside each input with the suffix {convert.OUTPUT_SUFFIX}",
    )
    parser.add_argument(
        "--strategy",
        choices=STRATEGIES,
        default="auto",
        help="which lowering to use (default: auto)",
    )
    parser.add_argument(
        "--target-opset",
        type=_positive,
        metavar="N",
        help="write the model at ai.onnx opset N (11 to the model's own); default: keep it",
    )
    parser.add_argument(
        "--target",
        choices=list(TARGETS),
        default=DEFAULT_TARGET,
        help="the runtime the output is for: "
        + "; ".join(f"{t.name}: {t.description}" for t in TARGETS.values())
        + " (default: %(default)s)",
    )
    parser.add_argument(
        "--max-length",
        type=_positive,
        metavar="N",
        help="a bound on scanned lengths known only at run time (symbolic dims, run-time "
        "axes); lowerings without control flow (doubling, and chain / radix padded to N) need "
        "one; a longer input then fails at run time instead of computing a wrong result",
    )
    parser.add_argument(
        "--verify",
        nargs="?",
        type=_positive,
        const=VERIFY_RUNS,
        default=0,
        metavar="N",
        help="compare the rewritten model with the original: outputs' names, types and shapes, "
        "N random input sets (default 3) plus special and extreme values, and each CumProd "
        "alone on adversarial values against numpy",
    )
    parser.add_argument(
        "--dim",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="size of a symbolic dimension for --verify (repeatable; default: 3, 4, 5, ... "
        "one size per dim, or all 3 if the original fails on that)",
    )
    parser.add_argument(
        "--report", metavar="FILE.json", help="write a per-file, per-node JSON report"
    )
    parser.add_argument(
        "--list",
        action="store_true",
        help="list every CumProd and the lowering it gets (for --target, --strategy); "
        "write nothing",
    )
    parser.add_argument("--in-place", action="store_true", help="overwrite each input (atomically)")
    verbosity = parser.add_mutually_exclusive_group()
    verbosity.add_argument(
        "-q", "--quiet", action="store_true", help="print errors only (no warnings, no summary)"
    )
    verbosity.add_argument(
        "-v", "--verbose", action="store_true", help="log each node; show tracebacks"
    )
    return parser


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {text!r}")
    return value


def _dims(parser: argparse.ArgumentParser, items: Sequence[str]) -> dict[str, int]:
    dims = {}
    for item in items:
        name, _, value = item.partition("=")
        if not name or not value.isdigit():
            parser.error(f"--dim takes NAME=VALUE with a whole number, got {item!r}")
        dims[name] = int(value)
    return dims


def _plan_outputs(
    parser: argparse.ArgumentParser, args: argparse.Namespace
) -> list[tuple[Path, Path | None]]:
    """(input file, output path or None for the default) per input."""
    if any(not item for item in args.inputs):
        parser.error("INPUT is an empty string (an unset variable?); give '.' for this folder")
    if args.output is not None and not args.output:
        parser.error("-o is an empty string (an unset variable?)")
    files = convert.find_model_files(args.inputs)
    if args.in_place:
        if args.output:
            parser.error("--in-place and -o cannot be used together")
        return [(path, path) for path, _ in files]
    if not args.output:
        return [(path, None) for path, _ in files]
    output = Path(args.output)
    as_folder = args.output.endswith(("/", os.sep)) or output.is_dir()
    single = len(args.inputs) == 1 and not Path(args.inputs[0]).is_dir()
    if single and not as_folder:
        return [(files[0][0], output)]
    return [(path, output / rel) for path, rel in files]


def _progress(
    items: list[tuple[Path, Path | None]], quiet: bool
) -> Iterator[tuple[Path, Path | None]]:
    if quiet or len(items) < 2 or not sys.stderr.isatty():
        yield from items
        return
    from tqdm import tqdm

    yield from tqdm(items, unit="file", file=sys.stderr)


def _dim_warnings(report: convert.FileReport) -> list[str]:
    """The --dim names that matched no symbolic dim of the file (its report's warnings too)."""
    if report.verify is None:
        return []
    return [
        f"--dim {name}: no symbolic dim of the model's inputs or CumProds has that name; "
        "nothing was fed at that size"
        for name in report.verify.unmatched_dims
    ]


def _print_report(report: convert.FileReport, listing: bool, quiet: bool) -> None:
    if report.verify is not None and quiet:
        for o in report.verify.mismatches():
            print(f"  verify {o.name} ({o.dtype}): [MISMATCH] {o.detail}", file=sys.stderr)
    if report.error:
        print(f"error: {report.error}", file=sys.stderr)
    if listing:
        for n in report.nodes:
            attrs = ", ".join(
                a for a, on in (("exclusive", n.exclusive), ("reverse", n.reverse)) if on
            )
            print(
                f"{report.input}: {n.location}: CumProd '{n.name}' {n.dtype} axis={n.axis}"
                f"{' ' + attrs if attrs else ''} -> {n.lowering}"
            )
        return
    for message in _dim_warnings(report):  # (even with --quiet: nothing was fed so)
        print(f"warning: {report.input}: {message}", file=sys.stderr)
    if quiet:
        return
    if report.verify is not None:
        print(
            f"  verify: rewritten model run on {report.verify.runtime}, original on "
            f"{report.verify.reference}"
        )
        if report.verify.sizes:
            fed = ", ".join(f"{name}={size}" for name, size in report.verify.sizes.items())
            print(f"  verify: symbolic dims fed at {fed} (--dim NAME=SIZE to choose)")
        if not report.verify.richer_feeds:
            print(
                "  verify: the original fails with each symbolic dim at its own size and Loop "
                "trip counts at 3: fed the safe values instead (--dim to choose sizes)"
            )
        for o in (*report.verify.outputs, *report.verify.sites):
            unit = (
                "ulp"
                if o.bound or o.dtype.startswith(("float", "double", "bfloat"))
                else "elements differ"
            )
            if o.skipped:
                print(f"  verify {o.name} ({o.dtype}): [SKIPPED] {o.detail}")
                continue
            state = "ok" if o.ok else "MISMATCH"
            print(
                f"  verify {o.name} ({o.dtype}): worst {o.worst:.3g} {unit} [{state}]"
                + (f" {o.detail}" if o.detail else "")
            )
    if report.status == "rewritten":
        used = ", ".join(f"{k} {v}" for k, v in sorted(report.lowerings_used().items()))
        print(f"{report.input} -> {report.output}: {len(report.nodes)} CumProd rewritten ({used})")
    elif report.status in ("unchanged", "copied"):
        where = f", copied to {report.output}" if report.output else ""
        print(f"{report.input}: no CumProd{where}")


def _summary(reports: list[convert.FileReport], seconds: float, listing: bool) -> str:
    if not reports:
        return "0 files: no .onnx model found"
    status = Counter(r.status for r in reports)
    lowered: Counter[str] = Counter()
    for r in reports:
        if r.status in ("listed", "rewritten"):
            lowered.update(r.lowerings_used())
    # only nodes actually rewritten (or, with --list, found): not a failed file's
    done = ("listed",) if listing else ("rewritten",)
    nodes = sum(len(r.nodes) for r in reports if r.status in done)
    parts = ", ".join(f"{n} {s}" for s, n in sorted(status.items()))
    per = ", ".join(f"{k} {v}" for k, v in sorted(lowered.items())) or "none"
    verb = "found" if listing else "rewritten"
    return (
        f"{len(reports)} file(s): {parts}; {nodes} CumProd node(s) {verb} ({per}); {seconds:.2f} s"
    )


def _version() -> str:
    """The installed package's version ("unknown" when run from a checkout not installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("cumprod-rewriter")
    except PackageNotFoundError:
        return "unknown"


class _FileTag(logging.Filter):
    """Puts the file being processed in front of the library's log lines: in a folder run a
    warning named a node and a graph, but not which file."""

    current = ""

    def filter(self, record: logging.LogRecord) -> bool:
        tagged = getattr(record, "file_tagged", False)  # one record, several handlers
        if self.current and record.name.startswith("rewriter") and not tagged:
            record.msg = f"{self.current.replace('%', '%%')}: {record.msg}"
            record.file_tagged = True
        return True


class _WarningCollector(logging.Handler):
    """Keeps the library's warnings about the file being processed, for ``--report``
    (they are printed too, unless ``-q``)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno == logging.WARNING:
            self.messages.append(record.getMessage())


class _Interrupted(BaseException):
    """SIGTERM or SIGINT: unwind (staging folders are removed on the way) and exit."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _raise_interrupted(signum: int, frame: FrameType | None) -> None:
    raise _Interrupted(signum)


def main(argv: Sequence[str] | None = None) -> int:
    previous = {}
    if threading.current_thread() is threading.main_thread():  # only there can we catch them
        previous = {
            sig: signal.signal(sig, _raise_interrupted) for sig in (signal.SIGTERM, signal.SIGINT)
        }
    try:
        return _main(argv)
    except (_Interrupted, KeyboardInterrupt) as exc:
        for sig in previous:
            signal.signal(sig, signal.SIG_IGN)
        io.cleanup_staging()
        signum = exc.signum if isinstance(exc, _Interrupted) else signal.SIGINT
        name = signal.Signals(signum).name
        print(
            f"interrupted ({name}): stopped; files not yet committed were not written",
            file=sys.stderr,
        )
        return 128 + int(signum)
    except BrokenPipeError:  # the reader went away (``--list | head``): stop quietly
        io.cleanup_staging()
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # Python would fail again flushing at exit
        return 128 + int(signal.SIGPIPE)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _leftovers(args: argparse.Namespace, jobs: list[tuple[Path, Path | None]]) -> None:
    folders = {Path(item) for item in args.inputs if Path(item).is_dir()}
    shallow = {source.parent for source, _ in jobs} | {
        target.parent for _, target in jobs if target is not None
    }
    found = io.find_staging_leftovers(folders) + io.find_staging_leftovers(
        shallow - folders, recursive=False
    )
    for path in sorted(set(found)):
        print(
            f"warning: {path}: staging folder left by an interrupted run; ignored (delete it "
            "when no run is writing there)",
            file=sys.stderr,
        )


def _bare_verify(argv: Sequence[str]) -> list[str]:
    """``--verify`` followed by something that is not a count (``--verify model.onnx``):
    given without N, as its default; argparse took the path for N and refused it."""
    args = list(argv)
    for k, arg in enumerate(args[:-1]):
        if arg == "--":
            break
        if arg == "--verify" and not args[k + 1].lstrip("-").isdigit():
            args[k] = f"--verify={VERIFY_RUNS}"
    return args


def _main(argv: Sequence[str] | None) -> int:
    parser = _parser()
    args = parser.parse_args(_bare_verify(sys.argv[1:] if argv is None else argv))
    tag = _FileTag()
    collector = _WarningCollector()
    with _run_logging(args.verbose, args.quiet, tag, collector):
        return _run(parser, args, tag, collector)


@contextlib.contextmanager
def _run_logging(
    verbose: bool, quiet: bool, tag: _FileTag, collector: _WarningCollector
) -> Iterator[None]:
    """The run's logging: a stderr handler on the root logger when it has none (what
    ``logging.basicConfig`` would add), the root's level DEBUG with ``-v`` else WARNING,
    onnx_ir's warnings hidden without ``-v`` (it warns about invalid models we then report in
    one line), the file tag on every root handler, ``-q`` raising them to ERROR, and the
    report's collector on the library's logger. All of it is undone afterwards: ``main()``
    may run again in this process (the tests do, and a script may), and a ``-v`` or ``-q``
    of one run must not stay for the next, nor our handler double the caller's."""
    root = logging.getLogger()
    onnx_ir_logger = logging.getLogger("onnx_ir")
    levels = (root.level, onnx_ir_logger.level)
    added = None
    if not root.handlers:
        added = logging.StreamHandler()
        added.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        root.addHandler(added)
    root.setLevel(logging.DEBUG if verbose else logging.WARNING)
    if not verbose:
        onnx_ir_logger.setLevel(logging.ERROR)
    handlers = [(handler, handler.level) for handler in root.handlers]
    for handler, _ in handlers:
        handler.addFilter(tag)
        if quiet:  # -q prints no warning; --report still records them
            handler.setLevel(max(handler.level, logging.ERROR))
    logger.addHandler(collector)
    try:
        yield
    finally:
        logger.removeHandler(collector)
        for handler, level in handlers:
            handler.removeFilter(tag)
            handler.setLevel(level)
        if added is not None:
            root.removeHandler(added)
        root.setLevel(levels[0])
        onnx_ir_logger.setLevel(levels[1])


def _run(
    parser: argparse.ArgumentParser,
    args: argparse.Namespace,
    tag: _FileTag,
    collector: _WarningCollector,
) -> int:
    dims = _dims(parser, args.dim)
    notes = []  # warnings about the options: printed, and kept in the report
    if dims and not args.verify:
        notes.append("--dim only sets sizes for --verify, which was not given: ignored")
    ignored = [
        flag
        for flag, given in (
            ("-o", args.output),
            ("--verify", args.verify),
            ("--in-place", args.in_place),
        )
        if given
    ]
    if args.list and ignored:
        notes.append(f"--list writes nothing: {', '.join(ignored)} ignored")
    for note in notes:
        print(f"warning: {note}", file=sys.stderr)
    jobs = _plan_outputs(parser, args)
    report_path = Path(args.report) if args.report else None
    if args.list:  # nothing written but the report
        planned = [(s, s) for s, _ in jobs]
    else:
        planned = [(s, t if t is not None else convert.default_output(s)) for s, t in jobs]
    try:
        io.check_write_plan(planned, in_place=args.in_place or args.list, report=report_path)
    except io.ModelFileError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    if not args.quiet:
        _leftovers(args, jobs)
    start = time.perf_counter()
    reports = []
    for source, target in _progress(jobs, args.quiet):
        tag.current = str(source)
        collector.messages = []
        if args.list:
            report = convert.list_file(
                source,
                strategy=args.strategy,
                target=args.target,
                max_length=args.max_length,
                target_opset=args.target_opset,
            )
        else:
            report = convert.convert_file(
                source,
                target,
                strategy=args.strategy,
                target_opset=args.target_opset,
                target=args.target,
                verify_runs=args.verify,
                dims=dims,
                max_length=args.max_length,
            )
        tag.current = ""
        report.warnings = collector.messages + _dim_warnings(report)
        _print_report(report, args.list, args.quiet)
        reports.append(report)
    seconds = time.perf_counter() - start
    failed = [r for r in reports if r.status == "failed"]
    mismatched = [r for r in reports if r.status == "mismatch"]
    if not args.quiet:
        print(_summary(reports, seconds, args.list))
    if len(reports) > 1 and (failed or mismatched):
        what = " or did not verify" if mismatched else ""
        print(f"{len(failed) + len(mismatched)} file(s) failed{what}:", file=sys.stderr)
        for r in (*failed, *mismatched):
            print(f"  {r.error}", file=sys.stderr)
    if report_path is not None:
        payload = {
            "tool": f"cumprod-rewriter {_version()}",
            "options": {
                "target": args.target,
                "strategy": args.strategy,
                "target_opset": args.target_opset,
                "max_length": args.max_length,
                "verify": args.verify,
                "dims": dims,
                "list": args.list,
            },
            "warnings": notes,
            "seconds": seconds,
            "files": [dataclasses.asdict(r) for r in reports],
        }
        try:
            io.write_text(report_path, json.dumps(payload, indent=2, default=str) + "\n")
        except io.ModelFileError as exc:
            print(f"error: --report {exc}", file=sys.stderr)
            return EXIT_ERROR
    if failed:
        return EXIT_ERROR
    if any(r.status == "mismatch" for r in reports):
        return EXIT_MISMATCH
    return EXIT_OK
