"""The GPU check around a judge step, against fakes of nvidia-smi (no GPU here)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from kz_runner.backends.stub import StubBackend
from kz_runner.execute import execute_task
from kz_runner.gpuguard import ComputeApp, DeviceBusy, GpuGuard, nvidia_smi_apps
from tests.unit.kz_runner.test_execute import _package, _spec

pytestmark = pytest.mark.unit

GPUS = "0, GPU-aaa\n1, GPU-bbb\n"
APPS = "4242, GPU-aaa, python3\n5151, GPU-bbb, other_job\n"


def _fake_smi(gpus: str = GPUS, apps: str = APPS, code: int = 0) -> Any:
    """A stand-in for `subprocess.run` of nvidia-smi: its two queries' CSV answers."""

    def run(argv: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        out = gpus if argv[1].startswith("--query-gpu=") else apps
        return subprocess.CompletedProcess(argv, code, out if code == 0 else "", "no devices")

    return run


@pytest.fixture
def smi_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tool = tmp_path / "nvidia-smi"
    tool.write_text("#!/bin/sh\nexit 0\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))


@pytest.mark.usefixtures("smi_on_path")
@pytest.mark.parametrize(
    ("gpus", "pids"), [((0,), [4242]), ((1,), [5151]), ((), [4242, 5151]), ((7,), [])]
)
def test_contexts_are_read_for_the_tasks_gpus_only(gpus: tuple[int, ...], pids: list[int]) -> None:
    """Only the contexts on the task's GPUs (all of them for `()`) count."""
    assert [app.pid for app in nvidia_smi_apps(gpus, run=_fake_smi())()] == pids


@pytest.mark.usefixtures("smi_on_path")
def test_a_failing_nvidia_smi_is_one_clear_line() -> None:
    """nvidia-smi failing (no device, no driver) voids the check with its own message."""
    with pytest.raises(DeviceBusy, match="nvidia-smi failed \\(no devices\\)"):
        nvidia_smi_apps((0,), run=_fake_smi(code=9))()


def test_no_nvidia_smi_is_one_clear_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Where there is no GPU tool at all the check says so."""
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(DeviceBusy, match="nvidia-smi not found"):
        nvidia_smi_apps((0,))()


def test_before_during_and_after() -> None:
    """Before: none at all; during: only the workers'; after: none left once they are killed."""
    me = os.getpid()  # a process this host's /proc shows, and not one of the workers
    seen: list[list[ComputeApp]] = [[]]
    guard = GpuGuard(lambda: seen[0], settle_s=0.0)
    guard.before()
    seen[0] = [ComputeApp(me, "GPU-aaa", "python3")]
    guard.during({me, 12}, 2)
    with pytest.raises(DeviceBusy, match=f"pid {me} \\(python3\\) on GPU-aaa"):
        guard.during({12}, 2)
    with pytest.raises(DeviceBusy, match="outlived the task"):
        guard.after()
    with pytest.raises(DeviceBusy, match="in use before the judge"):
        guard.before()


def test_pids_of_another_namespace_are_counted_against_the_workers() -> None:
    """Pids nvidia-smi reads in another PID namespace (a runner in a container) cannot be
    matched: up to one context per worker passes, one more is foreign."""
    unseen = [ComputeApp(4_000_000 + i, "GPU-aaa") for i in range(3)]
    guard = GpuGuard(lambda: unseen, settle_s=0.0)
    guard.during(set(), 3)
    with pytest.raises(DeviceBusy, match="another compute context"):
        guard.during(set(), 2)


def test_contexts_that_go_while_the_guard_waits_are_fine() -> None:
    """A killed worker's context takes a moment to go: `after` waits for it."""
    answers = [[ComputeApp(11, "GPU-aaa")], [ComputeApp(11, "GPU-aaa")], []]
    guard = GpuGuard(lambda: answers.pop(0) if len(answers) > 1 else answers[0], settle_s=5.0)
    guard.after()


class BusyGpuBackend(StubBackend):
    """The stub on a GPU that another job uses."""

    def gpu_guard(self) -> GpuGuard:
        return GpuGuard(lambda: [ComputeApp(999, "GPU-aaa", "someone_else")], settle_s=0.0)


def test_a_foreign_context_voids_the_task_and_leaves_no_trace(tmp_path: Path) -> None:
    """The task raises DeviceBusy (the runner's fault: handed back, never the candidate's
    failure) and its folders are gone."""
    workdir = _package(tmp_path)
    with pytest.raises(DeviceBusy, match="someone_else"):
        execute_task(_spec(workdir), BusyGpuBackend(), validate_result=lambda d: {})
    assert not Path(f"{workdir.resolve()}.kz").exists()
