"""The runner against a real NATS server with the real sandbox: claim, run, report."""

from __future__ import annotations

import asyncio
import io
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from runner_helpers import RMSNORM, RMSNORM_ID, state_of, submit_dir

from kz_events.eventlog import EventLog
from kz_events.events import SubmissionClaimed, SubmissionResult
from kz_events.server import EmbeddedServer
from kz_events.subjects import JUDGES_BUCKET, LOGS_BUCKET, judge_key
from kz_package import pack_directory
from kz_runner.backends import get_backend
from kz_runner.core import Runner, RunnerOptions
from kz_runner.native import NativeTransport
from kz_runner.transport import RunnerInfo
from kz_runner.workdir import MEMORY_PACKAGE_BYTES, TARBALL

pytestmark = pytest.mark.integration

BIG = MEMORY_PACKAGE_BYTES + 1  # a stated size that sends the package to disk


def _runner(
    log: EventLog, tmp: Path, name: str, backend: str = "sandbox", lease_s: float = 15.0
) -> Runner:
    info = RunnerInfo(runner_id=name, arches=("cpu",), device="cpu", backend=backend)
    options = RunnerOptions(workdir=tmp / name, heartbeat_s=0.5, poll_s=0.5, step_timeout_s=60)
    return Runner(info, NativeTransport(log, lease_s=lease_s), get_backend(backend), options)


async def test_runner_benchmarks_an_example_and_reports_real_timings(
    event_log: EventLog, tmp_path: Path
) -> None:
    """A sandbox runner claims the RMSNorm example, runs it, and appends a valid accepted result."""
    sid = await submit_dir(event_log, RMSNORM, RMSNORM_ID, tmp_path)
    runner = _runner(event_log, tmp_path, "r1")
    await asyncio.wait_for(runner.run(asyncio.Event(), max_tasks=1), timeout=120)
    state, events = await state_of(event_log, "cpu", sid)
    result = next(e for e in events if isinstance(e, SubmissionResult))
    assert result.outcome == "accepted", result
    assert result.attempt == 1 and result.runner_id == "r1"
    assert result.result is not None and result.result["metric"]["value"] > 0
    assert all(w["stats"]["samples"] for w in result.result["workloads"])
    assert result.environment["backend"] == "sandbox"
    assert state.status == "running" and state.result_seq is not None


async def test_two_runners_one_task_one_claim(event_log: EventLog, tmp_path: Path) -> None:
    """Two runners competing for one task: exactly one claims and reports it."""
    sid = await submit_dir(event_log, RMSNORM, RMSNORM_ID, tmp_path)
    stop = asyncio.Event()
    runners = [_runner(event_log, tmp_path, f"r{i}", backend="stub") for i in range(2)]
    tasks = [asyncio.create_task(r.run(stop)) for r in runners]
    for _ in range(200):
        _, events = await state_of(event_log, "cpu", sid)
        if any(isinstance(e, SubmissionResult) for e in events):
            break
        await asyncio.sleep(0.05)
    await asyncio.sleep(1.0)  # give a second (wrong) claim time to appear
    stop.set()
    await asyncio.gather(*tasks)
    _, events = await state_of(event_log, "cpu", sid)
    assert sum(isinstance(e, SubmissionClaimed) for e in events) == 1
    assert sum(isinstance(e, SubmissionResult) for e in events) == 1


async def test_runner_killed_mid_task_is_finished_by_another_as_attempt_two(
    nats_server: EmbeddedServer, event_log: EventLog, tmp_path: Path, sleepy_package: Path
) -> None:
    """A runner process killed with SIGKILL mid-task: another runner finishes it as attempt 2."""
    sid = await submit_dir(event_log, sleepy_package, RMSNORM_ID, tmp_path)
    env = {
        **os.environ,
        "KZ_NATS_URL": nats_server.url,
        "KZ_RUNNER_ID": "doomed",
        "KZ_LEASE_S": "2",
        "KZ_HEARTBEAT_S": "0.5",
        "KZ_RUNNER_WORKDIR": str(tmp_path / "doomed"),
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "kz_cli.main", "runner", "--arch", "cpu", "--backend", "sandbox"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            state, _ = await state_of(event_log, "cpu", sid)
            if state.status == "running":
                break
            await asyncio.sleep(0.1)
        assert state.runner_id == "doomed"
        await asyncio.sleep(1.0)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    # The second runner runs the real (not sleepy) package: the same digest is redelivered,
    # so give it a stub backend that answers at once.
    survivor = _runner(event_log, tmp_path, "survivor", backend="stub", lease_s=2)
    await asyncio.wait_for(survivor.run(asyncio.Event(), max_tasks=1), timeout=60)
    _, events = await state_of(event_log, "cpu", sid)
    claims = [e for e in events if isinstance(e, SubmissionClaimed)]
    results = [e for e in events if isinstance(e, SubmissionResult)]
    assert [c.attempt for c in claims] == [1, 2]
    assert [c.runner_id for c in claims] == ["doomed", "survivor"]
    assert len(results) == 1 and results[0].attempt == 2 and results[0].runner_id == "survivor"


async def test_cancelled_submission_stops_its_task_within_a_heartbeat(
    event_log: EventLog, tmp_path: Path, sleepy_package: Path
) -> None:
    """Cancelling a running submission kills its 120 s step at the next heartbeat."""
    from runner_helpers import meta

    from kz_events.lifecycle import Cancel, decide

    sid = await submit_dir(event_log, sleepy_package, RMSNORM_ID, tmp_path)
    runner = _runner(event_log, tmp_path, "r1")
    task = asyncio.create_task(runner.run(asyncio.Event(), max_tasks=1))
    for _ in range(400):
        state, _ = await state_of(event_log, "cpu", sid)
        if state.status == "running":
            break
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.5)
    state, _ = await state_of(event_log, "cpu", sid)
    (cancelled,) = decide(state, Cancel(meta=meta("alice"), reason="changed my mind"))
    await event_log.append(cancelled, expect=state.version)
    await asyncio.wait_for(task, timeout=20)
    _, events = await state_of(event_log, "cpu", sid)
    assert not any(isinstance(e, SubmissionResult) for e in events)
    assert (await state_of(event_log, "cpu", sid))[0].status == "cancelled"


async def test_sigterm_hands_the_task_back_at_once(
    nats_server: EmbeddedServer, event_log: EventLog, tmp_path: Path, sleepy_package: Path
) -> None:
    """SIGTERM stops the runner and hands its task back, so another takes it without waiting."""
    sid = await submit_dir(event_log, sleepy_package, RMSNORM_ID, tmp_path)
    env = {
        **os.environ,
        "KZ_NATS_URL": nats_server.url,
        "KZ_RUNNER_ID": "leaving",
        "KZ_LEASE_S": "60",
        "KZ_HEARTBEAT_S": "0.5",
        "KZ_RUNNER_WORKDIR": str(tmp_path / "leaving"),
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "kz_cli.main", "runner", "--arch", "cpu", "--backend", "sandbox"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(600):
            state, _ = await state_of(event_log, "cpu", sid)
            if state.status == "running":
                break
            await asyncio.sleep(0.1)
        assert state.runner_id == "leaving"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    survivor = _runner(event_log, tmp_path, "taker", backend="stub", lease_s=60)
    await asyncio.wait_for(survivor.run(asyncio.Event(), max_tasks=1), timeout=20)
    _, events = await state_of(event_log, "cpu", sid)
    claims = [e for e in events if isinstance(e, SubmissionClaimed)]
    assert [c.runner_id for c in claims] == ["leaving", "taker"]
    assert [c.attempt for c in claims] == [1, 2]
    assert not any(isinstance(e, SubmissionResult) and e.runner_id == "leaving" for e in events)


@pytest.mark.parametrize("stated_size", [None, BIG], ids=["in_memory", "on_disk"])
async def test_main_judge_runs_instead_of_the_submitted_one(
    event_log: EventLog, tmp_path: Path, stated_size: int | None
) -> None:
    """For an existing kernel the runner lays main's judge bundle over the package: main's
    benchmark.py runs, and KZ_BASELINE_PATH points at main's bench_result.yaml; alike for a
    package laid out from memory and one unpacked from disk."""
    trusted = tmp_path / "main_judge"
    shutil.copytree(RMSNORM / ".kernel_package", trusted / ".kernel_package")
    (trusted / ".kernel_package" / "bench_result.yaml").write_text(
        f"schema_version: 1\nkernel_id: {RMSNORM_ID}\nbest: {{value: 1000000000.0}}\n"
    )
    benchmark = trusted / ".kernel_package" / "benchmark.py"
    main_block = 'if __name__ == "__main__":\n'
    benchmark.write_text(
        benchmark.read_text().replace(main_block, main_block + '    print("main judge ran")\n')
    )
    bundle = io.BytesIO()
    pack_directory(trusted, bundle)
    bundle.seek(0)
    await event_log.put_object(JUDGES_BUCKET, judge_key(RMSNORM_ID), bundle)
    sid = await submit_dir(event_log, RMSNORM, RMSNORM_ID, tmp_path, package_size=stated_size)
    runner = _runner(event_log, tmp_path, "r1")
    await asyncio.wait_for(runner.run(asyncio.Event(), max_tasks=1), timeout=120)
    _, events = await state_of(event_log, "cpu", sid)
    result = next(e for e in events if isinstance(e, SubmissionResult))
    log = await event_log.get_object_bytes(LOGS_BUCKET, result.log_key or "")
    assert result.outcome == "accepted", log.decode()[-3000:]
    assert result.result is not None and "faster than current best" in result.result["reason"]
    assert b"main judge ran" in log


async def test_a_restarted_runner_removes_what_its_killed_run_left(
    event_log: EventLog, tmp_path: Path
) -> None:
    """Task directories left by a runner killed mid-task go when it starts again; another
    runner's directory in the same work dir is not touched."""

    def sharing(name: str) -> Runner:
        info = RunnerInfo(runner_id=name, arches=("cpu",), device="cpu", backend="stub")
        options = RunnerOptions(workdir=tmp_path / "shared", poll_s=0.5)
        return Runner(info, NativeTransport(event_log), get_backend("stub"), options)

    mine, theirs = sharing("r1"), sharing("host/r2")
    left = mine.taskdir / "task-0000abcd-x"
    (left / "pkg").mkdir(parents=True)
    (left / "pkg" / "big.bin").write_bytes(b"0" * 1024)
    busy = theirs.taskdir / "task-1111abcd-y"
    busy.mkdir(parents=True)
    assert mine.taskdir != theirs.taskdir
    await asyncio.wait_for(mine.run(asyncio.Event(), max_tasks=0), timeout=30)
    assert not left.exists() and busy.exists()


async def test_a_package_laid_out_in_memory_or_on_disk_runs_the_same(
    event_log: EventLog, tmp_path: Path
) -> None:
    """A small package is laid out straight into its task dir, one stated as big is fetched
    to disk and unpacked into pkg/; the stub, hashing the files it finds, gives both the
    same value. Without keep_workdirs nothing stays behind."""
    small = await submit_dir(event_log, RMSNORM, RMSNORM_ID, tmp_path)
    big = await submit_dir(event_log, RMSNORM, RMSNORM_ID, tmp_path, package_size=BIG)
    info = RunnerInfo(runner_id="r1", arches=("cpu",), device="cpu", backend="stub")
    kept = Runner(
        info,
        NativeTransport(event_log),
        get_backend("stub"),
        RunnerOptions(workdir=tmp_path / "kept", poll_s=0.5, keep_workdirs=True),
    )
    await asyncio.wait_for(kept.run(asyncio.Event(), max_tasks=2), timeout=60)
    values = []
    for sid in (small, big):
        _, events = await state_of(event_log, "cpu", sid)
        result = next(e for e in events if isinstance(e, SubmissionResult))
        assert result.outcome == "accepted" and result.result is not None
        values.append(result.result["metric"]["value"])
    assert values[0] == values[1]
    (small_dir,) = kept.taskdir.glob(f"task-{small[:8]}-*")
    (big_dir,) = kept.taskdir.glob(f"task-{big[:8]}-*")
    assert (small_dir / ".kernel_package" / "desc.yaml").is_file()
    assert sorted(p.name for p in big_dir.iterdir()) == [TARBALL, "pkg"]
    assert (big_dir / "pkg" / ".kernel_package" / "desc.yaml").is_file()

    again = [
        await submit_dir(event_log, RMSNORM, RMSNORM_ID, tmp_path, package_size=size)
        for size in (None, BIG)
    ]
    runner = _runner(event_log, tmp_path, "r2", backend="stub")
    await asyncio.wait_for(runner.run(asyncio.Event(), max_tasks=2), timeout=60)
    for sid in again:
        _, events = await state_of(event_log, "cpu", sid)
        assert any(isinstance(e, SubmissionResult) and e.outcome == "accepted" for e in events)
    assert list(runner.taskdir.iterdir()) == []


async def test_main_bundle_brings_the_incumbent_measured_side_by_side(
    event_log: EventLog, tmp_path: Path
) -> None:
    """Main's bundle carries the kernel's src/ (the incumbent, as the projector stores it): the
    runner hands it to the judge, which measures the challenger beside it and says by how much
    it is faster, with an interval; the runner leaves no copy of it behind."""
    from kz_projector.packages import judge_bundle

    main = {
        path.relative_to(RMSNORM).as_posix(): (0o644, path.read_bytes())
        for path in RMSNORM.rglob("*")
        if path.is_file()
    }
    await event_log.put_object(JUDGES_BUCKET, judge_key(RMSNORM_ID), judge_bundle(main))
    challenger = tmp_path / "fast"
    shutil.copytree(RMSNORM, challenger)
    shutil.rmtree(challenger / "src")
    shutil.copytree(RMSNORM.parents[5] / "variants" / "rmsnorm_fast" / "src", challenger / "src")
    sid = await submit_dir(event_log, challenger, RMSNORM_ID, tmp_path)
    runner = _runner(event_log, tmp_path, "r1")
    await asyncio.wait_for(runner.run(asyncio.Event(), max_tasks=1), timeout=120)
    _, events = await state_of(event_log, "cpu", sid)
    result = next(e for e in events if isinstance(e, SubmissionResult))
    log = await event_log.get_object_bytes(LOGS_BUCKET, result.log_key or "")
    assert result.result is not None, log.decode()[-3000:]
    comparison = result.result["comparison"]
    assert comparison["against"] == "incumbent", comparison
    assert comparison["outcome"] in ("faster", "inconclusive"), comparison  # vectorised: ~1.5x
    assert b"== worker incumbent ==" in log
    assert not list(runner.taskdir.glob("*.incumbent"))
