"""Writes that readers see whole or not at all: files are staged in a private folder
``.cumprod-staging-*`` beside the target, each write's external data goes to a fresh file
``<model>.<random>.data``, the model's ``os.replace`` is the commit point. The data files the
replaced model used are never removed (those no ``.onnx`` file of the folder reads any more are
named in a warning). A replaced file keeps its permission bits and owner (or nothing is
written); a new file takes those of the file it comes from."""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

import onnx
import onnx_ir as ir

from rewriter.checker import replace_tensors, tensors_in_memory
from rewriter.errors import ModelFileError
from rewriter.graphs import graphs_of
from rewriter.io.load import (
    _external_entries,
    _initializer_tensors,
    _read_header,
    data_files,
    run_checker,
)
from rewriter.io.plan import STAGING_PREFIX, _stream_file, _warn_unreferenced, is_staging
from rewriter.io.wire import InlineTensor, file_tensors, read_header, streamable, write_model
from rewriter.protos import model_graphs, model_tensors
from rewriter.serde import kept_output_declarations, restore_output_declarations

__all__ = [
    "atomic_copy",
    "cleanup_staging",
    "find_staging_leftovers",
    "save_model",
    "write_text",
]

# Above this many bytes of initializers a model cannot be one protobuf (2 GiB limit).
_INLINE_LIMIT = 1 << 30


# Staging folders in use by this process (removed by cleanup_staging on a signal).
_ACTIVE_STAGING: set[Path] = set()


@contextlib.contextmanager
def _staging(target: Path) -> Iterator[Path]:
    """A private (0700) temporary folder beside ``target``; removed whatever happens."""
    folder = target.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
        stage = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=folder))
    except OSError as exc:
        raise ModelFileError(f"{target}: cannot write there: {exc.strerror or exc}") from exc
    _ACTIVE_STAGING.add(stage)
    try:
        yield stage
    finally:
        shutil.rmtree(stage, ignore_errors=True)
        _ACTIVE_STAGING.discard(stage)


def cleanup_staging() -> list[Path]:
    """Remove every staging folder this process has open (for signal handlers)."""
    removed = []
    for stage in list(_ACTIVE_STAGING):
        shutil.rmtree(stage, ignore_errors=True)
        _ACTIVE_STAGING.discard(stage)
        removed.append(stage)
    return removed


def find_staging_leftovers(folders: Iterable[Path], recursive: bool = True) -> list[Path]:
    """Staging folders left by killed runs in ``folders`` (and below, when ``recursive``)."""
    found: set[Path] = set()
    for folder in folders:
        if not folder.is_dir():
            continue
        pattern = f"**/{STAGING_PREFIX}*" if recursive else f"{STAGING_PREFIX}*"
        for path in folder.glob(pattern):
            if path not in _ACTIVE_STAGING and not is_staging(path.parent.relative_to(folder)):
                found.add(path)
    return sorted(found)


def _fresh_name(folder: Path, stem: str, taken: set[str]) -> str:
    while True:
        name = f"{stem}.{secrets.token_hex(4)}.data"
        if name not in taken and not (folder / name).exists():
            taken.add(name)
            return name


def _keep_metadata(target: Path, staged: Path, like: Path | None, mode_from: Path | None) -> None:
    """Give ``staged`` the mode and owner of ``like`` (the file it replaces) when there is
    one, else the permission bits of ``mode_from``.

    Raises:
        ModelFileError: the owner cannot be kept (not allowed to chown).
    """
    try:
        if like is not None and like.exists():
            st = like.stat()
            mine = staged.stat()
            if (st.st_uid, st.st_gid) != (mine.st_uid, mine.st_gid):
                try:
                    os.chown(staged, st.st_uid, st.st_gid)
                except PermissionError as exc:
                    raise ModelFileError(
                        f"{target}: cannot keep the owner of {like} (uid {st.st_uid}, gid "
                        f"{st.st_gid}) as uid {os.geteuid()}: {exc.strerror}; nothing written"
                    ) from exc
            os.chmod(staged, stat.S_IMODE(st.st_mode))
        elif mode_from is not None and mode_from.exists():
            os.chmod(staged, stat.S_IMODE(mode_from.stat().st_mode) & 0o777)
    except OSError as exc:
        raise ModelFileError(f"{target}: cannot set its mode: {exc.strerror or exc}") from exc


def _narrow_mode(target: Path, staged: Path, source: Path) -> None:
    """Take away from ``staged`` the permission bits ``source`` does not have (weights kept
    private stay private, whatever the file the new one replaces allowed)."""
    try:
        keep = stat.S_IMODE(source.stat().st_mode)
        os.chmod(staged, stat.S_IMODE(staged.stat().st_mode) & keep)
    except OSError as exc:
        raise ModelFileError(f"{target}: cannot set its mode: {exc.strerror or exc}") from exc


def _commit(
    target: Path,
    staged_model: Path,
    staged_data: list[tuple[Path, str, Path | None]],
    mode_from: Path | None,
    *,
    is_model: bool = True,
) -> list[Path]:
    """Move the staged data files in (fresh names: no reader sees them yet), then the model
    (the commit point); then name the replaced model's data files nothing here reads.
    ``staged_data``: (staged file, its name, the file whose mode a new one takes)."""
    folder = target.parent
    old_data: set[Path] = set()
    with contextlib.suppress(ModelFileError):
        if is_model and target.is_file():
            old_data = data_files(target)
    like_data = next((p for p in sorted(old_data) if p.is_file()), None)
    replaced = target if target.exists() else None
    _keep_metadata(target, staged_model, replaced, mode_from)
    for staged, _, data_mode_from in staged_data:
        _keep_metadata(target, staged, like_data or replaced, data_mode_from or mode_from)
        if like_data is None and data_mode_from is not None:  # the input's weights' mode
            _narrow_mode(target, staged, data_mode_from)
    moved: list[Path] = []
    committed = False
    try:
        for staged, name, _ in staged_data:
            os.replace(staged, folder / name)
            moved.append(folder / name)
        os.replace(staged_model, target)
        committed = True
    except OSError as exc:
        raise ModelFileError(f"{target}: cannot write: {exc.strerror or exc}") from exc
    finally:
        if not committed:
            for path in moved:
                with contextlib.suppress(OSError):
                    path.unlink()
    new = {p.resolve() for p in moved}
    _warn_unreferenced(old_data - new, target)
    return [*moved, target]


def _needs_external(model: ir.Model) -> bool:
    total = 0
    for tensor in _initializer_tensors(model):
        if isinstance(tensor, ir.ExternalTensor) and not isinstance(tensor, InlineTensor):
            return True
        total += tensor.nbytes
    return total > _INLINE_LIMIT


def _inline_threshold(model: ir.Model) -> int:
    """The size in bytes up to which ``ir.save`` keeps an initializer in the model: its
    default, 256, or the largest string initializer's size, which onnx_ir 1.1 would try to
    move out (external data cannot hold strings: it raised "StringTensor does not support
    tobytes", and a model with a string initializer over 256 bytes and external weights
    was refused)."""
    sizes = [
        tensor.nbytes
        for tensor in _initializer_tensors(model)
        if tensor.dtype == ir.DataType.STRING
    ]
    return max([256, *sizes])


def save_model(
    model: ir.Model,
    target: str | os.PathLike[str],
    *,
    check: bool = True,
    accept: Callable[[Path], bool] | None = None,
    mode_from: str | os.PathLike[str] | None = None,
    training_info: Sequence[onnx.TrainingInfoProto] = (),
) -> list[Path]:
    """Write ``model`` to ``target`` atomically; return the files written.

    Weights that were external, or that are too large for one file, go to one data file
    ``<target name>.<random>.data`` beside it (a fresh name per write), so the output folder
    is self-contained. The files are staged in a private folder beside the target, checked
    (``onnx.checker``), then moved into place, the model last; on any error nothing is left
    behind and an existing target is untouched. A replaced target keeps its mode and owner;
    a new one takes the permission bits of ``mode_from``. ``accept`` sees the staged file
    before it is moved: when it returns False nothing is written and the result is empty.
    ``training_info`` (which onnx_ir does not carry) is written into the model as given.
    """
    target = Path(target)
    source = Path(mode_from) if mode_from is not None else None
    with _staging(target) as stage:
        data_name = (
            _fresh_name(target.parent, target.name, set()) if _needs_external(model) else None
        )
        staged = stage / target.name
        try:
            with tensors_in_memory(model, for_save=True):  # what ir.save does not move
                if data_name is None:
                    _save_inline(model, staged, training_info)
                else:
                    _save_external(model, staged, data_name, training_info)
            if check:
                run_checker(staged, read_header(staged))
        except onnx.checker.ValidationError as exc:
            first = str(exc).strip().splitlines()[0]
            raise ModelFileError(
                f"{target}: the rewritten model fails the ONNX checker: {first}"
            ) from exc
        except OSError as exc:
            raise ModelFileError(f"{target}: cannot write: {exc.strerror or exc}") from exc
        if accept is not None and not accept(staged):
            return []
        data = []
        staged_data = stage / data_name if data_name is not None else None
        if data_name is not None and staged_data is not None and staged_data.exists():
            if staged_data.stat().st_size:
                data = [(staged_data, data_name, _strictest_data_file(source))]
            else:  # every tensor small enough to stay in the model: no data file
                staged_data.unlink()
        return _commit(target, staged, data, source)


def _save_inline(
    model: ir.Model, staged: Path, training_info: Sequence[onnx.TrainingInfoProto]
) -> None:
    """Write ``model`` (its function bodies' external tensors read into memory: see
    :func:`save_model`) to ``staged`` as one file, as ``ir.save`` would, with the large
    main-graph initializers' bytes streamed from their tensors (:func:`write_model`), not
    serialised in memory: each is serialised as a data-less stand-in, whose place in the
    message the stream fills."""
    big = streamable(model)
    standing = {id(tensor) for tensor in big.values()}

    def stand_in(
        graph: ir.Graph, tensor: ir.TensorProtocol, initializer: bool
    ) -> ir.TensorProtocol:
        if not (initializer and graph is model.graph and id(tensor) in standing):
            return tensor
        return ir.ExternalTensor(
            "",
            None,
            None,
            tensor.dtype,
            shape=ir.Shape(tensor.shape.numpy()),
            name=tensor.name or "",
            doc_string=tensor.doc_string,
            metadata_props=dict(tensor.metadata_props),
        )

    restore = replace_tensors(model, stand_in)
    try:
        proto = ir.serde.serialize_model(model)
    finally:
        restore()
    streamed = {}
    for index, tensor in enumerate(proto.graph.initializer):
        if tensor.name in big and tensor.data_location == onnx.TensorProto.EXTERNAL:
            tensor.ClearField("data_location")
            tensor.ClearField("external_data")
            streamed[index] = big[tensor.name]
    if any(t.data_location == onnx.TensorProto.EXTERNAL for t in model_tensors(proto)):
        raise ModelFileError(f"{staged.name}: a tensor would be written as a file reference")
    restore_output_declarations(proto, kept_output_declarations(model))
    proto.training_info.extend(training_info)
    with open(staged, "wb") as file:
        write_model(proto, streamed, file)


def _save_external(
    model: ir.Model,
    staged: Path,
    data_name: str,
    training_info: Sequence[onnx.TrainingInfoProto],
) -> None:
    """``ir.save`` (its function bodies' external tensors read into memory: see
    :func:`save_model`) with the large tensors in the data file ``data_name`` beside ``staged``
    (streamed by onnx_ir), then what it does not carry put back into the (small) model
    file: ``training_info`` and the initializers' descriptions."""
    ir.save(
        model,
        staged,
        external_data=data_name,
        size_threshold_bytes=_inline_threshold(model),
    )
    described = _described_initializers(model)
    declared = kept_output_declarations(model)  # inputs that are also outputs
    if training_info or described or declared:
        proto = onnx.load(str(staged), load_external_data=False)
        restore_output_declarations(proto, declared)
        proto.training_info.extend(training_info)
        _describe_initializers(proto, described)
        onnx.save(proto, str(staged))


def _described_initializers(model: ir.Model) -> dict[str, tuple[str, dict[str, str]]]:
    """The doc_string and metadata_props of each initializer that has them, by name:
    ``ir.save`` drops both from the tensors it moves to external data (onnx_ir 1.1 builds
    the new ExternalTensor without them). A name that sibling subgraphs both give an
    initializer with different descriptions is left out (which is which is not known)."""
    seen: dict[str, list[tuple[str, dict[str, str]]]] = {}
    for graph in graphs_of(model):
        for name, value in graph.initializers.items():
            tensor = value.const_value
            if tensor is not None:
                description = (tensor.doc_string or "", dict(tensor.metadata_props))
                seen.setdefault(name, []).append(description)
    return {
        name: found[0]
        for name, found in seen.items()
        if found[0] != ("", {}) and all(other == found[0] for other in found)
    }


def _describe_initializers(
    proto: onnx.ModelProto, described: dict[str, tuple[str, dict[str, str]]]
) -> None:
    """Give the saved initializers back what :func:`_described_initializers` found."""
    if not described:
        return
    for graph in model_graphs(proto, training=False):
        for tensor in graph.initializer:
            if tensor.name in described and not (tensor.doc_string or tensor.metadata_props):
                doc, props = described[tensor.name]
                tensor.doc_string = doc
                for key, value in props.items():
                    tensor.metadata_props.add(key=key, value=value)


def _strictest_data_file(source: Path | None) -> Path | None:
    """The data file of the model ``source`` with the fewest permission bits (a new data
    file takes its mode: weights kept private stay private); None without one."""
    if source is None:
        return None
    with contextlib.suppress(ModelFileError, OSError):
        files = [f for f in data_files(source) if f.is_file()]
        if files:
            return min(files, key=lambda f: (bin(stat.S_IMODE(f.stat().st_mode)).count("1"), f))
    return None


def atomic_copy(source: Path, target: Path) -> list[Path]:
    """Copy a model and the external data it names, atomically. Without external data the
    copy is byte for byte; with it, each data file is copied byte for byte under a fresh
    name ``<target name>.<random>.data`` and the model's locations are changed to match
    (nothing else in it)."""
    source, target = Path(source), Path(target)
    header = _read_header(source)
    proto = header.proto
    entries = _external_entries(proto, source)
    with _staging(target) as stage:
        staged_model = stage / target.name
        staged_data: list[tuple[Path, str, Path | None]] = []
        try:
            if not entries:
                shutil.copyfile(source, staged_model)
            else:
                names: dict[Path, str] = {}
                taken: set[str] = set()
                for tensor, location, _, _ in entries:
                    file = (source.parent / location).resolve()
                    if file not in names:
                        names[file] = _fresh_name(target.parent, target.name, taken)
                        shutil.copyfile(file, stage / names[file])
                        staged_data.append((stage / names[file], names[file], file))
                    for entry in tensor.external_data:
                        if entry.key == "location":
                            entry.value = names[file]
                with open(staged_model, "wb") as out:  # inline weights copied file to file
                    write_model(proto, file_tensors(header, source), out)
        except OSError as exc:
            raise ModelFileError(f"{target}: cannot write: {exc.strerror or exc}") from exc
        return _commit(target, staged_model, staged_data, source)


def write_text(target: Path, text: str) -> None:
    """Write a text file atomically (staged beside it), keeping a replaced file's mode; a
    device or FIFO (``/dev/stdout``) is written as it is."""
    if _stream_file(target):
        try:
            with open(target, "w") as stream:
                stream.write(text)
        except OSError as exc:
            raise ModelFileError(f"{target}: cannot write: {exc.strerror or exc}") from exc
        return
    with _staging(target) as stage:
        staged = stage / target.name
        try:
            staged.write_text(text)
        except OSError as exc:
            raise ModelFileError(f"{target}: cannot write: {exc.strerror or exc}") from exc
        _commit(target, staged, [], None, is_model=False)
