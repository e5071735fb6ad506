"""The accuracy contract, stated once: the figures the README promises, written out here.

Every test that checks a lowered CumProd's numbers takes its tolerance from :func:`ulp_bound`
and compares with :func:`check`. Nothing here reads the code under test (no ``max_ulps``,
no ``rewriter.verify``): loosening a bound in ``rewriter`` cannot loosen a test.

The contract, for an output element that multiplies k factors whose prefix products stay in
the type's normal range, against the true (infinitely precise) product:

==========================================  ========================  ==================
lowering                                    float32 / float64         float16 / bfloat16
==========================================  ========================  ==================
loop, scan, chain, blocked, radix,          k - 1 ulps                0.5 + (k - 1) *
dynamic, doubling (and auto, which picks                              2^(p - 24) ulps
one of them)
logsum                                      1 ulp / 1490 k + 2 ulps   1 ulp
logsum on a target without float64       178 k + 2 ulps (float32;  0.5 + (178 k + 2) *
                                            float64 refused)          2^(p - 24) ulps
==========================================  ========================  ==================

p = 11 for float16, 8 for bfloat16. Integers: bit-exact (wraparound) for every lowering that
takes them. ulps are of the output type at the true product.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "EXACT_KERNELS",
    "PRECISION",
    "check",
    "factor_counts",
    "ulp_bound",
]

# (significand bits p, smallest normal exponent) of each float type, by name.
PRECISION: dict[str, tuple[int, int]] = {
    "bfloat16": (8, -126),
    "float16": (11, -14),
    "float32": (24, -126),
    "float64": (53, -1022),
}

# The lowerings held to the sequential kernel's k - 1 ulps.
EXACT_KERNELS = frozenset(
    {
        "loop",
        "scan",
        "chain",
        "blocked",
        "radix",
        "dynamic",
        "doubling",
        "carry",
        "cached",
        "masked",
    }
)

# The contract's figures (the README's accuracy table).
LOGSUM_NARROW_ULPS = 1.0  # logsum, float32 / float16 / bfloat16
LOGSUM_F64_PER_FACTOR, LOGSUM_F64_CONSTANT = 1490.0, 2.0  # logsum, float64
LOGSUM32_PER_FACTOR, LOGSUM32_CONSTANT = 178.0, 2.0  # logsum in float32, in ulps of float32


def type_name(dtype: np.dtype | str) -> str:
    name = str(np.dtype(dtype)) if not isinstance(dtype, str) else dtype
    return {"float": "float32", "double": "float64", "half": "float16"}.get(name, name)


def ulp_bound(lowering: str, dtype: np.dtype | str, k: np.ndarray | int) -> np.ndarray:
    """The contract's bound, in ulps of ``dtype``, for outputs of k factors each."""
    name = type_name(dtype)
    k = np.asarray(k, dtype=np.float64)
    k1 = np.maximum(k - 1, 0)
    narrow = name in ("float16", "bfloat16")
    scale = 2.0 ** (PRECISION[name][0] - 24) if narrow else 1.0
    if lowering in EXACT_KERNELS:
        return 0.5 + k1 * scale if narrow else k1
    if lowering == "logsum":
        if name == "float64":
            return LOGSUM_F64_PER_FACTOR * k + LOGSUM_F64_CONSTANT
        return np.full_like(k, LOGSUM_NARROW_ULPS)
    if lowering == "logsum32":
        assert name != "float64", "logsum32 refuses float64"
        bound32 = LOGSUM32_PER_FACTOR * k + LOGSUM32_CONSTANT
        return 0.5 + bound32 * scale if narrow else bound32
    raise ValueError(f"no contract for lowering {lowering!r}")


def factor_counts(shape: tuple[int, ...], axis: int, exclusive: bool, reverse: bool) -> np.ndarray:
    """How many factors each output of a CumProd multiplies."""
    axis %= len(shape)
    n = shape[axis]
    counts = np.arange(n) if exclusive else np.arange(1, n + 1)
    if reverse:
        counts = counts[::-1]
    view = [1] * len(shape)
    view[axis] = n
    return np.broadcast_to(counts.reshape(view), shape)


def _ulp(ref: np.ndarray, name: str) -> np.ndarray:
    """ulp of type ``name`` at each finite ``ref`` (longdouble)."""
    bits, emin = PRECISION[name]
    _, exp = np.frexp(np.abs(ref))  # |ref| = m * 2^exp, m in [0.5, 1)
    exp = np.maximum(exp.astype(np.int64) - 1, emin)
    return np.ldexp(np.ones_like(ref), exp - bits + 1)


def check(
    actual: np.ndarray, reference: np.ndarray, dtype: np.dtype | str, bound: object = 0.0
) -> str | None:
    """None when ``actual`` meets the contract against ``reference``, else what is wrong.

    Integers (and ``bound`` None): bit for bit. Floats: ``reference`` is the true product (in
    float64 or longdouble); where it rounds to ±inf or ±0 in ``dtype`` the result must be
    exactly that (sign of zero included); NaN exactly where the reference is NaN; elsewhere
    the error is at most ``bound`` ulps of ``dtype`` at the reference.
    """
    if actual.shape != reference.shape:
        return f"shape {actual.shape} != {reference.shape}"
    name = type_name(dtype)
    if name not in PRECISION:
        bad = np.argwhere(actual != reference)
        return f"{len(bad)} element(s) differ, first at {bad[0].tolist()}" if len(bad) else None
    act = actual.astype(np.longdouble)
    ref = reference.astype(np.longdouble)
    with np.errstate(over="ignore", invalid="ignore"):
        rounded = ref.astype(np.float64).astype(_numpy_type(name)).astype(np.longdouble)
    nan = np.isnan(ref) != np.isnan(act)
    special = ~np.isnan(ref) & (np.isinf(rounded) | (rounded == 0))
    bad_special = special & ((act != rounded) | (np.signbit(act) != np.signbit(rounded)))
    regular = ~special & ~np.isnan(ref)
    with np.errstate(invalid="ignore", over="ignore"):
        errors = np.where(regular, np.abs(act - ref) / _ulp(np.where(regular, ref, 1), name), 0)
    limit = np.broadcast_to(np.asarray(bound, dtype=np.longdouble), errors.shape)
    bad_error = regular & ~(errors <= limit)
    for mask, what in (
        (nan, "NaN where the reference is not (or the reverse)"),
        (bad_special, "inf / zero / sign of zero differs"),
        (bad_error, "error above the bound"),
    ):
        if mask.any():
            at = tuple(np.argwhere(mask)[0].tolist())
            return (
                f"{what} at {at}: got {act[at]!r}, reference {ref[at]!r}, error "
                f"{float(errors[at]):.4g} ulp, bound {float(limit[at]):.4g} "
                f"({int(mask.sum())} element(s))"
            )
    return None


def _numpy_type(name: str) -> np.dtype:
    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)
