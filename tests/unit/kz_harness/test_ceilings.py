"""The ceilings and the floor: which term bounds a call, and the CPU measurement's shape."""

from __future__ import annotations

import numpy as np
import pytest

from kz_harness.ceilings import Ceilings, floor_s, measure

pytestmark = pytest.mark.unit

H200ISH = Ceilings(bytes_per_s=4.0e12, flops_per_s=8.0e14, dtype="bfloat16", device="gpu")


def test_a_copy_heavy_call_is_memory_bound() -> None:
    seconds, bound = floor_s(H200ISH, bytes_moved=4_000_000, flops=1_000)
    assert bound == "memory" and seconds == pytest.approx(1e-6)


def test_a_large_product_is_compute_bound() -> None:
    n = 4096
    seconds, bound = floor_s(H200ISH, bytes_moved=3 * n * n * 2, flops=2 * n**3)
    assert bound == "compute" and seconds == pytest.approx(2 * n**3 / 8.0e14)


def test_undeclared_work_has_a_zero_floor() -> None:
    assert floor_s(H200ISH, bytes_moved=0, flops=0) == (0.0, "memory")


def test_ceilings_round_trip_through_the_document() -> None:
    assert Ceilings.from_dict(H200ISH.to_dict()) == H200ISH


def test_the_cpu_ceilings_are_measured_in_the_boards_dtype() -> None:
    measured = measure(np, "fp64")
    assert measured.device == "cpu" and measured.dtype == "float64"
    assert measured.bytes_per_s > 1e8 and measured.flops_per_s > 1e7
    assert measure(np, "bf16").dtype == "float32"  # numpy has no bfloat16
