"""Reading and writing model files: external data kept lazy, writes atomic, nothing lost.

Loading is onnx_ir's (weights in external data files are memory-mapped, not read into
memory). Saving is onnx_ir's too (``ir.save`` with ``external_data=``). What this module adds,
for the command line and the library alike:

- clear one-line errors naming the file (and tensor or node) for files that are not models,
  models onnx_ir cannot load, and external data that is missing, too short or points outside
  the model's folder (locations are validated before the file system is touched);
- external data reached through links read where onnxruntime 1.25+ reads it (the Hugging
  Face cache's ``snapshots/<rev>/`` symbolic links into ``blobs/``, files with hard links),
  which onnx's checker and onnx_ir's loader refuse; a symbolic link elsewhere refused;
- :func:`check_write_plan`: refuse any output that is an input, an input's external data
  file, another output, or an existing file another ``.onnx`` model of its folder reads as
  external data (by resolved path and by inode, so aliases and hard links count);
- writes that readers see whole or not at all: files are staged in a folder
  ``.cumprod-staging-*`` beside the target (folder scans skip such names), each write's
  external data goes to a fresh file ``<model>.<random>.data``, the model's ``os.replace`` is
  the commit point; the data files the replaced model used are never removed (a copy, a
  model elsewhere or of another extension may read them): those no ``.onnx`` file in the
  folder reads any more are named in a warning;
- an output that exists and is not a regular file (a device, a FIFO) is refused: replacing
  ``/dev/null`` with a file would break the machine;
- a replaced file keeps its permission bits and owner (or nothing is written); a new file
  takes the permission bits of the file it comes from (a data file those of the input's
  data files).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import secrets
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

import google.protobuf.message
import onnx
import onnx_ir as ir

from rewriter.checker import graphs_of, replace_tensors, tensors_in_memory
from rewriter.protos import model_graphs, model_node_lists, model_tensors
from rewriter.types import call_onnx_api, deserialize_model

__all__ = [
    "STAGING_PREFIX",
    "ModelFileError",
    "atomic_copy",
    "check_model_file",
    "check_write_plan",
    "cleanup_staging",
    "data_files",
    "external_files",
    "find_staging_leftovers",
    "is_staging",
    "load_model",
    "same_file",
    "save_model",
    "training_info",
    "write_text",
]

logger = logging.getLogger(__name__)

# Above this many bytes of initializers a model cannot be one protobuf (2 GiB limit).
_INLINE_LIMIT = 1 << 30

# Staging folders start with this; folder scans skip any path with a part starting with it.
STAGING_PREFIX = ".cumprod-staging-"

# Staging folders in use by this process (removed by cleanup_staging on a signal).
_ACTIVE_STAGING: set[Path] = set()


class ModelFileError(Exception):
    """A model file that cannot be read or written; the message names the file."""


def _one_line(exc: BaseException, limit: int = 300) -> str:
    """An exception's message folded onto one line, cut at ``limit`` characters."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _root_cause(exc: BaseException) -> BaseException:
    while exc.__cause__ is not None:
        exc = exc.__cause__
    return exc


def is_staging(path: Path) -> bool:
    """Whether ``path`` is, or is inside, a staging folder."""
    return any(part.startswith(STAGING_PREFIX) for part in path.parts)


# -- the model proto: tensors, external data entries ----------------------------------------


def _external_entries(
    proto: onnx.ModelProto, path: Path
) -> list[tuple[onnx.TensorProto, str, int, int | None]]:
    """(tensor, location, offset, length) of each external tensor, locations checked: relative,
    inside the model's folder, offset and length whole numbers >= 0. Touches no file."""
    entries: list[tuple[onnx.TensorProto, str, int, int | None]] = []
    for tensor in model_tensors(proto):
        if tensor.data_location != onnx.TensorProto.EXTERNAL:
            continue
        info = {e.key: e.value for e in tensor.external_data}
        name = f"tensor '{tensor.name}'"
        location = info.get("location", "")
        if not location:
            raise ModelFileError(f"{path}: {name} is external but names no data file")
        if os.path.isabs(location) or re.match(r"^([A-Za-z]:|[/\\])", location):
            raise ModelFileError(
                f"{path}: {name}: external data location '{location}' is an absolute path "
                "(it must be relative to the model's folder)"
            )
        if os.path.normpath(location).split(os.sep)[0] == "..":  # "a/../w.bin" stays inside
            raise ModelFileError(
                f"{path}: {name}: external data location '{location}' leaves the model's "
                "folder ('..')"
            )
        numbers: list[int | None] = []
        for key in ("offset", "length"):
            text = info.get(key)
            if text is None:
                numbers.append(None)
                continue
            try:
                value = int(text)
            except ValueError:
                value = -1
            if value < 0:
                raise ModelFileError(
                    f"{path}: {name}: external data {key} '{text}' is not a whole number >= 0"
                )
            numbers.append(value)
        entries.append((tensor, location, numbers[0] or 0, numbers[1]))
    return entries


def _read_proto(path: Path) -> onnx.ModelProto:
    """The model's protobuf, external data not loaded; one-line errors naming the file."""
    if not path.exists():
        raise ModelFileError(f"{path}: no such file")
    if not path.is_file():
        raise ModelFileError(f"{path}: not a file")
    try:
        proto = onnx.load(str(path), load_external_data=False)
    except (google.protobuf.message.DecodeError, ValueError, RuntimeError) as exc:
        raise ModelFileError(
            f"{path}: not a readable ONNX model (truncated or not ONNX): {_one_line(exc)}"
        ) from exc
    except OSError as exc:
        raise ModelFileError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    if not proto.HasField("graph") or (not proto.graph.output and not proto.graph.node):
        raise ModelFileError(f"{path}: not an ONNX model (no graph found)")
    return proto


def _structure_problems(proto: onnx.ModelProto, path: Path) -> None:
    """What onnx_ir cannot load, and the onnx checker does not say, named precisely (not in
    training_info, which onnx_ir does not load: it is carried as it is)."""
    for graph in model_graphs(proto, training=False):
        for kind, values in (("input", graph.input), ("output", graph.output)):
            seen: set[str] = set()
            for value in values:
                if value.name in seen:
                    raise ModelFileError(
                        f"{path}: graph '{graph.name}' lists the {kind} '{value.name}' twice"
                    )
                seen.add(value.name)
        for sparse in graph.sparse_initializer:
            raise ModelFileError(
                f"{path}: graph '{graph.name}' has a sparse initializer "
                f"'{sparse.values.name}', which this tool cannot load"
            )
    for where, nodes in model_node_lists(proto, training=False):
        for node in nodes:
            for attr in node.attribute:
                if attr.type in (
                    onnx.AttributeProto.SPARSE_TENSOR,
                    onnx.AttributeProto.SPARSE_TENSORS,
                ):
                    shown = f"node '{node.name}'" if node.name else "an unnamed node"
                    raise ModelFileError(
                        f"{path}: {shown} ({node.op_type}) in {where} has a sparse "
                        f"tensor attribute '{attr.name}', which this tool cannot load"
                    )


def data_files(path: str | os.PathLike[str]) -> set[Path]:
    """The external data files the model at ``path`` names (resolved), locations checked."""
    path = Path(path)
    proto = _read_proto(path)
    folder = path.parent
    return {(folder / location).resolve() for _, location, _, _ in _external_entries(proto, path)}


def _initializer_tensors(model: ir.Model) -> Iterator[ir.TensorProtocol]:
    for graph in graphs_of(model):
        for value in graph.initializers.values():
            if value.const_value is not None:
                yield value.const_value


def external_files(model: ir.Model) -> set[Path]:
    """The external data files the model's initializers point to (absolute paths)."""
    files = set()
    for tensor in _initializer_tensors(model):
        if isinstance(tensor, ir.ExternalTensor):
            files.add(Path(tensor.base_dir, tensor.location).resolve())
    return files


def _check_external_data(
    proto: onnx.ModelProto, entries: list[tuple[onnx.TensorProto, str, int, int | None]], path: Path
) -> set[str]:
    """Each external tensor's file exists and holds its bytes (size from the shape when the
    entry gives no length), and one reached through a symbolic link ends next to the model
    (:func:`_through_link`). Returns the locations reached through a symbolic or hard link."""
    linked: set[str] = set()
    for tensor, location, offset, given in entries:
        data = path.parent / location
        if not data.is_file():
            raise ModelFileError(
                f"{path}: external data file '{location}' is missing "
                f"(needed by tensor '{tensor.name}')"
            )
        if _through_link(path, location, tensor.name):
            linked.add(location)
        length = given if given is not None else _stored_length(tensor)
        end = offset + length
        size = data.stat().st_size
        if size < end:
            raise ModelFileError(
                f"{path}: external data file '{location}' is too short for "
                f"tensor '{tensor.name}' (needs {end} bytes, has {size})"
            )
    return linked


def _stored_length(tensor: onnx.TensorProto) -> int:
    """The bytes an external tensor with no ``length`` entry takes, from its shape."""
    count = 1
    for d in tensor.dims:
        count *= d
    try:
        bits = ir.DataType(tensor.data_type).bitwidth
    except (ValueError, TypeError, AttributeError):
        bits = 0
    return (count * bits + 7) // 8


def training_info(path: str | os.PathLike[str]) -> list[onnx.TrainingInfoProto]:
    """The model's training_info (onnx_ir does not carry it; the output gets it as it is),
    with its external tensors read into the protos: the output is written under other data
    file names, often in another folder. Call after :func:`load_model` has checked the
    data files."""
    path = Path(path)
    only = onnx.ModelProto()
    only.training_info.extend(_read_proto(path).training_info)
    for tensor, location, offset, given in _external_entries(only, path):
        length = given if given is not None else _stored_length(tensor)
        with open(os.path.realpath(path.parent / location), "rb") as data:
            data.seek(offset)
            tensor.raw_data = data.read(length)
        del tensor.external_data[:]
        tensor.data_location = onnx.TensorProto.DEFAULT
    return list(only.training_info)


def _through_link(path: Path, location: str, tensor: str) -> bool:
    """Whether the data file ``location`` of the model ``path`` is reached through a link:
    a symbolic one (the file, or a folder of ``location``), or the file has other hard
    links. onnx's checker and onnx_ir's loader refuse both; onnxruntime (1.25 and later)
    reads both, and so does this tool: a symbolic link whose real path is inside the
    model's folder, or inside the folder of the model file's own real path (the Hugging
    Face cache: ``snapshots/<rev>/`` holds links to ``blobs/<hash>``, the model's and its
    data's alike); a file with hard links (uv's package installs, DVC's and ``cp -al``'s
    copies). A symbolic link elsewhere (to any file of the machine, as an archive can carry)
    is refused, naming the tensor: its bytes would be copied into the output's weights."""
    step = path.parent
    linked = False
    for part in Path(location).parts:
        step = step / part
        linked = linked or step.is_symlink()
    if not linked:
        return (path.parent / location).stat().st_nlink > 1
    real = Path(os.path.realpath(path.parent / location))
    roots = {Path(os.path.realpath(path.parent)), Path(os.path.realpath(path)).parent}
    if not any(real.is_relative_to(root) for root in roots):
        raise ModelFileError(
            f"{path}: external data file '{location}' (tensor '{tensor}') is a symbolic link "
            f"to '{real}', outside the model's folder and the folder the model file itself "
            "links to"
        )
    return True


def load_model(path: str | os.PathLike[str], *, check: bool = True) -> ir.Model:
    """Load a model with its external data left on disk.

    Raises:
        ModelFileError: the file does not exist, is not an ONNX model (or is truncated), has
            external data outside its folder, missing or too short, holds something onnx_ir
            cannot load (the message says what), or (with ``check``) fails the ONNX checker.
    """
    path = Path(path)
    proto = _read_proto(path)
    entries = _external_entries(proto, path)
    _structure_problems(proto, path)
    linked = _check_external_data(proto, entries, path)
    try:
        model = deserialize_model(proto)
    except Exception as exc:
        try:
            onnx.checker.check_model(proto)
        except onnx.checker.ValidationError as checked:
            raise ModelFileError(f"{path}: fails the ONNX checker: {_one_line(checked)}") from exc
        raise ModelFileError(
            f"{path}: onnx_ir cannot load it: {_one_line(_root_cause(exc))}"
        ) from exc
    del proto
    for graph in (model.graph, *(f.graph for f in model.functions.values())):  # type: ignore[attr-defined]
        ir.external_data.set_base_dir(graph, str(path.parent))
    if linked:
        _follow_links(model, path, linked)
    if check:
        if linked:
            _check_in_memory(model, path)
        else:
            check_model_file(path)
    return model


def _follow_links(model: ir.Model, path: Path, linked: set[str]) -> None:
    """Point the external tensors whose data file is reached through a link (accepted by
    :func:`_through_link`) at the file's real, absolute path, with no base folder: onnx_ir
    refuses to read a symbolic link that leaves the model's folder (the Hugging Face
    cache's do) and a file with hard links, and checks nothing when there is no base
    folder; :func:`_external_entries` and :func:`_through_link` checked these."""

    def real(_: ir.Graph, tensor: ir.TensorProtocol, __: bool) -> ir.TensorProtocol:
        if not isinstance(tensor, ir.ExternalTensor) or tensor.location not in linked:
            return tensor
        return ir.ExternalTensor(
            os.path.realpath(path.parent / tensor.location),
            tensor.offset,
            tensor.length,
            tensor.dtype,
            shape=tensor.shape,
            name=tensor.name,
            doc_string=tensor.doc_string,
            metadata_props=dict(tensor.metadata_props),
        )

    replace_tensors(model, real)


def check_model_file(path: str | os.PathLike[str]) -> None:
    """Run the ONNX checker on a model file (external data is not read, except small,
    subgraph and attribute tensors of a model whose data is reached through a symbolic or
    hard link: onnx's checker refuses those, so such a model is checked in memory).

    Raises:
        ModelFileError: naming the file and the checker's complaint, on one line.
    """
    path = Path(path)
    entries = []
    with contextlib.suppress(ModelFileError):  # onnx's checker names what is wrong then
        entries = _external_entries(_read_proto(path), path)
    if any(
        _through_link(path, location, tensor.name)
        for tensor, location, _, _ in entries
        if (path.parent / location).is_file()
    ):
        _check_in_memory(load_model(path, check=False), path)
        return
    try:
        onnx.checker.check_model(str(path))
    except onnx.checker.ValidationError as exc:
        raise ModelFileError(f"{path}: fails the ONNX checker: {_one_line(exc)}") from exc
    except UnicodeDecodeError as exc:  # the checker's, on a name of bytes that are not UTF-8
        found = _not_utf8(_read_proto(path)) or "a string in it is not valid UTF-8"
        raise ModelFileError(f"{path}: {found}") from exc


def _not_utf8(message: google.protobuf.message.Message, where: str = "the model") -> str | None:
    """Where a string field of ``message`` is not valid UTF-8 (protobuf gives it as bytes;
    found by a review from outside: one flipped byte in a name did it, and the error named
    nothing), for a one-line error; None when every one is."""
    for field, value in message.ListFields():
        # protobuf 7 dropped ``label`` for ``is_repeated``
        repeated = getattr(field, "is_repeated", None)
        if repeated is None:
            repeated = field.label == field.LABEL_REPEATED
        if field.type == field.TYPE_STRING:
            bad = next((v for v in (value if repeated else [value]) if isinstance(v, bytes)), None)
            if bad is not None:
                return f"{where}: its {field.name} {bad!r} is not valid UTF-8"
        elif field.type == field.TYPE_MESSAGE:
            for item in value if repeated else [value]:
                here = where
                if isinstance(item, onnx.NodeProto):
                    here = f"node {item.name!r} ({item.op_type!r})"
                found = _not_utf8(item, here)
                if found:
                    return found
    return None


def _check_in_memory(model: ir.Model, path: Path) -> None:
    try:
        with tensors_in_memory(model):
            call_onnx_api(onnx.checker.check_model, model)
    except onnx.checker.ValidationError as exc:
        raise ModelFileError(f"{path}: fails the ONNX checker: {_one_line(exc)}") from exc


# -- which files a run may write --------------------------------------------------------------


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


# -- staging, metadata, commit ----------------------------------------------------------------


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
        if isinstance(tensor, ir.ExternalTensor):
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
                ir.save(
                    model,
                    staged,
                    external_data=data_name,
                    size_threshold_bytes=_inline_threshold(model),
                )
            described = _described_initializers(model) if data_name is not None else {}
            if training_info or described:
                proto = onnx.load(str(staged), load_external_data=False)
                proto.training_info.extend(training_info)
                _describe_initializers(proto, described)
                onnx.save(proto, str(staged))
            if check:
                onnx.checker.check_model(str(staged), full_check=False)
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
    proto = _read_proto(source)
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
                onnx.save(proto, str(staged_model))
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
