"""Fixtures for runner tests."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from runner_helpers import RMSNORM

@pytest.fixture
def sleepy_package(tmp_path: Path) -> Path:
    """The RMSNorm example whose benchmark first sleeps for a long time (to be killed)."""
    pkg = tmp_path / "sleepy"
    shutil.copytree(RMSNORM, pkg)
    bench = pkg / ".kernel_package" / "benchmark.py"
    bench.write_text("import time\ntime.sleep(120)\n" + bench.read_text())
    return pkg
