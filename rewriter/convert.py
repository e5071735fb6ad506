"""Rewriting model files: one file at a time, each tested on its own; the command line is a
thin layer over these functions.

``convert_file`` loads a model (weights left on disk), lowers every CumProd, optionally verifies
the result against the original on random inputs, and writes it atomically. It never raises
for a bad file: the :class:`FileReport` says what happened.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import logging
import os
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

import onnx

from rewriter import io
from rewriter.decompose import (
    DecomposeCumProdPass,
    Planned,
    check_training_info,
    decompose_cumprod,
)
from rewriter.errors import (
    CumProdError,
    InputModelError,
    ModelFileError,
    OpsetError,
    TargetError,
)
from rewriter.graphs import ai_onnx_opset
from rewriter.targets import DEFAULT_TARGET
from rewriter.verify import (
    LoweredSite,
    VerifyResult,
    plan_bound,
    site_model,
    symbolic_sizes,
    verify_model,
)

__all__ = [
    "OUTPUT_SUFFIX",
    "FileReport",
    "NodeReport",
    "convert_file",
    "default_output",
    "find_model_files",
    "list_file",
    "lower_sites",
]

logger = logging.getLogger(__name__)
# What a file's report states in one line (anything else is reported as unexpected).
_REPORTED_ERRORS = (ModelFileError, CumProdError, InputModelError, OpsetError, TargetError)

OUTPUT_SUFFIX = ".nocumprod.onnx"


@dataclasses.dataclass(frozen=True)
class NodeReport:
    """One CumProd node: where it is, what it is, and how it is (or would be) lowered."""

    location: str
    name: str
    dtype: str
    axis: int | str
    exclusive: bool
    reverse: bool
    lowering: str


@dataclasses.dataclass
class FileReport:
    """What happened to one input file.

    ``status`` is one of: ``rewritten``, ``unchanged`` (no CumProd, nothing written),
    ``copied`` (no CumProd, copied to the output asked for), ``listed``, ``mismatch``
    (``--verify`` failed; nothing written), ``failed``. ``warnings``: what the library
    logged as warnings while processing the file (the command line collects them).
    """

    input: str
    output: str | None = None
    status: str = "failed"
    error: str | None = None
    nodes: list[NodeReport] = dataclasses.field(default_factory=list)
    verify: VerifyResult | None = None
    seconds: float = 0.0
    warnings: list[str] = dataclasses.field(default_factory=list)

    def lowerings_used(self) -> dict[str, int]:
        return dict(collections.Counter(n.lowering for n in self.nodes))


def _describe(plans: Iterable[Planned]) -> list[NodeReport]:
    reports = []
    for plan in plans:
        site = plan.site
        axis: int | str = site.axis if site.axis is not None else "run-time"
        reports.append(
            NodeReport(
                location=site.location,
                name=site.name,
                dtype=site.dtype.name.lower() if site.dtype is not None else "unknown",
                axis=axis,
                exclusive=site.exclusive,
                reverse=site.reverse,
                lowering=plan.lowering.name,
            )
        )
    return reports


def find_model_files(inputs: Iterable[str | os.PathLike[str]]) -> list[tuple[Path, Path]]:
    """(file, path relative to the input it was found under) for each input: a file as
    given, a folder searched recursively for ``*.onnx`` in any case (our own
    ``*.nocumprod.onnx`` outputs, anything inside a staging folder ``.cumprod-staging-*``
    (see :func:`rewriter.io.find_staging_leftovers`) and the external data files of the
    models found, whatever their name, left out). A path that does not exist is kept, so
    that it is reported as failed."""
    found: list[tuple[Path, Path]] = []
    for item in map(Path, inputs):
        if item.is_dir():
            scanned = []
            for path in sorted(item.rglob("*")):
                rel = path.relative_to(item)
                if path.suffix.lower() != ".onnx" or io.is_staging(rel):
                    continue
                if path.name.lower().endswith(OUTPUT_SUFFIX) or not path.is_file():
                    continue
                scanned.append((path, rel))
            data: set[Path] = set()
            for path, _ in scanned:
                with contextlib.suppress(io.ModelFileError):  # reported when converted
                    data |= io.data_files(path)
            found.extend((path, rel) for path, rel in scanned if path.resolve() not in data)
        else:
            found.append((item, Path(item.name)))
    return found


def default_output(path: Path) -> Path:
    """``model.onnx`` -> ``model.nocumprod.onnx`` beside it (any case of ``.onnx``)."""
    stem = path.name[: -len(".onnx")] if path.name.lower().endswith(".onnx") else path.name
    return path.with_name(stem + OUTPUT_SUFFIX)


def list_file(
    path: Path,
    *,
    strategy: str = "auto",
    target: str = DEFAULT_TARGET,
    max_length: int | None = None,
    target_opset: int | None = None,
) -> FileReport:
    """Report every CumProd in ``path`` with the lowering it gets for ``target`` (``auto``'s
    choice unless ``strategy`` names one); write nothing. The rewrite runs on a copy in
    memory, so a node it would refuse is reported as the rewrite reports it (planning alone
    listed a lowering the rewrite then refused, e.g. below ``target_opset`` 14)."""
    start = time.perf_counter()
    report = FileReport(input=str(path))
    try:
        model = io.load_model(path, check=False)
        kept = io.training_info(path)  # refused under a lower opset, as the rewrite does
        check_training_info(kept, ai_onnx_opset(model.opset_imports), target_opset)
        rewrite = DecomposeCumProdPass(
            strategy, target_opset=target_opset, target=target, max_length=max_length
        )
        rewrite(model.clone())
        report.nodes = _describe(rewrite.plans)
        io.check_model_file(path)
        report.status = "listed"
    except _REPORTED_ERRORS as exc:
        logger.debug("%s failed", path, exc_info=True)
        report.error = _message(path, exc)
    except Exception as exc:  # one bad file must not stop a batch
        logger.debug("unexpected error on %s", path, exc_info=True)
        report.error = _unexpected(path, exc)
    report.seconds = time.perf_counter() - start
    return report


def _unexpected(path: Path, exc: Exception) -> str:
    """One line for an error we did not foresee: the checker's complaint when the model fails
    it (that is usually the real problem), else the exception's message."""
    try:
        io.check_model_file(path)
    except io.ModelFileError as checked:
        return str(checked)
    except Exception:  # noqa: BLE001 - the original error is the one to report
        pass
    text = " ".join(str(exc).split())
    if len(text) > 300:
        text = text[:297] + "..."
    return f"{path}: {type(exc).__name__}: {text}"


def _message(path: Path, exc: Exception) -> str:
    text = str(exc)
    return text if text.startswith(str(path)) else f"{path}: {text}"


def _verify_bound(plans: list[Planned], dims: Mapping[str, int]) -> float:
    """The largest of the CumProds' float bounds (:func:`rewriter.verify.plan_bound`): what
    ``--verify`` allows an output it cannot tie to its own CumProds."""
    return max([plan_bound(plan, dims) for plan in plans], default=0.0)


@contextlib.contextmanager
def _quiet_rewriter() -> Iterator[None]:
    """The rewriter's warnings held back while a CumProd is lowered again alone (they named
    a graph 'site' the user's model does not have, after the same warnings for the model)."""
    quiet = logging.getLogger("rewriter")
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        yield
    finally:
        quiet.setLevel(level)


def lower_sites(
    plans: Iterable[Planned],
    *,
    strategy: str = "auto",
    target: str = DEFAULT_TARGET,
    target_opset: int | None = None,
    max_length: int | None = None,
) -> list[LoweredSite]:
    """Each planned CumProd's one-node model (:func:`rewriter.verify.site_model`) lowered as
    the model was (:func:`rewriter.decompose_cumprod` with the same strategy, target, target
    opset and length bound), for :func:`rewriter.verify.check_sites`. A lowering that refuses
    the lone node (ValueError: it needs more than the pass was given) is kept as its one-line
    reason; a site of unknown type or rank is not lowered. The target's warnings were given
    for the model: they are held back here."""
    lowered = []
    for plan in plans:
        site = plan.site
        if site.dtype is None or site.shape is None:
            lowered.append(LoweredSite(plan, None))
            continue
        try:
            with _quiet_rewriter():
                model = decompose_cumprod(
                    site_model(site),
                    strategy=strategy,
                    target=target,
                    target_opset=target_opset,
                    max_length=max_length,
                )
        except ValueError as exc:
            text = " ".join(str(exc).split()) or type(exc).__name__
            lowered.append(LoweredSite(plan, None, text[:240]))
            continue
        assert isinstance(model, onnx.ModelProto)
        lowered.append(LoweredSite(plan, model))
    return lowered


def convert_file(
    source: Path,
    output: Path | None,
    *,
    strategy: str = "auto",
    target_opset: int | None = None,
    target: str = DEFAULT_TARGET,
    verify_runs: int = 0,
    dims: Mapping[str, int] | None = None,
    max_length: int | None = None,
) -> FileReport:
    """Lower every CumProd of the model at ``source`` and write it to ``output``.

    ``output`` None means: do not write a file when there is nothing to do, and
    ``default_output(source)`` otherwise. An ``output`` that is ``source`` (or an alias or
    hard link of it) rewrites in place (atomically); one that is the input's external data
    file is refused. Writes go through :func:`rewriter.io.save_model` (atomic, mode and
    owner kept). ``strategy``, ``target_opset``, ``target`` and ``max_length`` are the pass's
    (DecomposeCumProdPass). With ``verify_runs`` > 0 the staged output is checked with
    :func:`rewriter.verify.verify_model` before it is moved into place; a mismatch writes
    nothing.
    """
    start = time.perf_counter()
    report = FileReport(input=str(source))
    try:
        destination = output if output is not None else default_output(source)
        # never over an input's external data (an output equal to the input is in place)
        io.check_write_plan([(source, destination)], in_place=True)
        model = io.load_model(source, check=False)
        kept = io.training_info(source)  # onnx_ir does not carry it
        check_training_info(kept, ai_onnx_opset(model.opset_imports), target_opset)
        sizes = symbolic_sizes(model, dims)  # what --verify feeds (before the pass's rewrite)
        rewrite = DecomposeCumProdPass(
            strategy, target_opset=target_opset, target=target, max_length=max_length
        )
        modified = rewrite(model).modified  # validates every node first: errors name it
        io.check_model_file(source)
        report.nodes = _describe(rewrite.plans)
        if not modified:
            report.status = "unchanged"
            if output is not None and not io.same_file(output, source):
                io.atomic_copy(source, output)
                report.output, report.status = str(output), "copied"
            return report
        bound = _verify_bound(rewrite.plans, sizes)

        def check(staged: Path) -> bool:
            if verify_runs <= 0:
                return True
            report.verify = verify_model(
                source,
                staged,
                bound_ulps=bound,
                runs=verify_runs,
                dims=dims,
                plans=rewrite.plans,
                sites=lower_sites(
                    rewrite.plans,
                    strategy=strategy,
                    target=target,
                    target_opset=target_opset,
                    max_length=max_length,
                ),
                target=target,
                max_length=max_length,
            )
            return report.verify.ok

        if io.save_model(model, destination, accept=check, mode_from=source, training_info=kept):
            report.output, report.status = str(destination), "rewritten"
        else:
            report.status = "mismatch"
            report.error = f"{source}: --verify found a mismatch; nothing written"
    except _REPORTED_ERRORS as exc:
        logger.debug("%s failed", source, exc_info=True)
        report.error = _message(source, exc)
    except Exception as exc:
        logger.debug("unexpected error on %s", source, exc_info=True)
        report.error = _unexpected(source, exc)
    finally:
        report.seconds = time.perf_counter() - start
    return report
