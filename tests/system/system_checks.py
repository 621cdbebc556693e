"""The end-of-run checks of the system tests, against the log, the kernel repo, the object store,
`kz audit`, `kz index` and the API, and the summary table they print.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from dulwich.objects import Commit
from dulwich.repo import Repo
from dulwich.trailers import parse_trailers
from system_driver import TERMINAL, Record
from system_packages import expected_status
from system_stack import Stack, wait_for

from kz_events.eventlog import EventLog
from kz_events.events import SubmissionAccepted, SubmissionCommitted, SubmissionSubmitted
from kz_events.subjects import PACKAGES_BUCKET

__all__ = [
    "LogFacts",
    "MainCommit",
    "check_run",
    "main_history",
    "read_log",
    "stream_replicas",
    "summary_table",
]

# Why a valid submission may end other than its package asked: its runners kept dying.
FAULT_CODES = frozenset({"runner_lost", "attempts_exhausted", "lease_expired"})


@dataclass
class LogFacts:
    """What the event log holds, reduced to what the checks need."""

    last_seq: int = 0
    submitted: dict[str, SubmissionSubmitted] = field(default_factory=dict)
    accepted: dict[str, int] = field(default_factory=dict)  # submission id -> seq
    committed: dict[str, list[SubmissionCommitted]] = field(
        default_factory=lambda: defaultdict(list)
    )
    types: Counter[str] = field(default_factory=Counter)
    digests_present: set[str] = field(default_factory=set)


def read_log(stack: Stack, probe_digests: Sequence[str] = ()) -> LogFacts:
    """Replay the whole log; also ask the object store about `probe_digests`."""

    async def main() -> LogFacts:
        elog = await EventLog.connect(stack.nats_url, name="system-test-check")
        facts = LogFacts()
        try:
            facts.last_seq = await elog.last_seq()
            async for seq, event in elog.replay(1):
                facts.types[str(getattr(event, "type", type(event).__name__))] += 1
                if isinstance(event, SubmissionSubmitted):
                    facts.submitted[event.submission_id] = event
                elif isinstance(event, SubmissionAccepted):
                    facts.accepted[event.submission_id] = seq
                elif isinstance(event, SubmissionCommitted):
                    facts.committed[event.submission_id].append(event)
            for digest in probe_digests:
                if await elog.has_object(PACKAGES_BUCKET, digest):
                    facts.digests_present.add(digest)
        finally:
            await elog.close()
        return facts

    return asyncio.run(main())


@dataclass(frozen=True)
class MainCommit:
    sha: str
    kind: str
    submission_id: str
    event_seq: int


def main_history(repo_path: Path) -> list[MainCommit]:
    """The commits of main, oldest first (first-parent), with their Kz- trailers."""
    repo = Repo(str(repo_path))
    try:
        sha: bytes | None = repo.refs[b"refs/heads/main"]
        out: list[MainCommit] = []
        while sha is not None:
            commit = repo[sha]
            assert isinstance(commit, Commit)
            _, trailers = parse_trailers(commit.message)
            values = {t.key: t.value for t in trailers}
            if "Kz-Submission" in values:
                out.append(
                    MainCommit(
                        sha.decode(),
                        values.get("Kz-Commit", "?"),
                        values["Kz-Submission"],
                        int(values["Kz-Event-Seq"]),
                    )
                )
            sha = commit.parents[0] if commit.parents else None
        return out[::-1]
    finally:
        repo.close()


def wait_quiet(stack: Stack, timeout_s: float = 120.0) -> int:
    """Wait until every API process has folded the whole log, nothing is queued or running,
    no accepted submission awaits its commit, and the log stood still for a moment."""
    last: list[int] = []

    def quiet() -> int | None:
        seqs = []
        for url in stack.api_urls:
            health = httpx.get(url + "/api/health", timeout=5).json()
            busy = any(q["queued"] or q["running"] for q in health["queue"].values())
            if busy or health["projector_lag"] or not health["fold"]["caught_up"]:
                return None
            seqs.append(int(health["nats"]["stream_seq"]))
        if len(set(seqs)) != 1:
            return None
        last.append(seqs[0])
        stable = len(last) >= 4 and len(set(last[-4:])) == 1
        return seqs[0] if stable else None

    return wait_for("the stack to go quiet", quiet, timeout_s, every_s=0.5)


def check_run(stack: Stack, records: Sequence[Record], tmp: Path) -> dict[str, Any]:
    """Every end-of-run promise; raises AssertionError naming what broke. Returns figures."""
    dead = [name for name, proc in stack.procs.items() if not proc.alive]
    assert not dead, f"processes died during the run: {dead}"
    quiet_seq = wait_quiet(stack)
    invalid = [r for r in records if r.plan.invalid]
    valid = [r for r in records if not r.plan.invalid]
    facts = read_log(stack, [r.digest for r in invalid])
    problems: list[str] = []
    deviations: Counter[str] = Counter()

    # Every valid submission was taken and ended in a state its submitter saw.
    for r in valid:
        if r.submission_id is None:
            problems.append(f"valid package refused: {r.plan} -> {r.http_status} {r.error_code}")
        elif r.status not in TERMINAL:
            problems.append(f"{r.submission_id} not terminal: {r.status}")
        elif r.status != expected_status(r.plan):
            code = (r.final or {}).get("error", {}) or {}
            if r.status == "failed" and code.get("code") in FAULT_CODES:
                deviations[f"{r.plan.verdict}->failed:{code.get('code')}"] += 1
            else:
                problems.append(
                    f"{r.submission_id} ({r.plan.verdict}) ended {r.status} {code}, "
                    f"expected {expected_status(r.plan)}"
                )

    # Exactly the submissions the submitters were answered for exist, no more.
    ours = {r.submission_id for r in valid if r.submission_id}
    extra = set(facts.submitted) - ours
    if extra:
        problems.append(f"submissions in the log no submitter was answered for: {sorted(extra)}")

    # Nothing of an invalid package: a 4xx envelope, no object, no event.
    logged_digests = {e.package_digest for e in facts.submitted.values()}
    for r in invalid:
        if not (400 <= r.http_status < 500 and r.error_code):
            problems.append(f"invalid package answered {r.http_status} {r.error_code}: {r.plan}")
        if r.digest in facts.digests_present or r.digest in logged_digests:
            problems.append(f"invalid package left a trace: {r.plan.verdict} {r.digest}")

    problems += _check_commits(stack, facts, valid)
    audit = stack.kz("audit")
    if audit.returncode != 0:
        problems.append(f"kz audit failed ({audit.returncode}):\n{audit.stdout}\n{audit.stderr}")
    problems += _check_index(stack, tmp)

    assert not problems, "\n".join(problems[:40]) + f"\n({len(problems)} problems)"
    return {"log_seq": quiet_seq, "deviations": deviations, "facts": facts}


def _check_commits(stack: Stack, facts: LogFacts, valid: Sequence[Record]) -> list[str]:
    problems: list[str] = []
    history = main_history(stack.kernel_repo)
    kinds: dict[str, Counter[str]] = defaultdict(Counter)
    for c in history:
        kinds[c.submission_id][c.kind] += 1
    for sid, seq in facts.accepted.items():
        if kinds[sid] != Counter({"source": 1, "bench-result": 1}):
            problems.append(f"accepted {sid} (seq {seq}) on main as {dict(kinds[sid])}")
        if len(facts.committed[sid]) != 1:
            problems.append(f"accepted {sid} has {len(facts.committed[sid])} committed events")
    not_accepted = set(kinds) - set(facts.accepted)
    if not_accepted:
        problems.append(f"commits for submissions never accepted: {sorted(not_accepted)}")
    # In log order: main's event sequences rise, and follow the accepted events' order.
    sources = [c for c in history if c.kind == "source"]
    if [c.event_seq for c in sources] != sorted(facts.accepted.values()):
        problems.append("main's source commits are not in the log order of the accepted events")
    by_sid = {c.submission_id: c.sha for c in sources}
    for sid, events in facts.committed.items():
        if events and events[0].source_commit != by_sid.get(sid):
            problems.append(f"committed event of {sid} names {events[0].source_commit}")
    for r in valid:
        if r.status == "committed":
            commits = (r.final or {}).get("commits") or {}
            if commits.get("source") != by_sid.get(r.submission_id or ""):
                problems.append(f"status of {r.submission_id} shows commits {commits}")
    return problems


def _check_index(stack: Stack, tmp: Path) -> list[str]:
    out = tmp / "fresh-index.json"
    made = stack.kz("index", "--out", str(out))
    if made.returncode != 0:
        return [f"kz index failed:\n{made.stdout}\n{made.stderr}"]
    fresh = json.loads(out.read_bytes())
    problems = []
    for url in stack.api_urls:
        served = httpx.get(url + "/api/index.json", timeout=30).json()
        if served != fresh:
            keys = [k for k in fresh if served.get(k) != fresh.get(k)]
            problems.append(f"{url} index.json differs from a fresh fold in {keys}")
    return problems


def percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def summary_table(
    title: str,
    records: Sequence[Record],
    faults: Counter[str],
    durations: dict[str, float],
    deviations: Counter[str],
) -> str:
    """A Markdown summary: final states per asked verdict, faults, durations, latencies."""
    rows = Counter(
        (r.plan.verdict.split(":")[0], r.status or f"refused {r.http_status}") for r in records
    )
    lines = [f"### {title}", "", "| package asked | final state | count |", "|---|---|---:|"]
    lines += [f"| {v} | {s} | {n} |" for (v, s), n in sorted(rows.items())]
    finals = Counter(r.status or "refused" for r in records)
    lines += ["", "| final state | count |", "|---|---:|"]
    lines += [f"| {s} | {n} |" for s, n in sorted(finals.items())]
    lines += ["", "| fault injected | count |", "|---|---:|"]
    lines += [f"| {f} | {n} |" for f, n in sorted(faults.items())] or ["| none | 0 |"]
    if deviations:
        lines += ["", "| ended otherwise because of faults | count |", "|---|---:|"]
        lines += [f"| {d} | {n} |" for d, n in sorted(deviations.items())]
    latencies = [r.latency_s for r in records if r.latency_s is not None]
    stale = sum(r.stale_reads for r in records)
    lines += ["", "| figure | value |", "|---|---:|"]
    lines += [f"| {k} | {v:.1f} s |" for k, v in durations.items()]
    lines += [
        f"| submissions (valid / refused at the door) | {len(latencies)} / "
        f"{sum(1 for r in records if r.submission_id is None)} |",
        f"| submit→terminal p50 | {percentile(latencies, 0.5):.2f} s |",
        f"| submit→terminal p99 | {percentile(latencies, 0.99):.2f} s |",
        f"| submit→terminal max | {max(latencies, default=float('nan')):.2f} s |",
        f"| mean | {statistics.fmean(latencies) if latencies else float('nan'):.2f} s |",
        f"| status reads answered 404 by a lagging replica | {stale} |",
    ]
    return "\n".join(lines)


def timed(fn: Any, *args: Any, **kw: Any) -> tuple[Any, float]:
    start = time.monotonic()
    return fn(*args, **kw), time.monotonic() - start


def stream_replicas(stack: Stack) -> dict[str, int]:
    """The replica count of every stream of the stack, as NATS reports it."""

    async def main() -> dict[str, int]:
        elog = await EventLog.connect(stack.nats_url, name="system-test-streams")
        try:
            names = await elog.js.streams_info()
            return {s.config.name or "?": int(s.config.num_replicas or 1) for s in names}
        finally:
            await elog.close()

    return asyncio.run(main())
