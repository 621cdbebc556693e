"""Copies of the example problem sets (examples/problem_sets) that a test may change."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

SETS = Path(__file__).resolve().parents[3] / "examples" / "problem_sets"


@pytest.fixture
def example_set(tmp_path: Path) -> Callable[[str], Path]:
    """A copy of one example set (kernelbench, gpumode, flashinfer) under tmp_path, made once
    per test."""

    def copy(name: str) -> Path:
        target = tmp_path / name
        if not target.exists():
            shutil.copytree(SETS / name, target)
        return target

    return copy
