"""What a verification found: one record per output or standalone CumProd, one per model."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

__all__ = ["OutputCheck", "VerifyResult"]


@dataclasses.dataclass(frozen=True)
class OutputCheck:
    """How one graph output (or one CumProd run standalone) compared over all runs (worst
    case). ``detail`` is one line saying what differs, empty when ok; ``skipped``: the check
    could not run (``detail`` says why), which is not a mismatch."""

    name: str
    dtype: str
    ok: bool
    worst: float
    bound: float
    detail: str = ""
    skipped: bool = False


def _skipped(name: str, dtype: str, why: str) -> OutputCheck:
    return OutputCheck(name, dtype, True, 0.0, 0.0, f"not checked: {why}", skipped=True)


def _failed(name: str, dtype: str, detail: str) -> OutputCheck:
    return OutputCheck(name, dtype, False, float("inf"), 0.0, detail)


@dataclasses.dataclass(frozen=True)
class VerifyResult:
    """The outcome of :func:`verify_model`.

    Attributes:
        ok: Every check passed.
        runs: How many random input sets were run (two adversarial sets come on top).
        reference: What ran the original: ``onnxruntime`` or ``onnx.reference``.
        outputs: Per graph output, the worst error seen; structural differences (an output
            missing, renamed, retyped or reshaped, a run that fails) are failed checks too.
        sites: Per CumProd, its lowering run standalone on adversarial values against numpy.
        runtime: What ran the rewritten model: the target's own runtime when it is installed
            here (:mod:`rewriter.runtimes`), else ``onnxruntime``.
        sizes: The size each symbolic dim of the graph inputs was fed at.
        richer_feeds: Whether each symbolic dim had a size of its own and Loop trip counts
            were 3 (else every dim not given was 3 and the counts took the safe values of
            :data:`INDEX_POSITIONS`: the original failed on the richer feeds).
        unmatched_dims: The names given in ``dims`` that no symbolic dim of the graph inputs
            or of a CumProd's input has (a misspelt ``--dim``: nothing was fed at that size).
    """

    ok: bool
    runs: int
    reference: str
    outputs: tuple[OutputCheck, ...]
    sites: tuple[OutputCheck, ...] = ()
    runtime: str = "onnxruntime"
    sizes: Mapping[str, int] = dataclasses.field(default_factory=dict)
    richer_feeds: bool = False
    unmatched_dims: tuple[str, ...] = ()

    def mismatches(self) -> list[OutputCheck]:
        return [c for c in (*self.outputs, *self.sites) if not c.ok]


def _one_line(exc: BaseException, limit: int = 240) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _listed(items: Sequence[str], limit: int = 3) -> str:
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")
