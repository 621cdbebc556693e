"""`kz audit --from-archive` on clones of a real kernel repo, next to a stack's data dir."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kz_events.config import Settings
from kz_events.eventlog import EventLog
from kz_projector.audit import run_audit
from kz_projector.service import Projectors
from tests.integration.projector.projector_helpers import (
    Clock,
    settings_for,
    store_package,
    submit_and_run,
    write_package,
)

pytestmark = pytest.mark.integration

KID = "cpu/Norm/RMSNorm/fp32/audit_k"


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    )
    return done.stdout


def kz_audit(clone: Path, data_dir: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KZ_DATA_DIR": str(data_dir)}
    env.pop("KZ_NATS_URL", None)
    return subprocess.run(
        [sys.executable, "-m", "kz_cli.main", "audit", "--from-archive", str(clone)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


async def _stack(event_log: EventLog, tmp_path: Path) -> Settings:
    """A kernel repo with two accepted results and its archive, audited clean from the stream."""
    settings = settings_for(tmp_path / "stack")
    clock = Clock()
    digest = await store_package(event_log, write_package(tmp_path / "p1", KID))
    for value in (5.0, 4.0):
        await submit_and_run(event_log, clock, KID, digest, value)
    await _project(event_log, settings, clock)
    assert (await run_audit(settings, clock=clock, elog=event_log)).ok
    return settings


async def _project(event_log: EventLog, settings: Settings, clock: Clock) -> None:
    projectors = Projectors(event_log, settings, clock=clock)
    try:
        await projectors.catch_up()
    finally:
        projectors.close()


async def test_a_plain_clone_verifies_itself_and_the_stack_audit_stays(
    event_log: EventLog, tmp_path: Path
) -> None:
    """`git clone REPO CLONE` and nothing else: the clone has the archive (the branch
    kz-archive, beside refs/kz/events), and `kz audit --from-archive CLONE` replays it to
    main's commit ids and passes; it does not touch the stack's audit.json, which
    `GET /api/audit` serves."""
    settings = await _stack(event_log, tmp_path)
    origin = settings.kernel_repo_path
    stack_report = (settings.data_dir / "audit.json").read_bytes()
    git(origin, "fsck", "--strict")
    archived = git(origin, "rev-parse", "refs/kz/events").strip()
    assert git(origin, "rev-parse", "refs/heads/kz-archive").strip() == archived
    clone = tmp_path / "clone"

    git(tmp_path, "clone", "-q", str(origin), str(clone))
    done = kz_audit(clone, settings.data_dir)

    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("audit (archive): clean"), done.stdout
    assert git(clone, "rev-parse", "origin/kz-archive").strip() == archived
    assert git(clone, "rev-parse", "main").strip() == git(origin, "rev-parse", "main").strip()
    assert (settings.data_dir / "audit.json").read_bytes() == stack_report


async def test_a_clone_without_any_archive_is_told_how_to_fetch_it(
    event_log: EventLog, tmp_path: Path
) -> None:
    """A clone of a repo whose projector has not run since the branch kz-archive came (here:
    the branch removed) has no archive: the audit says how to fetch it instead of reporting a
    divergence; with it fetched it passes; the next start of the projector puts the branch
    back, and plain clones verify themselves again."""
    settings = await _stack(event_log, tmp_path)
    origin = settings.kernel_repo_path
    git(origin, "update-ref", "-d", "refs/heads/kz-archive")
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(origin), str(clone))

    plain = kz_audit(clone, settings.data_dir)

    assert plain.returncode == 2, plain.stdout + plain.stderr
    assert "git fetch origin 'refs/kz/*:refs/kz/*'" in plain.stderr
    assert "diverge" not in plain.stdout + plain.stderr
    git(clone, "fetch", "-q", "origin", "refs/kz/*:refs/kz/*")
    assert kz_audit(clone, settings.data_dir).returncode == 0

    await _project(event_log, settings, Clock())
    again = tmp_path / "again"
    git(tmp_path, "clone", "-q", str(origin), str(again))
    assert kz_audit(again, settings.data_dir).returncode == 0
