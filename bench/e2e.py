"""End to end: submit → committed latency and sustained throughput through the whole stack.

Starts an embedded `nats-server`, `kz api`, `kz projector` and several `kz runner --backend stub`
processes, then (1) submits trivial packages one at a time and times each from the POST to the
status long-poll answering `committed` (p50, p99), and (2) lets `--submitters` clients submit
as fast as they can for `--duration` seconds and counts submissions answered 202 and those that
reach `committed`, per second. Side by side: the bare HTTP round trip of `GET /api/health` on
the same server, as a ratio. Targets: p50 < 250 ms, p99 < 1 s, >= 50 accepted/s.

    .venv/bin/python bench/e2e.py [--latency 100] [--duration 20] [--runners 4] [--json OUT]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

import httpx

from kz_events.eventlog import EventLog
from kz_events.events import (
    SubmissionAccepted,
    SubmissionClaimed,
    SubmissionCommitted,
    SubmissionResult,
    SubmissionSubmitted,
)
from kz_events.server import EmbeddedServer, free_port
from kz_testing import (
    KzProcess,
    RawClient,
    filesystem_of,
    kz_argv,
    package_files,
    package_tarball,
    process_cpu_s,
    scratch_base,
    stack_env,
    stop_all,
    submission_request,
    wait_healthy,
)

__all__ = ["Figures", "Stack", "kept_pace", "main", "package_bytes"]

P50_TARGET_MS = 250.0
P99_TARGET_MS = 1000.0
RATE_TARGET = 50.0
PACE_DRAIN_S = 2.0  # at an offered rate, "kept pace": all done within this long after the window
TERMINAL = {"committed", "rejected", "failed", "cancelled"}
KERNELS = [f"cpu/Bench/e2e/fp32/k{i}" for i in range(4)]


@dataclass
class Figures:
    runners: int
    latency_n: int
    p50_ms: float
    p99_ms: float
    mean_ms: float
    bare_p50_ms: float
    stages_ms: dict[str, float]
    submitters: int
    duration_s: float
    submitted: int
    http_accepted_per_s: float
    committed_per_s: float
    steady_committed_per_s: float
    backlog_at_end: int
    drain_s: float
    backlog_steps: dict[str, int] = field(default_factory=dict)
    offered_per_s: float | None = None
    pace_drain_s: float = PACE_DRAIN_S
    workdir_fs: str = ""
    not_committed: dict[str, int] = field(default_factory=dict)
    cpu_ms_per_submission: dict[str, float] = field(default_factory=dict)


def package_bytes(kid: str, salt: str) -> bytes:
    """A valid trivial package for `kid`; `salt` makes its bytes (and digest) unique."""
    return package_tarball(package_files(kid, title="End-to-end bench kernel", salt=salt))


class Stack:
    """The processes of one stack, started in order, stopped in reverse."""

    def __init__(self, tmp: Path, runners: int, workdirs: Path) -> None:
        self.tmp, self.runners, self.workdirs = tmp, runners, workdirs
        self.nats = EmbeddedServer(tmp / "nats", sync_always=True)
        self.port = free_port()
        self.procs: list[KzProcess] = []

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self, **extra: str) -> dict[str, str]:
        return stack_env(
            self.tmp,
            self.nats.url,
            self.port,
            KZ_MAX_OPEN_SUBMISSIONS="100000",
            KZ_RESUBMIT_LIMIT="0",  # throughput, not the resubmission rate, is measured
            KZ_LEASE_SECRET="bench-lease-secret-0123456789abcdef",
            **extra,
        )

    def spawn(self, name: str, args: list[str], **extra: str) -> KzProcess:
        log = self.tmp / "logs" / f"{name}.log"
        proc = KzProcess(name, kz_argv(*args), self.env(**extra), log).start()
        self.procs.append(proc)
        return proc

    def start(self) -> None:
        self.nats.start()
        self.spawn("api", ["api"])
        self.spawn("projector", ["projector"])
        for i in range(self.runners):
            self.spawn(
                f"runner{i}",
                ["runner", "--arch", "cpu", "--backend", "stub"],
                KZ_RUNNER_ID=f"bench-stub-{i}",
                KZ_RUNNER_WORKDIR=str(self.workdirs / f"work{i}"),
            )
        wait_healthy(self.base, 60.0, self.procs)

    def cpu_seconds(self) -> dict[str, float]:
        """User + system CPU seconds so far of each process (runners summed), from /proc."""
        pids = [(proc.name.rstrip("0123456789"), proc.pid or 0) for proc in self.procs]
        pids.append(("nats-server", self.nats.pid or 0))
        out: dict[str, float] = {}
        for name, pid in pids:
            out[name] = out.get(name, 0.0) + process_cpu_s(pid)
        return out

    def print_errors(self) -> None:
        """The tail of every process log that holds a traceback (a failed run's evidence)."""
        for log in sorted((self.tmp / "logs").glob("*.log")):
            text = log.read_text(errors="replace")
            if "Traceback" in text:
                print(f"--- {log.name} (tail)\n{text[-3000:]}", file=sys.stderr)

    def pid(self, name: str) -> int:
        return next(proc.pid or 0 for proc in self.procs if proc.name == name)

    def stop(self) -> None:
        stop_all(reversed(self.procs), timeout_s=10.0)
        self.nats.stop()


@contextmanager
def running_stack(tmp: Path, runners: int, workdirs: Path) -> Iterator[Stack]:
    stack = Stack(tmp, runners, workdirs)
    try:
        stack.start()
        yield stack
    except BaseException:
        stack.print_errors()
        raise
    finally:
        stack.stop()


async def submit(client: httpx.AsyncClient, kid: str, data: bytes, who: str) -> httpx.Response:
    return await client.post(
        "/api/submissions",
        files={"package": ("p.tar.gz", data, "application/gzip")},
        data={"kernel_id": kid},
        headers={"X-Submitter-Id": who},
    )


async def wait_terminal(client: httpx.AsyncClient, sid: str, who: str, version: int) -> str:
    """Long-poll the status until it is terminal; the final status."""
    while True:
        resp = await client.get(
            f"/api/submissions/{sid}/status",
            params={"since": version, "timeout": 30},
            headers={"X-Submitter-Id": who},
        )
        resp.raise_for_status()
        doc = resp.json()
        if doc["status"] in TERMINAL:
            return str(doc["status"])
        version = int(doc["version"])


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def latency_phase(
    base: str, bodies: list[tuple[str, bytes]]
) -> tuple[list[float], dict[str, float], dict[str, float]]:
    """Seconds from POST to the long-poll answering committed, one submission at a time;
    also each submission's wall-clock start and end (for the stage breakdown)."""
    out: list[float] = []
    started: dict[str, float] = {}
    ended: dict[str, float] = {}
    async with httpx.AsyncClient(base_url=base, timeout=60) as client:
        for kid, data in bodies:
            wall, began = time.time(), time.perf_counter()
            resp = await submit(client, kid, data, "lat")
            if resp.status_code != 202:
                raise SystemExit(f"submission refused: {resp.status_code} {resp.text}")
            answer = resp.json()
            status = await wait_terminal(client, answer["submission_id"], "lat", answer["version"])
            if status != "committed":
                raise SystemExit(f"a trivial submission ended {status}, expected committed")
            out.append(time.perf_counter() - began)
            started[answer["submission_id"]] = wall
            ended[answer["submission_id"]] = wall + out[-1]
    return out, started, ended


async def bare_latency(base: str, n: int) -> list[float]:
    out = []
    async with httpx.AsyncClient(base_url=base) as client:
        for _ in range(n):
            began = time.perf_counter()
            (await client.get("/api/health")).raise_for_status()
            out.append(time.perf_counter() - began)
    return out


STAGES = (
    (SubmissionSubmitted, "api: POST -> submitted"),
    (SubmissionClaimed, "runner: submitted -> claimed"),
    (SubmissionResult, "runner: claimed -> result"),
    (SubmissionAccepted, "referee: result -> accepted"),
    (SubmissionCommitted, "git: accepted -> committed"),
)


async def stage_times(
    url: str, started: dict[str, float], ended: dict[str, float]
) -> dict[str, float]:
    """Median seconds of each pipeline step, from the events' `occurred_at` (one clock)."""
    marks: dict[str, dict[type, float]] = {sid: {} for sid in started}
    elog = await EventLog.connect(url, name="bench-e2e")
    try:
        async for _seq, event in elog.replay():
            sid = getattr(event, "submission_id", None)
            at = getattr(event, "occurred_at", None)
            if sid in marks and at is not None and type(event) not in marks[sid]:
                marks[sid][type(event)] = at.timestamp()
    finally:
        await elog.close()
    steps: dict[str, list[float]] = {name: [] for _, name in STAGES}
    steps["api: committed -> long-poll answer"] = []
    for sid, seen in marks.items():
        previous = started[sid]
        for kind, name in STAGES:
            steps[name].append(seen[kind] - previous)
            previous = seen[kind]
        steps["api: committed -> long-poll answer"].append(ended[sid] - previous)
    return {name: round(statistics.median(v) * 1000, 1) for name, v in steps.items() if v}


@dataclass
class Load:
    ids: dict[str, float] = field(default_factory=dict)  # submission id -> time answered 202
    committed_at: dict[str, float] = field(default_factory=dict)
    final: dict[str, str] = field(default_factory=dict)
    window_over: bool = False
    backlog_at_end: int = 0  # answered 202 but not yet at an end when the window closed
    closed_at: float = 0.0  # wall-clock time the window closed
    done: asyncio.Event = field(default_factory=asyncio.Event)

    def check_done(self) -> None:
        if self.window_over and all(sid in self.final for sid in self.ids):
            self.done.set()


async def follow(url: str, from_seq: int, load: Load) -> None:
    """Note when each submission's terminal event appears in the log: one consumer per
    terminal type, so the observer receives one event per submission, not all of them."""
    elog = await EventLog.connect(url, name="bench-e2e-follow")

    async def watch(kind: str) -> None:
        async for _seq, event in elog.subscribe(f"kz.ev.submission.*.*.{kind}", from_seq):
            sid = getattr(event, "submission_id", "")
            if sid not in load.final:
                load.final[sid] = kind
                if kind == "committed":
                    load.committed_at[sid] = time.perf_counter()
                load.check_done()

    try:
        await asyncio.gather(*(watch(kind) for kind in sorted(TERMINAL)))
    finally:
        await elog.close()


async def log_end(url: str) -> int:
    elog = await EventLog.connect(url, name="bench-e2e-seq")
    try:
        return await elog.last_seq()
    finally:
        await elog.close()


async def load_phase(
    stack: Stack,
    bodies: list[tuple[str, bytes]],
    submitters: int,
    duration: float,
    rate: float | None = None,
) -> tuple[Load, float, float, float]:
    """Submit from `submitters` clients for `duration` s while following the log for ends:
    as fast as they are answered, or with `rate` at that many submissions a second in all
    (open loop: the i-th goes out at i/rate s, late ones at once)."""
    load = Load()
    host = f"127.0.0.1:{stack.port}"
    queue = [
        submission_request(host, kid, data, f"load{i % submitters}")
        for i, (kid, data) in reversed(list(enumerate(bodies)))
    ]
    follower = asyncio.create_task(follow(stack.nats.url, await log_end(stack.nats.url) + 1, load))
    clients = [await RawClient.open(stack.port) for _ in range(submitters)]

    sent = 0

    async def submitter(client: RawClient) -> None:
        nonlocal sent
        while queue and time.perf_counter() < deadline:
            if rate is not None:
                slot, sent = began + sent / rate, sent + 1
                await asyncio.sleep(slot - time.perf_counter())
                if slot >= deadline:
                    break
            status, body = await client.send(queue.pop())
            if status != 202:
                raise SystemExit(f"submission refused: {status} {body[:500]!r}")
            load.ids[json.loads(body)["submission_id"]] = time.perf_counter()

    began = time.perf_counter()
    deadline = began + duration
    try:
        await asyncio.gather(*(submitter(client) for client in clients))
    finally:
        for client in clients:
            await client.close()
    window_end = time.perf_counter()
    load.backlog_at_end = len(load.ids) - len(load.final)
    load.closed_at = time.time()
    load.window_over = True
    load.check_done()
    try:
        await asyncio.wait_for(load.done.wait(), timeout=300)
    finally:
        follower.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await follower
    return load, began, window_end - began, time.perf_counter() - window_end


def steady_rate(ends: dict[str, float], began: float, window: float) -> float:
    """Commits per second over the window's steady part: its first quarter (at most 5 s,
    while the pipeline fills) left out, and the drain after it too."""
    ramp = min(5.0, window / 4)
    inside = sum(1 for at in ends.values() if began + ramp <= at <= began + window)
    return inside / (window - ramp)


async def backlog_by_step(url: str, ids: set[str], at: float) -> dict[str, int]:
    """Where the submissions not yet ended at wall time `at` were: their last event by then."""
    last: dict[str, str] = {}
    elog = await EventLog.connect(url, name="bench-e2e-backlog")
    try:
        async for _seq, event in elog.replay():
            sid = getattr(event, "submission_id", None)
            occurred = getattr(event, "occurred_at", None)
            if sid in ids and occurred is not None and occurred.timestamp() <= at:
                last[sid] = type(event).__name__.removeprefix("Submission").lower()
    finally:
        await elog.close()
    waiting: dict[str, int] = {}
    for step in last.values():
        if step not in TERMINAL:
            waiting[f"after {step}"] = waiting.get(f"after {step}", 0) + 1
    return waiting


def client_cpu_s() -> float:
    """CPU seconds of this process (the load generator): it shares the machine's cores."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def start_profiles(
    stack: Stack, out: Path | None, duration: float
) -> list[subprocess.Popen[bytes]]:
    """With `--profile DIR`, sample the API, projector and one runner during the load phase."""
    spy = shutil.which("py-spy")
    if out is None:
        return []
    if spy is None:
        raise SystemExit("--profile needs py-spy on PATH")
    out.mkdir(parents=True, exist_ok=True)
    return [
        subprocess.Popen(
            [
                spy,
                "record",
                "--format",
                "raw",
                "--rate",
                "200",
                "--nonblocking",
                "--duration",
                str(int(duration)),
                "--pid",
                str(stack.pid(name)),
                "-o",
                str(out / f"{name}.txt"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for name in ("api", "projector", "runner0")
    ]


def measure(args: argparse.Namespace, tmp: Path) -> Figures:
    total = args.latency + len(KERNELS) + int(args.duration * args.max_rate)
    print(f"building {total} packages ...", flush=True)
    bodies = [
        (KERNELS[i % len(KERNELS)], package_bytes(KERNELS[i % len(KERNELS)], f"s{i}"))
        for i in range(total)
    ]
    warm, timed = len(KERNELS), len(KERNELS) + args.latency
    workdirs = Path(tempfile.mkdtemp(prefix="kz-e2e-work-", dir=args.workdir or scratch_base(tmp)))
    try:
        with running_stack(tmp / "stack", args.runners, workdirs) as stack:
            print(
                f"stack up at {stack.base}: nats, api, projector, {args.runners} stub runners "
                f"(task folders in {workdirs}, {filesystem_of(workdirs)})"
            )
            return _measure(args, stack, bodies, warm, timed)
    finally:
        shutil.rmtree(workdirs, ignore_errors=True)


def _measure(
    args: argparse.Namespace,
    stack: Stack,
    bodies: list[tuple[str, bytes]],
    warm: int,
    timed: int,
) -> Figures:
    asyncio.run(latency_phase(stack.base, bodies[:warm]))  # the kernels' first commits
    lat, started, ended = asyncio.run(latency_phase(stack.base, bodies[warm:timed]))
    stages = asyncio.run(stage_times(stack.nats.url, started, ended))
    bare = asyncio.run(bare_latency(stack.base, 200))
    profilers = start_profiles(stack, args.profile, args.duration)
    cpu_before = {**stack.cpu_seconds(), "bench client": client_cpu_s()}
    load, began, window, drain = asyncio.run(
        load_phase(stack, bodies[timed:], args.submitters, args.duration, args.rate)
    )
    cpu_after = {**stack.cpu_seconds(), "bench client": client_cpu_s()}
    for proc in profilers:
        proc.wait(60)
    backlog = asyncio.run(backlog_by_step(stack.nats.url, set(load.ids), load.closed_at))
    done = max(1, len(load.final))
    cpu_ms = {
        name: round((cpu_after[name] - cpu_before[name]) / done * 1000, 1) for name in cpu_after
    }
    not_committed: dict[str, int] = {}
    for status in load.final.values():
        if status != "committed":
            not_committed[status] = not_committed.get(status, 0) + 1
    return Figures(
        runners=args.runners,
        latency_n=len(lat),
        p50_ms=round(pct(lat, 0.5) * 1000, 1),
        p99_ms=round(pct(lat, 0.99) * 1000, 1),
        mean_ms=round(statistics.mean(lat) * 1000, 1),
        bare_p50_ms=round(pct(bare, 0.5) * 1000, 2),
        stages_ms=stages,
        submitters=args.submitters,
        duration_s=round(window, 2),
        submitted=len(load.ids),
        http_accepted_per_s=round(len(load.ids) / window, 1),
        committed_per_s=round(len(load.committed_at) / (window + drain), 1),
        steady_committed_per_s=round(steady_rate(load.committed_at, began, window), 1),
        backlog_at_end=load.backlog_at_end,
        backlog_steps=backlog,
        drain_s=round(drain, 2),
        offered_per_s=args.rate,
        workdir_fs=filesystem_of(stack.workdirs),
        not_committed=not_committed,
        cpu_ms_per_submission=cpu_ms,
    )


def kept_pace(fig: Figures) -> bool:
    """At an offered rate: whether the pipeline kept up, its backlog never growing past what
    `PACE_DRAIN_S` seconds after the window finish."""
    return fig.offered_per_s is not None and fig.drain_s <= fig.pace_drain_s


def report(fig: Figures) -> str:
    def verdict(ok: bool) -> str:
        return "PASS" if ok else "MISS"

    return "\n".join(
        [
            f"end to end (nats + api + projector + {fig.runners} stub runners, as processes; "
            f"task folders on {fig.workdir_fs})",
            f"latency submit -> committed, {fig.latency_n} sequential submissions:",
            f"  p50 {fig.p50_ms:8.1f} ms   target < {P50_TARGET_MS:.0f} ms: "
            f"{verdict(fig.p50_ms < P50_TARGET_MS)}",
            f"  p99 {fig.p99_ms:8.1f} ms   target < {P99_TARGET_MS:.0f} ms: "
            f"{verdict(fig.p99_ms < P99_TARGET_MS)}",
            f"  bare GET /api/health p50 {fig.bare_p50_ms:.2f} ms; "
            f"ratio e2e/bare {fig.p50_ms / fig.bare_p50_ms:.0f}x",
            "  median per step: "
            + ", ".join(f"{name} {ms:.1f}" for name, ms in fig.stages_ms.items()),
            f"sustained, {fig.submitters} submitters for {fig.duration_s} s, "
            + (
                "as fast as answered:"
                if fig.offered_per_s is None
                else f"offering {fig.offered_per_s:g}/s:"
            ),
            f"  submitted (202)   {fig.http_accepted_per_s:8.1f} /s  ({fig.submitted})",
            f"  committed         {fig.committed_per_s:8.1f} /s  (window and drain; all done "
            f"{fig.drain_s} s after the window"
            + (
                f"; target >= {RATE_TARGET:.0f}/s: {verdict(fig.committed_per_s >= RATE_TARGET)})"
                if fig.offered_per_s is None
                else ")"
            ),
            *(
                []
                if fig.offered_per_s is None
                else [
                    f"  kept pace with {fig.offered_per_s:g}/s offered (all done within "
                    f"{PACE_DRAIN_S:g} s of the window): {verdict(kept_pace(fig))}"
                ]
            ),
            f"  committed, steady {fig.steady_committed_per_s:8.1f} /s  (the window without its "
            f"ramp-up); not yet done when it closed: {fig.backlog_at_end} "
            f"({', '.join(f'{n} {step}' for step, n in fig.backlog_steps.items()) or '-'})",
            f"  not committed: {fig.not_committed or 'none'}",
            "  CPU ms per submission: "
            + ", ".join(f"{name} {ms:.1f}" for name, ms in fig.cpu_ms_per_submission.items()),
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=int, default=100, help="sequential submissions")
    parser.add_argument("--duration", type=float, default=20.0, help="load window, seconds")
    parser.add_argument("--submitters", type=int, default=8)
    parser.add_argument("--runners", type=int, default=4)
    parser.add_argument("--max-rate", type=float, default=120.0, help="packages built per s")
    parser.add_argument(
        "--rate", type=float, help="offer this many submissions a second (default: saturate)"
    )
    parser.add_argument(
        "--workdir", type=Path, help="runners' task folders here (default: /dev/shm if tmpfs)"
    )
    parser.add_argument("--json", type=Path, help="also write the figures here as JSON")
    parser.add_argument("--profile", type=Path, help="py-spy samples of the load phase here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="kz-bench-e2e-") as tmp:
        figures = measure(args, Path(tmp))
    print(report(figures))
    if args.json:
        args.json.write_text(json.dumps(asdict(figures), indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
