"""Reading a model file: one-line errors naming the file (and tensor or node), external data
locations checked before the file system is touched (relative, inside the model's folder,
whole numbers), data files present and long enough, data reached through links read where
onnxruntime reads it, and the ONNX checker. Loading itself is onnx_ir's (external weights
memory-mapped, not read)."""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator
from pathlib import Path

import google.protobuf.message
import onnx
import onnx_ir as ir

from rewriter.checker import replace_tensors, tensors_in_memory
from rewriter.errors import ModelFileError
from rewriter.graphs import graphs_of
from rewriter.io.wire import InlineTensor, ModelHeader, checker_view, inline_tensors, read_header
from rewriter.protos import model_graphs, model_node_lists, model_tensors
from rewriter.serde import call_onnx_api, deserialize_model

__all__ = [
    "check_model_file",
    "data_files",
    "external_files",
    "load_model",
    "run_checker",
    "training_info",
]


def _one_line(exc: BaseException, limit: int = 300) -> str:
    """An exception's message folded onto one line, cut at ``limit`` characters."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _root_cause(exc: BaseException) -> BaseException:
    while exc.__cause__ is not None:
        exc = exc.__cause__
    return exc


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


def _read_header(path: Path) -> ModelHeader:
    """The model's protobuf, external data not read and large main-graph initializers' bytes
    left in the file (:func:`rewriter.io.wire.read_header`); one-line errors naming the
    file."""
    if not path.exists():
        raise ModelFileError(f"{path}: no such file")
    if not path.is_file():
        raise ModelFileError(f"{path}: not a file")
    try:
        header = read_header(path)
    except (google.protobuf.message.DecodeError, ValueError, RuntimeError) as exc:
        raise ModelFileError(
            f"{path}: not a readable ONNX model (truncated or not ONNX): {_one_line(exc)}"
        ) from exc
    except OSError as exc:
        raise ModelFileError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    proto = header.proto
    if not proto.HasField("graph") or (not proto.graph.output and not proto.graph.node):
        raise ModelFileError(f"{path}: not an ONNX model (no graph found)")
    return header


def _read_proto(path: Path) -> onnx.ModelProto:
    """The model's protobuf as :func:`_read_header` gives it: the initializers whose bytes it
    left in the file have no value field (never write it back as it is)."""
    return _read_header(path).proto


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
        if isinstance(tensor, ir.ExternalTensor) and not isinstance(tensor, InlineTensor):
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
    header = _read_header(path)
    proto = header.proto
    entries = _external_entries(proto, path)
    _structure_problems(proto, path)
    linked = _check_external_data(proto, entries, path)
    try:
        model = deserialize_model(proto)
    except Exception as exc:
        try:
            onnx.checker.check_model(checker_view(header))
        except onnx.checker.ValidationError as checked:
            raise ModelFileError(f"{path}: fails the ONNX checker: {_one_line(checked)}") from exc
        raise ModelFileError(
            f"{path}: onnx_ir cannot load it: {_one_line(_root_cause(exc))}"
        ) from exc
    del proto
    for graph in (model.graph, *(f.graph for f in model.functions.values())):  # type: ignore[attr-defined]
        ir.external_data.set_base_dir(graph, str(path.parent))
    inline_tensors(model, path, header.spans)
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
    header = None
    entries = []
    with contextlib.suppress(ModelFileError):  # onnx's checker names what is wrong then
        header = _read_header(path)
        entries = _external_entries(header.proto, path)
    if any(
        _through_link(path, location, tensor.name)
        for tensor, location, _, _ in entries
        if (path.parent / location).is_file()
    ):
        _check_in_memory(load_model(path, check=False), path)
        return
    try:
        run_checker(path, header)
    except onnx.checker.ValidationError as exc:
        raise ModelFileError(f"{path}: fails the ONNX checker: {_one_line(exc)}") from exc
    except UnicodeDecodeError as exc:  # the checker's, on a name of bytes that are not UTF-8
        found = _not_utf8(_read_proto(path)) or "a string in it is not valid UTF-8"
        raise ModelFileError(f"{path}: {found}") from exc


def run_checker(path: Path, header: ModelHeader | None) -> None:
    """``onnx.checker.check_model`` (not ``full_check``) on the model file at ``path``, or,
    given its ``header`` with initializers left in the file and no external data, on its
    :func:`~rewriter.io.wire.checker_view` (onnx's checker reads a file whole, twice over:
    the file's bytes and the parsed model). A model with external data is checked from its
    file: onnx's checker looks for the data files beside it.

    Raises:
        onnx.checker.ValidationError: the checker's complaint.
    """
    external = header is None or any(
        tensor.data_location == onnx.TensorProto.EXTERNAL for tensor in model_tensors(header.proto)
    )
    if header is not None and header.spans and not external:
        onnx.checker.check_model(checker_view(header))
    else:
        onnx.checker.check_model(str(path))


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
