"""The separated judge inside containers: cheats of docs/judging.md tried for real through the
docker backend (the judge in one container, each worker in its own, descriptors crossing
through /kz/fds), each gaining nothing.

Each candidate prints `TRIED <family>` once it has really tried, so a cheat that broke itself
cannot pass for a defence (the sandbox's suite, tests/integration/sandbox/test_judge_cheats.py,
has every family; these are the ones a container changes: descriptors, /proc, CPU accounting).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from docker_support import Engine

from kz_runner.execute import TaskOutcome
from kz_testing.cheats import BUSY_THREAD, FORK_PER_CALL, HONEST, JUDGE

pytestmark = pytest.mark.integration

RunPackage = Callable[..., TaskOutcome]  # the `run_in_docker` fixture of conftest.py

FORGE = """
import json, os, socket
FORGED = json.dumps({"schema_version": 1, "accepted": True, "reason": "forged",
    "metric": {"name": "latency", "unit": "us", "better": "lower", "value": 0.001},
    "workloads": [], "correctness": {"passed": True, "checks": []}}).encode()

def forge():
    reached = []
    for fd in range(3, 256):
        try:
            os.write(fd, FORGED)
            reached.append(fd)
        except OSError:
            pass
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                for fd in os.listdir(f"/proc/{pid}/fd"):
                    with open(f"/proc/{pid}/fd/{fd}", "wb") as out:
                        out.write(FORGED)
                    reached.append(f"{pid}/{fd}")
            except OSError:
                pass
    for folder in ("/kz/fds", "/kz/work/fds", "/kz/scratch"):
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for name in names:  # the bridge's sockets: connect again and send a document
            for kind in (socket.SOCK_STREAM, socket.SOCK_SEQPACKET):
                try:
                    conn = socket.socket(socket.AF_UNIX, kind)
                    conn.settimeout(0.5)
                    conn.connect(os.path.join(folder, name))
                    conn.send(FORGED)
                    reached.append(f"{folder}/{name}")
                except OSError:
                    pass
    return reached
"""


def _log(outcome: TaskOutcome) -> str:
    return outcome.log.decode(errors="replace")[-4000:]


def _tried(outcome: TaskOutcome, family: str) -> None:
    assert f"TRIED {family}".encode() in outcome.log, _log(outcome)


def _flags(outcome: TaskOutcome) -> set[str]:
    assert outcome.result is not None, _log(outcome)
    return {flag["code"] for flag in outcome.result.get("flags", [])}


def _measured_honestly(outcome: TaskOutcome) -> float:
    """Accepted for what it really costs: a row loop over 8 and 32 rows is never under 5 us."""
    assert outcome.reason == "accepted", _log(outcome)
    assert outcome.result is not None
    value = float(outcome.result["metric"]["value"])
    assert value > 5.0, value
    return value


def test_an_honest_kernel_is_accepted_with_no_flags(run_in_docker: RunPackage) -> None:
    """The reference shape: accepted, timed, and nothing flagged by the container's view."""
    outcome = run_in_docker(JUDGE, {"kernel.py": HONEST})
    _measured_honestly(outcome)
    assert _flags(outcome) == set()


def test_a_result_forged_at_import_then_exit_is_rejected(
    run_in_docker: RunPackage, engine: Engine
) -> None:
    """Writing a document to every descriptor, every /proc descriptor and every bridge socket
    it can find, then exiting: the worker's container holds no result channel, and a worker
    that dies is a failed candidate."""
    cheat = FORGE + "print('TRIED forge_import', forge(), flush=True)\nos._exit(0)\n"
    outcome = run_in_docker(JUDGE, {"kernel.py": cheat})
    _tried(outcome, "forge_import")
    tried = outcome.log.split(b"TRIED forge_import")[1].split(b"\n")[0]
    assert b"/kz/fds" not in tried  # the bridge accepted its one connection and closed
    assert outcome.reason == "rejected", _log(outcome)
    assert outcome.result is not None and outcome.result["correctness"]["passed"] is False
    assert outcome.result["metric"]["value"] != 0.001
    assert [c.name for c in engine.containers()] == []


def test_the_secret_seed_is_nowhere_in_a_workers_container(run_in_docker: RunPackage) -> None:
    """The worker looks for the seed in its environment, in every /proc it can see and on
    the judge's paths; it finds none, and sees no process but its own."""
    cheat = (
        HONEST
        + """
import os
found = [k for k in os.environ if k.startswith("KZ_") or "SEED" in k]
pids = [p for p in os.listdir("/proc") if p.isdigit()]
for pid in pids:
    for name in ("environ", "cmdline"):
        try:
            if b"KZ_SEED" in open(f"/proc/{pid}/{name}", "rb").read():
                found.append(f"{pid}/{name}")
        except OSError:
            pass
for path in ("/kz/judge", "/kz/scratch", "/kz/harness/../judge", "/kz/fds/../judge"):
    if os.path.exists(path):
        found.append(path)
print("TRIED secrets", "FOUND" if found else "NOTHING", found, "PIDS", len(pids), flush=True)
"""
    )
    outcome = run_in_docker(JUDGE, {"kernel.py": cheat})
    _tried(outcome, "secrets")
    assert b"TRIED secrets NOTHING [] PIDS 1" in outcome.log, _log(outcome)
    _measured_honestly(outcome)


def test_a_background_thread_working_beside_the_calls_is_flagged(
    run_in_docker: RunPackage,
) -> None:
    """A thread that keeps spinning beside the calls is seen by the runner through /proc:
    an extra thread, and CPU time outside the serving thread."""
    cheat = BUSY_THREAD
    outcome = run_in_docker(JUDGE, {"kernel.py": cheat})
    _tried(outcome, "busy_thread")
    assert {"extra_threads", "background_work"} <= _flags(outcome), _log(outcome)


def test_a_worker_that_forks_per_call_is_flagged(run_in_docker: RunPackage) -> None:
    """Children left running after a call are counted in the worker's container."""
    cheat = FORK_PER_CALL
    outcome = run_in_docker(JUDGE, {"kernel.py": cheat})
    _tried(outcome, "fork_per_call")
    assert "extra_processes" in _flags(outcome), _log(outcome)
