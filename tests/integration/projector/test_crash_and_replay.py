"""Crash safety and replay: SIGKILLed projector processes, and a 1,000-result replay."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from dulwich.repo import Repo
from projector_helpers import Clock, settings_for, store_package, submit_and_run, write_package

from kz_events.eventlog import EventLog
from kz_events.events import SubmissionCommitted
from kz_events.server import EmbeddedServer
from kz_events.subjects import JUDGES_BUCKET, judge_key, reference_key
from kz_package.memread import read_package_files
from kz_projector.audit import run_audit
from kz_projector.packages import files_of_tree, judge_bundle
from kz_projector.service import Projectors

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout


async def _make_log(elog: EventLog, tmp: Path, clock: Clock, count: int) -> list[str]:
    kernels = [f"cpu/Norm/RMSNorm/fp32/k{i}" for i in range(4)]
    digests = [
        await store_package(elog, write_package(tmp / f"p{i}", k)) for i, k in enumerate(kernels)
    ]
    rng = random.Random(7)
    sids = []
    for n in range(count):
        k = n % len(kernels)
        sids.append(
            await submit_and_run(elog, clock, kernels[k], digests[k], round(rng.uniform(1, 100), 3))
        )
    return sids


def _committed_counts(events: list[tuple[int, object]]) -> Counter[str]:
    return Counter(e.submission_id for _, e in events if isinstance(e, SubmissionCommitted))


async def test_replay_of_1000_results_gives_the_live_head(
    event_log: EventLog, tmp_path: Path, clock: Clock
) -> None:
    """Replaying 1,000 accepted results into an empty repo gives the live head; fsck is clean."""
    settings = settings_for(tmp_path)
    sids = await _make_log(event_log, tmp_path, clock, 1000)
    await Projectors(event_log, settings, clock=clock).catch_up()
    repo = settings.kernel_repo_path
    assert int(_git(repo, "rev-list", "--count", "main")) == 2000
    _git(repo, "fsck", "--strict")
    report = await run_audit(settings, clock=clock, elog=event_log)
    assert report.ok, report.lines()
    assert report.replay_head == report.live_head and report.results_compared == 1000
    committed = _committed_counts(await event_log.load("kz.ev.submission.*.*.committed"))
    assert set(committed) == set(sids) and set(committed.values()) == {1}


def _spawn(settings_env: dict[str, str]) -> subprocess.Popen[bytes]:
    env = {**os.environ, **settings_env, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-m", "kz_cli.main", "projector"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


async def test_sigkilled_projector_applies_every_result_exactly_once(
    nats_server: EmbeddedServer, event_log: EventLog, tmp_path: Path, clock: Clock
) -> None:
    """Killing the projector at random points never applies a result twice or loses one."""
    settings = settings_for(tmp_path)
    env = {
        "KZ_NATS_URL": nats_server.url,
        "KZ_KERNEL_REPO_PATH": str(settings.kernel_repo_path),
        "KZ_DATA_DIR": str(settings.data_dir),
        "KZ_INDEX_PATH": str(tmp_path / "index.json"),
    }
    sids = await _make_log(event_log, tmp_path, clock, 200)
    rng = random.Random(11)
    lock = settings.kernel_repo_path / "refs" / "heads" / "main.lock"
    for _ in range(8):
        proc = _spawn(env)
        await asyncio.sleep(rng.uniform(0.8, 2.5))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        if lock.exists():  # the operator's step the projector asks for
            lock.unlink()
    proc = _spawn(env)
    try:
        for _ in range(600):
            committed = _committed_counts(await event_log.load("kz.ev.submission.*.*.committed"))
            if len(committed) == len(sids):
                break
            await asyncio.sleep(0.1)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    assert set(committed) == set(sids) and set(committed.values()) == {1}
    trailers = Counter(
        _git(
            settings.kernel_repo_path,
            "log",
            "--format=%(trailers:key=Kz-Submission,valueonly)",
            "main",
        ).split()
    )
    assert set(trailers) == set(sids) and set(trailers.values()) == {2}
    with Repo(str(settings.kernel_repo_path)) as repo:  # runners get main's judge, crashes or not
        tree = repo[repo.refs[b"refs/heads/main"]].tree
        key = reference_key("cpu/Norm/RMSNorm/fp32")
        # pinned once, whatever the crashes
        reference = read_package_files(await event_log.get_object_bytes(JUDGES_BUCKET, key))
        for kernel in {f"cpu/Norm/RMSNorm/fp32/k{i}" for i in range(4)}:
            stored = await event_log.get_object_bytes(JUDGES_BUCKET, judge_key(kernel))
            files = files_of_tree(repo.object_store, tree, kernel)
            assert stored == judge_bundle(files, reference)
    await Projectors(event_log, settings, clock=clock).catch_up()
    report = await run_audit(settings, clock=clock, elog=event_log)
    assert report.ok, report.lines()
