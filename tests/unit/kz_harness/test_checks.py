"""Correctness checks: tolerances by dtype, NaN/Inf, degenerate outputs, mutated inputs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kz_harness.checks import TOLERANCES, compare, tolerance_for
from kz_harness.errors import HarnessError

pytestmark = pytest.mark.unit

REF = [1.0, 2.0, 3.0, 4.0]


@pytest.mark.parametrize(
    ("out", "passed", "reason"),
    [
        ([1.0, 2.0, 3.0, 4.0], True, ""),
        ([1.00001, 2.0, 3.0, 4.0], True, ""),
        ([1.1, 2.0, 3.0, 4.0], False, "outside"),
        ([math.nan, 2.0, 3.0, 4.0], False, "NaN or Inf"),
        ([math.inf, 2.0, 3.0, 4.0], False, "NaN or Inf"),
        ([0.0, 0.0, 0.0, 0.0], False, "all zeros"),
        ([2.5, 2.5, 2.5, 2.5], False, "constant"),
        ([1.0, 2.0, 3.0], False, "shape"),
    ],
)
def test_outputs_are_judged_against_the_reference(
    out: list[float], passed: bool, reason: str
) -> None:
    """Each kind of output passes or fails with a reason that names the problem."""
    check = compare(out, REF, dtype="fp32")
    assert check.passed is passed
    assert reason in check.reason


def test_nan_never_passes_even_against_a_nan_reference() -> None:
    """A NaN output fails even where the reference holds NaN too."""
    assert not compare([math.nan, 1.0], [math.nan, 1.0], dtype="fp32").passed


def test_constant_output_passes_when_the_reference_is_constant_within_tolerance() -> None:
    """A constant output is fine when the reference varies by less than the tolerance."""
    assert compare([1.0, 1.0, 1.0], [1.0, 1.0, 1.00001], dtype="fp16").passed
    assert compare(np.zeros(4), np.zeros(4), dtype="fp32").passed


def test_changed_inputs_fail_the_check() -> None:
    """A kernel that writes into its input fails even when its output is right."""
    before = [np.array([1.0, 2.0])]
    after = [np.array([1.0, 2.5])]
    check = compare(REF, REF, dtype="fp32", inputs_before=before, inputs_after=after)
    assert not check.passed and "positions [0]" in check.reason
    same = compare(REF, REF, dtype="fp32", inputs_before=before, inputs_after=[before[0].copy()])
    assert same.passed


@pytest.mark.parametrize(
    ("dtype", "expected"),
    [("fp32", TOLERANCES["fp32"]), ("float16", TOLERANCES["fp16"]),
     ("bfloat16", TOLERANCES["bf16"]), ("fp8_e4m3", TOLERANCES["fp8"]),
     ("int8", (0.0, 0.0)), ("uint4", (0.0, 0.0))],
)  # fmt: skip
def test_tolerances_default_from_the_dtype(dtype: str, expected: tuple[float, float]) -> None:
    """Declared dtypes and their aliases map to their default (atol, rtol)."""
    assert tolerance_for(dtype) == expected


def test_looser_dtypes_accept_what_fp32_rejects() -> None:
    """An error of 0.5 % passes for bf16 and fails for fp32; integers compare exactly."""
    out = [1.005, 2.0, 3.0, 4.0]
    assert compare(out, REF, dtype="bf16").passed
    assert not compare(out, REF, dtype="fp32").passed
    assert not compare([1, 2, 3, 5], [1, 2, 3, 4], dtype="int8").passed


def test_an_unknown_dtype_needs_explicit_tolerances() -> None:
    """An unknown dtype is an error unless atol and rtol are both given."""
    with pytest.raises(HarnessError):
        compare(REF, REF, dtype="weird")
    assert compare(REF, REF, dtype="weird", atol=0.0, rtol=0.0).passed


def test_errors_and_the_dict_form() -> None:
    """max_abs_err and max_rel_err are measured, and non-finite errors become null."""
    check = compare(np.array([[1.0, 2.0], [3.0, 4.4]]), [[1.0, 2.0], [3.0, 4.0]], dtype="fp32")
    assert check.max_abs_err == pytest.approx(0.4)
    assert check.max_rel_err == pytest.approx(0.1)
    assert set(check.to_dict()) == {"name", "max_abs_err", "max_rel_err", "atol", "rtol", "passed"}
    bad = compare([math.inf, 1.0], [1.0, 1.0], dtype="fp32").to_dict()
    assert bad["max_abs_err"] is None and bad["passed"] is False


def test_plain_nested_sequences_and_ragged_input() -> None:
    """Nested lists compare like arrays; ragged ones are refused."""
    assert compare([[1, 2], [3, 4]], np.array([[1, 2], [3, 4]]), dtype="fp32").passed
    with pytest.raises(HarnessError):
        compare([[1, 2], [3]], [[1, 2], [3]], dtype="fp32")


@pytest.mark.parametrize(
    ("out", "passed"),
    [([1.0, 2.0, 3.0, 4.0], True), ([1.1, 2.0, 3.0, 4.0], False),
     ([math.nan, 2.0, 3.0, 4.0], False),
     ([0.0, 0.0, 0.0, 0.0], False), ([[1.0, 2.0], [3.0, 4.0]], False)],
)  # fmt: skip
def test_the_pure_python_path_agrees_without_numpy(
    monkeypatch: pytest.MonkeyPatch, out: list[float], passed: bool
) -> None:
    """Without numpy, plain sequences are judged the same way."""
    import kz_harness.checks as module

    monkeypatch.setattr(module, "_np", None)
    assert module.compare(out, REF, dtype="fp32").passed is passed
