"""A model file's large inline initializers, read and written without holding their bytes.

``onnx.load`` holds a model's inline weights twice while it parses (the file's bytes and the
parsed message), ``onnx.checker.check_model(path)`` likewise, and ``ir.save`` three times
(the tensors' bytes, the message, its serialisation). This module walks the protobuf wire
format instead (ModelProto field 7 ``graph``, GraphProto field 5 ``initializer``, TensorProto
field 9 ``raw_data``):

- :func:`read_header`: the model's message with the ``raw_data`` of each large main-graph
  initializer left out, and where those bytes are in the file (:class:`Span`). The model
  then reads them as :class:`InlineTensor`, onnx_ir's memory-mapped ``ExternalTensor`` over
  the model file itself. Cost: the small part of the file, plus the pages actually read.
- :func:`checker_view`: a copy of that message for ``onnx.checker`` in which each left-out
  initializer is one element of its type and rank (the checker reads an inline tensor's data
  only for its size, checked here instead against the same rule: at least the bytes its
  shape and type need; here, exactly those).
- :func:`write_model`: the message written with large main-graph initializers' bytes streamed
  from their tensors (``tofile``: a kernel copy for memory-mapped ones) into the field where
  ``SerializeToString`` would put them: the file is byte for byte the one ``onnx.save`` gives.

Only main-graph initializers are handled; one of a subgraph or a function, and a tensor
attribute, is read and written as onnx / onnx_ir do (in memory). A file this reader does not
take apart in one pass (another wire layout, a field repeated that protobuf would merge, 2 GiB
or more) is read whole by ``onnx.load``, with its errors.

Measured (``scripts/results/memory-2026-12-06-inline.md``): the CLI on 256 MiB of inline
weights peaked at 101 MiB of resident memory (1,117 MiB when read, checked and saved whole),
on 1 GiB at 120 to 125 MiB (4,189 MiB); the interpreter alone takes about 90 MiB.
"""

from __future__ import annotations

import dataclasses
import mmap
import os
from collections.abc import Iterator, Mapping
from typing import Any, BinaryIO

import google.protobuf.message
import numpy as np
import onnx
import onnx_ir as ir

from rewriter.errors import ModelFileError

__all__ = [
    "STRIP_OVER",
    "InlineTensor",
    "ModelHeader",
    "Span",
    "checker_view",
    "file_tensors",
    "inline_tensors",
    "read_header",
    "streamable",
    "write_model",
]

# Initializers with more raw_data bytes than this are left in the file.
STRIP_OVER = 4096

_MODEL_GRAPH = 7
_GRAPH_INITIALIZER = 5
_TENSOR_RAW_DATA = 9
_LEN = 2  # wire type of a length-delimited field
_PROTO_LIMIT = 1 << 31  # protobuf refuses messages of 2 GiB or more
_VALUE_FIELDS = (
    "float_data",
    "int32_data",
    "string_data",
    "int64_data",
    "double_data",
    "uint64_data",
)


class _NotSimple(Exception):
    """The file's layout is not the one :func:`read_header` takes apart (read it whole)."""


@dataclasses.dataclass(frozen=True)
class Span:
    """Where an initializer's ``raw_data`` bytes are in the model file."""

    offset: int
    length: int


@dataclasses.dataclass
class ModelHeader:
    """A model's message with the ``raw_data`` of the initializers in ``spans`` (main graph,
    by name) left out: those initializers have no value field in ``proto``."""

    proto: onnx.ModelProto
    spans: dict[str, Span]


class InlineTensor(ir.ExternalTensor):
    """An initializer whose bytes are the ``raw_data`` of the model file it was read from,
    at ``offset``: onnx_ir's external tensor (memory-mapped when read, copied file to file by
    ``tofile``) over the model file, whose real path is its location (no base folder).
    Saving writes it inline again (it is not external data).

    The model file is the tensor's only copy: each read checks that the file is still the
    one it was made from (device, inode, size and modification time; ``tofile`` also after
    copying) and raises :class:`~rewriter.errors.ModelFileError` when it is not, rather than
    take another file's bytes as the weights."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        span: Span,
        dtype: ir.DataType,
        *,
        shape: ir.Shape,
        name: str,
        doc_string: str | None = None,
        metadata_props: dict[str, str] | None = None,
    ) -> None:
        real = os.path.realpath(path)
        super().__init__(
            real,
            span.offset,
            span.length,
            dtype,
            shape=shape,
            name=name,
            doc_string=doc_string,
            metadata_props=metadata_props,
        )
        self._identity = _identity(real)

    def _unchanged(self) -> None:
        try:
            now = _identity(self.path)
        except OSError:
            now = None
        if now != self._identity:
            raise ModelFileError(
                f"{self.path}: the model file changed while it was being rewritten (tensor "
                f"'{self.name}' is read from it); nothing written"
            )

    def numpy(self) -> np.ndarray:
        self._unchanged()
        return super().numpy()

    def __array__(self, dtype: Any = None) -> np.ndarray:
        self._unchanged()
        return super().__array__(dtype)

    def tobytes(self) -> bytes:
        self._unchanged()
        return super().tobytes()

    def tofile(self, file: Any) -> None:
        self._unchanged()
        super().tofile(file)
        self._unchanged()


def _identity(path: str) -> tuple[int, int, int, int]:
    st = os.stat(path)
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def _varint(buf: mmap.mmap | bytes, pos: int, end: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= end or shift > 63:
            raise _NotSimple("truncated varint")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _fields(buf: mmap.mmap | bytes, start: int, end: int) -> Iterator[tuple[int, int, int, int]]:
    """(field number, field start, payload start, field end) of each field in
    ``buf[start:end]``; the payload of a length-delimited field is ``[payload start, end)``."""
    pos = start
    while pos < end:
        first = pos
        key, pos = _varint(buf, pos, end)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise _NotSimple("field number 0")
        if wire == 0:
            _, after = _varint(buf, pos, end)
        elif wire == 1:
            after = pos + 8
        elif wire == 5:
            after = pos + 4
        elif wire == _LEN:
            length, pos = _varint(buf, pos, end)
            after = pos + length
        else:  # groups (3, 4) or invalid
            raise _NotSimple(f"wire type {wire}")
        if after > end:
            raise _NotSimple("field past the end of its message")
        yield number, first, pos, after
        pos = after


def _required_bytes(tensor: onnx.TensorProto) -> int | None:
    """Bytes of raw_data the tensor's shape and type need; None if it has no elements, a
    negative dimension, or an element type without a fixed width."""
    if any(dim < 0 for dim in tensor.dims):
        return None
    count = 1
    for dim in tensor.dims:
        count *= dim
    try:
        dtype = ir.DataType(tensor.data_type)
    except ValueError:
        return None
    if count <= 0 or dtype in (ir.DataType.UNDEFINED, ir.DataType.STRING):
        return None
    return (count * dtype.bitwidth + 7) // 8


def _header_of(buf: mmap.mmap, start: int, end: int, strip_over: int) -> tuple[bytes, Span] | None:
    """The TensorProto in ``buf[start:end]`` serialised without its raw_data, and where that
    is, when it is one large raw_data field, exactly the size its shape and type need, and
    nothing else holds a value; None otherwise (a tensor the checker would question, or a
    small one, is read whole)."""
    raw = [
        (first, payload, after)
        for n, first, payload, after in _fields(buf, start, end)
        if n == _TENSOR_RAW_DATA
    ]
    if len(raw) != 1 or raw[0][2] - raw[0][1] <= strip_over:
        return None
    first, payload, after = raw[0]
    data = buf[start:first] + buf[after:end]
    header = onnx.TensorProto.FromString(data)
    plain = (
        header.name
        and not header.HasField("segment")
        and header.data_location != onnx.TensorProto.EXTERNAL
        and not header.external_data
        and not any(len(getattr(header, field)) for field in _VALUE_FIELDS)
        and _required_bytes(header) == after - payload
    )
    return (data, Span(payload, after - payload)) if plain else None


def _take_apart(buf: mmap.mmap, strip_over: int) -> ModelHeader:
    """The model in ``buf`` parsed once, from its bytes with each large initializer's
    raw_data field cut out (the lengths of the messages around it re-encoded)."""
    graphs = [f for f in _fields(buf, 0, len(buf)) if f[0] == _MODEL_GRAPH]
    if len(graphs) != 1:
        raise _NotSimple("not one graph field")
    _, g_first, g_start, g_end = graphs[0]
    graph = bytearray()
    spans: dict[str, Span] = {}
    kept = g_start  # buf[kept:first] is copied as it is
    for number, first, payload, after in _fields(buf, g_start, g_end):
        if number != _GRAPH_INITIALIZER:
            continue
        found = _header_of(buf, payload, after, strip_over)
        if found is None:
            continue
        data, span = found
        spans[onnx.TensorProto.FromString(data).name] = span
        graph += buf[kept:first]
        graph += _key(_GRAPH_INITIALIZER) + _encode_varint(len(data)) + data
        kept = after
    if not spans:
        return ModelHeader(onnx.ModelProto.FromString(buf[:]), {})
    graph += buf[kept:g_end]
    message = buf[:g_first] + _key(_MODEL_GRAPH) + _encode_varint(len(graph)) + graph
    proto = onnx.ModelProto.FromString(message + buf[g_end:])
    names = [tensor.name for tensor in proto.graph.initializer]
    if len(set(names)) != len(names):
        raise _NotSimple("an initializer name repeats")
    return ModelHeader(proto, spans)


def read_header(path: str | os.PathLike[str], *, strip_over: int = STRIP_OVER) -> ModelHeader:
    """The model at ``path`` with the ``raw_data`` of main-graph initializers over
    ``strip_over`` bytes left in the file (:class:`ModelHeader`), external data not read.
    A file this does not take apart (see the module) is read by ``onnx.load``, whose errors
    (``DecodeError``, ``OSError``...) it raises."""
    fmt = onnx.serialization.registry.get_format_from_file_extension(os.path.splitext(path)[1])
    with open(path, "rb") as file:
        size = os.fstat(file.fileno()).st_size
        if 0 < size < _PROTO_LIMIT and fmt in (None, "protobuf"):
            with mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as buf:
                try:
                    return _take_apart(buf, strip_over)
                except (_NotSimple, google.protobuf.message.DecodeError):
                    pass
    return ModelHeader(onnx.load(os.fspath(path), load_external_data=False), {})


def checker_view(header: ModelHeader) -> onnx.ModelProto:
    """A copy of ``header.proto`` for ``onnx.checker``: each initializer left in the file is
    one element of its type and rank (``raw_data`` of that element's bytes). Its size was
    checked when it was read (exactly what its shape and type need), and the checker reads an
    inline initializer's data for nothing else: what it says of the copy it says of the file."""
    view = onnx.ModelProto()
    view.CopyFrom(header.proto)
    for tensor in view.graph.initializer:
        if tensor.name in header.spans:
            rank = len(tensor.dims)
            del tensor.dims[:]
            tensor.dims.extend([1] * rank)
            tensor.raw_data = b"\0" * _required_bytes(tensor)  # type: ignore[operator]
    return view


def inline_tensors(model: ir.Model, path: str | os.PathLike[str], spans: dict[str, Span]) -> None:
    """Make the main-graph initializers named in ``spans`` :class:`InlineTensor` views of
    the model file at ``path`` (they were deserialized from a header without their data)."""
    for name, span in spans.items():
        value = model.graph.initializers.get(name)
        old = value.const_value if value is not None else None
        if value is None or old is None:  # never left without its data
            raise ModelFileError(f"{path}: initializer '{name}' was not read as one")
        value.const_value = InlineTensor(
            path,
            span,
            old.dtype,
            shape=ir.Shape(old.shape.numpy()),
            name=old.name or name,
            doc_string=old.doc_string,
            metadata_props=dict(old.metadata_props),
        )


def file_tensors(header: ModelHeader, path: str | os.PathLike[str]) -> dict[int, InlineTensor]:
    """The initializers ``header`` left in the file at ``path``, by their index in
    ``header.proto.graph.initializer``, as :class:`InlineTensor` (for :func:`write_model`)."""
    found = {}
    for index, tensor in enumerate(header.proto.graph.initializer):
        span = header.spans.get(tensor.name)
        if span is not None:
            found[index] = InlineTensor(
                path,
                span,
                ir.DataType(tensor.data_type),
                shape=ir.Shape(tensor.dims),
                name=tensor.name,
            )
    return found


def _split(message: bytes, number: int) -> tuple[bytes, bytes]:
    """``message`` (canonical: fields in number order) cut into the fields numbered below
    ``number`` and those above (it has none numbered ``number``)."""
    for n, first, _, _ in _fields(message, 0, len(message)):
        if n > number:
            return message[:first], message[first:]
    return message, b""


def _key(number: int) -> bytes:
    return _encode_varint(number << 3 | _LEN)


def write_model(
    proto: onnx.ModelProto, streamed: Mapping[int, ir.TensorProtocol], file: BinaryIO
) -> None:
    """Write ``proto`` to ``file`` as ``proto.SerializeToString()`` would, with the
    ``raw_data`` of each main-graph initializer ``proto.graph.initializer[i]`` for ``i`` in
    ``streamed`` (which have no value field in ``proto``) taken from ``streamed[i]``'s
    ``tofile``: never in memory as one piece."""
    graph = proto.graph
    tensors: list[tuple[bytes, bytes, bytes, ir.TensorProtocol | None]] = []
    for index, tensor in enumerate(graph.initializer):
        source = streamed.get(index)
        if source is None:
            tensors.append((tensor.SerializeToString(), b"", b"", None))
        else:
            before, after = _split(tensor.SerializeToString(), _TENSOR_RAW_DATA)
            tensors.append(
                (before, _key(_TENSOR_RAW_DATA) + _encode_varint(source.nbytes), after, source)
            )
    bare_graph = onnx.GraphProto()
    bare_graph.CopyFrom(graph)
    del bare_graph.initializer[:]
    graph_before, graph_after = _split(bare_graph.SerializeToString(), _GRAPH_INITIALIZER)
    bare_model = onnx.ModelProto()
    bare_model.CopyFrom(proto)
    bare_model.ClearField("graph")
    model_before, model_after = _split(bare_model.SerializeToString(), _MODEL_GRAPH)

    def tensor_length(parts: tuple[bytes, bytes, bytes, ir.TensorProtocol | None]) -> int:
        before, key, after, source = parts
        return len(before) + len(key) + len(after) + (source.nbytes if source is not None else 0)

    lengths = [tensor_length(parts) for parts in tensors]
    graph_length = len(graph_before) + len(graph_after)
    graph_length += sum(len(_key(_GRAPH_INITIALIZER)) + len(_encode_varint(n)) + n for n in lengths)
    file.write(model_before)
    file.write(_key(_MODEL_GRAPH) + _encode_varint(graph_length))
    file.write(graph_before)
    for (before, key, after, source), length in zip(tensors, lengths, strict=True):
        file.write(_key(_GRAPH_INITIALIZER) + _encode_varint(length) + before + key)
        if source is not None:
            file.flush()
            start = file.tell()
            tofile = getattr(source, "tofile", None)  # onnx_ir's tensors have it
            if tofile is not None:
                tofile(file)
            else:
                file.write(source.tobytes())
            file.seek(0, os.SEEK_END)
            written = file.tell() - start
            if written != source.nbytes:
                raise OSError(
                    f"tensor '{source.name}': {written} bytes written, not {source.nbytes}"
                )
        file.write(after)
    file.write(graph_after)
    file.write(model_after)


def streamable(model: ir.Model, over: int = STRIP_OVER) -> dict[str, ir.TensorProtocol]:
    """The main-graph initializers :func:`write_model` streams, by value name: every
    :class:`InlineTensor` (its bytes are still in its file), and any other over ``over``
    bytes of a fixed-width type (not strings)."""
    found = {}
    for name, value in model.graph.initializers.items():
        tensor = value.const_value
        if tensor is None:
            continue
        large = tensor.dtype != ir.DataType.STRING and tensor.nbytes > over
        if isinstance(tensor, InlineTensor) or large:
            found[name] = tensor
    return found
