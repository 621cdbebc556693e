"""Real tasks through the docker backend on a real engine: the example board accepted, the
container's walls (network, files, memory, processes, time) holding, nothing left behind."""

from __future__ import annotations

import io
import shutil
import socket
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from docker_support import Engine

from kz_events.ids import KernelId
from kz_package import validate_result_document
from kz_runner.backends import DockerBackend, StepSpec
from kz_runner.execute import TaskOutcome, TaskSpec, execute_task
from kz_runner.limits import MIB, StepLimits
from kz_testing.lanes import lane_cpu

pytestmark = pytest.mark.integration

RunPackage = Callable[..., TaskOutcome]  # the `run_in_docker` fixture of conftest.py
REPO_ROOT = Path(__file__).resolve().parents[3]
RMSNORM = REPO_ROOT / "examples/kernels/cpu/Norm/RMSNorm/fp32/numpy_ref"


def _log(outcome: TaskOutcome) -> str:
    return outcome.log.decode(errors="replace")[-4000:]


def _host_processes_with(marker: str) -> list[str]:
    """Command lines of live host processes that mention `marker` (containers' included)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if marker in cmdline:
                found.append(cmdline)
    return found


def _no_containers_left(engine: Engine) -> None:
    assert [c.name for c in engine.containers()] == []


def test_the_rmsnorm_example_is_accepted_with_real_timings(
    tmp_path: Path, docker_backend: DockerBackend, engine: Engine
) -> None:
    """The example board's judge and kernel, run as a runner would: the build, the judge and
    both workers in containers, every workload timed, the containers gone afterwards."""
    workdir = tmp_path / "work"
    shutil.copytree(RMSNORM, workdir)
    spec = TaskSpec(
        kernel_id=KernelId.parse("cpu/Norm/RMSNorm/fp32/numpy_ref"),
        arch="cpu",
        workdir=workdir,
        harness_path=REPO_ROOT,
        cpu=lane_cpu(),
        step_timeout_s=120.0,
        task_timeout_s=240.0,
        limits=StepLimits(memory_bytes=1024 * MIB),
    )
    outcome = execute_task(spec, docker_backend, validate_result=validate_result_document)
    assert outcome.reason == "accepted", _log(outcome)
    assert outcome.environment["backend"] == "docker"
    assert b"ready: python" in outcome.log  # the build step ran in the image
    result = outcome.result
    assert result is not None and result["correctness"]["passed"] is True
    assert [w["name"] for w in result["workloads"]] == ["r128_c2048", "r32_c8192"]
    for workload in result["workloads"]:
        stats = workload["stats"]
        assert stats["n"] >= 10 and len(stats["samples"]) == stats["n"]
        assert stats["median"] > 1.0  # microseconds: a real row-wise norm, not a no-op
        assert workload["channel_overhead"] > 0
    assert result["timing"]["method"] == "batched_window"
    for cpu in result["timing"]["worker_cpu"].values():
        assert 0 < cpu["main_cpu_ns"] <= 2 * cpu["windows_ns"]  # /proc read at once, exactly
    assert {flag["code"] for flag in result.get("flags", [])} == set()
    _no_containers_left(engine)


@pytest.fixture
def host_listener() -> tuple[str, int, socket.socket]:
    """A TCP server on the host's own (non-loopback where there is one) address."""
    address = socket.gethostbyname(socket.gethostname())
    server = socket.create_server((address, 0))
    server.settimeout(0.1)
    return address, server.getsockname()[1], server


def test_the_network_is_refused_inside(
    run_in_docker: RunPackage, host_listener: tuple[str, int, socket.socket]
) -> None:
    """The judge's container has loopback only: the host's address, a public one and name
    lookups all fail, and the host's server accepts nothing."""
    address, port, server = host_listener
    probe = f"""
    import os, socket
    print("INTERFACES", sorted(os.listdir("/sys/class/net")))
    for target in [({address!r}, {port}), ("1.1.1.1", 53)]:
        try:
            socket.create_connection(target, timeout=2).close()
            print("CONNECTED", target)
        except OSError as exc:
            print("REFUSED", target, exc.errno)
    try:
        socket.getaddrinfo("example.com", 80)
        print("RESOLVED")
    except OSError:
        print("NO NAMES")
    raise SystemExit(3)
    """
    outcome = run_in_docker(probe)
    assert outcome.reason == "benchmark_error"
    assert b"INTERFACES ['lo']" in outcome.log, _log(outcome)
    assert outcome.log.count(b"REFUSED") == 2 and b"NO NAMES" in outcome.log
    assert b"CONNECTED" not in outcome.log and b"RESOLVED" not in outcome.log
    with pytest.raises(TimeoutError):
        server.accept()
    server.close()


WRITES = """
import os
def attempt(label, paths):
    for path in paths:
        try:
            with open(os.path.join(path, "kz_probe"), "w") as out:
                out.write("x")
            print(label, "WROTE", path, flush=True)
        except OSError as exc:
            print(label, "BLOCKED", path, exc.errno, flush=True)
"""


def test_the_root_is_read_only_and_only_the_work_dir_and_scratch_are_writable(
    run_in_docker: RunPackage, tmp_path: Path
) -> None:
    """The build step writes only its work dir, the judge only its scratch, a worker only
    its scratch (and each its private /tmp and HOME); the image, the judge's files, the
    harness and src/ stay read-only, and nothing lands on the host outside those folders."""
    build = (
        WRITES + "attempt('BUILD', ['.', '/tmp', '/home/kz', '/', '/usr', '/etc', '/kz/judge'])\n"
    )
    judge = (
        WRITES
        + """
attempt('JUDGE', ['/kz/scratch', '/tmp', '/home/kz', '/', '/usr/local/lib', '/etc',
                  '/kz/judge', '/kz/harness/kz_harness'])
from kz_harness.channel import Channel, Op
from kz_harness.judge import Control
control = Control(Channel.from_fd(int(os.environ["KZ_CONTROL_FD"])))
link = control.spawn("candidate")
link.request(Op.LOAD, {"entry": "kernel:run", "path": "src"})
print("LOADED", flush=True)
raise SystemExit(3)
"""
    )
    candidate = (
        WRITES
        + """
attempt('WORKER', ['/kz/work/scratch', '/tmp', '/home/kz', '/kz/work/src', '/', '/usr', '/kz'])
def run():
    pass
"""
    )
    outcome = run_in_docker(judge, {"kernel.py": candidate}, build=build)
    log = outcome.log.decode()
    for label, writable in (
        ("BUILD", ["."]),
        ("JUDGE", ["/kz/scratch"]),
        ("WORKER", ["/kz/work/scratch"]),
    ):
        for path in [*writable, "/tmp", "/home/kz"]:
            assert f"{label} WROTE {path}\n" in log, log[-4000:]
        assert log.count(f"{label} WROTE") == len(writable) + 2, log[-4000:]
        assert f"{label} BLOCKED / 30" in log  # EROFS: the image is read-only
    assert (tmp_path / "work" / "kz_probe").is_file()  # the build step's work dir is the host's
    for host in (Path("/usr/kz_probe"), Path("/etc/kz_probe"), Path("/kz_probe")):
        assert not host.exists()


def test_memory_over_the_limit_kills_the_judge(run_in_docker: RunPackage) -> None:
    """Touching 1 GiB under a 256 MiB limit (no swap) is stopped by the container's cgroup."""
    hog = "blocks = [b'x' * (64 << 20) for _ in range(16)]\nprint('ALLOCATED', flush=True)\n"
    outcome = run_in_docker(hog, limits=StepLimits(memory_bytes=256 * MIB))
    assert outcome.reason == "benchmark_error"
    assert b"ALLOCATED" not in outcome.log
    assert b"benchmark.py: exit 137" in outcome.log or b"MemoryError" in outcome.log


def test_processes_stop_at_the_pids_limit(run_in_docker: RunPackage) -> None:
    """Forking stops at the container's pids limit; the task ends with its reason."""
    counter = """
    import os, time
    n = 0
    try:
        while n < 500:
            if os.fork() == 0:
                time.sleep(30)
                os._exit(0)
            n += 1
    except OSError:
        pass
    print("FORKS", n, flush=True)
    raise SystemExit(3)
    """
    outcome = run_in_docker(counter, limits=StepLimits(max_pids=24, memory_bytes=512 * MIB))
    assert outcome.reason == "benchmark_error", _log(outcome)
    forks = int(outcome.log.split(b"FORKS ")[1].split()[0])
    assert 0 < forks < 24


HUNG_JUDGE = """
import os, subprocess, sys, time
from kz_harness.channel import Channel
from kz_harness.judge import Control
control = Control(Channel.from_fd(int(os.environ["KZ_CONTROL_FD"])))
control.spawn("candidate")
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(987)"])
open("/kz/scratch/started", "w").close()
print("HANGING", flush=True)
time.sleep(1000)
"""

HUNG_CANDIDATE = "import time\nprint('WORKER UP', flush=True)\ntime.sleep(988)\n"


def test_a_hung_judge_is_killed_at_its_timeout_with_its_workers(
    run_in_docker: RunPackage, engine: Engine
) -> None:
    """A judge that started a worker (hung at import) and a child, then sleeps, is killed at
    the step timeout; its container, the worker's and everything in them are gone when the
    task returns."""
    started = time.monotonic()
    outcome = run_in_docker(HUNG_JUDGE, {"kernel.py": HUNG_CANDIDATE}, step_timeout_s=6.0)
    assert outcome.reason == "timed_out", _log(outcome)
    assert b"benchmark.py: killed (timeout)" in outcome.log and b"HANGING" in outcome.log
    assert time.monotonic() - started < 40
    _no_containers_left(engine)
    assert _host_processes_with("time.sleep(98") == []


def test_a_cancelled_task_stops_within_a_poll(
    run_in_docker: RunPackage, engine: Engine, tmp_path: Path
) -> None:
    """When `cancelled()` turns true, the judge's container is killed and the task is
    cancelled; the workers' containers go with it."""
    started = tmp_path / "work.kz" / "judge-scratch" / "started"
    began = time.monotonic()
    outcome = run_in_docker(HUNG_JUDGE, {"kernel.py": HUNG_CANDIDATE}, cancelled=started.exists)
    assert outcome.reason == "cancelled", _log(outcome)
    assert b"benchmark.py: killed (cancelled)" in outcome.log
    assert time.monotonic() - began < 30
    _no_containers_left(engine)


def test_a_flood_of_output_is_capped_and_killed(run_in_docker: RunPackage) -> None:
    """Printing 1 GiB ends as a benchmark error with a log no larger than the limit."""
    flood = "import sys\nfor _ in range(1024):\n    sys.stdout.buffer.write(b'x' * (1 << 20))\n"
    outcome = run_in_docker(flood, limits=StepLimits(max_output_bytes=64 * 1024))
    assert outcome.reason == "benchmark_error"
    assert b"benchmark.py: killed (output_limit)" in outcome.log
    assert len(outcome.log) < 2 * 64 * 1024 + 4096


def test_a_file_over_the_size_limit_cannot_be_written(run_in_docker: RunPackage) -> None:
    """The fsize ulimit binds in the container."""
    big = "open('/kz/scratch/big.bin', 'wb').write(b'x' * (8 * 1024 * 1024))\n"
    outcome = run_in_docker(big, limits=StepLimits(max_file_bytes=1 * MIB))
    assert outcome.reason == "benchmark_error"
    assert b"File too large" in outcome.log or b"exit 153" in outcome.log, _log(outcome)


def test_the_images_entry_point_does_not_wrap_the_step(
    engine: Engine, docker_backend: DockerBackend, tmp_path: Path
) -> None:
    """An image with an entry point of its own (deploy/'s runner image runs `kz`) still runs
    each step as its argv."""
    engine.client.images.build(
        fileobj=io.BytesIO(
            f'FROM {docker_backend.image}\nENTRYPOINT ["python3", "-c", "print(1 / 0)"]\n'.encode()
        ),
        tag="kz-entrypoint-test",
        rm=True,
        network_mode="none",
    )
    backend = DockerBackend(image="kz-entrypoint-test", base_url=engine.url, gpus=None)
    step = StepSpec(
        argv=("python3", "-c", "print('STEP RAN')"), workdir=tmp_path, env={}, timeout_s=30.0
    )
    result = backend.run(step)
    assert result.exit_code == 0 and b"STEP RAN" in result.output, result.output
    _no_containers_left(engine)


def test_no_container_outlives_the_session_s_tasks(engine: Engine) -> None:
    """After every task of this module ran, `docker ps -a` is empty."""
    _no_containers_left(engine)
