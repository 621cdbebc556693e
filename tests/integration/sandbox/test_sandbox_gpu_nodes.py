"""GPU nodes in the real sandbox, with stand-ins for the device nodes (no GPU here): a step
marked `devices` sees them and the driver's folder, unlimited address space and the driver's
libraries on its loader path; a step that is not marked sees none of it."""

from __future__ import annotations

from pathlib import Path

import pytest

from kz_runner.backends.base import StepSpec
from kz_runner.backends.sandbox import SandboxBackend
from kz_runner.limits import MIB, StepLimits

pytestmark = pytest.mark.integration

PROBE = (
    "for n in nvidiactl nvidia-uvm nvidia0 nvidia1; do test -e /dev/$n && echo has $n; done; "
    "test -d {driver}/lib64 && echo has driver; echo ld=$LD_LIBRARY_PATH; echo as=$(ulimit -v)"
)


def _gpu_backend(tmp_path: Path, sandbox: SandboxBackend) -> tuple[SandboxBackend, Path]:
    dev = tmp_path / "dev"
    dev.mkdir()
    for name in ("nvidiactl", "nvidia-uvm", "nvidia0", "nvidia1"):
        (dev / name).write_text("")
        (dev / name).chmod(0o666)
    driver = tmp_path / "driver"
    (driver / "lib64").mkdir(parents=True, mode=0o755)
    driver.chmod(0o755)
    backend = SandboxBackend(
        sandbox_uid=sandbox.uid, sandbox_gid=sandbox.gid, worker_uid_base=sandbox.worker_uid_base,
        gpus="0", dev_root=dev, driver_dir=driver,
    )  # fmt: skip
    return backend, driver


def _run(backend: SandboxBackend, tmp_path: Path, driver: Path, *, devices: bool) -> str:
    work = tmp_path / ("gpu" if devices else "judge")
    work.mkdir(mode=0o755)
    step = StepSpec(
        argv=("/bin/sh", "-c", PROBE.format(driver=driver)),
        workdir=work,
        env={},
        timeout_s=20,
        limits=StepLimits(memory_bytes=512 * MIB),
        devices=devices,
    )
    result = backend.run(step)
    assert result.succeeded, result.output
    return result.output.decode()


def test_a_device_step_sees_the_chosen_nodes_and_the_driver(
    tmp_path: Path, sandbox: SandboxBackend
) -> None:
    backend, driver = _gpu_backend(tmp_path, sandbox)
    backend.check_available()
    lines = _run(backend, tmp_path, driver, devices=True).splitlines()
    assert "has nvidiactl" in lines and "has nvidia-uvm" in lines and "has nvidia0" in lines
    assert "has nvidia1" not in lines  # gpus="0": the other device stays out
    assert "has driver" in lines and f"ld={driver}/lib64" in lines
    assert "as=unlimited" in lines


def test_a_step_not_marked_sees_no_gpu(tmp_path: Path, sandbox: SandboxBackend) -> None:
    backend, driver = _gpu_backend(tmp_path, sandbox)
    lines = _run(backend, tmp_path, driver, devices=False).splitlines()
    assert not any(line.startswith("has") for line in lines)
    assert "ld=" in lines and f"as={512 * 1024}" in lines
