"""Projector benchmark: results folded into git per second, against the plain `git` CLI.

Prints (1) accepted results per second folded by the git projector's core (dulwich objects,
one pack and one compare-and-swap per batch, and per result), (2) the same two commits per
result made with the `git` CLI in a working tree, and their ratio, and (3) the time to replay
100,000 events (20,000 accepted results) into an empty in-memory repo plus the index fold.
Run: `.venv/bin/python bench/projector.py [--results N] [--events N]`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from kz_events.events import (
    PackageSummary,
    SubmissionAccepted,
    SubmissionClaimed,
    SubmissionCommitted,
    SubmissionResult,
    SubmissionSubmitted,
)
from kz_projector.gitfold import GitFold
from kz_projector.gitstore import FILE_MODE, FileMap, Person, open_repo
from kz_projector.index import IndexState, fold_index, render_index, with_facts
from kz_projector.scoreboard import Accepted, Board, board_accept, render_yaml, scoreboard
from kz_testing import package_files

T0 = datetime(2025, 1, 1, tzinfo=UTC)
SERVICE = Person("kernel zoo", "bot@kernel-zoo.invalid")
KERNELS = [f"cpu/Norm/RMSNorm/fp32/k{i}" for i in range(8)]
SUMMARY = PackageSummary(title="t", language="python", metric=None)


def package(kernel_id: str, variant: int) -> FileMap:
    files = package_files(
        kernel_id,
        title="bench kernel",
        benchmark="print('bench')\n" * 40,
        src={"kernel.py": f"VARIANT = {variant}\n" * 30},
    )
    return {path: (FILE_MODE, data) for path, data in files.items()}


class Packages:
    """Packages held in memory, keyed by a made-up digest."""

    def __init__(self) -> None:
        self.store: dict[str, FileMap] = {}

    def add(self, kernel_id: str, variant: int) -> str:
        digest = f"{variant:064x}"
        self.store[digest] = package(kernel_id, variant)
        return digest

    async def files(self, digest: str) -> FileMap:
        return self.store[digest]


def result_doc(value: float) -> dict[str, Any]:
    return {
        "schema_version": 1,
        "accepted": True,
        "reason": "faster",
        "metric": {"name": "latency", "unit": "us", "better": "lower", "value": value},
        "workloads": [
            {
                "name": "w",
                "value": value,
                "stats": {"median": value, "samples": 20, "p10": value, "p90": value},
            }
        ],
        "correctness": {"passed": True, "checks": [{"name": "w", "passed": True}]},
        "environment": {"device": "cpu"},
    }


def accepted(n: int, digest: str) -> SubmissionAccepted:
    return SubmissionAccepted(
        event_id=str(uuid.uuid4()),
        occurred_at=T0 + timedelta(seconds=n),
        actor="referee",
        submission_id=str(uuid.UUID(int=n + 1)),
        kernel_id=KERNELS[n % len(KERNELS)],
        submitter_id=f"agent-{n % 5}",
        runner_id="r1",
        attempt=1,
        package_digest=digest,
        result=result_doc(100.0 - (n % 97)),
        result_seq=n,
    )


def fold_rate(count: int, batch: int) -> float:
    """Results per second through `GitFold` into a bare repo on disk."""
    packages = Packages()
    digests = [packages.add(KERNELS[n % len(KERNELS)], n % 50) for n in range(count)]
    with tempfile.TemporaryDirectory() as tmp:
        fold = GitFold(open_repo(Path(tmp) / "repo"), packages, SERVICE)
        start = time.perf_counter()

        async def go() -> None:
            for n in range(count):
                await fold.apply(n + 1, accepted(n, digests[n]))
                if (n + 1) % batch == 0:
                    fold.flush()
            fold.flush()

        asyncio.run(go())
        elapsed = time.perf_counter() - start
        fold.repo.close()
    return count / elapsed


def git(cwd: Path, *args: str, env: dict[str, str] | None = None) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, env=env)


def cli_rate(count: int) -> float:
    """Results per second making the same two commits per result with the `git` CLI."""
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        git(work, "init", "-q", "-b", "main")
        git(work, "config", "core.fsyncObjectFiles", "true")
        boards: dict[str, Board] = {}
        start = time.perf_counter()
        for n in range(count):
            event = accepted(n, "")
            kernel = work / event.kernel_id
            for path, (_, data) in package(event.kernel_id, n % 50).items():
                (kernel / path).parent.mkdir(parents=True, exist_ok=True)
                (kernel / path).write_bytes(data)
            board = boards.get(event.kernel_id) or Board(kernel_id=event.kernel_id)
            bench = kernel / ".kernel_package" / "bench_result.yaml"
            bench.write_bytes(render_yaml(scoreboard(board)))
            env = {
                **os.environ,
                "GIT_AUTHOR_NAME": event.submitter_id,
                "GIT_AUTHOR_EMAIL": "a@b",
                "GIT_COMMITTER_NAME": SERVICE.name,
                "GIT_COMMITTER_EMAIL": SERVICE.email,
                "GIT_AUTHOR_DATE": event.occurred_at.isoformat(),
                "GIT_COMMITTER_DATE": event.occurred_at.isoformat(),
            }
            trailers = f"\n\nKz-Submission: {event.submission_id}\nKz-Event-Seq: {n + 1}"
            git(work, "add", "-A", env=env)
            git(work, "commit", "-q", "-m", f"source{trailers}", env=env)
            item = Accepted(
                seq=n + 1,
                submission_id=event.submission_id,
                submitter=event.submitter_id,
                runner_id="r1",
                digest="",
                value=event.result["metric"]["value"],
                at=event.occurred_at.isoformat(),
                result=event.result,
                environment={},
            )
            boards[event.kernel_id] = board_accept(board, item, None)
            bench.write_bytes(render_yaml(scoreboard(boards[event.kernel_id])))
            git(work, "add", "-A", env=env)
            git(work, "commit", "-q", "-m", f"bench result{trailers}", env=env)
        elapsed = time.perf_counter() - start
    return count / elapsed


def replay_events(total: int) -> list[tuple[int, Any]]:
    """`total` events: submitted, claimed, result, accepted, committed per submission."""
    events: list[tuple[int, Any]] = []
    n = 0
    while len(events) < total:
        ev = accepted(n, f"{n % 50:064x}")
        common = {
            "actor": "x",
            "occurred_at": ev.occurred_at,
            "submission_id": ev.submission_id,
            "kernel_id": ev.kernel_id,
        }
        seq = len(events)
        events += [
            (
                seq + 1,
                SubmissionSubmitted(
                    event_id="s",
                    submitter_id=ev.submitter_id,
                    package_digest=ev.package_digest,
                    package_size=1,
                    **common,
                ),
            ),
            (
                seq + 2,
                SubmissionClaimed(event_id="c", runner_id="r1", attempt=1, lease_id="l", **common),
            ),
            (
                seq + 3,
                SubmissionResult(
                    event_id="r",
                    runner_id="r1",
                    attempt=1,
                    lease_id="l",
                    outcome="accepted",
                    result=ev.result,
                    **common,
                ),
            ),
            (seq + 4, ev),
            (
                seq + 5,
                SubmissionCommitted(
                    event_id="m",
                    source_commit="a" * 40,
                    bench_result_commit="b" * 40,
                    accepted_seq=seq + 4,
                    **common,
                ),
            ),
        ]
        n += 1
    return events[:total]


def replay_time(total: int) -> tuple[float, int]:
    packages = Packages()
    for n in range(50):
        for kernel in KERNELS:
            packages.store[f"{n:064x}"] = package(kernel, n)
    events = replay_events(total)
    fold = GitFold(open_repo(None), packages, SERVICE)
    state = IndexState()
    start = time.perf_counter()

    async def go() -> None:
        nonlocal state
        for seq, event in events:
            await fold.apply(seq, event)
            digest = getattr(event, "package_digest", None)
            if digest is not None and digest not in state.facts:
                state = with_facts(state, digest, SUMMARY)
            state = fold_index(state, seq, event)
        fold.flush()
        render_index(state)

    asyncio.run(go())
    return time.perf_counter() - start, sum(
        1 for _, e in events if isinstance(e, SubmissionAccepted)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--results", type=int, default=300)
    parser.add_argument("--cli-results", type=int, default=60)
    parser.add_argument("--events", type=int, default=100_000)
    args = parser.parse_args()
    batched = fold_rate(args.results, batch=64)
    single = fold_rate(args.results, batch=1)
    cli = cli_rate(args.cli_results)
    print(f"git projector (dulwich, batch of 64): {batched:8.1f} results/s")
    print(f"git projector (dulwich, CAS per result): {single:8.1f} results/s")
    print(f"git CLI in a working tree:            {cli:8.1f} results/s")
    print(
        f"ratio batched / CLI: {batched / cli:5.1f}x (target >= 10x); "
        f"per-result / CLI: {single / cli:5.1f}x"
    )
    elapsed, results = replay_time(args.events)
    print(
        f"replay of {args.events} events ({results} accepted) into an empty in-memory repo "
        f"+ index: {elapsed:.1f} s (target < 60 s)"
    )


if __name__ == "__main__":
    main()
