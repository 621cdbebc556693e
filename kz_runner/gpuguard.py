"""The task's GPUs to itself: no compute context on them but the task's own workers'.

A kernel left running in a second CUDA context survives SIGSTOP and the cgroup freezer and
slows whatever is timed beside it, so the runner looks at the task's GPUs (`nvidia-smi
--query-compute-apps`) before the judge step (no context at all), when it ends (only
contexts of the task's workers, whose processes are in their cgroups) and after the workers
are killed (none left). Anything else voids the task's figures as the runner's fault:
`DeviceBusy`, which the runner answers by handing the task back, never by blaming the
candidate.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path

from kz_events.errors import KzError

__all__ = ["ComputeApp", "DeviceBusy", "GpuGuard", "nvidia_smi_apps"]

_SETTLE_S = 5.0  # how long a killed worker's contexts may take to go


class DeviceBusy(KzError):
    """Another compute context was on the task's GPU, or the GPU could not be checked: the
    task's figures are void, the runner's fault."""

    code = "device_busy"


@dataclass(frozen=True, slots=True)
class ComputeApp:
    """One compute context: its process (a host pid), its GPU's UUID, the process's name."""

    pid: int
    gpu: str
    name: str = ""


ListApps = Callable[[], list[ComputeApp]]
Run = Callable[..., "subprocess.CompletedProcess[str]"]


def _query(run: Run, what: str, fields: str) -> list[list[str]]:
    tool = shutil.which("nvidia-smi")
    if tool is None:
        raise DeviceBusy("cannot check the task's GPU for other work: nvidia-smi not found")
    done = run(
        [tool, f"--query-{what}={fields}", "--format=csv,noheader,nounits"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        detail = (done.stderr or done.stdout).strip().splitlines()
        raise DeviceBusy(
            "cannot check the task's GPU for other work: nvidia-smi failed"
            f" ({detail[-1] if detail else 'exit ' + str(done.returncode)})"
        )
    return [[cell.strip() for cell in line.split(",")] for line in done.stdout.splitlines() if line]


def nvidia_smi_apps(gpus: tuple[int, ...], run: Run = subprocess.run) -> ListApps:
    """The compute contexts on the GPUs `gpus` (() for every one), as nvidia-smi lists them."""

    def apps() -> list[ComputeApp]:
        listed = {index: uuid for index, uuid, *_ in _query(run, "gpu", "index,uuid")}
        wanted = (
            {listed[str(i)] for i in gpus if str(i) in listed} if gpus else set(listed.values())
        )
        rows = _query(run, "compute-apps", "pid,gpu_uuid,process_name")
        return [
            ComputeApp(int(pid), uuid, name[0] if name else "")
            for pid, uuid, *name in rows
            if uuid in wanted and pid.isdigit()
        ]

    return apps


def _described(apps: list[ComputeApp]) -> str:
    return ", ".join(f"pid {a.pid} ({a.name or 'unknown'}) on {a.gpu}" for a in apps)


class GpuGuard:
    """The three checks around a judge step; each raises `DeviceBusy` naming what it found."""

    def __init__(self, list_apps: ListApps, settle_s: float = _SETTLE_S) -> None:
        self.list_apps = list_apps
        self.settle_s = settle_s

    def before(self) -> None:
        """No compute context on the task's GPUs before the judge starts (the build step's,
        ended with its cgroup, may take a moment to go)."""
        self._none_left("the task's GPU is in use before the judge")

    def during(self, owned: Collection[int], workers: int) -> None:
        """As the judge ends: contexts only of the task's own workers (`owned`: their pids;
        `workers`: how many there are). A pid this runner's /proc does not show (nvidia-smi
        reading another PID namespace's, as in a container) cannot be told apart: such
        contexts are counted instead, and more than the workers could hold are foreign."""
        apps = self.list_apps()
        others = [app for app in apps if app.pid not in owned]
        seen = [app for app in others if Path(f"/proc/{app.pid}").exists()]
        if seen or len(others) > workers - (len(apps) - len(others)):
            raise DeviceBusy(
                f"another compute context was on the task's GPU: {_described(seen or others)}"
            )

    def after(self) -> None:
        """Once the workers are killed, their contexts go too; none may be left."""
        self._none_left("compute contexts outlived the task")

    def _none_left(self, problem: str) -> None:
        deadline = time.monotonic() + self.settle_s
        found = self.list_apps()
        while found and time.monotonic() < deadline:
            time.sleep(0.1)
            found = self.list_apps()
        if found:
            raise DeviceBusy(f"{problem}: {_described(found)}")
