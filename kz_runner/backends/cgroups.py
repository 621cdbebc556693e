"""One cgroup per sandboxed step: what a step is made of, whatever namespaces it makes.

A step joins its own group before any of its code runs (`StepGroup.join_argv`: a shell that
writes its own pid into the group, then execs the sandbox), and every descendant stays in it.
So stopping, counting, timing and killing act on the group, never on a process list:

- cgroup v2 (`cgroup.freeze`, `cgroup.events`, `cgroup.kill`, `cpu.stat`), a unified
  `/sys/fs/cgroup` delegated to the runner or owned by root, or the hybrid `unified` mount;
- cgroup v1 (`freezer` and `cpuacct`, with `pids` where mounted), writable by root.

Groups are named `kz-<random token>` under the runner's own cgroup: a name says nothing of
the step, and inside the sandbox's cgroup namespace the step sees its group as `/`.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import signal
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from kz_events.errors import KzError

__all__ = [
    "JOIN_SCRIPT",
    "MODES",
    "ContainmentError",
    "Hierarchy",
    "StepGroup",
    "find_hierarchy",
    "own_cgroups",
    "parse_mounts",
]

MODES = ("auto", "v1", "v2", "none")
_V1_NEEDED = ("freezer", "cpuacct")
_WAIT_S = 10.0
_SWEEP_AGE_S = 600.0
_V1_CPU_SHARES = 262144  # the most v1 allows: 256 times a process of nice 0
_V2_CPU_WEIGHT = 10000  # the most v2 allows: 100 times the default
# The step's first process: join every group (its pid into each cgroup.procs), then exec the
# sandbox, so no process of the step ever runs outside them. Exit 125 when a join fails.
JOIN_SCRIPT = 'while [ "$1" != -- ]; do echo $$ > "$1" || exit 125; shift; done; shift; exec "$@"'


class ContainmentError(KzError):
    """A step's cgroup could not be made, frozen, emptied or removed."""

    code = "containment_failed"


@dataclass(frozen=True, slots=True)
class Mount:
    """A cgroup filesystem mounted at `point`, showing the hierarchy from `root` down."""

    point: Path
    root: str
    version: int
    controllers: frozenset[str]


def parse_mounts(mountinfo: str) -> list[Mount]:
    """The cgroup mounts in a /proc/<pid>/mountinfo text."""
    found = []
    for line in mountinfo.splitlines():
        ours, _, theirs = line.partition(" - ")
        fields, tail = ours.split(), theirs.split()
        if len(fields) < 5 or len(tail) < 3 or tail[0] not in ("cgroup", "cgroup2"):
            continue
        options = frozenset(tail[2].split(","))
        version = 2 if tail[0] == "cgroup2" else 1
        controllers = options - {"rw", "ro", "relatime", "noatime", "nosuid", "nodev", "noexec"}
        point = Path(fields[4].replace("\\040", " "))
        found.append(Mount(point, fields[3], version, controllers if version == 1 else frozenset()))
    return found


def own_cgroups(text: str) -> dict[str, str]:
    """A /proc/<pid>/cgroup text as {controller: path}; the v2 hierarchy's key is ""."""
    groups: dict[str, str] = {}
    for line in text.splitlines():
        _number, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            groups[controller] = path
    return groups


def _base(mount: Mount, path: str) -> Path:
    """The folder of cgroup `path` in `mount` (whose root may be a sub-group)."""
    relative = Path(path).relative_to(mount.root) if mount.root != "/" else Path(path.lstrip("/"))
    return mount.point / str(relative).lstrip("/")


def _writable(folder: Path) -> bool:
    return os.access(folder, os.W_OK | os.X_OK) and os.access(folder / "cgroup.procs", os.W_OK)


@dataclass(slots=True)
class Hierarchy:
    """Where a runner makes its steps' groups: v1 (one folder per controller) or v2 (one)."""

    version: int
    bases: Mapping[str, Path]
    live: set[Path] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def describe(self) -> str:
        folders = ", ".join(str(p) for p in self.bases.values())
        return f"cgroup v{self.version} ({folders})"

    def sweep(self, older_than_s: float = _SWEEP_AGE_S) -> list[Path]:
        """Remove the empty `kz-*` groups a runner killed mid-task left (the kernel refuses to
        remove a group that still holds a process); ones younger than `older_than_s` are left
        alone, as another runner may be about to join its new group. The removed folders."""
        removed = []
        cutoff = time.time() - older_than_s
        for base in self.bases.values():
            for folder in base.glob("kz-*"):
                with contextlib.suppress(OSError):
                    if folder.is_dir() and folder.stat().st_mtime < cutoff:
                        folder.rmdir()
                        removed.append(folder)
        return removed

    def group(self, *, max_tasks: int | None = None) -> StepGroup:
        """A new, empty group for one step (`max_tasks`: its pids.max, where there is one)."""
        return StepGroup(self, secrets.token_hex(8), max_tasks)


def _v2(mount: Mount, own: Mapping[str, str]) -> Hierarchy | None:
    base = _base(mount, own.get("", "/"))
    # Every group but the root has cgroup.freeze (Linux 5.2 and later).
    freezable = base == mount.point or (base / "cgroup.freeze").exists()
    return Hierarchy(2, {"": base}) if freezable and _writable(base) else None


def _v1(mounts: list[Mount], own: Mapping[str, str]) -> Hierarchy | None:
    bases: dict[str, Path] = {}
    for controller in (*_V1_NEEDED, "pids", "cpu"):
        mount = next((m for m in mounts if controller in m.controllers), None)
        if mount is not None and _writable(_base(mount, own.get(controller, "/"))):
            bases[controller] = _base(mount, own.get(controller, "/"))
    return Hierarchy(1, bases) if all(c in bases for c in _V1_NEEDED) else None


def find_hierarchy(
    mode: str = "auto",
    *,
    mountinfo: Path = Path("/proc/self/mountinfo"),
    cgroup: Path = Path("/proc/self/cgroup"),
) -> Hierarchy | None:
    """The writable hierarchy to contain steps in, by `mode` (auto: a unified v2
    /sys/fs/cgroup, else v1's freezer and cpuacct, else a hybrid v2 mount); None for "none"
    or where nothing is writable (containment is then by PID namespace only)."""
    if mode not in MODES:
        raise ContainmentError(f"cgroups: expected one of {', '.join(MODES)}, got {mode!r}")
    if mode == "none":
        return None
    mounts = parse_mounts(mountinfo.read_text())
    own = own_cgroups(cgroup.read_text())
    unified = [m for m in mounts if m.version == 2]
    whole = [m for m in unified if m.point == Path("/sys/fs/cgroup")]
    candidates: list[Hierarchy | None] = []
    if mode in ("auto", "v2"):
        candidates += [_v2(m, own) for m in whole]
    if mode in ("auto", "v1"):
        candidates.append(_v1(mounts, own))
    if mode in ("auto", "v2"):
        candidates += [_v2(m, own) for m in unified if m not in whole]
    return next((h for h in candidates if h is not None), None)


def _read(path: Path) -> str:
    return path.read_text()


def _write(path: Path, text: str) -> None:
    with path.open("w") as out:
        out.write(text)


class StepGroup:
    """One step's cgroup (a folder per v1 controller, or one v2 folder); see the module."""

    def __init__(self, hierarchy: Hierarchy, token: str, max_tasks: int | None) -> None:
        self.hierarchy = hierarchy
        self.name = f"kz-{token}"
        self.folders = {key: base / self.name for key, base in hierarchy.bases.items()}
        self.main = self.folders["" if hierarchy.version == 2 else "freezer"]
        try:
            for folder in self.folders.values():
                folder.mkdir(mode=0o755)
                with hierarchy.lock:
                    hierarchy.live.add(folder)
            if max_tasks is not None:
                self._limit_tasks(max_tasks)
            self._weigh()
        except OSError as exc:
            self.remove()
            raise ContainmentError(f"cannot make the step's cgroup {self.main}: {exc}") from exc

    def _limit_tasks(self, max_tasks: int) -> None:
        pids = self.folders.get("pids", self.main) / "pids.max"
        if pids.exists():
            _write(pids, str(max_tasks))

    def _weigh(self) -> None:
        """The step's CPU weight over everything else on the host: a measurement shares its
        CPU with nothing it can avoid sharing it with."""
        if self.hierarchy.version == 1:
            shares = self.folders.get("cpu", self.main) / "cpu.shares"
            if shares.exists():
                _write(shares, str(_V1_CPU_SHARES))
        elif (self.main / "cpu.weight").exists():
            _write(self.main / "cpu.weight", str(_V2_CPU_WEIGHT))

    def join_argv(self) -> list[str]:
        """The command prefix that puts a step in this group before it runs anything."""
        procs = [str(folder / "cgroup.procs") for folder in self.folders.values()]
        return ["/bin/sh", "-c", JOIN_SCRIPT, "kz-join", *procs, "--"]

    # --- what the group holds -------------------------------------------------------------

    def pids(self) -> list[int]:
        """Host pids of the group's processes now."""
        return [int(line) for line in _read(self.main / "cgroup.procs").split()]

    def threads(self) -> int:
        name = "cgroup.threads" if self.hierarchy.version == 2 else "tasks"
        return len(_read(self.main / name).split())

    def cpu_ns(self) -> int:
        """CPU time of everything the group ever ran, exited processes included."""
        if self.hierarchy.version == 1:
            return int(_read(self.folders["cpuacct"] / "cpuacct.usage"))
        for line in _read(self.main / "cpu.stat").splitlines():
            key, _, value = line.partition(" ")
            if key == "usage_usec":
                return int(value) * 1000
        raise ContainmentError(f"{self.main}/cpu.stat has no usage_usec")

    # --- stopping, resuming, ending -------------------------------------------------------

    def freeze(self) -> None:
        """Stop every process of the group, and return once all are stopped."""
        if self.hierarchy.version == 2:
            _write(self.main / "cgroup.freeze", "1")
            self._wait(lambda: "frozen 1" in _read(self.main / "cgroup.events"), "frozen")
            return
        state = self.main / "freezer.state"

        def frozen() -> bool:
            if _read(state).strip() == "FROZEN":
                return True
            _write(state, "FROZEN")  # a task in an uninterruptible wait makes a retry needed
            return False

        _write(state, "FROZEN")
        self._wait(frozen, "frozen")

    def thaw(self) -> None:
        if self.hierarchy.version == 2:
            _write(self.main / "cgroup.freeze", "0")
        else:
            _write(self.main / "freezer.state", "THAWED")

    def kill(self) -> None:
        """SIGKILL everything in the group; return once it is empty."""
        if not self.main.exists():
            return
        if self.hierarchy.version == 2 and (self.main / "cgroup.kill").exists():
            _write(self.main / "cgroup.kill", "1")
            self._wait(lambda: not self.pids(), "empty")
            return
        self._wait(self._kill_round, "empty")

    def _kill_round(self) -> bool:
        """Freeze (no fork can race the listing), SIGKILL every process, thaw: True once
        nothing is left."""
        with contextlib.suppress(ContainmentError):
            self.freeze()
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.thaw()
        time.sleep(0.001)
        return not self.pids()

    def remove(self) -> None:
        """Remove the (empty) group's folders; a folder still busy is retried for a while."""
        for folder in self.folders.values():
            self._wait(partial(_removed, folder), "removed")
            with self.hierarchy.lock:
                self.hierarchy.live.discard(folder)

    def _wait(self, done: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + _WAIT_S
        pause = 0.0002
        while not done():
            if time.monotonic() > deadline:
                raise ContainmentError(f"the step's cgroup {self.main} was not {what} in time")
            time.sleep(pause)
            pause = min(pause * 2, 0.02)


def _removed(folder: Path) -> bool:
    try:
        folder.rmdir()
    except FileNotFoundError:
        return True
    except OSError as exc:
        if exc.errno == errno.EBUSY:
            return False
        raise ContainmentError(f"cannot remove the step's cgroup {folder}: {exc}") from exc
    return True
