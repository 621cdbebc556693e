"""A sandboxed step the runner started and returned from at once (a judge's worker).

Where the runner has a cgroup hierarchy, the step is its cgroup: everything it started is in
it whatever namespaces it made, so stopping and resuming freeze and thaw the group, INSPECT
counts its processes and threads and reads its CPU time there (exited processes included),
and killing empties it. Without one (an unprivileged runner without delegation) the step is
the processes of its PID namespace, which it cannot leave because the seccomp filter refuses
nested namespaces.

The step's first process is started with `posix_spawn`, which puts the descriptors it should
inherit at fixed numbers (3, 4, …), so every worker sees its channel at the same descriptor.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import select
import signal
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from kz_runner.backends.cgroups import StepGroup
from kz_runner.backends.process import OutputBuffer
from kz_runner.backends.procview import cpu_ns, proc_view

__all__ = ["Child", "SandboxProcess", "end_namespace", "sandbox_init_pid", "spawn_child"]

_REAP_WAIT_S = 5.0
_STAGING = 10  # descriptors are staged above the ones they are put at, so none is overwritten
_SIGSTOP, _SIGCONT = signal.SIGSTOP.value, signal.SIGCONT.value


class Child:
    """A process started with `spawn_child`: its pid and, once waited for, its exit code."""

    def __init__(self, pid: int, stdout: int) -> None:
        self.pid = pid
        self.stdout = stdout
        self.returncode: int | None = None
        self._lock = threading.Lock()

    def wait(self) -> int:
        with self._lock:
            if self.returncode is None:
                _pid, status = os.waitpid(self.pid, 0)
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode


def spawn_child(argv: Sequence[str], env: Mapping[str, str], fds: Sequence[int]) -> Child:
    """Start `argv` in a new session with stdin from /dev/null, stdout and stderr to a new
    pipe (`Child.stdout`, ours to read) and `fds[i]` at descriptor 3 + i."""
    if len(fds) > _STAGING - 3:
        raise ValueError(f"at most {_STAGING - 3} descriptors can be put at fixed numbers")
    out_read, out_write = os.pipe()
    staged = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, _STAGING) for fd in (out_write, *fds)]
    actions: list[tuple[int, ...] | tuple[int, int, str, int, int]] = [
        (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
        (os.POSIX_SPAWN_DUP2, staged[0], 1),
        (os.POSIX_SPAWN_DUP2, staged[0], 2),
    ]
    actions += [(os.POSIX_SPAWN_DUP2, fd, 3 + i) for i, fd in enumerate(staged[1:])]
    try:
        pid = os.posix_spawnp(argv[0], list(argv), dict(env), file_actions=actions, setsid=True)
    except BaseException:
        os.close(out_read)
        raise
    finally:
        for fd in (out_write, *staged):
            os.close(fd)
    return Child(pid, out_read)


def sandbox_init_pid(info_read: int, wait_s: float = 0.0) -> int | None:
    """The host pid of the sandbox's init, from the JSON bwrap writes to its info fd (it may
    come in pieces: read until it parses, the fd ends, or `wait_s` has passed)."""
    os.set_blocking(info_read, False)
    data = b""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            chunk = os.read(info_read, 4096)
        except BlockingIOError:
            chunk = None
        if chunk:
            data += chunk
            with contextlib.suppress(ValueError):
                pid = json.loads(data).get("child-pid")
                return pid if isinstance(pid, int) and pid > 1 else None
            continue
        left = deadline - time.monotonic()
        if chunk == b"" or left <= 0:
            return None
        select.select([info_read], [], [], left)


def _gone(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[0] in ("Z", "X")


def end_namespace(info_read: int) -> None:
    """Kill the sandbox's init (the kernel then kills its whole PID namespace) and wait."""
    pid = sandbox_init_pid(info_read)
    if pid is None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + _REAP_WAIT_S
    while not _gone(pid) and time.monotonic() < deadline:
        time.sleep(0.01)


def _pid_namespace(pid: int) -> str | None:
    try:
        return str(Path(f"/proc/{pid}/ns/pid").readlink())
    except OSError:
        return None


def _started(pid: int) -> int:
    """A process's start time in clock ticks since boot (a large number once it is gone)."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[19])
    except (OSError, ValueError, IndexError):
        return 1 << 62


class SandboxProcess:
    """A step started with `SandboxBackend.spawn`; see the module docstring. Its own process
    and the sandbox's init (bubblewrap's two) are the runner's, not the step's: they are left
    out of what it is made of."""

    def __init__(
        self, child: Child, info_read: int, max_output: int, group: StepGroup | None = None
    ) -> None:
        self.process = child
        self.info_read = info_read
        self.group = group
        self.frozen = False
        self.killed = False  # set before its processes are killed and its group removed
        self.init = sandbox_init_pid(info_read, wait_s=10.0)
        self.namespace = _pid_namespace(self.init) if self.init else None
        self.helpers = {child.pid, *([self.init] if self.init else [])}
        self.buffer = OutputBuffer(max_output)
        self.reader = threading.Thread(target=self._pump, daemon=True)
        self.reader.start()

    def _pump(self) -> None:
        fd = self.process.stdout
        with contextlib.suppress(OSError):
            for chunk in iter(lambda: os.read(fd, 1 << 16), b""):
                if not self.buffer.add(chunk):
                    self.kill()
                    return

    def members(self) -> list[int]:
        """The step's processes, oldest first (its serving process leads)."""
        if self.group is not None:
            found = [pid for pid in self.group.pids() if pid not in self.helpers]
        elif self.namespace is None:
            return []
        else:
            found = [
                int(entry.name)
                for entry in os.scandir("/proc")
                if entry.name.isdigit()
                and int(entry.name) not in self.helpers
                and _pid_namespace(int(entry.name)) == self.namespace
            ]
        return sorted(found, key=lambda pid: (_started(pid), pid))

    def inspect(self) -> dict[str, int]:
        """Processes, threads and CPU time of the step, read by the host: from its cgroup
        (bubblewrap's two processes left out), `main_cpu_ns` its oldest process's main thread.
        A step already killed (its output over the limit) has nothing left to count."""
        try:
            return self._inspect()
        except OSError:
            if not self.killed:
                raise
            return {"processes": 0, "threads": 0, "cpu_ns": 0, "main_cpu_ns": 0}

    def _inspect(self) -> dict[str, int]:
        members = self.members()
        if self.group is None:
            return proc_view(members)
        main_cpu_ns = 0
        if members:
            with contextlib.suppress(OSError):
                main_cpu_ns = cpu_ns(f"/proc/{members[0]}/task/{members[0]}")
        return {
            "processes": len(members),
            "threads": max(self.group.threads() - len(self.helpers), len(members)),
            "cpu_ns": self.group.cpu_ns(),
            "main_cpu_ns": main_cpu_ns,
        }

    def signal(self, signum: int) -> None:
        """STOP and CONT freeze and thaw the cgroup (where there is one); any other signal, or
        without a cgroup, goes to every process of the step. A step already killed (its output
        over the limit, its group gone) has nothing left to signal."""
        try:
            self._signal(signum)
        except OSError:
            if not self.killed:
                raise

    def _signal(self, signum: int) -> None:
        if self.group is not None and signum in (_SIGSTOP, _SIGCONT):
            if signum == _SIGSTOP:
                self.group.freeze()
            else:
                self.group.thaw()
            self.frozen = signum == _SIGSTOP
            return
        for pid in self.members():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signum)

    def kill(self) -> None:
        """Kill every process of the step and wait until none is left (then its cgroup goes)."""
        self.killed = True
        if self.group is not None:
            self.group.kill()
        elif self.init is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.init, signal.SIGKILL)
            deadline = time.monotonic() + _REAP_WAIT_S
            while not _gone(self.init) and time.monotonic() < deadline:
                time.sleep(0.005)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        if self.group is not None:
            self.group.remove()

    def output(self) -> bytes:
        self.kill()
        if threading.current_thread() is not self.reader:
            self.reader.join(5.0)
        for fd in (self.info_read, self.process.stdout):
            with contextlib.suppress(OSError):
                os.close(fd)
        return self.buffer.finish(None)
