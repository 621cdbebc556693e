"""The runner's side of a judge: its control line, the workers it starts, its result channel.

The judge (a board's `benchmark.py` on `kz_harness.judge`) runs in one sandbox; every worker
it asks for runs in another, under its own uid, started by this supervisor in the task's
backend. The judge gets two inherited descriptors: the control socket (`KZ_CONTROL_FD`) and
the write end of the result pipe (`KZ_RESULT_FD`). A worker gets one socket end, connected to
the judge only; its other end travels to the judge over the control socket. So no worker can
reach the runner, the result channel or another worker, and none sees the judge's files.

Workers a judge will surely ask for (`prestart`) are started with the judge, so their start
overlaps its own.

Nothing a worker can observe names the implementation it runs: its uid is drawn at random,
per task and without reuse, from the backend's range; its `src/` is a copy made at its start,
with modes, owner and times made alike (`copy_source`), in a folder named by a random token;
its paths, environment and channel descriptor (3) are those of every other worker.

When the judge's step has ended, `finish` kills every worker's sandbox (orphans included:
each is its own cgroup, or PID namespace) and only then reads the result.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import secrets
import socket
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kz_events.errors import KzError
from kz_harness.channel import Channel, ChannelClosed, Op, decode_json
from kz_harness.errors import HarnessError
from kz_runner.backends.base import Backend, BackendUnavailable, Bind, Spawned, StepSpec
from kz_runner.limits import StepLimits
from kz_runner.workdir import copy_source

__all__ = [
    "HARNESS_INSIDE",
    "WORKER_UID_BASE",
    "JudgeResult",
    "Supervisor",
    "worker_environment",
]

log = logging.getLogger("kz.runner")

HARNESS_INSIDE = "/kz/harness"
WORK_INSIDE = "/kz/work"
HOME_INSIDE = "/home/kz"
WORKER_UID_BASE = 65000  # workers run as uids drawn from 65000 + [0, 32); the judge as the
WORKER_UIDS = 32  # backend's own uid
MAX_WORKERS = 8
CHANNEL_FD = 3  # where every worker finds its channel (`Backend.spawn` puts pass_fds from 3)
_PASSED_THROUGH = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
_SIGNALS = {Op.STOP: 19, Op.CONT: 18}  # SIGSTOP, SIGCONT


def worker_environment() -> dict[str, str]:
    """A worker's whole environment, the same for each: its channel, private HOME and TMPDIR,
    one BLAS thread."""
    env = {
        "KZ_CHANNEL_FD": str(CHANNEL_FD),
        "HOME": HOME_INSIDE,
        "TMPDIR": "/tmp",  # noqa: S108 - the sandbox's private tmpfs
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }
    env.update({k: os.environ[k] for k in _PASSED_THROUGH if k in os.environ})
    return env


def _uid_draw(backend: Backend) -> list[int]:
    """The uids this task's workers take, in a random order (popped from the end): a sample
    of the backend's range, so no uid is used twice in a task and none tells a start order."""
    base = int(getattr(backend, "worker_uid_base", WORKER_UID_BASE))
    count = int(getattr(backend, "worker_uids", WORKER_UIDS))
    return random.SystemRandom().sample(range(base, base + count), min(count, MAX_WORKERS))


@dataclass(slots=True)
class JudgeResult:
    """What the judge sent (None: nothing) and what each worker printed."""

    document: bytes | None
    worker_logs: list[tuple[str, bytes]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


class Supervisor:
    """Serves one judge; see the module docstring. Use `judge_fds`, then `finish()`."""

    def __init__(
        self,
        backend: Backend,
        *,
        implementations: Mapping[str, Path],
        scratch_root: Path,
        harness: Path,
        limits: StepLimits,
        timeout_s: float,
        max_result_bytes: int,
        prestart: Sequence[str] = (),
    ) -> None:
        self.backend = backend
        self.implementations = dict(implementations)
        self.scratch_root = scratch_root
        self.harness = harness
        self.limits = limits
        self.timeout_s = timeout_s
        self.max_result_bytes = max_result_bytes
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.control = Channel(ours)
        self.judge_control = theirs
        self.result_read, self.result_write = os.pipe()
        self.workers: list[tuple[str, Spawned | None]] = []
        self._ready: dict[str, list[int]] = {}
        self._ends: dict[int, socket.socket] = {}
        self.problems: list[str] = []
        self.document = bytearray()
        self._lock = threading.Lock()
        self._served = threading.Thread(target=self._serve, daemon=True)
        self._read = threading.Thread(target=self._read_result, daemon=True)
        self.prestart = tuple(prestart)
        self._uids = _uid_draw(backend)
        self._served.start()
        self._read.start()

    @property
    def judge_fds(self) -> tuple[int, int]:
        """(control, result) descriptors the judge's step inherits."""
        return self.judge_control.fileno(), self.result_write

    def judge_environment(self) -> dict[str, str]:
        control, result = self.judge_fds
        return {"KZ_CONTROL_FD": str(control), "KZ_RESULT_FD": str(result)}

    # --- serving the judge -------------------------------------------------------------

    def _serve(self) -> None:
        # Workers are started from this thread, which lives as long as the judge's control
        # line: bubblewrap's --die-with-parent follows the thread that started it.
        self._prestart(self.prestart)
        while True:
            try:
                op, payload, fds = self.control.receive()
            except ChannelClosed:
                return
            for fd in fds:
                os.close(fd)
            try:
                self._answer(op, decode_json(payload))
            except (HarnessError, KzError, KeyError, ValueError, OSError) as exc:
                # KzError: a worker's cgroup that would not freeze or empty in time.
                with contextlib.suppress(ChannelClosed):
                    self.control.send_json(Op.ERROR, {"message": str(exc)})

    def _answer(self, op: int, request: dict[str, Any]) -> None:
        if op == Op.SPAWN:
            self._spawn(str(request["implementation"]))
            return
        worker = self._worker(request)
        if op == Op.INSPECT:
            self.control.send_json(Op.OK, worker.inspect())
        elif op in _SIGNALS:
            worker.signal(_SIGNALS[op])
            self.control.send_json(Op.OK, {})
        elif op == Op.KILL:
            worker.kill()
            self.control.send_json(Op.OK, {})
        else:
            raise HarnessError(f"unknown control operation {op}")

    def _worker(self, request: dict[str, Any]) -> Spawned:
        number = int(request["worker"])
        with self._lock:
            handed = 0 <= number < len(self.workers) and number not in self._ends
            worker = self.workers[number][1] if handed else None
        if worker is None:
            raise HarnessError(f"no worker {number}")
        return worker

    def _spawn(self, implementation: str) -> None:
        """Hand the judge a worker of `implementation`: one started ahead if there is one."""
        if implementation != "calibrate" and implementation not in self.implementations:
            known = sorted({"calibrate", *self.implementations})
            raise HarnessError(f"no implementation {implementation!r}; known: {known}")
        with self._lock:
            ready = self._ready.get(implementation, [])
            number = ready.pop(0) if ready else None
        if number is None:
            number = self._start(implementation)
        end = self._ends.pop(number)
        try:
            self.control.send_json(Op.OK, {"worker": number}, [end.fileno()])
        finally:
            end.close()

    def _prestart(self, implementations: Sequence[str]) -> None:
        """Start workers before the judge asks, so their start overlaps the judge's own."""
        for implementation in implementations:
            try:
                number = self._start(implementation)
            except BackendUnavailable:
                return  # a backend without workers (the stub) answers for the judge itself
            except (HarnessError, KzError, OSError) as exc:
                log.warning("a %s worker could not be started ahead: %s", implementation, exc)
                continue
            with self._lock:
                self._ready.setdefault(implementation, []).append(number)

    def _start(self, implementation: str) -> int:
        """Start a worker in the backend; its number (its end of the channel in `_ends`)."""
        with self._lock:
            if len(self.workers) >= MAX_WORKERS or not self._uids:
                raise HarnessError(f"a judge may start at most {MAX_WORKERS} workers")
            number = len(self.workers)
            self.workers.append((implementation, None))
            uid = self._uids.pop()
        folder = self.scratch_root / secrets.token_hex(8)
        folder.mkdir(mode=0o755)
        scratch, src = folder / "scratch", folder / "src"
        scratch.mkdir(mode=0o755)
        copy_source(self.implementations.get(implementation), src)
        binds = [
            Bind(scratch, f"{WORK_INSIDE}/scratch", writable=True),
            Bind(self.harness, HARNESS_INSIDE),
            Bind(src, f"{WORK_INSIDE}/src"),
        ]
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            step = StepSpec(
                argv=(
                    self.backend.python,
                    "-I",
                    f"{HARNESS_INSIDE}/kz_harness/launch.py",
                    "worker",
                ),
                workdir=scratch,
                env=worker_environment(),
                timeout_s=self.timeout_s,
                limits=self.limits,
                binds=tuple(binds),
                tmpfs=(HOME_INSIDE,),
                cwd=WORK_INSIDE,
                pass_fds=(theirs.fileno(),),
                uid=uid,
                devices=True,  # the candidate's calls run on the runner's GPUs, if any
            )
            spawned = self.backend.spawn(step)
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        with self._lock:
            self.workers[number] = (implementation, spawned)
        # A backend that cannot pass the descriptor (a container) hands over its own
        # connection to the worker instead.
        handed: socket.socket | None = getattr(spawned, "channel", None)
        if handed is not None:
            ours.close()
            ours = socket.socket(fileno=os.dup(handed.fileno()))
        self._ends[number] = ours
        return number

    def _read_result(self) -> None:
        while True:
            chunk = os.read(self.result_read, 1 << 16)
            if not chunk:
                return
            if len(self.document) + len(chunk) > self.max_result_bytes:
                self.problems.append(f"result document is over {self.max_result_bytes} bytes")
                self.document.clear()
                while os.read(self.result_read, 1 << 16):
                    pass
                return
            self.document += chunk

    # --- the end -------------------------------------------------------------------------

    def pids(self) -> tuple[set[int], int]:
        """Host pids of every process of the task's workers now, and how many workers."""
        with self._lock:
            workers = [worker for _name, worker in self.workers if worker is not None]
        return {pid for worker in workers for pid in worker.members()}, len(workers)

    def finish(self) -> JudgeResult:
        """After the judge's step: kill every worker, then hand over the result."""
        self.judge_control.close()
        os.close(self.result_write)
        self._served.join(5.0)
        with self._lock:
            workers = [(name, worker) for name, worker in self.workers if worker is not None]
            ends, self._ends = list(self._ends.values()), {}
        for end in ends:
            end.close()
        logs = [(name, worker.output()) for name, worker in workers]  # output() kills first
        self._served.join(5.0)
        self._read.join(5.0)
        self.control.close()
        os.close(self.result_read)
        too_big = any("over" in p for p in self.problems)
        document = None if too_big or not self.document else bytes(self.document)
        return JudgeResult(document, logs, list(self.problems))
