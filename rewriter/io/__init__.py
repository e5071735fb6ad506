"""Reading and writing model files: external data kept lazy, writes atomic, nothing lost.

- :mod:`~rewriter.io.load`: reading and validation (one-line errors naming the file, tensor
  or node; external data locations, sizes and links checked; the ONNX checker).
- :mod:`~rewriter.io.plan`: which files a run may write (aliases, inodes, the models that
  read a file as external data).
- :mod:`~rewriter.io.atomic`: staged writes whose commit point is the model's rename,
  modes and owners kept.
- :mod:`~rewriter.io.wire`: large inline initializers read where they lie in the model file
  and written streamed, so that no step holds a copy of the weights in memory.

Loading and saving are onnx_ir's (weights in external data files memory-mapped; ``ir.save``
with ``external_data=``); inline weights are onnx_ir external tensors over the model file
itself, written back inline (:mod:`~rewriter.io.wire`).
"""

from __future__ import annotations

from rewriter.errors import ModelFileError
from rewriter.io.atomic import (
    atomic_copy,
    cleanup_staging,
    find_staging_leftovers,
    save_model,
    write_text,
)
from rewriter.io.load import (
    check_model_file,
    data_files,
    external_files,
    load_model,
    training_info,
)
from rewriter.io.plan import STAGING_PREFIX, check_write_plan, is_staging, same_file

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
