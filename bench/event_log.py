"""Event log throughput: `EventLog.append` and `EventLog.replay` against raw nats-py.

Appends: the same events (same subjects, payloads and headers: `Nats-Msg-Id` and the
per-aggregate expected sequence) through `EventLog.append` and through a bare `js.publish`,
in alternating rounds on one embedded server, reported as events/s and their ratio. Replay:
a log of `--replay-events` events read by `EventLog.replay` (decoded, checked against their
subjects) and by nats-py's own pull `fetch` (decoded only). Targets: append cost within 1.5x of
raw publishing; replay at least 20,000 events/s.

    .venv/bin/python bench/event_log.py [--appends 1500] [--replay-events 20000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

from kz_events.eventlog import EventLog, LogOptions
from kz_events.events import SubmissionSubmitted, decode_event, encode_event, subject_of
from kz_events.server import EmbeddedServer
from kz_events.subjects import EVENTS_STREAM

APPEND_RATIO_TARGET = 1.5
REPLAY_TARGET = 20_000


@dataclass
class Figures:
    sync_always: bool
    appends_per_round: int
    rounds: int
    eventlog_appends_per_s: float
    raw_publish_per_s: float
    append_cost_ratio: float
    replay_events: int
    eventlog_replay_per_s: float
    raw_fetch_replay_per_s: float
    load_average: float


def make_events(n: int) -> list[SubmissionSubmitted]:
    now = datetime.now(UTC)
    return [
        SubmissionSubmitted(
            event_id=str(uuid.uuid4()),
            occurred_at=now,
            actor="bench",
            submission_id=str(uuid.uuid4()),
            kernel_id="sm90/Attention/MHA/fp16/flash_v3",
            submitter_id="bench",
            package_digest="d" * 64,
            package_size=4096,
            message="a submission of typical size for the benchmark",
        )
        for _ in range(n)
    ]


def raw_message(event: SubmissionSubmitted) -> tuple[str, bytes, dict[str, str]]:
    """What `EventLog.append(event, expect=0)` sends, precomputed: subject, payload, headers."""
    subject = subject_of(event)
    headers = {
        "Nats-Msg-Id": event.event_id,
        "Nats-Expected-Last-Subject-Sequence": "0",
        "Nats-Expected-Last-Subject-Sequence-Subject": subject.rsplit(".", 1)[0] + ".*",
    }
    return subject, encode_event(event), headers


async def time_eventlog_appends(elog: EventLog, events: list[SubmissionSubmitted]) -> float:
    start = time.perf_counter()
    for event in events:
        await elog.append(event, expect=0)
    return time.perf_counter() - start


async def time_raw_publishes(elog: EventLog, events: list[SubmissionSubmitted]) -> float:
    messages = [raw_message(event) for event in events]
    start = time.perf_counter()
    for subject, payload, headers in messages:
        await elog.js.publish(subject, payload, stream=EVENTS_STREAM, headers=headers)
    return time.perf_counter() - start


async def measure_appends(elog: EventLog, n: int, rounds: int) -> tuple[float, float]:
    """Median events/s of EventLog.append and raw js.publish, in alternating rounds."""
    ours: list[float] = []
    raw: list[float] = []
    await time_eventlog_appends(elog, make_events(50))  # warm up both paths
    await time_raw_publishes(elog, make_events(50))
    for round_ in range(rounds):
        pair = [("ours", make_events(n)), ("raw", make_events(n))]
        for kind, events in pair if round_ % 2 == 0 else reversed(pair):
            if kind == "ours":
                ours.append(n / await time_eventlog_appends(elog, events))
            else:
                raw.append(n / await time_raw_publishes(elog, events))
    return statistics.median(ours), statistics.median(raw)


async def fill(elog: EventLog, n: int) -> int:
    """Append `n` events quickly (pipelined publishes with the same headers); last sequence."""
    for start in range(0, n, 500):
        acks = [
            elog.js.publish(subject, payload, stream=EVENTS_STREAM, headers=headers)
            for subject, payload, headers in map(raw_message, make_events(min(500, n - start)))
        ]
        await asyncio.gather(*acks)
    return await elog.last_seq()


async def time_eventlog_replay(elog: EventLog) -> tuple[int, float]:
    start, count = time.perf_counter(), 0
    async for _ in elog.replay():
        count += 1
    return count, time.perf_counter() - start


async def time_raw_fetch_replay(elog: EventLog) -> tuple[int, float]:
    """nats-py's own pull consumer `fetch`, batches of 1000, decoding each payload."""
    config = ConsumerConfig(
        deliver_policy=DeliverPolicy.ALL, ack_policy=AckPolicy.NONE, inactive_threshold=60.0
    )
    start, count = time.perf_counter(), 0
    psub = await elog.js.pull_subscribe("kz.ev.>", stream=EVENTS_STREAM, config=config)
    remaining = int((await psub.consumer_info()).num_pending or 0)
    while remaining > 0:
        for msg in await psub.fetch(min(1000, remaining), timeout=10):
            decode_event(msg.data)
            count += 1
            remaining = int(msg.metadata.num_pending)
    elapsed = time.perf_counter() - start
    await psub.unsubscribe()
    return count, elapsed


async def measure_replay(elog: EventLog, total: int, rounds: int) -> tuple[float, float]:
    """Best-of-rounds events/s of EventLog.replay and the raw fetch loop over the whole log."""
    ours: list[float] = []
    raw: list[float] = []
    for _ in range(rounds):
        count, elapsed = await time_eventlog_replay(elog)
        assert count == total, (count, total)
        ours.append(count / elapsed)
        count, elapsed = await time_raw_fetch_replay(elog)
        assert count == total, (count, total)
        raw.append(count / elapsed)
    return max(ours), max(raw)


async def run(args: argparse.Namespace, store: Path) -> Figures:
    with EmbeddedServer(store, sync_always=not args.no_sync) as server:
        elog = await EventLog.connect(server.url, LogOptions())
        try:
            await elog.ensure()
            ours_append, raw_append = await measure_appends(elog, args.appends, args.rounds)
            total = await fill(elog, args.replay_events - await elog.last_seq())
            ours_replay, raw_replay = await measure_replay(elog, total, args.rounds)
        finally:
            await elog.close()
    return Figures(
        sync_always=not args.no_sync,
        appends_per_round=args.appends,
        rounds=args.rounds,
        eventlog_appends_per_s=round(ours_append),
        raw_publish_per_s=round(raw_append),
        append_cost_ratio=round(raw_append / ours_append, 3),
        replay_events=total,
        eventlog_replay_per_s=round(ours_replay),
        raw_fetch_replay_per_s=round(raw_replay),
        load_average=round(_load_average(), 2),
    )


def _load_average() -> float:
    try:
        return float(Path("/proc/loadavg").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return -1.0


def report(fig: Figures) -> str:
    sync = "always" if fig.sync_always else "default (2 min)"
    ratio_ok = "PASS" if fig.append_cost_ratio <= APPEND_RATIO_TARGET else "MISS"
    replay_ok = "PASS" if fig.eventlog_replay_per_s >= REPLAY_TARGET else "MISS"
    return "\n".join(
        [
            f"event log benchmark  (sync_interval: {sync}; load average {fig.load_average})",
            f"appends: {fig.appends_per_round} events x {fig.rounds} rounds, median",
            f"  {'EventLog.append':<24}{fig.eventlog_appends_per_s:>10,} events/s",
            f"  {'raw js.publish':<24}{fig.raw_publish_per_s:>10,} events/s",
            f"  {'cost ratio (ours/raw)':<24}{fig.append_cost_ratio:>10}x"
            f"   target <= {APPEND_RATIO_TARGET}x: {ratio_ok}",
            f"replay: {fig.replay_events} events, best of {fig.rounds}",
            f"  {'EventLog.replay':<24}{fig.eventlog_replay_per_s:>10,} events/s"
            f"   target >= {REPLAY_TARGET:,}: {replay_ok}",
            f"  {'raw pull fetch':<24}{fig.raw_fetch_replay_per_s:>10,} events/s"
            f"   ({fig.eventlog_replay_per_s / fig.raw_fetch_replay_per_s:.2f}x)",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--appends", type=int, default=1500, help="events per append round")
    parser.add_argument("--replay-events", type=int, default=20_000, help="size of the log")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-sync", action="store_true", help="server without sync: always")
    parser.add_argument("--json", type=Path, help="also write the figures here as JSON")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="kz-bench-") as tmp:
        figures = asyncio.run(run(args, Path(tmp) / "store"))
    print(report(figures))
    if args.json:
        args.json.write_text(json.dumps(asdict(figures), indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
