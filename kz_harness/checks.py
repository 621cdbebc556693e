"""Correctness checks of an output against a reference, with tolerances from the dtype.

A check fails on any NaN or Inf in the output, on an all-zero or constant output when the
reference is not, on a shape mismatch, on inputs changed by the call, and on any element
outside `atol + rtol * |ref|`. Works on numpy arrays, tensors (converted with `.numpy()`)
and plain nested sequences; numpy is used when present, never required.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kz_harness.errors import HarnessError

__all__ = ["TOLERANCES", "Check", "compare", "tolerance_for"]

TOLERANCES: dict[str, tuple[float, float]] = {
    "fp64": (1e-7, 1e-7),
    "fp32": (1e-4, 1e-4),
    "tf32": (5e-3, 5e-3),
    "fp16": (1e-2, 1e-2),
    "bf16": (2e-2, 2e-2),
    "fp8": (1e-1, 1.25e-1),
    "fp4": (2.5e-1, 2.5e-1),
    "int": (0.0, 0.0),
}
_ALIASES = {
    "float64": "fp64", "f64": "fp64", "double": "fp64",
    "float32": "fp32", "f32": "fp32", "float": "fp32",
    "float16": "fp16", "f16": "fp16", "half": "fp16",
    "bfloat16": "bf16",
    "fp8_e4m3": "fp8", "fp8_e5m2": "fp8", "e4m3": "fp8", "e5m2": "fp8", "float8": "fp8",
    "nvfp4": "fp4", "mxfp4": "fp4",
}  # fmt: skip
_INTEGER_PREFIXES = ("int", "uint", "w4a16", "w8a8", "bool")


def tolerance_for(dtype: str) -> tuple[float, float]:
    """Default (atol, rtol) for a declared dtype name such as fp16, bf16, fp8 or int8."""
    name = dtype.strip().lower()
    name = _ALIASES.get(name, name)
    if name in TOLERANCES:
        return TOLERANCES[name]
    if name.startswith(_INTEGER_PREFIXES):
        return TOLERANCES["int"]
    raise HarnessError(
        f"no default tolerance for dtype {dtype!r}: pass atol and rtol, or use one of "
        f"{sorted(TOLERANCES)} (integer types compare exactly)"
    )


@dataclass(frozen=True, slots=True)
class Check:
    """One correctness check; `reason` says why it failed ("" when it passed)."""

    name: str
    max_abs_err: float
    max_rel_err: float
    atol: float
    rtol: float
    passed: bool
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The check as the result document lists it; non-finite errors become null."""
        return {
            "name": self.name,
            "max_abs_err": _finite_or_none(self.max_abs_err),
            "max_rel_err": _finite_or_none(self.max_rel_err),
            "atol": self.atol,
            "rtol": self.rtol,
            "passed": self.passed,
        }


def _finite_or_none(value: float) -> float | None:
    return value if math.isfinite(value) else None


_np: Any
try:  # numpy makes large comparisons fast; plain sequences work without it
    import numpy as _np
except ImportError:  # pragma: no cover - exercised only where numpy is absent
    _np = None


@dataclass(frozen=True, slots=True)
class _Flat:
    shape: tuple[int, ...]
    values: Any  # a float64 numpy array when numpy is present, else a list of floats


def _to_host(value: Any) -> Any:
    if hasattr(value, "detach"):  # a torch tensor: bring it to host memory as float64
        return value.detach().double().cpu().numpy()
    return value


def _flatten_python(value: Any) -> tuple[tuple[int, ...], list[float]]:
    if hasattr(value, "shape") and hasattr(value, "ravel"):
        return tuple(int(n) for n in value.shape), [float(v) for v in value.ravel()]
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        parts = [_flatten_python(item) for item in value]
        inner = parts[0][0] if parts else ()
        if any(shape != inner for shape, _ in parts):
            raise HarnessError("ragged nested sequence: every row must have the same shape")
        return (len(parts), *inner), [v for _, values in parts for v in values]
    return (), [float(value)]


def _flatten(value: Any) -> _Flat:
    value = _to_host(value)
    if _np is None:
        return _Flat(*_flatten_python(value))
    try:
        array = _np.asarray(value, dtype=_np.float64)
    except ValueError as exc:
        raise HarnessError(f"cannot read the value as a numeric array: {exc}") from exc
    return _Flat(tuple(int(n) for n in array.shape), array.ravel())


def _all_finite(values: Any) -> bool:
    if _np is not None:
        return bool(_np.isfinite(values).all())
    return all(math.isfinite(v) for v in values)


def _all_equal_to(values: Any, target: float) -> bool:
    if _np is not None:
        return bool((values == target).all())
    return all(v == target for v in values)


def _constant(values: Any) -> bool:
    return len(values) > 1 and _all_equal_to(values, values[0])


def _spread(values: Any) -> tuple[float, float]:
    """(max - min, max |v|) over the finite values; (0, 0) when there are none."""
    if _np is not None:
        finite = values[_np.isfinite(values)]
        if finite.size == 0:
            return 0.0, 0.0
        return float(finite.max() - finite.min()), float(_np.abs(finite).max())
    kept = [v for v in values if math.isfinite(v)]
    if not kept:
        return 0.0, 0.0
    return max(kept) - min(kept), max(abs(v) for v in kept)


def _degenerate(out: Any, ref: Any, atol: float, rtol: float) -> str:
    """A zero or constant output fails when the reference varies by more than the tolerance."""
    ref_spread, ref_peak = _spread(ref)
    if _all_equal_to(out, 0.0) and ref_peak > atol:
        return "output is all zeros but the reference is not"
    if _constant(out) and ref_spread > atol + rtol * ref_peak:
        return "output is constant but the reference is not"
    return ""


def _errors_python(
    out: list[float], ref: list[float], atol: float, rtol: float
) -> tuple[float, float, int]:
    max_abs = max_rel = 0.0
    outside = 0
    for o, r in zip(out, ref, strict=True):
        diff = abs(o - r)
        max_abs = max(max_abs, diff) if not math.isnan(diff) else math.nan
        max_rel = max(max_rel, diff / abs(r) if r else (0.0 if diff == 0 else math.inf))
        outside += not diff <= atol + rtol * abs(r)
    return max_abs, max_rel, outside


def _errors(out: Any, ref: Any, atol: float, rtol: float) -> tuple[float, float, int]:
    """Largest absolute and relative error, and how many elements fall outside tolerance."""
    if _np is None:
        return _errors_python(out, ref, atol, rtol)
    if out.size == 0:
        return 0.0, 0.0, 0
    with _np.errstate(invalid="ignore", divide="ignore"):
        diff = _np.abs(out - ref)
        scale = _np.abs(ref)
        rel = _np.where(
            scale > 0, diff / _np.where(scale > 0, scale, 1.0), _np.where(diff == 0, 0.0, _np.inf)
        )
        outside = int((~(diff <= atol + rtol * scale)).sum())
    return float(diff.max()), float(rel.max()), outside


def _same(a: Any, b: Any) -> bool:
    left, right = _flatten(a), _flatten(b)
    if left.shape != right.shape:
        return False
    if _np is not None:
        return bool(_np.array_equal(left.values, right.values, equal_nan=True))
    pairs = zip(left.values, right.values, strict=True)
    return all(x == y or (math.isnan(x) and math.isnan(y)) for x, y in pairs)


def _inputs_changed(before: Sequence[Any] | None, after: Sequence[Any] | None) -> str:
    if before is None and after is None:
        return ""
    if before is None or after is None or len(before) != len(after):
        return "inputs_before and inputs_after must both be given, with as many items"
    changed = [i for i, (b, a) in enumerate(zip(before, after, strict=True)) if not _same(b, a)]
    return f"the call changed its inputs at positions {changed}" if changed else ""


def compare(
    out: Any,
    ref: Any,
    *,
    dtype: str,
    atol: float | None = None,
    rtol: float | None = None,
    inputs_before: Sequence[Any] | None = None,
    inputs_after: Sequence[Any] | None = None,
    name: str = "output",
) -> Check:
    """Check `out` against `ref`; unset tolerances come from `dtype` (see `TOLERANCES`)."""
    default_atol, default_rtol = tolerance_for(dtype) if atol is None or rtol is None else (0, 0)
    atol = default_atol if atol is None else atol
    rtol = default_rtol if rtol is None else rtol
    got, want = _flatten(out), _flatten(ref)
    if got.shape != want.shape:
        reason = f"output shape {got.shape} differs from the reference shape {want.shape}"
        return Check(name, math.inf, math.inf, atol, rtol, False, reason)
    max_abs, max_rel, outside = _errors(got.values, want.values, atol, rtol)
    reason = (
        ("output holds NaN or Inf" if not all(math.isfinite(v) for v in got.values) else "")
        or _degenerate(got.values, want.values, atol, rtol)
        or _inputs_changed(inputs_before, inputs_after)
        or (
            f"{outside} of {len(got.values)} elements outside atol={atol} rtol={rtol}"
            if outside
            else ""
        )
    )
    return Check(name, max_abs, max_rel, atol, rtol, not reason, reason)
