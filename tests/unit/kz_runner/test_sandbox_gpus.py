"""The sandbox's GPU settings, on its pure command line: which nodes, which steps, which limits."""

from __future__ import annotations

from pathlib import Path

import pytest

from kz_runner.backends.base import BackendUnavailable, StepSpec
from kz_runner.backends.sandbox import SandboxBackend, gpu_nodes, parse_gpus
from kz_runner.limits import MIB, StepLimits

pytestmark = pytest.mark.unit

SHARED = ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset")


def _dev(root: Path, *names: str) -> Path:
    dev = root / "dev"
    dev.mkdir()
    for name in names:
        (dev / name).write_text("")
    return dev


def _step(workdir: Path, *, devices: bool) -> StepSpec:
    return StepSpec(
        argv=("python", "worker.py"),
        workdir=workdir,
        env={},
        timeout_s=30,
        limits=StepLimits(memory_bytes=512 * MIB),
        devices=devices,
    )


def _backend(tmp_path: Path, gpus: str | None, *nodes: str) -> SandboxBackend:
    driver = tmp_path / "driver"
    (driver / "lib64").mkdir(parents=True)
    return SandboxBackend(gpus=gpus, dev_root=_dev(tmp_path, *nodes), driver_dir=driver)


def test_gpus_parse_as_none_all_or_indices() -> None:
    assert parse_gpus(None) is None and parse_gpus("none") is None and parse_gpus("") is None
    assert parse_gpus("all") == () and parse_gpus("ALL") == ()
    assert parse_gpus("0,2") == (0, 2)
    with pytest.raises(BackendUnavailable, match="expected none, all or device indices"):
        parse_gpus("gpu0")


def test_gpu_nodes_are_the_shared_ones_and_the_chosen_devices(tmp_path: Path) -> None:
    dev = _dev(tmp_path, *SHARED, "nvidia0", "nvidia1", "nvidia10", "nvidia-foo")
    (dev / "nvidia-caps").mkdir()
    every = [p.name for p in gpu_nodes((), dev)]
    assert every == [*SHARED, "nvidia-caps", "nvidia0", "nvidia1", "nvidia10"]
    assert [p.name for p in gpu_nodes((1, 7), dev)][-1] == "nvidia1"  # nvidia7 is not there


def test_a_device_step_sees_the_nodes_and_the_driver_without_the_memory_limit(
    tmp_path: Path,
) -> None:
    backend = _backend(tmp_path, "all", "nvidiactl", "nvidia-uvm", "nvidia0")
    dev = tmp_path / "dev"
    text = " ".join(backend.command(_step(tmp_path, devices=True)))
    assert f"--dev-bind {dev}/nvidiactl /dev/nvidiactl" in text
    assert f"--dev-bind {dev}/nvidia-uvm /dev/nvidia-uvm" in text
    assert f"--dev-bind {dev}/nvidia0 /dev/nvidia0" in text
    assert f"--ro-bind {tmp_path}/driver {tmp_path}/driver" in text
    assert "--as=" not in text  # CUDA maps far more address space than it uses
    env = backend.device_environment(_step(tmp_path, devices=True))
    assert env == {"LD_LIBRARY_PATH": f"{tmp_path}/driver/lib64"}


def test_the_judge_and_a_cpu_runner_see_no_gpu(tmp_path: Path) -> None:
    """Only steps marked `devices` get them, and only when the runner was given GPUs."""
    with_gpus = _backend(tmp_path, "all", "nvidiactl", "nvidia0")
    judge = " ".join(with_gpus.command(_step(tmp_path, devices=False)))
    assert "nvidia" not in judge and f"--as={512 * MIB}" in judge
    assert with_gpus.device_environment(_step(tmp_path, devices=False)) == {}
    cpu = SandboxBackend(dev_root=tmp_path / "dev")
    assert "nvidia" not in " ".join(cpu.command(_step(tmp_path, devices=True)))


def test_chosen_indices_bind_only_their_device(tmp_path: Path) -> None:
    backend = _backend(tmp_path, "1", "nvidiactl", "nvidia0", "nvidia1")
    text = " ".join(backend.command(_step(tmp_path, devices=True)))
    assert "/dev/nvidia1" in text and "/dev/nvidia0" not in text


@pytest.mark.parametrize(
    ("gpus", "nodes", "message"),
    [
        ("all", (), r"gpus=all: no .*/dev/nvidia\* device nodes on this host"),
        ("all", ("nvidiactl",), r"gpus=all: no .*/dev/nvidia\* device nodes"),
        ("0,1", ("nvidiactl", "nvidia0"), r"gpus=0,1: no .*/dev/nvidia1 on this host"),
    ],
)
def test_gpus_asked_for_but_absent_fail_with_one_line(
    tmp_path: Path, gpus: str, nodes: tuple[str, ...], message: str
) -> None:
    backend = _backend(tmp_path, gpus, *nodes)
    with pytest.raises(BackendUnavailable, match=message) as caught:
        backend._check_gpus()
    assert "\n" not in str(caught.value)


def test_no_gpus_asked_for_needs_no_nodes(tmp_path: Path) -> None:
    SandboxBackend(dev_root=tmp_path)._check_gpus()
