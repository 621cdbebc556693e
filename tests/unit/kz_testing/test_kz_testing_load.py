"""Where a local stack's runners put their task folders: the filesystem of a path, and
`/dev/shm` only when it is a tmpfs."""

from __future__ import annotations

from pathlib import Path

import pytest

from kz_testing import filesystem_of, scratch_base

pytestmark = pytest.mark.unit


def test_filesystem_is_the_longest_mount_prefix() -> None:
    """A path takes the type of the deepest mount point above it, as the mount table says."""
    table = Path("/proc/self/mounts").read_text().splitlines()
    mounts = {point: kind for _dev, point, kind, *_ in (line.split() for line in table)}
    assert filesystem_of(Path("/proc/self/status")) == mounts["/proc"] == "proc"
    assert filesystem_of(Path("/")) == mounts["/"]


def test_scratch_base_is_dev_shm_only_when_it_is_a_tmpfs(tmp_path: Path) -> None:
    """`/dev/shm` when it is a writable tmpfs, else the fallback given."""
    base = scratch_base(tmp_path)
    if filesystem_of(Path("/dev/shm")) == "tmpfs":
        assert base == Path("/dev/shm")
    else:
        assert base == tmp_path
