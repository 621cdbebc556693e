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
    source = bench.read_text()
    anchor = "import numpy as np\n"
    assert anchor in source
    bench.write_text(source.replace(anchor, anchor + "import time\n\ntime.sleep(120)\n", 1))
    return pkg
