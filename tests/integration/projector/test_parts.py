"""Disqualification, import, the sweeper, the index file, locks and the CLI, end to end."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from dulwich.repo import Repo
from projector_helpers import Clock, store_package, submit_and_run, write_package

from kz_events.config import Settings
from kz_events.eventlog import EventLog
from kz_events.events import EventMeta, SubmissionFailed
from kz_events.lifecycle import Disqualify, decide, fold
from kz_events.server import EmbeddedServer
from kz_events.subjects import JUDGES_BUCKET, aggregate_filter, judge_key
from kz_projector import gitstore
from kz_projector.audit import run_audit
from kz_projector.errors import RefLocked
from kz_projector.importer import import_path
from kz_projector.referee import Referee
from kz_projector.repo_read import KernelRepo
from kz_projector.service import Projectors

pytestmark = pytest.mark.integration

KID = "cpu/Norm/RMSNorm/fp32/test_k"
ROOT = Path(__file__).resolve().parents[3]


async def _status_within(elog: EventLog, sid: str, wanted: str, *, tries: int) -> str:
    """The submission's status once it is `wanted`, or after `tries` looks 50 ms apart."""
    subject = aggregate_filter("submission", "cpu", sid)
    for _ in range(tries):
        status = str(fold(await elog.load(subject)).status)
        if status == wanted:
            return status
        await asyncio.sleep(0.05)
    return str(fold(await elog.load(subject)).status)


async def _disqualify(elog: EventLog, clock: Clock, sid: str) -> None:
    state = fold(await elog.load(aggregate_filter("submission", "cpu", sid)))
    meta = EventMeta(event_id=str(uuid.uuid4()), occurred_at=clock(), actor="maintainer")
    event = decide(state, Disqualify(meta=meta, reason="timing exploit"))[0]
    await elog.append(event, expect=state.version)


async def test_disqualification_refolds_as_new_commits(
    event_log: EventLog, settings: Settings, clock: Clock, tmp_path: Path
) -> None:
    """Disqualifying the best result restores the next best and its source in new commits."""
    d1 = await store_package(event_log, write_package(tmp_path / "a", KID, variant="slow"))
    d2 = await store_package(event_log, write_package(tmp_path / "b", KID, variant="cheat"))
    await submit_and_run(event_log, clock, KID, d1, 4.0)
    cheat = await submit_and_run(event_log, clock, KID, d2, 1.0)
    projectors = Projectors(event_log, settings, clock=clock)
    await projectors.catch_up()
    repo = KernelRepo(settings.kernel_repo_path)
    assert repo.read_file(KID, "src/kernel.py") == b"VARIANT = 'cheat'\n"
    before = repo.head()
    await _disqualify(event_log, clock, cheat)
    await projectors.catch_up()
    assert repo.read_file(KID, "src/kernel.py") == b"VARIANT = 'slow'\n"
    board = repo.read_file(KID, ".kernel_package/bench_result.yaml").decode()
    assert "value: 4.0" in board and "value: 1.0" not in board
    history = repo.history(KID, limit=10)
    assert [c.kind for c in history[:2]] == ["bench-result", "disqualify-source"]
    assert history[2].commit == before
    index = json.loads(settings.effective_index_path.read_bytes())
    assert index["kernels"][0]["best"]["value"] == 4.0
    assert (await run_audit(settings, clock=clock, elog=event_log)).ok


async def test_import_makes_the_repo_from_the_log_alone(
    event_log: EventLog, settings: Settings, clock: Clock, tmp_path: Path
) -> None:
    """Imported packages become commits once; the judge bundle is stored for each kernel."""
    folder = tmp_path / "kernels"
    for name in ("x1", "x2"):
        write_package(folder / name, f"cpu/GEMM/dense/fp32/{name}")
    done = await import_path(event_log, folder, submitter="zoo", clock=clock)
    assert [d.seq is not None for d in done] == [True, True]
    again = await import_path(event_log, folder, submitter="zoo", clock=clock)
    assert [d.seq for d in again] == [None, None]
    await Projectors(event_log, settings, clock=clock).catch_up()
    repo = KernelRepo(settings.kernel_repo_path)
    assert repo.files("cpu/GEMM/dense/fp32/x1") == [
        ".kernel_package/bench_result.yaml",
        ".kernel_package/benchmark.py",
        ".kernel_package/build_test_env.py",
        ".kernel_package/desc.yaml",
        "src/kernel.py",
    ]
    assert await event_log.has_object(JUDGES_BUCKET, judge_key("cpu/GEMM/dense/fp32/x2"))
    assert (await run_audit(settings, clock=clock, elog=event_log)).ok


async def test_non_bare_repo_gets_its_checkout_refreshed(
    event_log: EventLog, tmp_path: Path, clock: Clock, settings: Settings
) -> None:
    """A non-bare kernel repo's files follow main after each commit."""
    repo_path = tmp_path / "checkout"
    Repo.init(str(repo_path), mkdir=True, default_branch=b"main").close()
    mine = Settings(
        **{
            **{f: getattr(settings, f) for f in settings.__struct_fields__},
            "kernel_repo_path": repo_path,
        }
    )
    digest = await store_package(event_log, write_package(tmp_path / "p", KID))
    await submit_and_run(event_log, clock, KID, digest, 2.0)
    await Projectors(event_log, mine, clock=clock).catch_up()
    board = (repo_path / KID / ".kernel_package" / "bench_result.yaml").read_text()
    assert "value: 2.0" in board
    status = subprocess.run(
        ["git", "-C", str(repo_path), "status", "--porcelain"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert status == ""


async def test_a_ref_lock_left_by_a_killed_writer_is_removed(
    event_log: EventLog,
    settings: Settings,
    clock: Clock,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A projector SIGKILLed mid-update leaves `main.lock` (the soak saw its successor stop
    on it). One that stays untouched for `STALE_REF_LOCK_S` is its writer's debris: removed
    with a warning, and main moves — whether it is hours old or left a moment ago."""
    monkeypatch.setattr(gitstore, "STALE_REF_LOCK_S", 0.3)
    digest = await store_package(event_log, write_package(tmp_path / "p", KID))
    await submit_and_run(event_log, clock, KID, digest, 2.0)
    projectors = Projectors(event_log, settings, clock=clock)
    lock = settings.kernel_repo_path / "refs" / "heads" / "main.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text("")
    os.utime(lock, (1, 1))  # left long ago
    await projectors.catch_up()
    assert not lock.exists()
    repo = Repo(str(settings.kernel_repo_path))
    assert repo.refs[b"refs/heads/main"] is not None
    repo.close()
    await submit_and_run(event_log, clock, KID, digest, 1.0)
    lock.write_text("")  # left a moment ago
    await projectors.catch_up()
    assert not lock.exists()
    projectors.close()
    assert sum("left by a writer that died" in r.getMessage() for r in caplog.records) == 2


def test_a_ref_lock_a_live_writer_keeps_renewing_is_left_alone(tmp_path: Path) -> None:
    """A lock that changes while the projector waits belongs to a live writer: the move stops
    with `RefLocked` naming it, and the lock is not touched."""
    repo = Repo.init_bare(str(tmp_path / "repo.git"), mkdir=True)
    writer = gitstore.Writer(repo)
    blob = writer.blob(b"x")
    lock = tmp_path / "repo.git" / "refs" / "heads" / "main.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text("")
    stop = threading.Event()

    def renew() -> None:
        while not stop.wait(0.02):
            lock.write_text(str(time.monotonic()))

    renewer = threading.Thread(target=renew)
    renewer.start()
    try:
        with pytest.raises(RefLocked, match=r"main\.lock is held by another writer"):
            writer.move(None, blob)
    finally:
        stop.set()
        renewer.join()
        repo.close()
    assert lock.exists()


async def test_sweeper_fails_tasks_whose_runner_went_quiet(
    event_log: EventLog, settings: Settings, tmp_path: Path
) -> None:
    """A last attempt with no heartbeat past lease and grace ends failed with runner_lost."""
    clock = Clock()
    digest = await store_package(event_log, write_package(tmp_path / "p", KID))
    lost = await submit_and_run(
        event_log, clock, KID, digest, 1.0, stop_after_claim=True, max_attempts=1
    )
    retry = await submit_and_run(event_log, clock, KID, digest, 1.0, stop_after_claim=True)
    projectors = Projectors(event_log, settings, clock=clock)
    clock.now += timedelta(seconds=60)
    assert await projectors.sweeper.sweep() == [lost]
    failed = [
        e
        for _, e in await event_log.load(aggregate_filter("submission", "cpu", lost))
        if isinstance(e, SubmissionFailed)
    ]
    assert failed[0].code == "runner_lost"
    assert fold(await event_log.load(aggregate_filter("submission", "cpu", retry))).status == (
        "running"
    )


async def test_running_sweeper_follows_the_log_and_fails_a_task_claimed_later(
    event_log: EventLog, settings: Settings, tmp_path: Path
) -> None:
    """The sweeper of a running service learns of claims from the shared follow (no replay
    per pass) and fails a last attempt that goes quiet after it started."""
    clock = Clock()
    digest = await store_package(event_log, write_package(tmp_path / "p", KID))
    projectors = Projectors(event_log, settings, clock=clock)
    projectors.sweeper.interval_s = 0.05
    replays = 0
    replay = event_log.replay

    def counting_replay(*args: object, **kwargs: object) -> object:
        nonlocal replays
        replays += 1
        return replay(*args, **kwargs)  # type: ignore[arg-type]

    event_log.replay = counting_replay  # type: ignore[method-assign]
    running = asyncio.create_task(projectors.run())
    try:
        await asyncio.sleep(0.3)
        replays_at_start = replays
        lost = await submit_and_run(
            event_log, clock, KID, digest, 1.0, stop_after_claim=True, max_attempts=1
        )
        clock.now += timedelta(seconds=60)
        assert await _status_within(event_log, lost, "failed", tries=100) == "failed"
        assert replays == replays_at_start  # followed, not replayed each pass
    finally:
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running
        projectors.close()


async def test_cli_index_at_and_audit_exit_codes(
    nats_server: EmbeddedServer,
    event_log: EventLog,
    settings: Settings,
    clock: Clock,
    tmp_path: Path,
) -> None:
    """`kz index --at` rewinds the leaderboard; `kz audit` exits 0 clean, 1 on a moved branch."""
    digest = await store_package(event_log, write_package(tmp_path / "p", KID))
    for value in (3.0, 1.0):
        await submit_and_run(event_log, clock, KID, digest, value)
    await Projectors(event_log, settings, clock=clock).catch_up()
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "KZ_NATS_URL": nats_server.url,
        "KZ_KERNEL_REPO_PATH": str(settings.kernel_repo_path),
        "KZ_DATA_DIR": str(settings.data_dir),
        "KZ_INDEX_PATH": str(tmp_path / "index.json"),
    }

    def kz(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "kz_cli.main", *args],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        )

    accepted = await event_log.load("kz.ev.submission.*.*.accepted")
    past = await asyncio.to_thread(kz, "index", "--at", str(accepted[0][0]))
    assert past.returncode == 0, past.stderr
    assert json.loads(past.stdout)["kernels"][0]["best"]["value"] == 3.0
    clean = await asyncio.to_thread(kz, "audit")
    assert clean.returncode == 0, clean.stdout + clean.stderr
    subprocess.run(
        ["git", "-C", str(settings.kernel_repo_path), "update-ref", "refs/heads/main", "main~1"],
        check=True,
    )
    moved = await asyncio.to_thread(kz, "audit")
    assert moved.returncode == 1 and "DIVERGENCE" in moved.stdout
    assert json.loads((settings.data_dir / "audit.json").read_text())["ok"] is False


async def test_a_part_that_stands_still_is_started_again(
    event_log: EventLog, settings: Settings, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A referee that stops following the log (as one did after a restart on a cluster)
    while results keep coming is noticed by the service's watch, and every part is started
    again from what it durably did: the result waiting for it is judged and committed."""
    clock = Clock()
    digest = await store_package(event_log, write_package(tmp_path / "p", KID))
    real_run = Referee.run
    stalls = [True]

    async def stand_still(self: Referee) -> None:
        if not stalls:
            await real_run(self)
            return
        stalls.clear()
        await asyncio.Event().wait()  # follows nothing, forever

    projectors = Projectors(event_log, settings, clock=clock, stall_s=0.5, watch_s=0.1)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Referee, "run", stand_still)
        running = asyncio.create_task(projectors.run())
        try:
            sid = await submit_and_run(event_log, clock, KID, digest, 2.0)
            assert await _status_within(event_log, sid, "committed", tries=200) == "committed"
        finally:
            running.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await running
            projectors.close()
    assert any("the referee stood at sequence" in r.getMessage() for r in caplog.records)
