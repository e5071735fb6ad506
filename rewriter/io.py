"""Reading and writing model files: external data kept lazy, writes atomic.

Loading is onnx_ir's (``ir.load``: weights in external data files are memory-mapped, not read
into memory). Saving is onnx_ir's too (``ir.save`` with ``external_data=``). What this module
adds: clear errors for files that are not models or whose weights are missing, and writes that
either complete or leave nothing behind.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import google.protobuf.message
import onnx
import onnx_ir as ir

__all__ = [
    "ModelFileError",
    "atomic_copy",
    "check_model_file",
    "external_files",
    "load_model",
    "save_model",
]

logger = logging.getLogger(__name__)

# Above this many bytes of initializers a model cannot be one protobuf (2 GiB limit).
_INLINE_LIMIT = 1 << 30


class ModelFileError(Exception):
    """A model file that cannot be read or written; the message names the file."""


def _one_line(exc: BaseException, limit: int = 300) -> str:
    """An exception's message folded onto one line, cut at ``limit`` characters."""
    text = " ".join(str(exc).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _initializer_tensors(model: ir.Model) -> Iterator[ir.TensorProtocol]:
    for graph in (model.graph, *model.graph.subgraphs()):
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


def _check_external_data(model: ir.Model, path: Path) -> None:
    for tensor in _initializer_tensors(model):
        if not isinstance(tensor, ir.ExternalTensor):
            continue
        data = Path(tensor.base_dir, tensor.location)
        if not data.is_file():
            raise ModelFileError(
                f"{path}: external data file '{tensor.location}' is missing "
                f"(needed by initializer '{tensor.name}')"
            )
        end = (tensor.offset or 0) + (tensor.length or 0)
        if data.stat().st_size < end:
            raise ModelFileError(
                f"{path}: external data file '{tensor.location}' is too short for "
                f"initializer '{tensor.name}' (needs {end} bytes, has {data.stat().st_size})"
            )


def load_model(path: str | os.PathLike[str], *, check: bool = True) -> ir.Model:
    """Load a model with its external data left on disk.

    Raises:
        ModelFileError: the file does not exist, is not an ONNX model (or is truncated), its
            external data is missing, or (with ``check``) it fails the ONNX checker.
    """
    path = Path(path)
    if not path.exists():
        raise ModelFileError(f"{path}: no such file")
    if not path.is_file():
        raise ModelFileError(f"{path}: not a file")
    try:
        model = ir.load(path)
    except (google.protobuf.message.DecodeError, ValueError, RuntimeError, OSError) as exc:
        raise ModelFileError(
            f"{path}: not a readable ONNX model (truncated or not ONNX): {exc}"
        ) from exc
    if not model.graph.outputs and not len(model.graph):
        raise ModelFileError(f"{path}: not an ONNX model (no graph found)")
    _check_external_data(model, path)
    if check:
        check_model_file(path)
    return model


def check_model_file(path: str | os.PathLike[str]) -> None:
    """Run the ONNX checker on a model file (external data is not read).

    Raises:
        ModelFileError: naming the file and the checker's complaint, on one line.
    """
    try:
        onnx.checker.check_model(str(path))
    except onnx.checker.ValidationError as exc:
        raise ModelFileError(f"{path}: fails the ONNX checker: {_one_line(exc)}") from exc


@contextlib.contextmanager
def _staging(target: Path) -> Iterator[Path]:
    """A temporary folder beside ``target``; removed whatever happens."""
    folder = target.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
        stage = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=folder))
    except OSError as exc:
        raise ModelFileError(f"{target}: cannot write there: {exc.strerror or exc}") from exc
    try:
        yield stage
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def _needs_external(model: ir.Model) -> bool:
    total = 0
    for tensor in _initializer_tensors(model):
        if isinstance(tensor, ir.ExternalTensor):
            return True
        total += tensor.nbytes
    return total > _INLINE_LIMIT


def save_model(
    model: ir.Model,
    target: str | os.PathLike[str],
    *,
    check: bool = True,
    accept: Callable[[Path], bool] | None = None,
) -> list[Path]:
    """Write ``model`` to ``target`` atomically; return the files written.

    Weights that were external, or that are too large for one file, go to one data file
    ``<target name>.data`` beside it, so the output folder is self-contained. The files are
    staged in a temporary folder beside the target, checked (``onnx.checker``), then moved
    into place; on any error nothing is left behind and an existing target is untouched.
    ``accept`` sees the staged file before it is moved: when it returns False nothing is
    written and the result is empty.
    """
    target = Path(target)
    data_name = f"{target.name}.data" if _needs_external(model) else None
    with _staging(target) as stage:
        staged = stage / target.name
        try:
            ir.save(model, staged, external_data=data_name)
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
        written = []
        try:
            if data_name is not None:
                os.replace(stage / data_name, target.parent / data_name)
                written.append(target.parent / data_name)
            os.replace(staged, target)
            written.append(target)
        except OSError as exc:
            raise ModelFileError(f"{target}: cannot write: {exc.strerror or exc}") from exc
    return written


def atomic_copy(source: Path, target: Path) -> list[Path]:
    """Copy a model file and the external data files it names, byte for byte, atomically."""
    model = load_model(source, check=False)
    pairs = [(source, target)]
    for data in external_files(model):
        pairs.append((data, target.parent / data.relative_to(source.parent.resolve())))
    with _staging(target) as stage:
        staged = []
        for i, (src, dst) in enumerate(pairs):
            tmp = stage / f"{i}"
            try:
                shutil.copyfile(src, tmp)
            except OSError as exc:
                raise ModelFileError(f"{dst}: cannot write: {exc.strerror or exc}") from exc
            staged.append((tmp, dst))
        written = []
        try:
            for tmp, dst in reversed(staged):  # data files first, the model last
                dst.parent.mkdir(parents=True, exist_ok=True)
                os.replace(tmp, dst)
                written.append(dst)
        except OSError as exc:
            raise ModelFileError(f"{target}: cannot write: {exc.strerror or exc}") from exc
    return written
