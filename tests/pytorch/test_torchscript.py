"""torch.onnx.export(..., dynamo=False) after rewriter.pytorch.register_torchscript_symbolic():
real modules that use torch.cumprod, exported at every opset 11-20, run on the current
onnxruntime and on onnxruntime 1.20.1 (.venv-ort120, the slow tier), compared with torch eager.

- Integers: bit-exact against torch eager (int64 promotion of bool / int8 / uint8 / int16 /
  int32, wraparound, narrowing dtype=, out=).
- Floats: each cumprod's factors are computed by correctly rounded ops only (1 - x, + 1e-10,
  casts, concatenation, flips), so onnxruntime's factors must equal eager's bit for bit;
  then, against the true product of those factors (onnx.reference's CumProd in float64, in
  longdouble for float64: tests/helpers.wide_reference) and for an output that multiplies k
  factors:
  - onnxruntime's result is within the contract (tests/bounds.py): k - 1 ulps (float16 /
    bfloat16: 0.5 + (k - 1) * 2^(p - 24) ulps, the product computed in float32);
  - it differs from torch eager's by at most that plus k - 1 ulps, the error bound of a
    sequential product of k factors (each multiply rounds once: relative error (k - 1) u,
    at most k - 1 ulps of the result), which bounds torch's CPU kernel whether it multiplies
    in the type or wider.
"""

from __future__ import annotations

import dataclasses
import io
import warnings
from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np
import onnx
import pytest

from tests import bounds
from tests.helpers import LegacyBatch, import_torch, op_types, run_ort, torch_draws, wide_reference

OPSETS = tuple(range(11, 21))
# The fast tier's opsets: the lowest (the most forms converted down) and the issue's; the
# others, and every onnxruntime 1.20.1 run, are in the slow tier with tests/pytorch/test_dynamo.py.
FAST_OPSETS = (11, 17)


@dataclasses.dataclass(frozen=True)
class Scan:
    """A float cumprod among a module's outputs: ``result`` is the (exclusive / reverse)
    cumprod along ``dim`` of ``factors`` (an output index, or an input index with
    ``factors_in``); ``carried``: the narrower type both travel in as float32."""

    factors: int
    result: int
    dim: int
    exclusive: bool = False
    reverse: bool = False
    carried: Any = None
    factors_in: bool = False


@dataclasses.dataclass
class Case:
    """A module, input sets (the first is the export's), dynamic axes, the float cumprods
    among its outputs (every other output is compared bit for bit)."""

    module: Any
    inputs: list[tuple[Any, ...]]
    names: list[str]
    dynamic_axes: dict[str, dict[int, str]] = dataclasses.field(default_factory=dict)
    scans: list[Scan] = dataclasses.field(default_factory=list)


def _cases() -> dict[str, Callable[[], Case]]:
    torch = import_torch()
    nn = torch.nn
    rand, ints, _ = torch_draws()

    class NoiseSchedule(nn.Module):
        """A DDPM / DDIM scheduler's alphas_cumprod from its betas: float32 from a run-time
        schedule (as diffusers keeps them), and float64 from a buffer (as the original DDPM
        code computes them in numpy), a constant in the exported graph, where the exporter
        folds what it can of the lowering."""

        def __init__(self, steps: int) -> None:
            super().__init__()
            root = torch.linspace(1e-4**0.5, 0.02**0.5, steps, dtype=torch.float64)
            self.register_buffer("betas64", root**2)  # diffusers' "scaled_linear"

        def forward(self, betas: Any) -> tuple[Any, ...]:
            alphas, alphas64 = 1.0 - betas, 1.0 - self.betas64
            return (
                alphas,
                torch.cumprod(alphas, dim=0),
                alphas64,
                torch.cumprod(alphas64, dim=0),
            )

    class Transmittance(nn.Module):
        """NeRF volume rendering (nerf-pytorch's raw2outputs): the transmittance before
        each sample, prod_{j<i} (1 - alpha_j + 1e-10), by a cat of ones."""

        def forward(self, alpha: Any) -> tuple[Any, ...]:
            factors = 1.0 - alpha + 1e-10
            ones = torch.ones_like(alpha[:, :1])
            transmittance = torch.cumprod(torch.cat([ones, factors], -1), -1)[:, :-1]
            return factors, transmittance

    def alphas(rays: int, samples: int) -> tuple[Any, ...]:
        alpha = rand(rays, samples) * 0.2
        alpha[0, samples // 2] = 1.0  # an opaque sample: its factor is 1e-10
        alpha[-1, 0] = 0.0
        return (alpha,)

    class StickBreaking(nn.Module):
        """Dirichlet-process mixture weights (Pyro's DPMM mix_weights): the cumprod of
        1 - beta, also in bfloat16 (the factors cast from float32)."""

        def forward(self, beta: Any) -> tuple[Any, ...]:
            remaining = 1.0 - beta
            narrow = remaining.bfloat16()
            return (
                remaining,
                torch.cumprod(remaining, -1),
                narrow.float(),
                torch.cumprod(narrow, -1).float(),
            )

    class Strides(nn.Module):
        """Contiguous strides of a tensor from its run-time shape (int64 cumprod of a shape
        tensor), its element count, and the flat index of multi-indices."""

        def forward(self, x: Any, index: Any) -> tuple[Any, ...]:
            sizes = torch._shape_as_tensor(x)
            suffix = torch.cumprod(sizes.flip(0), 0).flip(0)
            strides = torch.cat([suffix[1:], torch.ones_like(sizes[:1])])
            return strides, suffix[0], (index * strides).sum(-1)

    class IntegerTypes(nn.Module):
        """torch's integer rules: bool / int8 / uint8 / int16 / int32 give int64; int64
        wraps around; dtype= (and out=) cast first, a narrower type wraps to its width."""

        def forward(self, k: Any, j: Any, flags: Any, small: Any, pixels: Any) -> tuple[Any, ...]:
            out = torch.empty_like(j)
            torch.cumprod(j, 1, out=out)  # int32 out=: int32 result
            return (
                torch.cumprod(k, 0),  # products of 48-bit values: wraps
                torch.cumprod(j, -1),  # int32 in, int64 out
                torch.cumprod(flags, 1),
                torch.cumprod(small, 1),  # int8
                torch.cumprod(pixels, -1),  # uint8
                torch.cumprod(pixels.short(), 0),  # int16
                torch.cumprod(k, 1, dtype=torch.int32),  # int64 in: wraps to 32 bits
                torch.cumprod(k, 1, dtype=torch.int8),
                torch.cumprod(k, 1, dtype=torch.uint8),
                torch.cumprod(j, 1, dtype=torch.int32),
                out,
            )

    def integers(n: int) -> tuple[Any, ...]:
        return (
            torch.where(rand(n, 5) < 0.5, ints(1, 9, n, 5), ints(-(2**47), 2**47, n, 5)),
            ints(-(2**31), 2**31 - 1, n, 4, dtype=torch.int32),
            rand(n, 7) < 0.8,
            ints(-128, 128, n, 6, dtype=torch.int8),
            ints(0, 256, n, 4, dtype=torch.uint8),
        )

    class ReverseHalf(nn.Module):
        """A reverse cumprod in float16 by the flip pattern (survival to the end of a
        sequence), along the last axis and along the first by a negative dim."""

        def forward(self, p: Any) -> tuple[Any, ...]:
            return (
                torch.flip(torch.cumprod(torch.flip(p, [-1]), -1), [-1]),
                p.flip(-2).cumprod(-2).flip(-2),
            )

    def probabilities(rows: int, n: int) -> tuple[Any, ...]:
        return ((0.5 + rand(rows, n)).half(),)

    class Variants(nn.Module):
        """dtype= (float32 cast to float64 first), in-place, out=, a 0-D tensor."""

        def forward(self, x: Any, s: Any) -> tuple[Any, ...]:
            y = x.clone()
            y.cumprod_(1)
            out = torch.empty_like(x)
            torch.cumprod(x, 0, out=out)
            return x.double(), torch.cumprod(x, 1, dtype=torch.float64), y, out, torch.cumprod(s, 0)

    return {
        "diffusion_alphas_cumprod": lambda: Case(
            NoiseSchedule(1000),
            [(torch.linspace(1e-4, 0.02, 1000),), (torch.linspace(1e-4, 0.2, 50),)],
            ["betas"],
            {"betas": {0: "steps"}},
            [Scan(0, 1, 0), Scan(2, 3, 0)],
        ),
        "nerf_transmittance": lambda: Case(
            Transmittance(),
            [alphas(6, 64), alphas(3, 17), alphas(2, 200), alphas(4, 1)],
            ["alpha"],
            {"alpha": {0: "rays", 1: "samples"}},
            [Scan(0, 1, 1, exclusive=True)],
        ),
        "stick_breaking": lambda: Case(
            StickBreaking(),
            [(rand(5, 3, 20) * 0.3,), (rand(2, 3, 20) * 0.3,)],
            ["beta"],
            {"beta": {0: "batch"}},
            [Scan(0, 1, 2), Scan(2, 3, 2, carried=ml_dtypes.bfloat16)],
        ),
        "integer_strides": lambda: Case(
            Strides(),
            [(rand(2, 3, 4, 5), ints(0, 2, 7, 4)), (rand(6, 1, 9, 2), ints(0, 6, 3, 4))],
            ["x", "index"],
            {"x": {0: "a", 1: "b", 2: "c", 3: "d"}, "index": {0: "points"}},
        ),
        "integer_types": lambda: Case(
            IntegerTypes(),
            [integers(4), integers(9)],
            ["k", "j", "flags", "small", "pixels"],
            {name: {0: "batch"} for name in ("k", "j", "flags", "small", "pixels")},
        ),
        "reverse_float16": lambda: Case(
            ReverseHalf(),
            [probabilities(3, 12), probabilities(5, 40), probabilities(1, 1), probabilities(3, 0)],
            ["p"],
            {"p": {0: "rows", 1: "n"}},
            [
                Scan(0, 0, 1, reverse=True, factors_in=True),
                Scan(0, 1, 0, reverse=True, factors_in=True),
            ],
        ),
        "variants": lambda: Case(
            Variants(),
            [(rand(3, 5) + 0.5, torch.tensor(3.5))],
            ["x", "s"],
            scans=[Scan(0, 1, 1), Scan(0, 2, 1, factors_in=True), Scan(0, 3, 0, factors_in=True)],
        ),
    }


CASE_NAMES = [
    "diffusion_alphas_cumprod",
    "nerf_transmittance",
    "stick_breaking",
    "integer_strides",
    "integer_types",
    "reverse_float16",
    "variants",
]
# bfloat16: Cast and Mul take it from opset 13 (below, a test of the refusal)
MIN_OPSETS = {"stick_breaking": 13}


@pytest.fixture(scope="module")
def registered() -> Any:
    """The symbolic registered for this module's tests, and removed after them."""
    import_torch()
    from rewriter.pytorch import register_torchscript_symbolic, unregister_torchscript_symbolic

    register_torchscript_symbolic()
    yield
    unregister_torchscript_symbolic()


def _export(module: Any, inputs: tuple[Any, ...], opset: int, **kwargs: Any) -> onnx.ModelProto:
    torch = import_torch()
    f = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the exporter's deprecation and tracer warnings
        torch.onnx.export(module, inputs, f, dynamo=False, opset_version=opset, **kwargs)
    return onnx.load_from_string(f.getvalue())


class Exports:
    """Each case's module, eager outputs and feeds, and its exported models, made on first
    use (an export per case and opset, shared by the tests of the module)."""

    def __init__(self) -> None:
        torch = import_torch()
        self.cases = {name: build() for name, build in _cases().items()}
        self.expected: dict[str, list[list[np.ndarray]]] = {}
        self.feeds: dict[str, list[dict[str, np.ndarray]]] = {}
        with torch.no_grad():
            for name, case in self.cases.items():
                self.expected[name] = [[_numpy(t) for t in case.module(*i)] for i in case.inputs]
                self.feeds[name] = [
                    {n: _numpy(t) for n, t in zip(case.names, i)} for i in case.inputs
                ]
        self._models: dict[tuple[str, int], onnx.ModelProto] = {}

    def model(self, name: str, opset: int) -> onnx.ModelProto:
        if (name, opset) not in self._models:
            case = self.cases[name]
            self._models[name, opset] = _export(
                case.module,
                case.inputs[0],
                opset,
                input_names=case.names,
                dynamic_axes=case.dynamic_axes,
            )
        return self._models[name, opset]

    def opsets(self, name: str) -> list[int]:
        return [opset for opset in OPSETS if opset >= MIN_OPSETS.get(name, OPSETS[0])]


def _numpy(t: Any) -> np.ndarray:
    return t.detach().numpy()


@pytest.fixture(scope="module")
def exports(registered: None) -> Exports:
    return Exports()


def _check(
    case: Case, feeds: dict[str, np.ndarray], expected: list[np.ndarray], got: list[np.ndarray]
) -> None:
    """``got`` (a runtime's outputs) against torch eager's, as the module docstring says."""
    assert len(got) == len(expected)
    scanned = {scan.result for scan in case.scans}
    for i, (g, e) in enumerate(zip(got, expected)):
        assert g.dtype == e.dtype and g.shape == e.shape, (i, g.dtype, e.dtype, g.shape, e.shape)
        if i not in scanned:  # integers, and the factors: bit for bit
            np.testing.assert_array_equal(g, e, err_msg=f"output {i}", strict=True)
    inputs = list(feeds.values())
    for scan in case.scans:
        x = inputs[scan.factors] if scan.factors_in else got[scan.factors]
        y, eager = got[scan.result], expected[scan.result]
        if scan.carried is not None:  # the values are exactly those of the narrower type
            x, y, eager = (a.astype(scan.carried) for a in (x, y, eager))
        exact = wide_reference(x, scan.dim, int(scan.exclusive), int(scan.reverse))
        k = bounds.factor_counts(x.shape, scan.dim, scan.exclusive, scan.reverse)
        contract = bounds.ulp_bound("scan", x.dtype, k)  # auto picks a k - 1 ulps lowering
        problem = bounds.check(y, exact, x.dtype, contract)
        assert problem is None, f"output {scan.result} against the exact product: {problem}"
        apart = _ulps_apart(y, eager, exact, x.dtype)
        allowed = contract + np.maximum(k - 1, 0)
        if not (apart <= allowed).all():
            worst = np.unravel_index(np.argmax(apart - allowed), apart.shape)
            raise AssertionError(
                f"output {scan.result} against torch eager: {apart[worst]} ulps apart at "
                f"{worst}, allowed {allowed[worst]}"
            )


def _ulps_apart(a: np.ndarray, b: np.ndarray, exact: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """|a - b| in ulps of ``dtype`` at the exact product (exact where the product rounds to
    zero or inf in ``dtype``: there both must equal it, which bounds.check has seen for a)."""
    wide = np.longdouble
    name = bounds.type_name(dtype)
    ulp = bounds._ulp(exact.astype(wide), name)
    with np.errstate(invalid="ignore"):
        apart = np.abs(a.astype(wide) - b.astype(wide)) / ulp
    return np.where(a.astype(wide) == b.astype(wide), 0, apart)


@pytest.mark.parametrize(
    ("opset", "name"),
    [
        pytest.param(opset, name, marks=() if opset in FAST_OPSETS else pytest.mark.slow)
        for opset in OPSETS
        for name in CASE_NAMES
        if opset >= MIN_OPSETS.get(name, OPSETS[0])
    ],
)
def test_export_has_no_cumprod_and_matches_torch_eager_on_onnxruntime(
    exports: Exports, opset: int, name: str
) -> None:
    model = exports.model(name, opset)
    onnx.checker.check_model(model, full_check=True)
    assert "CumProd" not in op_types(model)  # subgraphs too
    assert [(o.domain, o.version) for o in model.opset_import] == [("", opset)]
    # what onnxruntime 1.20.1 loads: IR <= 10, opset <= 21 (torch 2.13 writes IR 6 at opset
    # 11 up to IR 9 at opsets 19 and 20)
    assert model.ir_version <= 10, model.ir_version
    for feeds, expected in zip(exports.feeds[name], exports.expected[name]):
        _check(exports.cases[name], feeds, expected, run_ort(model, feeds))


@pytest.fixture(scope="module")
def legacy_outputs(exports: Exports, tmp_path_factory: pytest.TempPathFactory) -> LegacyBatch:
    batch = LegacyBatch(tmp_path_factory.mktemp("torchscript_legacy"))
    for name in CASE_NAMES:
        for opset in exports.opsets(name):
            for k, feeds in enumerate(exports.feeds[name]):
                batch.add(f"{name}-{opset}-{k}", exports.model(name, opset), feeds)
    batch.run()
    return batch


@pytest.mark.slow  # where tests/pytorch/test_dynamo.py's onnxruntime 1.20.1 runs are (slow tier)
@pytest.mark.parametrize("name", CASE_NAMES)
def test_onnxruntime_1_20_matches_torch_eager(
    exports: Exports, legacy_outputs: LegacyBatch, name: str
) -> None:
    for opset in exports.opsets(name):
        for k, (feeds, expected) in enumerate(zip(exports.feeds[name], exports.expected[name])):
            case = f"{name}-{opset}-{k}"
            got = legacy_outputs.outputs(case)
            try:
                _check(exports.cases[name], feeds, expected, got)
            except AssertionError as exc:
                raise AssertionError(f"{case}: {exc}") from exc


# -- registration and options ---------------------------------------------------------------


@pytest.fixture
def restore_registration(registered: None) -> Any:
    """For tests that change the registration: the module's default one again after them."""
    from rewriter.pytorch import register_torchscript_symbolic

    yield
    register_torchscript_symbolic()


def _cumprod_module(dim: int = 1, **kwargs: Any) -> Any:
    torch = import_torch()

    class CumProd(torch.nn.Module):
        def forward(self, x: Any) -> Any:
            return torch.cumprod(x, dim, **kwargs)

    return CumProd()


def test_without_the_symbolic_torch_cannot_export_cumprod(restore_registration: None) -> None:
    """The gap this closes (pytorch/pytorch#102948); unregistering restores it, and
    registering twice is one registration."""
    torch = import_torch()
    from rewriter.pytorch import register_torchscript_symbolic, unregister_torchscript_symbolic

    x = torch.rand(2, 3)
    register_torchscript_symbolic()
    unregister_torchscript_symbolic()
    unregister_torchscript_symbolic()  # nothing left to remove: no error
    for opset in (11, 17, 20):
        with pytest.raises(torch.onnx.errors.UnsupportedOperatorError, match="aten::cumprod"):
            _export(_cumprod_module(), (x,), opset)
    register_torchscript_symbolic()
    register_torchscript_symbolic()
    (y,) = run_ort(_export(_cumprod_module(), (x,), 17, input_names=["x"]), {"x": x.numpy()})
    assert y.shape == (2, 3)
    unregister_torchscript_symbolic()  # one call removes it
    with pytest.raises(torch.onnx.errors.UnsupportedOperatorError, match="aten::cumprod"):
        _export(_cumprod_module(), (x,), 17)


def test_registering_again_takes_the_new_options(restore_registration: None) -> None:
    """strategy="loop": a Loop, and float32 products in numpy's order (bit for bit); the
    default registration again: no Loop."""
    torch = import_torch()
    from rewriter.pytorch import register_torchscript_symbolic

    x = torch.rand(4, 50) + 0.5
    register_torchscript_symbolic("loop")
    model = _export(_cumprod_module(), (x,), 13, input_names=["x"])
    assert "Loop" in op_types(model)
    (y,) = run_ort(model, {"x": x.numpy()})
    np.testing.assert_array_equal(y, np.cumprod(x.numpy(), 1))
    register_torchscript_symbolic()
    assert "Loop" not in op_types(_export(_cumprod_module(), (x,), 13))


def test_bfloat16_below_opset_13_is_refused_with_the_reason(registered: None) -> None:
    torch = import_torch()
    x = torch.rand(2, 5).bfloat16()
    for opset in (11, 12):
        with pytest.raises(ValueError, match=r"bfloat16 needs ai\.onnx opset 13 or later"):
            _export(_cumprod_module(), (x,), opset)


def test_logsum_is_refused_for_integers(restore_registration: None) -> None:
    torch = import_torch()
    from rewriter.pytorch import register_torchscript_symbolic

    register_torchscript_symbolic("logsum")
    with pytest.raises(ValueError, match="strategy 'logsum' is inexact for int64"):
        _export(_cumprod_module(0), (torch.arange(4),), 17)


def test_max_length_for_a_dynamic_axis_on_a_target_without_loop_or_scan(
    restore_registration: None,
) -> None:
    """target="portable" (no Loop, no Scan, no If) over a dynamic_axes length: refused
    without a bound, saying to pass one; with max_length=, exact up to the bound (opset 14:
    below it, the pass refuses dims not all static on a target without If)."""
    torch = import_torch()
    from rewriter.pytorch import register_torchscript_symbolic

    x = torch.randint(-5, 6, (3, 9))
    dynamic = {"x": {1: "n"}}
    register_torchscript_symbolic(target="portable")
    with pytest.raises(ValueError, match="max_length"):
        _export(_cumprod_module(), (x,), 14, input_names=["x"], dynamic_axes=dynamic)
    register_torchscript_symbolic(target="portable", max_length=64)
    model = _export(_cumprod_module(), (x,), 14, input_names=["x"], dynamic_axes=dynamic)
    assert not {"Loop", "Scan", "CumProd"} & set(op_types(model))
    for n in (1, 9, 64):
        x = torch.randint(-5, 6, (3, n))
        (y,) = run_ort(model, {"x": x.numpy()})
        np.testing.assert_array_equal(y, torch.cumprod(x, 1).numpy(), strict=True)
