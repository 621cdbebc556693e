"""The GPU-host backend: each step in a fresh container of the configured image.

The container has no network, a read-only root, a tmpfs /tmp, the work dir bound
read-write and the read-only paths bound read-only, memory (no swap), pids, CPU and
file-size limits, no capabilities, a non-root user, GPUs through a device request, and
is removed after the step whatever happened.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from typing import Any

from kz_runner.backends.base import (
    KILLED_OUTPUT_LIMIT,
    BackendUnavailable,
    Cancelled,
    StepResult,
    StepSpec,
)
from kz_runner.backends.process import POLL_S, OutputBuffer, why_stop

__all__ = ["DockerBackend"]

_TMPFS = "rw,nosuid,nodev,size=1g,mode=1777"
_LOG_JOIN_S = 5.0


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
        """Fail with one line when the engine does not answer."""
        import docker

        try:
            self.client.version()
        except docker.errors.DockerException as exc:
            raise BackendUnavailable(f"docker engine not reachable: {exc}") from exc

    def create_options(self, step: StepSpec) -> dict[str, Any]:
        """Keyword arguments of `containers.create` for a step (pure)."""
        from docker.types import Ulimit

        workdir = str(step.workdir.resolve())
        volumes = {
            str(p.resolve()): {"bind": str(p.resolve()), "mode": "ro"} for p in step.readonly_paths
        }
        volumes[workdir] = {"bind": workdir, "mode": "rw"}
        limits = step.limits
        options: dict[str, Any] = {
            "command": list(step.argv),
            "working_dir": workdir,
            "environment": dict(step.env),
            "user": self.user,
            "network_disabled": True,
            "network_mode": "none",
            "read_only": True,
            "tmpfs": {"/tmp": _TMPFS},  # noqa: S108 - a private tmpfs inside the container
            "volumes": volumes,
            "pids_limit": limits.max_pids,
            "ulimits": [
                Ulimit(name="fsize", soft=limits.max_file_bytes, hard=limits.max_file_bytes),
                Ulimit(name="core", soft=0, hard=0),
            ],
            "cap_drop": ["ALL"],
            "security_opt": ["no-new-privileges"],
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

    def run(self, step: StepSpec, *, cancelled: Cancelled | None = None) -> StepResult:
        """Create, start and watch a container; kill it on timeout, cancel or flood; remove it."""
        started = time.monotonic()
        buffer = OutputBuffer(step.limits.max_output_bytes)
        container = self.client.containers.create(self.image, **self.create_options(step))
        flooded = threading.Event()
        try:
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
        return StepResult(
            exit_code=exit_code,
            timed_out=reason == "timeout",
            killed_reason=reason,
            output=buffer.finish(reason),
            output_truncated=buffer.truncated,
            wall_s=time.monotonic() - started,
        )

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
