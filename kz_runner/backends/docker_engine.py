"""The GPU-host backend: each step in a fresh container of the configured image.

The container has no network, a read-only root, a tmpfs /tmp, the work dir bound
read-write and the read-only paths bound read-only, memory (no swap), pids, CPU and
file-size limits, no capabilities, a non-root user, GPUs through a device request, and
is removed after the step whatever happened.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from kz_runner.backends.base import (
    KILLED_OUTPUT_LIMIT,
    BackendUnavailable,
    Bind,
    Cancelled,
    StepResult,
    StepSpec,
)
from kz_runner.backends.fdbridge import INSIDE as FD_INSIDE
from kz_runner.backends.fdbridge import FdBridge
from kz_runner.backends.process import POLL_S, OutputBuffer, why_stop
from kz_runner.backends.procview import proc_view

__all__ = ["DockerBackend", "DockerProcess", "unconfined"]

_TMPFS = "rw,nosuid,nodev,size=1g,mode=1777"
_LOG_JOIN_S = 5.0
_CONNECT_S = 60.0  # a worker's container starts and connects to its channel within this
_SIGSTOP, _SIGCONT = 19, 18
_FREEZE_S = 10.0  # a pause or resume the runtime keeps failing is an error after this


def unconfined(security_options: list[str]) -> str | None:
    """Why containers of an engine with these `SecurityOptions` could make namespaces (None:
    they cannot). The engine's default seccomp profile refuses `unshare`, `setns`, `clone`
    with namespace flags and `clone3` to a container without CAP_SYS_ADMIN, and every step
    drops all capabilities; an engine without seccomp, or with `unconfined` as its default
    profile, would let a worker make namespaces."""
    seccomp = [o for o in security_options if "name=seccomp" in o.split(",")]
    if not seccomp:
        return "seccomp is off (rebuild or configure the engine with seccomp)"
    if any("profile=unconfined" in o.split(",") for o in seccomp):
        return "its default seccomp profile is unconfined (drop --seccomp-profile=unconfined)"
    return None


def _device_requests(gpus: str | None) -> list[Any]:
    from docker.types import DeviceRequest

    if not gpus or gpus == "none":
        return []
    if gpus == "all":
        return [DeviceRequest(count=-1, capabilities=[["gpu"]])]
    return [DeviceRequest(device_ids=gpus.split(","), capabilities=[["gpu"]])]


class DockerBackend:
    """Runs steps in containers through the Docker SDK; see the module docstring."""

    name = "docker"

    def __init__(
        self,
        *,
        image: str,
        client: Any = None,
        base_url: str | None = None,
        gpus: str | None = "all",
        user: str | None = None,
        cpus: float | None = None,
        python: str = "python3",
    ) -> None:
        self.image = image
        self.gpus = gpus
        self.cpus = cpus
        self.python = python
        self.user = user or ("65534:65534" if os.geteuid() == 0 else f"{os.getuid()}:{os.getgid()}")
        self._client = client
        self._base_url = base_url

    @property
    def client(self) -> Any:
        if self._client is None:
            import docker

            try:
                self._client = (
                    docker.DockerClient(base_url=self._base_url)
                    if self._base_url
                    else docker.from_env()
                )
            except docker.errors.DockerException as exc:
                raise BackendUnavailable(f"docker engine not reachable: {exc}") from exc
        return self._client

    def check_available(self) -> None:
        """Fail with one line when the engine does not answer, or would run containers without
        its seccomp profile (which refuses nested namespaces: see `confined`)."""
        import docker

        try:
            self.client.version()
            security = self.client.info().get("SecurityOptions") or []
        except docker.errors.DockerException as exc:
            raise BackendUnavailable(f"docker engine not reachable: {exc}") from exc
        problem = unconfined(security)
        if problem:
            raise BackendUnavailable(f"docker engine: {problem}")

    def one_shot(self) -> dict[str, bool]:
        """`one_shot=True` where the engine has it (API 1.41+): stats then answer at once
        instead of waiting two sampling cycles (about 2 s a call)."""
        from docker.utils import version_gte

        return {"one_shot": True} if version_gte(self.client.api.api_version, "1.41") else {}

    def create_options(self, step: StepSpec) -> dict[str, Any]:
        """Keyword arguments of `containers.create` for a step (pure)."""
        from docker.types import Ulimit

        workdir = str(step.workdir.resolve())
        volumes = {
            str(p.resolve()): {"bind": str(p.resolve()), "mode": "ro"} for p in step.readonly_paths
        }
        if not any(bind.host.resolve() == step.workdir.resolve() for bind in step.binds):
            volumes[workdir] = {"bind": workdir, "mode": "rw"}
        for bind in step.binds:
            mode = "rw" if bind.writable else "ro"
            volumes[str(bind.host.resolve())] = {"bind": bind.inside, "mode": mode}
        tmpfs = {"/tmp": _TMPFS}  # noqa: S108 - a private tmpfs inside the container
        tmpfs.update({folder: _TMPFS for folder in step.tmpfs})
        limits = step.limits
        options: dict[str, Any] = {
            "entrypoint": [""],  # the image's own (deploy/'s runs `kz`) would wrap the step
            "command": list(step.argv),
            "working_dir": step.cwd or workdir,
            "environment": dict(step.env),
            "user": self.user if step.uid is None else f"{step.uid}:{step.uid}",
            "network_disabled": True,
            "network_mode": "none",
            "read_only": True,
            "tmpfs": tmpfs,
            "volumes": volumes,
            "pids_limit": limits.max_pids,
            "ulimits": [
                Ulimit(name="fsize", soft=limits.max_file_bytes, hard=limits.max_file_bytes),
                Ulimit(name="core", soft=0, hard=0),
            ],
            "cap_drop": ["ALL"],
            "security_opt": ["no-new-privileges"],  # and the engine's default seccomp profile
            "device_requests": _device_requests(self.gpus),
            "labels": {"kz.role": "task-step"},
            "detach": True,
        }
        if limits.memory_bytes is not None:
            options["mem_limit"] = limits.memory_bytes
            options["memswap_limit"] = limits.memory_bytes
        if self.cpus:
            options["nano_cpus"] = int(self.cpus * 1e9)
        return options

    def _owner(self, step: StepSpec) -> tuple[int, int] | None:
        """The numeric uid:gid the step runs as, where the runner may hand it folders."""
        if os.geteuid() != 0:
            return None  # the step runs as the runner's own uid, which owns them already
        if step.uid is not None:
            return step.uid, step.uid
        uid, _, gid = self.user.partition(":")
        if not (uid.isdigit() and (gid or uid).isdigit()):
            return None  # a user name of the image: its ids are not known here
        return int(uid), int(gid or uid)

    def _hand_over(self, step: StepSpec) -> None:
        """As root, give the step's writable folders (the work dir where it is bound at its
        own path, and the writable binds) to the step's uid, as the sandbox does: the
        container runs unprivileged, so a folder root owns would be read-only to it."""
        owner = self._owner(step)
        if owner is None:
            return
        writable = [bind.host for bind in step.binds if bind.writable]
        if not any(bind.host.resolve() == step.workdir.resolve() for bind in step.binds):
            writable.append(step.workdir)
        for folder in writable:
            for directory, _dirs, files in os.walk(folder):
                os.chown(directory, *owner, follow_symlinks=False)
                for name in files:
                    os.chown(Path(directory) / name, *owner, follow_symlinks=False)

    def _bridged(self, step: StepSpec, *, from_3: bool = False) -> tuple[StepSpec, FdBridge | None]:
        """The step with its descriptors turned into sockets it connects to (see fdbridge),
        put at their own numbers, or at 3, 4, … (`from_3`, a worker's, as `spawn` promises)."""
        if not step.pass_fds:
            return step, None
        folder = Path(tempfile.mkdtemp(prefix="kz-fds-", dir=step.workdir.resolve().parent))
        numbers = {fd: 3 + i for i, fd in enumerate(step.pass_fds)} if from_3 else None
        bridge = FdBridge(folder, step.pass_fds, numbers)
        bridged = replace(
            step,
            env={**step.env, **bridge.env()},
            binds=(*step.binds, Bind(folder, FD_INSIDE, writable=True)),
        )
        return bridged, bridge

    def run(self, step: StepSpec, *, cancelled: Cancelled | None = None) -> StepResult:
        """Create, start and watch a container; kill it on timeout, cancel or flood; remove it."""
        started = time.monotonic()
        buffer = OutputBuffer(step.limits.max_output_bytes)
        self._hand_over(step)
        step, bridge = self._bridged(step)
        container = self.client.containers.create(self.image, **self.create_options(step))
        flooded = threading.Event()
        try:
            if bridge is not None:
                bridge.relay(step.timeout_s)
            container.start()
            reader = threading.Thread(
                target=self._read_logs, args=(container, buffer, flooded), daemon=True
            )
            reader.start()
            reason, exit_code = self._watch(container, started + step.timeout_s, cancelled, flooded)
            if reason is not None:
                container.kill()
            reader.join(_LOG_JOIN_S)
        finally:
            container.remove(force=True)
            if bridge is not None:
                bridge.close()
                shutil.rmtree(bridge.folder, ignore_errors=True)
        return StepResult(
            exit_code=exit_code,
            timed_out=reason == "timeout",
            killed_reason=reason,
            output=buffer.finish(reason),
            output_truncated=buffer.truncated,
            wall_s=time.monotonic() - started,
        )

    def spawn(self, step: StepSpec) -> DockerProcess:
        """Start a worker's container; its channel is handed over, not relayed."""
        self._hand_over(step)
        step, bridge = self._bridged(step, from_3=True)
        assert bridge is not None, "a worker step inherits its channel"
        container = self.client.containers.create(self.image, **self.create_options(step))
        try:
            container.start()
            channel = bridge.accept(step.pass_fds[0], _CONNECT_S)
        except Exception:
            container.remove(force=True)
            bridge.close()
            raise
        return DockerProcess(self, container, bridge, channel, step.limits.max_output_bytes)

    def _watch(
        self, container: Any, deadline: float, cancelled: Cancelled | None, flooded: threading.Event
    ) -> tuple[str | None, int | None]:
        while True:
            reason = KILLED_OUTPUT_LIMIT if flooded.is_set() else why_stop(deadline, cancelled)
            if reason is not None:
                return reason, None
            state = self.client.api.inspect_container(container.id)["State"]
            if state.get("Status") in ("exited", "dead"):
                return None, int(state.get("ExitCode", -1))
            flooded.wait(POLL_S)

    @staticmethod
    def _read_logs(container: Any, buffer: OutputBuffer, flooded: threading.Event) -> None:
        """Stream the container's logs into the buffer; flag a flood past the limit."""
        import docker
        import requests

        try:
            chunks: Iterator[bytes] = container.logs(
                stream=True, follow=True, stdout=True, stderr=True
            )
            for chunk in chunks:
                if not buffer.add(chunk):
                    flooded.set()
                    return
        except (docker.errors.DockerException, requests.RequestException, OSError) as exc:
            buffer.add(f"\n[kz: log stream ended early: {exc}]\n".encode())


class DockerProcess:
    """A worker's container: stopped and resumed by freezing its cgroup (pause/unpause),
    counted and timed through /proc (or the engine's stats), killed and removed as a whole."""

    def __init__(
        self,
        backend: DockerBackend,
        container: Any,
        bridge: FdBridge,
        channel: socket.socket,
        max_output: int,
    ) -> None:
        self.backend = backend
        self.container = container
        self.bridge = bridge
        self.channel = channel
        self.max_output = max_output
        self.dead = False
        self.paused = False

    def members(self) -> list[int]:
        top = self.container.top()
        index = top["Titles"].index("PID")
        return [int(row[index]) for row in top.get("Processes") or []]

    def _visible(self, pids: list[int]) -> bool:
        """Whether this host's /proc shows the container's processes (the runner beside the
        engine, not in a PID namespace of its own): their cgroup names the container."""
        try:
            return all(self.container.id in Path(f"/proc/{pid}/cgroup").read_text() for pid in pids)
        except OSError:
            return False

    def inspect(self) -> dict[str, int]:
        """Processes, threads and CPU time of the container, read from /proc like the
        sandbox's (exact, and at once): `main_cpu_ns` is its first process's main thread.
        Where /proc does not show them, the engine's stats, which do not split CPU time by
        thread, so all of it counts as the serving thread's (`work_outside_window` still
        sees work beside the calls)."""
        pids = sorted(self.members())
        if pids and self._visible(pids):
            return proc_view(pids)
        stats = self.container.stats(stream=False, **self.backend.one_shot())
        used = int(stats.get("cpu_stats", {}).get("cpu_usage", {}).get("total_usage", 0))
        tasks = int(stats.get("pids_stats", {}).get("current", 0))
        return {
            "processes": len(pids),
            "threads": max(tasks, len(pids)),
            "cpu_ns": used,
            "main_cpu_ns": used,
        }

    def signal(self, signum: int) -> None:
        """STOP and CONT freeze and thaw the cgroup, each at most once in a row (the engine
        refuses to pause a paused container or resume a running one, where a signal would not).
        On a loaded host the runtime's freezer can give up before every thread has stopped
        ("unable to freeze") and thaw it again; the request is then repeated until the engine
        reports the state asked for, and what the engine reports is the truth either way."""
        if signum == _SIGSTOP:
            if not self.paused:
                self._until_state(self.container.pause, paused=True)
        elif signum == _SIGCONT:
            if self.paused:
                self._until_state(self.container.unpause, paused=False)
        else:
            self.container.kill(signal=signum)

    def _until_state(self, request: Callable[[], object], *, paused: bool) -> None:
        import docker
        from tenacity import Retrying, retry_if_exception_type, stop_after_delay, wait_exponential

        for attempt in Retrying(
            retry=retry_if_exception_type(docker.errors.APIError),
            stop=stop_after_delay(_FREEZE_S),
            wait=wait_exponential(multiplier=0.01, max=0.5),
            reraise=True,
        ):
            with attempt:
                try:
                    request()
                except docker.errors.APIError:
                    self.container.reload()
                    if (self.container.status == "paused") != paused:
                        raise
        self.paused = paused

    def kill(self) -> None:
        if self.dead:
            return
        self.dead = True
        with contextlib.suppress(Exception):
            self.container.kill()

    def output(self) -> bytes:
        self.kill()
        buffer = OutputBuffer(self.max_output)
        with contextlib.suppress(Exception):
            buffer.add(self.container.logs(stdout=True, stderr=True))
        with contextlib.suppress(Exception):
            self.container.remove(force=True)
        self.channel.close()
        self.bridge.close()
        shutil.rmtree(self.bridge.folder, ignore_errors=True)
        return buffer.finish(None)
