"""Which files a run may write: an output is never an input (unless in place), an input's
external data file, another output, or an existing file another ``.onnx`` model of its folder
reads as external data (by resolved path and by inode, so aliases and hard links count); a
device or FIFO is never replaced; a ``--report`` path is checked the same way."""

from __future__ import annotations

import contextlib
import logging
import os
import stat
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from rewriter.errors import ModelFileError
from rewriter.io.load import _external_entries, _read_proto, data_files

__all__ = ["STAGING_PREFIX", "check_write_plan", "is_staging", "same_file"]

logger = logging.getLogger("rewriter.io")  # the name the command prints

# Staging folders start with this; folder scans skip any path with a part starting with it.
STAGING_PREFIX = ".cumprod-staging-"


def is_staging(path: Path) -> bool:
    """Whether ``path`` is, or is inside, a staging folder."""
    return any(part.startswith(STAGING_PREFIX) for part in path.parts)


# Per folder scanned (:func:`_data_owner`): each data file's identity -> (file, model reading it)
_Scans = dict[Path, dict[tuple[object, ...], list[tuple[Path, Path]]]]


def _identities(path: Path) -> set[tuple[object, ...]]:
    """Keys two paths to the same file share: the resolved path, and device and inode."""
    keys: set[tuple[object, ...]] = {("path", str(path.resolve()))}
    with contextlib.suppress(OSError):
        st = path.stat()
        keys.add(("inode", st.st_dev, st.st_ino))
    return keys


def same_file(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    """Whether ``a`` and ``b`` are one file: same resolved path, or os.path.samefile."""
    return bool(_identities(Path(a)) & _identities(Path(b)))


def check_write_plan(
    jobs: Iterable[tuple[Path, Path]],
    *,
    in_place: bool,
    report: Path | None = None,
) -> None:
    """Refuse a run that would overwrite what it reads or write one file twice.

    ``jobs`` are (input, output). An output may be its own input only with ``in_place``; it
    may never be another input, an input's external data file, another job's output, or an
    existing file that an ``.onnx`` model of its folder reads as external data
    (:func:`_data_owner`). ``report`` (a JSON report path) may be none of these, nor a
    folder, and must be writable.

    Raises:
        ModelFileError: one line naming the output and what it would destroy.
    """
    jobs = list(jobs)
    scanned: _Scans = {}
    inputs: dict[tuple[object, ...], Path] = {}
    data: dict[tuple[object, ...], tuple[Path, Path]] = {}
    for source, _ in jobs:
        for key in _identities(source):
            inputs[key] = source
        try:
            files = data_files(source)
        except ModelFileError:
            continue  # reported when the input is processed
        for file in files:
            for key in _identities(file):
                data[key] = (file, source)
    outputs: dict[tuple[object, ...], tuple[int, Path]] = {}
    for job, (source, target) in enumerate(jobs):
        if _special_file(target):
            raise ModelFileError(
                f"{target}: is not a regular file (a device, FIFO or socket); nothing written"
            )
        keys = _identities(target)
        own = _identities(source)
        for key in keys:
            if key in inputs and not (in_place and key in own):
                other = inputs[key]
                hint = "" if in_place else " (use --in-place to rewrite an input)"
                raise ModelFileError(
                    f"{target}: refusing to write over the input {other}{hint}; nothing written"
                )
            if key in data:
                file, owner = data[key]
                raise ModelFileError(
                    f"{target}: refusing to write over {file}, the external data of the input "
                    f"{owner}; nothing written"
                )
            if key in outputs and outputs[key][0] != job:
                raise ModelFileError(
                    f"{target}: several inputs would be written there ({outputs[key][1]} and "
                    f"{source}); nothing written"
                )
        reader = None if keys & own else _data_owner(target, scanned)  # (not --in-place's)
        if reader is not None:
            raise ModelFileError(
                f"{target}: refusing to write over the external data of the model "
                f"{_reader_text(target, *reader)}; nothing written"
            )
        for key in keys:
            outputs[key] = (job, source)
    if report is not None:
        targets = [target for _, target in jobs]
        _check_report(report, inputs, data, outputs, targets, scanned=scanned)


def _data_owner(path: Path, scanned: _Scans) -> tuple[Path, Path] | None:
    """(data file, model) when the existing regular file ``path`` is the external data
    (by :func:`_identities`) of an ``.onnx`` model (any case; not ``path`` itself; one that
    cannot be read is skipped) in its folder, or in the folder of the file a symbolic link
    ``path`` points to; else None. Models in other folders (a parent's ``sub/w.bin``) are
    not looked at. ``scanned`` keeps each folder's scan for the next path."""
    if not path.is_file():
        return None
    keys = _identities(path)
    for folder in dict.fromkeys((path.parent.resolve(), path.resolve().parent)):
        if folder not in scanned:
            readers: dict[tuple[object, ...], list[tuple[Path, Path]]] = {}
            for model, files in _folder_references(folder):
                for file in files or ():
                    for key in _identities(file):
                        readers.setdefault(key, []).append((file, model))
            scanned[folder] = readers
        for key in keys:
            for file, model in scanned[folder].get(key, []):
                if not _identities(model) & keys:
                    return file, model
    return None


def _reader_text(path: Path, file: Path, model: Path) -> str:
    """``model``, and the data file it reads when that is not ``path`` as given (a link)."""
    return str(model) if str(file) == os.path.abspath(path) else f"{model} ({file})"


def _mode(path: Path) -> int | None:
    """``path``'s mode after symbolic links; None when it does not exist."""
    try:
        return path.stat().st_mode
    except OSError:
        return None


def _special_file(path: Path) -> bool:
    """Whether ``path`` exists and is not a regular file or folder (a device, FIFO, socket)."""
    mode = _mode(path)
    return mode is not None and not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def _stream_file(path: Path) -> bool:
    """Whether ``path`` is a character device or FIFO (``/dev/stdout``): written into."""
    mode = _mode(path)
    return mode is not None and (stat.S_ISCHR(mode) or stat.S_ISFIFO(mode))


def _check_report(
    report: Path,
    inputs: dict[tuple[object, ...], Path],
    data: dict[tuple[object, ...], tuple[Path, Path]],
    outputs: dict[tuple[object, ...], tuple[int, Path]],
    targets: Sequence[Path],
    *,
    scanned: _Scans,
) -> None:
    where = f"--report {report}"
    if report.is_dir():
        raise ModelFileError(f"{where}: is a folder; give a file name")
    keys = _identities(report)
    if keys & inputs.keys():
        raise ModelFileError(f"{where}: is an input model; nothing written")
    if keys & data.keys():
        raise ModelFileError(f"{where}: is an input's external data file; nothing written")
    if keys & outputs.keys():
        raise ModelFileError(f"{where}: is also a model output; nothing written")
    reader = _data_owner(report, scanned)
    if reader is not None:
        raise ModelFileError(
            f"{where}: is the external data of the model {_reader_text(report, *reader)}; "
            "nothing written"
        )
    # a folder this run makes for its outputs (found by a review from outside: refused
    # only after the models were written)
    resolved = report.resolve()
    if any(resolved in target.resolve().parents for target in targets):
        raise ModelFileError(f"{where}: is a folder of the model outputs; give a file name")
    if _stream_file(report):  # /dev/stdout, a FIFO: written as it is (write_text)
        if not os.access(report, os.W_OK):
            raise ModelFileError(f"{where}: not writable")
        return
    if _special_file(report):
        raise ModelFileError(f"{where}: is a socket or block device; nothing written")
    # a missing folder is made when the report is written, as -o's are: the nearest
    # existing one must be a folder we can write in
    folder = report.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise ModelFileError(f"{where}: {folder} is not a folder; nothing written")
    if not os.access(folder, os.W_OK | os.X_OK) or (
        report.exists() and not os.access(report, os.W_OK)
    ):
        raise ModelFileError(f"{where}: not writable")


# The external data locations of the models folder scans read, by absolute path, with the
# file's identity and times they were read at: a model is read again only when it changed (a
# scan per output, as convert_file's check makes, read every model of the folder each time).
_LOCATIONS: dict[Path, tuple[tuple[int, ...], tuple[str, ...] | None]] = {}


def _data_locations(model: Path) -> tuple[str, ...] | None:
    """The external data locations the model ``model`` names (checked by
    :func:`_external_entries`); None when it cannot be read."""
    try:
        st = model.stat()
    except OSError:
        return None
    stamp = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    known = _LOCATIONS.get(model.absolute())
    if known is not None and known[0] == stamp:
        return known[1]
    found: tuple[str, ...] | None
    try:
        found = tuple(loc for _, loc, _, _ in _external_entries(_read_proto(model), model))
    except ModelFileError:
        found = None
    _LOCATIONS[model.absolute()] = (stamp, found)
    return found


def _folder_references(folder: Path) -> Iterator[tuple[Path, set[Path] | None]]:
    """Each ``.onnx`` file (any case, staging folders skipped) of ``folder``, with the data
    files it references (resolved, as :func:`data_files` gives them), None when it cannot be
    read; nothing when the folder cannot be listed."""
    try:
        models = sorted(folder.iterdir())
    except OSError:
        return
    for model in models:
        if model.suffix.lower() != ".onnx" or is_staging(model) or not model.is_file():
            continue
        locations = _data_locations(model)
        yield model, None if locations is None else {(folder / x).resolve() for x in locations}


def _referenced_by_folder(folder: Path) -> tuple[set[Path], list[Path]]:
    """Every data file the readable ``.onnx`` files (any case) of ``folder`` reference, and
    the ``.onnx`` files of it that cannot be read (what they reference is not known)."""
    referenced: set[Path] = set()
    unreadable: list[Path] = []
    for model, files in _folder_references(folder):
        if files is None:
            unreadable.append(model)
        else:
            referenced |= files
    return referenced, unreadable


def _warn_unreferenced(candidates: set[Path], target: Path) -> None:
    """After a commit: name the replaced model's old data files that no ``.onnx`` file (any
    case) in the target's folder references any more. They are never removed: a copy
    (``a.onnx.bak``), a model in another folder or a file of another extension may still
    read them. When a model there cannot be read, nothing is claimed unreferenced: one
    warning names it and the kept files no readable model references, which it may read."""
    folder = target.parent
    candidates = {c for c in candidates if c.is_file()}
    if not candidates:
        return
    referenced, unreadable = _referenced_by_folder(folder)
    unknown = sorted(candidates - referenced)
    if unknown and unreadable:
        logger.warning(
            "kept %s, the external data of the model %s replaced: cannot tell whether a "
            ".onnx file in its folder still reads %s, as %s cannot be read",
            ", ".join(map(str, unknown)),
            target,
            "it" if len(unknown) == 1 else "them",
            ", ".join(map(str, unreadable)),
        )
        return
    for path in unknown:
        logger.warning(
            "kept %s, the external data of the model %s replaced, which no .onnx file in "
            "its folder reads any more (remove it when nothing else does)",
            path,
            target,
        )
