"""Hostile and honest benchmarks through the real sandbox backend, end to end."""

from __future__ import annotations

import os
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kz_runner.execute import TaskOutcome
from kz_runner.limits import MIB, StepLimits

pytestmark = pytest.mark.integration

RunPackage = Callable[..., TaskOutcome]  # the `run_package` fixture of conftest.py

ACCEPTING = """
import numpy as np
import kz_harness as h

def make_inputs():
    return (np.arange(256, dtype=np.float64),)

stats = h.bench_cpu(np.cumsum, make_inputs, warmup_s=0.01, budget_s=0.05, max_samples=200,
                    flush_bytes=1 << 20)
x = make_inputs()[0]
before = [x.copy()]
check = h.compare(np.cumsum(x), np.cumsum(x), dtype="fp64", inputs_before=before, inputs_after=[x])
h.write_result(accepted=check.passed, reason="matches the reference",
               metric={"name": "latency", "unit": "us", "better": "lower", "value": stats.median},
               workloads=[{"name": "n256", "value": stats.median, "stats": stats}],
               checks=[check], environment={"device": "cpu"})
"""


def _processes_with(marker: str) -> list[str]:
    """Command lines of live host processes that mention `marker`."""
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


@pytest.fixture
def listener() -> Iterator[tuple[int, list[str]]]:
    """A loopback server on the host that records every connection it accepts."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.1)
    accepted: list[str] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, peer = server.accept()
            except TimeoutError:
                continue
            accepted.append(str(peer))
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1], accepted
    stop.set()
    thread.join()
    server.close()


def test_an_honest_benchmark_is_accepted_with_a_valid_document(run_package: RunPackage) -> None:
    """A benchmark using the harness inside the sandbox yields an accepted, timed result."""
    outcome = run_package(ACCEPTING)
    assert outcome.reason == "accepted", outcome.log.decode()
    assert outcome.result is not None
    stats = outcome.result["workloads"][0]["stats"]
    assert stats["n"] >= 3 and len(stats["samples"]) == stats["n"]
    assert outcome.result["correctness"]["passed"] is True
    assert outcome.environment["backend"] == "sandbox"
    assert b"build ok" in outcome.log


def test_a_hanging_benchmark_times_out_and_leaves_nothing_running(run_package: RunPackage) -> None:
    """A benchmark that never ends is killed at its step timeout with its children."""
    outcome = run_package(
        "import subprocess, time\nsubprocess.Popen(['sleep', '987.654'])\ntime.sleep(1000)\n",
        step_timeout_s=2.0,
    )
    assert outcome.reason == "timed_out"
    assert _processes_with("987.654") == []


def test_process_count_is_capped_for_the_sandbox_user(
    run_package: RunPackage, tmp_path: Path
) -> None:
    """Forking stops at the pids limit even though the runner itself is root."""
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
    outcome = run_package(counter, limits=StepLimits(max_pids=24, memory_bytes=1024 * MIB))
    assert outcome.reason == "benchmark_error"
    forks = int(outcome.log.split(b"FORKS ")[1].split()[0])
    assert 0 < forks < 24


def test_a_fork_bomb_ends_and_the_host_lives_on(run_package: RunPackage) -> None:
    """A real fork bomb is contained: the task ends with a reason and the host can still fork."""
    bomb = (
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    )
    outcome = run_package(bomb, step_timeout_s=3.0, limits=StepLimits(max_pids=32))
    assert outcome.reason in {"timed_out", "benchmark_error"}
    assert subprocess.run(["true"], check=False).returncode == 0


def test_the_network_is_unreachable_from_the_sandbox(
    run_package: RunPackage, listener: tuple[int, list[str]]
) -> None:
    """A connection to a host loopback server fails inside and the server sees nothing."""
    port, accepted = listener
    probe = f"""
    import socket, sys
    try:
        socket.create_connection(("127.0.0.1", {port}), timeout=2).close()
    except OSError as exc:
        print("refused:", exc)
        sys.exit(2)
    print("CONNECTED")
    """
    outcome = run_package(probe)
    assert outcome.reason == "benchmark_error"
    assert b"refused" in outcome.log and b"CONNECTED" not in outcome.log
    time.sleep(0.2)
    assert accepted == []


def test_writes_outside_the_work_dir_do_not_reach_the_host(
    run_package: RunPackage, tmp_path: Path
) -> None:
    """Writing to host paths outside the work dir fails or lands in a private tmpfs."""
    outside = tmp_path / "outside.txt"
    harness_file = Path(__file__).resolve().parents[3] / "kz_harness" / "__init__.py"
    writer = f"""
    import kz_harness, sys
    targets = [{str(outside)!r}, "/usr/kz_owned", "/etc/kz_owned", kz_harness.__file__]
    for target in targets:
        try:
            with open(target, "a") as handle:
                handle.write("owned")
            print("wrote", target)
        except OSError as exc:
            print("blocked", target, exc.errno)
    sys.exit(4)
    """
    before = harness_file.read_bytes()
    outcome = run_package(writer)
    assert outcome.reason == "benchmark_error"
    assert not outside.exists()
    assert not Path("/usr/kz_owned").exists() and not Path("/etc/kz_owned").exists()
    assert harness_file.read_bytes() == before
    assert outcome.log.count(b"blocked") >= 3


def test_a_gigabyte_of_output_is_capped_and_killed(run_package: RunPackage) -> None:
    """Printing 1 GiB ends as a benchmark error with a log no larger than the limit."""
    flood = "import sys\nfor _ in range(1024):\n    sys.stdout.buffer.write(b'x' * (1 << 20))\n"
    limits = StepLimits(max_output_bytes=64 * 1024)
    outcome = run_package(flood, limits=limits)
    assert outcome.reason == "benchmark_error"
    assert b"output truncated" in outcome.log
    assert len(outcome.log) < 2 * 64 * 1024 + 4096


def test_memory_beyond_the_limit_cannot_be_allocated(run_package: RunPackage) -> None:
    """An allocation over the address-space limit fails inside the sandbox."""
    hog = "buffer = bytearray(2 * 1024 ** 3)\nprint('allocated')\n"
    outcome = run_package(hog, limits=StepLimits(memory_bytes=512 * MIB))
    assert outcome.reason == "benchmark_error"
    assert b"MemoryError" in outcome.log


def test_a_large_file_is_stopped_by_the_file_size_limit(run_package: RunPackage) -> None:
    """Writing a file over the size limit fails inside the sandbox."""
    big = "open('/kz/scratch/big.bin', 'wb').write(b'x' * (8 * 1024 * 1024))\n"
    outcome = run_package(big, limits=StepLimits(max_file_bytes=1 * MIB))
    assert outcome.reason == "benchmark_error"


def test_a_cancelled_task_stops_within_a_poll(run_package: RunPackage, tmp_path: Path) -> None:
    """When `cancelled()` turns true the running step is killed and the task is cancelled."""
    started = tmp_path / "work.kz" / "judge-scratch" / "started"
    sleeper = "import time\nopen('/kz/scratch/started', 'w').close()\ntime.sleep(60)\n"
    outcome = run_package(sleeper, cancelled=started.exists)
    assert outcome.reason == "cancelled"
    assert b"benchmark.py: killed (cancelled)" in outcome.log


def test_a_failing_build_stops_before_the_benchmark(run_package: RunPackage) -> None:
    """A non-zero build step gives build_failed and the benchmark never runs."""
    outcome = run_package("print('BENCH RAN')\n", build="raise SystemExit('no compiler')\n")
    assert outcome.reason == "build_failed"
    assert b"no compiler" in outcome.log and b"BENCH RAN" not in outcome.log


@pytest.mark.parametrize(
    ("benchmark", "expected"),
    [
        ("pass\n", "invalid_result"),
        ("import os\nos.write(int(os.environ['KZ_RESULT_FD']), b'{not json')\n", "invalid_result"),
        ("import os\nos.write(int(os.environ['KZ_RESULT_FD']), b'[1, 2]')\n", "invalid_result"),
        (
            "import os\nfd = int(os.environ['KZ_RESULT_FD'])\n"
            "for _ in range(9):\n    os.write(fd, b' ' * 1024 * 1024)\n",
            "invalid_result",
        ),
    ],
)
def test_a_missing_or_bad_document_is_an_invalid_result(
    run_package: RunPackage, benchmark: str, expected: str
) -> None:
    """Exit 0 without a valid document on the result channel is invalid_result, never a
    verdict; an oversized one is refused whole."""
    assert run_package(benchmark).reason == expected


def test_the_contract_environment_is_given_to_the_benchmark(run_package: RunPackage) -> None:
    """The judge sees KZ_RESULT_FD, KZ_KERNEL_ID, KZ_ARCH, a seed and the harness on its path."""
    probe = """
    import os, kz_harness
    env = os.environ
    print("ENV", env["KZ_KERNEL_ID"], env["KZ_ARCH"], "KZ_BASELINE_PATH" in env)
    print("SEED", len(env["KZ_SEED"]), "FD", env["KZ_RESULT_FD"].isdigit())
    print("UID", os.getuid())
    raise SystemExit(5)
    """
    outcome = run_package(probe)
    assert b"ENV cpu/Norm/RMSNorm/fp32/sandbox_test cpu False" in outcome.log
    assert b"SEED 32 FD True" in outcome.log
    if os.geteuid() == 0:
        assert b"UID 0" not in outcome.log
