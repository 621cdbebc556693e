"""A worker is one unit no descendant leaves: every way out attempted through the real sandbox.

Each step really attempts its family (`kz_testing.containment`, printing `TRIED <family>`) in
a worker started as a judge's are (`SandboxBackend.spawn`), under each containment this host
offers: cgroup v1 (freezer, cpuacct, pids), cgroup v2 (the hybrid `unified` mount here) and
the PID namespace alone. The seccomp filter refuses every nested namespace; and where a
namespace is made anyway (the filter switched off, which only tests can), the cgroup still
holds the helper: it is frozen with its worker, counted by INSPECT and killed at the end.
After every test no process of the workers' uids is left on the host, and no cgroup.
"""

from __future__ import annotations

import re
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kz_runner.backends import SandboxBackend
from kz_runner.backends.base import StepSpec
from kz_runner.backends.cgroups import find_hierarchy
from kz_runner.backends.sandbox_process import SandboxProcess
from kz_runner.limits import MIB, StepLimits
from kz_testing.containment import FAMILIES, attempt, counter_moves, survivors

pytestmark = pytest.mark.integration

EPERM, EINVAL, ENOSYS = 1, 22, 38
MODES = [m for m in ("v1", "v2") if find_hierarchy(m) is not None] + ["none"]
# What each family gets: (with the filter, without it).
REFUSED = {"setns": (EPERM, EINVAL), "clone3": (ENOSYS, EINVAL), "unshare_fork": (EPERM, 0)}


def _lane(worker_id: str) -> int:
    return int(worker_id.removeprefix("gw")) if worker_id.startswith("gw") else 0


def _backend(mode: str, lane: int, *, refuse: bool) -> SandboxBackend:
    """A sandbox with uids of its own (apart from the other suites'), so survivors are ours."""
    base = (61000 if refuse else 60000) - 100 * lane
    backend = SandboxBackend(
        sandbox_uid=base + 90, sandbox_gid=base + 90, worker_uid_base=base, worker_uids=32,
        cgroups=mode, refuse_namespaces=refuse,
    )  # fmt: skip
    backend.check_available()
    return backend


@pytest.fixture(params=MODES)
def contained(request: pytest.FixtureRequest, worker_id: str) -> Iterator[SandboxBackend]:
    backend = _backend(request.param, _lane(worker_id), refuse=True)
    yield backend
    _nothing_left(backend)


@pytest.fixture(params=[m for m in MODES if m != "none"])
def escapable(request: pytest.FixtureRequest, worker_id: str) -> Iterator[SandboxBackend]:
    """Without the filter: only a cgroup can hold what leaves the PID namespace."""
    backend = _backend(request.param, _lane(worker_id), refuse=False)
    yield backend
    _nothing_left(backend)


def _nothing_left(backend: SandboxBackend) -> None:
    uids = range(backend.worker_uid_base, backend.worker_uid_base + backend.worker_uids)
    deadline = time.monotonic() + 5
    while survivors(uids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert survivors(uids) == []
    if backend.hierarchy is not None:
        assert backend.hierarchy.live == set()


def _start(backend: SandboxBackend, tmp_path: Path, family: str) -> tuple[SandboxProcess, Path]:
    workdir = tmp_path / f"worker-{family}"
    workdir.mkdir(mode=0o755)
    counter = workdir / "count"
    step = StepSpec(
        argv=(backend.python, "-I", "-c", attempt(family, str(counter))),
        workdir=workdir, env={"LANG": "C.UTF-8"}, timeout_s=60,
        limits=StepLimits(memory_bytes=1024 * MIB), uid=backend.worker_uid_base + 7,
    )  # fmt: skip
    worker = backend.spawn(step)
    deadline = time.monotonic() + 20
    while b"READY" not in worker.buffer.data and time.monotonic() < deadline:
        time.sleep(0.02)
    assert b"READY" in worker.buffer.data, bytes(worker.buffer.data).decode()
    return worker, counter


def _tried(output: bytes, family: str) -> tuple[int, int]:
    found = re.search(rf"TRIED {family} (-?\d+) (\d+)".encode(), output)
    assert found, output.decode()
    return int(found[1]), int(found[2])


def _held(worker: SandboxProcess, counter: Path, processes: int) -> None:
    """The helper runs, is counted, stops with its worker and resumes with it."""
    assert counter_moves(counter), "the helper never ran"
    assert worker.inspect()["processes"] == processes
    worker.signal(signal.SIGSTOP)
    time.sleep(0.05)  # a write in flight lands
    assert not counter_moves(counter), "the helper ran while its worker was stopped"
    worker.signal(signal.SIGCONT)
    assert counter_moves(counter)


@pytest.mark.parametrize("family", FAMILIES)
def test_each_family_is_refused_or_held(
    contained: SandboxBackend, tmp_path: Path, family: str
) -> None:
    """With the filter: no namespace is made (EPERM, or ENOSYS for clone3), and what a worker
    forks (a helper, a setsid daemon) is stopped, counted and killed with it."""
    worker, counter = _start(contained, tmp_path, family)
    output = bytes(worker.buffer.data)
    ret, err = _tried(output, family)
    assert b"SECCOMP 2" in output
    if family in REFUSED:
        assert (ret, err) == (-1, REFUSED[family][0])
    elif family == "clone_newuser":
        assert (ret, err) == (-1, EPERM)
    if family in ("unshare_fork", "daemon"):
        _held(worker, counter, processes=2)
    helpers = worker.members()
    worker.output()
    assert not counter_moves(counter)
    assert all(not Path(f"/proc/{pid}").exists() for pid in helpers)


@pytest.mark.parametrize("family", ["unshare_fork", "clone_newuser", "setns", "clone3"])
def test_a_namespace_made_anyway_stays_in_the_cgroup(
    escapable: SandboxBackend, tmp_path: Path, family: str
) -> None:
    """Without the filter the kernel lets an unprivileged worker make a user and PID
    namespace (so the control is real); its helper, outside the worker's PID namespace, is
    still frozen, counted and killed through the worker's cgroup."""
    worker, counter = _start(escapable, tmp_path, family)
    output = bytes(worker.buffer.data)
    ret, err = _tried(output, family)
    assert b"SECCOMP 0" in output
    if family in REFUSED:
        assert err == REFUSED[family][1] and (ret == -1) == (err != 0)
    if family in ("unshare_fork", "clone_newuser"):
        assert ret >= 0
        members = worker.members()
        spaces = {Path(f"/proc/{pid}/ns/pid").readlink() for pid in members}
        if family == "unshare_fork":
            assert len(spaces) == 2, "the helper did not leave the worker's PID namespace"
        _held(worker, counter, processes=2)
    worker.output()
    assert not counter_moves(counter)


def test_inspect_counts_cpu_of_processes_that_have_exited(
    contained: SandboxBackend, tmp_path: Path
) -> None:
    """A cgroup's CPU time keeps what an exited child used; the PID namespace method cannot."""
    if contained.hierarchy is None:
        pytest.skip("the PID namespace method reads living processes only")
    program = (
        "import os, time\n"
        "if os.fork() == 0:\n"
        "    end = time.process_time() + 0.3\n"
        "    while time.process_time() < end: pass\n"
        "    os._exit(0)\n"
        "os.wait()\nprint('TRIED exited_child 0 0', flush=True)\nprint('READY', flush=True)\n"
        "time.sleep(60)\n"
    )
    workdir = tmp_path / "w"
    workdir.mkdir()
    step = StepSpec(
        argv=(contained.python, "-I", "-c", program), workdir=workdir, env={}, timeout_s=60,
        uid=contained.worker_uid_base + 3,
    )  # fmt: skip
    worker = contained.spawn(step)
    deadline = time.monotonic() + 20
    while b"READY" not in worker.buffer.data and time.monotonic() < deadline:
        time.sleep(0.02)
    seen = worker.inspect()
    worker.output()
    _tried(bytes(worker.buffer.data), "exited_child")
    assert seen["processes"] == 1
    assert seen["cpu_ns"] - seen["main_cpu_ns"] >= 250_000_000


def test_a_worker_killed_for_its_output_is_gone_for_every_later_operation(
    contained: SandboxBackend, tmp_path: Path
) -> None:
    """A worker whose output passes its limit is killed by the runner while the judge may be
    about to stop, resume or count it: each of those then finds nothing left, never an error
    that would end the judge (the candidate's flood is the candidate's failure)."""
    workdir = tmp_path / "worker-flood"
    workdir.mkdir(mode=0o755)
    flood = "import time\nprint('x' * 100000, flush=True)\ntime.sleep(60)"
    step = StepSpec(
        argv=(contained.python, "-I", "-c", flood),
        workdir=workdir, env={"LANG": "C.UTF-8"}, timeout_s=60,
        limits=StepLimits(memory_bytes=1024 * MIB, max_output_bytes=4096),
        uid=contained.worker_uid_base + 7,
    )  # fmt: skip
    worker = contained.spawn(step)
    deadline = time.monotonic() + 20
    while not worker.killed and time.monotonic() < deadline:
        time.sleep(0.02)
    assert worker.killed
    worker.reader.join(10)
    worker.signal(signal.SIGSTOP)
    worker.signal(signal.SIGCONT)
    assert worker.inspect()["processes"] == 0
    worker.output()
