"""The GPU check's local stack: `kz up` (embedded NATS, the API, the projectors; its own
runner is a stub serving cpu), the sm90 examples imported, and `kz runner` processes for sm90
with the sandbox (GPUs shown to the candidate's steps) or, in a dry run, the stub. Then
submissions through the HTTP API and a wait for their verdicts."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from kz_package import pack_directory
from kz_testing.process import KzProcess, ProcessError, kz_argv, stop_all, wait_healthy

__all__ = [
    "TERMINAL",
    "GpuRunnerSettings",
    "LocalStack",
    "free_port",
    "runner_environment",
    "variant_package",
]

TERMINAL = ("committed", "rejected", "failed", "cancelled")
SUBMITTER = "gpu-check"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _clean_environ() -> dict[str, str]:
    """This process's environment without settings of kernel zoo (each part gets its own)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("KZ_")}


@dataclass(frozen=True, kw_only=True)
class GpuRunnerSettings:
    """How the check's sm90 runners run their steps."""

    backend: str = "sandbox"  # "stub" in a dry run
    gpus: str = "all"
    readonly: tuple[str, ...] = ()  # e.g. the image's Python environment
    bwrap: str = "bwrap"
    task_timeout_s: float = 150.0
    step_timeout_s: float = 120.0


def runner_environment(
    nats_url: str, workdir: Path, runner_id: str, settings: GpuRunnerSettings
) -> dict[str, str]:
    """The KZ_* settings of one sm90 runner (checked by kz_events.config at its start)."""
    env = {
        "KZ_NATS_URL": nats_url,
        "KZ_RUNNER_ARCH": "sm90",
        "KZ_RUNNER_ID": runner_id,
        "KZ_RUNNER_BACKEND": settings.backend,
        "KZ_RUNNER_WORKDIR": str(workdir),
        "KZ_TASK_TIMEOUT_S": str(settings.task_timeout_s),
        "KZ_STEP_TIMEOUT_S": str(settings.step_timeout_s),
        "KZ_HEARTBEAT_S": "2",
    }
    if settings.backend == "sandbox":
        env["KZ_RUNNER_GPUS"] = settings.gpus
        env["KZ_RUNNER_BWRAP"] = settings.bwrap
        if settings.readonly:
            env["KZ_RUNNER_READONLY"] = ",".join(settings.readonly)
    return env


def variant_package(package: Path, src: Path | None, into: Path) -> Path:
    """A copy of the example package, with `src` (a variant's src/) in place of its own."""
    target = into / f"pkg-{len(list(into.iterdir())) if into.is_dir() else 0}"
    shutil.copytree(package, target)
    if src is not None:
        shutil.rmtree(target / "src")
        shutil.copytree(src, target / "src")
    return target


@dataclass
class LocalStack:
    """The processes of one stack under `root`; `start`, `add_runners`, then `close`."""

    root: Path
    logs: Path
    port: int = field(default_factory=free_port)
    up: KzProcess | None = None
    runners: list[KzProcess] = field(default_factory=list)
    nats_url: str = ""

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout_s: float) -> None:
        """`kz up --no-demo` with its stub cpu runner; waits for the API and the NATS URL."""
        data = self.root / "data"
        argv = kz_argv("up", "--no-demo", "--backend", "stub", "--data-dir", str(data))
        env = {**_clean_environ(), "KZ_PORT": str(self.port), "KZ_NATS_SYNC_ALWAYS": "false"}
        self.up = KzProcess("kz-up", [*argv, "--port", str(self.port)], env, self.logs / "up.log")
        self.up.start()
        wait_healthy(self.base_url, timeout_s, [self.up])
        url_file = data / "nats.url"
        deadline = time.monotonic() + 10
        while not url_file.is_file() and time.monotonic() < deadline:
            time.sleep(0.1)
        self.nats_url = url_file.read_text().strip()

    def import_examples(self, examples: Path, kernel_ids: list[str], timeout_s: float) -> None:
        """`kz import` the example packages, then wait until the API lists every kernel."""
        done = subprocess.run(
            kz_argv(
                "import", str(examples), "--submitter", "examples", "--nats-url", self.nats_url
            ),
            env=_clean_environ(),
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
        (self.logs / "import.log").write_text(done.stdout + done.stderr)
        if done.returncode != 0:
            raise ProcessError(f"kz import exited {done.returncode}: {done.stderr.strip()[-300:]}")
        deadline = time.monotonic() + timeout_s
        with httpx.Client(base_url=self.base_url, timeout=10) as client:
            while time.monotonic() < deadline:
                listed = client.get("/api/kernels", params={"arch": "sm90"})
                known = {k.get("id") or k.get("kernel_id") for k in _items(listed.json())}
                if set(kernel_ids) <= known:
                    return
                time.sleep(0.5)
        raise ProcessError(f"the API did not list {kernel_ids} within {timeout_s:.0f} s")

    def add_runners(self, count: int, settings: GpuRunnerSettings, wait_s: float = 8.0) -> None:
        """Start `count` sm90 runners, each on its own CPU; fail if one exits at start."""
        cpus = os.cpu_count() or 1
        for number in range(count):
            runner_id = f"gpu-check-{number}"
            env = {
                **_clean_environ(),
                **runner_environment(self.nats_url, self.root / "work", runner_id, settings),
            }
            cpu = str(max(cpus - 2 - number, 0))  # the last CPU stays the check's own tasks'
            argv = kz_argv("runner", "--cpu", cpu)
            proc = KzProcess(runner_id, argv, env, self.logs / f"{runner_id}.log")
            self.runners.append(proc.start())
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            dead = [p for p in self.runners if not p.alive]
            if dead:
                raise ProcessError(
                    f"{dead[0].name} exited at start: {dead[0].errors() or dead[0].tail(5)}"
                )
            if self._registered() >= count:
                return
            time.sleep(0.5)

    def _registered(self) -> int:
        try:
            response = httpx.get(f"{self.base_url}/api/runners", timeout=5)
            return sum(1 for r in _items(response.json()) if "sm90" in (r.get("arches") or []))
        except (httpx.HTTPError, ValueError):
            return 0

    def stop_runners(self) -> None:
        stop_all(self.runners)

    def close(self) -> None:
        stop_all([*self.runners, *([self.up] if self.up else [])])

    # --- submissions -------------------------------------------------------------------

    def submit(self, package: Path, kernel_id: str, message: str) -> str:
        with tempfile.TemporaryDirectory(prefix="kz-gpu-check-") as tmp:
            tarball = Path(tmp) / "package.tar.gz"
            pack_directory(package, tarball)
            with tarball.open("rb") as handle, httpx.Client(timeout=60) as client:
                response = client.post(
                    f"{self.base_url}/api/submissions",
                    headers={"X-Submitter-Id": SUBMITTER},
                    data={"kernel_id": kernel_id, "submitter_id": SUBMITTER, "message": message},
                    files={"package": ("package.tar.gz", handle, "application/gzip")},
                )
        if response.status_code != 202:
            raise ProcessError(
                f"submission refused ({response.status_code}): {response.text[:300]}"
            )
        sid: str = response.json()["submission_id"]
        return sid

    def wait(self, ids: list[str], deadline: float) -> dict[str, dict[str, Any]]:
        """The status documents of `ids` once each is terminal or the deadline passed."""
        states: dict[str, dict[str, Any]] = {}
        with httpx.Client(base_url=self.base_url, timeout=10) as client:
            while True:
                for sid in ids:
                    if states.get(sid, {}).get("status") in TERMINAL:
                        continue
                    states[sid] = client.get(
                        f"/api/submissions/{sid}/status",
                        headers={"X-Submitter-Id": SUBMITTER},
                    ).json()
                done = all(states[sid].get("status") in TERMINAL for sid in ids)
                if done or time.monotonic() >= deadline:
                    return states
                time.sleep(1.0)

    def detail(self, sid: str) -> Mapping[str, Any]:
        response = httpx.get(f"{self.base_url}/api/submissions/{sid}", timeout=10)
        detail: Mapping[str, Any] = response.json()
        return detail

    def log(self, sid: str) -> str:
        response = httpx.get(f"{self.base_url}/api/submissions/{sid}/logs", timeout=10)
        return response.text if response.status_code == 200 else f"(no log: {response.status_code})"


def _items(body: Any) -> list[dict[str, Any]]:
    if isinstance(body, dict):
        for key in ("items", "kernels", "runners"):
            if isinstance(body.get(key), list):
                return list(body[key])
        return []
    return list(body) if isinstance(body, list) else []
