"""Finding the hierarchy a runner contains its steps in, from mountinfo and its own cgroup;
the alike copies of src/ and the drawing of workers' uids."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import pytest

from kz_runner.backends.cgroups import (
    ContainmentError,
    StepGroup,
    find_hierarchy,
    own_cgroups,
    parse_mounts,
)
from kz_runner.backends.stub import StubBackend
from kz_runner.supervisor import MAX_WORKERS, _uid_draw
from kz_runner.workdir import SOURCE_MTIME, copy_source

pytestmark = pytest.mark.unit

HYBRID = """\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""
OWN = "8:pids:/\n6:freezer:/\n4:memory:/job/1\n2:cpuacct:/\n1:cpu:/\n0::/\n"


def test_mounts_and_own_groups_are_parsed() -> None:
    """Each cgroup mount with its version and controllers; the v2 group under the key ""."""
    mounts = {m.point.name: m for m in parse_mounts(HYBRID)}
    assert set(mounts) == {"cpu", "cpuacct", "freezer", "pids", "unified"}
    assert mounts["freezer"].version == 1 and mounts["freezer"].controllers == {"freezer"}
    assert mounts["unified"].version == 2
    assert own_cgroups(OWN) == {
        "pids": "/", "freezer": "/", "memory": "/job/1", "cpuacct": "/", "cpu": "/", "": "/"
    }  # fmt: skip


def _host(tmp_path: Path, mountinfo: str) -> tuple[Path, Path]:
    """A fake host whose cgroup mounts are folders under tmp_path."""
    text = mountinfo.replace("/sys/fs/cgroup", str(tmp_path / "cg"))
    for mount in parse_mounts(text):
        mount.point.mkdir(parents=True, exist_ok=True)
        (mount.point / "cgroup.procs").touch()
        if mount.version == 2:
            (mount.point / "cgroup.controllers").touch()
    (tmp_path / "mountinfo").write_text(text)
    (tmp_path / "cgroup").write_text(OWN)
    return tmp_path / "mountinfo", tmp_path / "cgroup"


def test_the_hierarchy_is_chosen_by_mode(tmp_path: Path) -> None:
    """auto on a hybrid host takes v1 (freezer, cpuacct, pids and cpu); v2 the unified mount;
    none nothing; anything else is refused naming the choices."""
    mountinfo, cgroup = _host(tmp_path, HYBRID)
    auto = find_hierarchy("auto", mountinfo=mountinfo, cgroup=cgroup)
    assert auto is not None and auto.version == 1
    assert set(auto.bases) == {"freezer", "cpuacct", "pids", "cpu"}
    v2 = find_hierarchy("v2", mountinfo=mountinfo, cgroup=cgroup)
    assert v2 is not None and v2.bases == {"": tmp_path / "cg" / "unified"}
    assert find_hierarchy("none", mountinfo=mountinfo, cgroup=cgroup) is None
    with pytest.raises(ContainmentError, match="expected one of auto, v1, v2, none"):
        find_hierarchy("v3", mountinfo=mountinfo, cgroup=cgroup)


def test_a_unified_host_takes_v2_under_the_runners_own_group(tmp_path: Path) -> None:
    """On a unified /sys/fs/cgroup the groups go under the runner's own (delegated) group."""
    text = "30 23 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate\n"
    mountinfo, cgroup = _host(tmp_path, text)
    cgroup.write_text("0::/user.slice/runner.service\n")
    own = tmp_path / "cg" / "user.slice" / "runner.service"
    own.mkdir(parents=True)
    for name in ("cgroup.procs", "cgroup.freeze"):
        (own / name).touch()
    found = find_hierarchy("auto", mountinfo=mountinfo, cgroup=cgroup)
    assert found is not None and found.version == 2 and found.bases == {"": own}


def test_a_groups_name_is_a_random_token_and_its_join_comes_first(tmp_path: Path) -> None:
    """`kz-<16 hex>`, different each time; the join prefix names each cgroup.procs, then --."""
    mountinfo, cgroup = _host(tmp_path, HYBRID)
    hierarchy = find_hierarchy("v1", mountinfo=mountinfo, cgroup=cgroup)
    assert hierarchy is not None
    one, two = StepGroup(hierarchy, "a" * 16, None), StepGroup(hierarchy, "b" * 16, None)
    assert one.name == "kz-" + "a" * 16 and one.main != two.main
    argv = one.join_argv()
    assert argv[:2] == ["/bin/sh", "-c"] and argv[-1] == "--"
    assert sorted(argv[4:-1]) == sorted(str(f / "cgroup.procs") for f in one.folders.values())
    assert hierarchy.live == {*one.folders.values(), *two.folders.values()}
    one.remove()
    assert hierarchy.live == set(two.folders.values())


def test_a_sweep_removes_old_empty_groups_only(tmp_path: Path) -> None:
    """What a killed runner left (empty, old) goes; a new group or one still holding
    something (rmdir refused) stays."""
    mountinfo, cgroup = _host(tmp_path, HYBRID)
    hierarchy = find_hierarchy("v1", mountinfo=mountinfo, cgroup=cgroup)
    assert hierarchy is not None
    freezer = hierarchy.bases["freezer"]
    old, new, busy = freezer / "kz-old", freezer / "kz-new", freezer / "kz-busy"
    for folder in (old, new, busy):
        folder.mkdir()
    (busy / "cgroup.procs").write_text("42\n")  # a folder rmdir refuses, as a busy group
    for folder in (old, busy):
        os.utime(folder, (1_000_000_000, 1_000_000_000))
    assert hierarchy.sweep() == [old]
    assert new.is_dir() and busy.is_dir() and not old.exists()


def test_source_copies_are_alike_whoever_wrote_them(tmp_path: Path) -> None:
    """Two trees of the same content, written with different modes and times, come out with
    the same modes and times: only their content tells them apart."""
    first, second = tmp_path / "a", tmp_path / "b"
    for tree, mode, when in ((first, 0o755, 1_700_000_000), (second, 0o600, 1_600_000_000)):
        (tree / "pkg").mkdir(parents=True)
        (tree / "pkg" / "k.py").write_text("x = 1\n")
        (tree / "pkg" / "k.py").chmod(mode)
        os.utime(tree / "pkg" / "k.py", (when, when))
    copies = [tmp_path / "copy-a", tmp_path / "copy-b"]
    copy_source(first, copies[0])
    copy_source(second, copies[1])

    def seen(root: Path) -> list[tuple[str, int, int, int]]:
        return [
            (str(p.relative_to(root)), p.stat().st_mode, int(p.stat().st_mtime), p.stat().st_size)
            for p in sorted([root, *root.rglob("*")])
        ]

    assert seen(copies[0]) == seen(copies[1])
    assert int((copies[0] / "pkg" / "k.py").stat().st_mtime) == SOURCE_MTIME
    copy_source(None, tmp_path / "empty")
    assert list((tmp_path / "empty").iterdir()) == []


def test_worker_uids_are_drawn_at_random_without_reuse() -> None:
    """Each task's uids are distinct and from the range; which comes first varies."""
    backend = StubBackend()
    backend.worker_uid_base, backend.worker_uids = 5000, 32  # type: ignore[attr-defined]
    firsts: Counter[int] = Counter()
    for _ in range(200):
        uids = _uid_draw(backend)
        assert len(uids) == len(set(uids)) == MAX_WORKERS
        assert all(5000 <= uid < 5032 for uid in uids)
        firsts[uids[-1]] += 1
    assert len(firsts) > 16
