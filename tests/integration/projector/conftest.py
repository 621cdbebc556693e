"""Fixtures of the projector suite: settings in a temp dir and a deterministic clock."""

from __future__ import annotations

from pathlib import Path

import pytest
from projector_helpers import Clock, settings_for

from kz_events.config import Settings


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """Settings whose repo, index and data dir live in the test's temp dir."""
    return settings_for(tmp_path)


@pytest.fixture
def clock() -> Clock:
    """A clock that ticks one second per call from a fixed start."""
    return Clock()
