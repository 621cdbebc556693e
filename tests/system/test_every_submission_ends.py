"""Every submission ends, and poison in the log stops nothing: `kz up` as a process, SIGKILLed
(its embedded nats-server with it) with work in flight and started again on the same data dir,
and started over a log holding undecodable, misfiled and repeated events."""

from __future__ import annotations

import asyncio
import os
import random
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from dulwich.repo import Repo
from system_packages import valid_package

from kz_events.eventlog import EventLog
from kz_events.server import free_port
from kz_events.subjects import EVENTS_STREAM
from kz_projector.gitstore import MAIN, commit_trailers
from kz_testing import KzProcess, kz_argv

pytestmark = [pytest.mark.system, pytest.mark.timeout(170)]

TERMINAL = {"committed", "rejected", "failed", "cancelled"}
CRASHES = 3
SUBMITTERS = 3


class Up:
    """`kz up --backend stub` on one data dir, started again on a fresh API port each time."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.process: KzProcess | None = None
        self.base_url = ""
        self.starts = 0

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("KZ_")}
        env.update(
            {
                "KZ_LEASE_S": "2",
                "KZ_HEARTBEAT_S": "0.5",
                "KZ_TASK_TIMEOUT_S": "30",
                "KZ_LONGPOLL_TIMEOUT_S": "5",
                "KZ_MAX_OPEN_SUBMISSIONS": "1000",
                "KZ_RESUBMIT_LIMIT": "0",  # load, not the resubmission rate, is under test
            }
        )
        return env

    def start(self, timeout_s: float = 60.0) -> None:
        port = free_port()
        self.starts += 1
        argv = kz_argv(
            "up",
            "--backend",
            "stub",
            "--no-demo",
            "--port",
            str(port),
            "--data-dir",
            str(self.root),
        )
        self.process = KzProcess("kz up", argv, self.env(), self.root / "up.log").start()
        self.base_url = f"http://127.0.0.1:{port}"
        self.process.wait_healthy(self.base_url, timeout_s)

    def kill(self) -> None:
        """SIGKILL the process group: kz up and the nats-server it started, as a crash would."""
        assert self.process is not None
        self.process.kill()

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop(timeout_s=20)

    @property
    def nats_url(self) -> str:
        return (self.root / "nats.url").read_text().strip()

    def tail(self) -> str:
        return self.process.tail(80) if self.process else "(not started)"


def _submit(client: httpx.Client, kernel_id: str, verdict: str) -> str | None:
    """POST one package; its id when answered 202 (a crash may cut the request short)."""
    try:
        response = client.post(
            "/api/submissions",
            headers={"X-Submitter-Id": "crash", "Idempotency-Key": uuid.uuid4().hex},
            data={"kernel_id": kernel_id, "message": f"crash test {verdict}"},
            files={
                "package": (
                    "p.tar.gz",
                    valid_package(kernel_id, verdict, 1.0 + random.random()),
                    "application/gzip",
                )
            },
        )
    except httpx.HTTPError:
        return None
    return str(response.json()["submission_id"]) if response.status_code == 202 else None


def _statuses(client: httpx.Client, ids: list[str]) -> dict[str, str]:
    out = {}
    for sid in ids:
        response = client.get(f"/api/submissions/{sid}", headers={"X-Submitter-Id": "crash"})
        out[sid] = response.json()["submission"]["status"] if response.status_code == 200 else "?"
    return out


def _wait_terminal(up: Up, ids: list[str], quiet_s: float) -> dict[str, str]:
    """The statuses once every submission ended, or once none ended for `quiet_s`: the backlog
    of the three rounds (hundreds of tasks, as many as the submitters got in) takes its time on
    a busy host, and what fails the promise is a stall, not a slow runner."""
    ended, progress = -1, time.monotonic()
    with httpx.Client(base_url=up.base_url, timeout=10) as client:
        while True:
            statuses = _statuses(client, ids)
            now_ended = sum(s in TERMINAL for s in statuses.values())
            if now_ended == len(statuses):
                return statuses
            if now_ended > ended:
                ended, progress = now_ended, time.monotonic()
            elif time.monotonic() - progress > quiet_s:
                return statuses
            time.sleep(0.3)


def _submit_until(base_url: str, prefix: str, stop: threading.Event, ids: list[str]) -> None:
    """Submit packages one after another until `stop` (or the stack dies under the requests)."""
    with httpx.Client(base_url=base_url, timeout=10) as client:
        for i in range(1000):
            if stop.is_set():
                return
            sid = _submit(
                client, f"cpu/Norm/RMSNorm/fp32/{prefix}_{i}", "reject" if i % 4 == 3 else "accept"
            )
            if sid is None:
                return
            ids.append(sid)


def _claims(up: Up, ids: list[str]) -> int:
    """How many submissions were claimed more than once (re-claimed after a crash)."""
    with httpx.Client(base_url=up.base_url, timeout=10) as client:
        return sum(
            [
                e["type"]
                for e in client.get(
                    f"/api/submissions/{sid}", headers={"X-Submitter-Id": "crash"}
                ).json()["events"]
            ].count("claimed")
            > 1
            for sid in ids
        )


def test_every_202_answered_submission_ends_after_sigkills(tmp_path: Path) -> None:
    """Three SIGKILLs of kz up and its nats-server while submitters keep submitting, each
    followed by a start on the same data dir: every submission answered 202 ends in a terminal
    state, and `kz audit` finds none left open past its time limit."""
    up = Up(tmp_path / "up")
    rng = random.Random(21)
    accepted: list[str] = []
    open_at_kill = 0
    try:
        for round_ in range(CRASHES):
            up.start()
            stop = threading.Event()
            ids: list[str] = []
            submitters = [
                threading.Thread(
                    target=_submit_until, args=(up.base_url, f"c{round_}_{n}", stop, ids)
                )
                for n in range(SUBMITTERS)
            ]
            for thread in submitters:
                thread.start()
            time.sleep(rng.uniform(1.5, 3.0))
            with httpx.Client(base_url=up.base_url, timeout=5) as client:
                open_at_kill += sum(
                    s not in TERMINAL for s in _statuses(client, list(ids)).values()
                )
            up.kill()
            stop.set()
            for thread in submitters:
                thread.join(timeout=30)
            accepted += ids
        up.start()
        statuses = _wait_terminal(up, accepted, quiet_s=60)
        left = {sid: s for sid, s in statuses.items() if s not in TERMINAL}
        assert not left, f"not ended: {left}\n{up.tail()}"
        assert open_at_kill > 0, "no kill found work in flight"
        print(
            f"\n{len(accepted)} submissions answered 202, {open_at_kill} open at the kills, "
            f"{_claims(up, accepted)} claimed again after a crash"
        )
        audit = _audit(up)
        assert audit["open_too_long"] == [], audit
    finally:
        up.stop()


def _audit(up: Up) -> dict[str, Any]:
    import json
    import subprocess

    done = subprocess.run(
        kz_argv("audit", "--json", "--nats-url", up.nats_url),
        env={
            **up.env(),
            "KZ_DATA_DIR": str(up.root),
            "KZ_KERNEL_REPO_PATH": str(up.root / "kernel_data"),
        },
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.stdout, done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return report


async def _poison(nats_url: str) -> None:
    """`{}`, garbage, a misfiled copy and a repeated copy of the first `accepted`."""
    elog = await EventLog.connect(nats_url, name="poison")
    try:
        accepted = await elog.js.get_last_msg(EVENTS_STREAM, "kz.ev.submission.*.*.accepted")
        subject, raw = str(accepted.subject), bytes(accepted.data or b"")
        misfiled = subject.replace(subject.split(".")[4], str(uuid.uuid4()))
        for subj, data in [
            ("kz.ev.submission.cpu.nobody.result", b"{}"),
            ("kz.ev.submission.cpu.nobody.submitted", b"\xffnot json"),
            (misfiled, raw),
            (subject, raw),
        ]:
            await elog.js.publish(
                subj, data, stream=EVENTS_STREAM, headers={"Nats-Msg-Id": str(uuid.uuid4())}
            )
    finally:
        await elog.close()


def _commits_of(repo_path: Path) -> list[str]:
    repo = Repo(str(repo_path))
    try:
        return [
            commit_trailers(entry.commit).get("Kz-Submission", "")
            for entry in repo.get_walker(include=[repo.refs[MAIN]])
        ]
    finally:
        repo.close()


def test_kz_up_starts_over_poison_and_commits_later_submissions(tmp_path: Path) -> None:
    """With undecodable, misfiled and repeated events in the log, kz up starts again, its
    read models catch up and report them, a repeated accepted is committed once and a later
    submission commits."""
    up = Up(tmp_path / "up")
    try:
        up.start()
        with httpx.Client(base_url=up.base_url, timeout=10) as client:
            first = _submit(client, "cpu/Norm/RMSNorm/fp32/poisoned", "accept")
        assert first is not None
        assert _wait_terminal(up, [first], 30)[first] == "committed"
        asyncio.run(_poison(up.nats_url))
        up.stop()
        up.start()
        with httpx.Client(base_url=up.base_url, timeout=10) as client:
            later = _submit(client, "cpu/Norm/RMSNorm/fp32/poisoned", "accept")
            assert later is not None
            assert _wait_terminal(up, [later], 30)[later] == "committed", up.tail()
            health = client.get("/api/health").json()
        assert health["fold"]["caught_up"] is True
        assert health["skipped_events"]["by_kind"] == {
            "misfiled": 1,
            "repeated": 1,
            "undecodable": 2,
        }
        assert up.process is not None and up.process.alive
        commits = _commits_of(up.root / "kernel_data")
        assert commits.count(first) == 2 and commits.count(later) == 2
    finally:
        up.stop()
