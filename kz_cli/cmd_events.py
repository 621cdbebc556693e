"""`kz events tail`: a readable live view of the event log."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from kz_cli import aio
from kz_cli.local import nats_url_for
from kz_events.config import load_settings
from kz_events.eventlog import EventLog
from kz_events.events import UnknownEvent

__all__ = ["format_event", "register"]

_SKIP = {"event_id", "schema_version", "occurred_at", "actor", "type", "result", "environment"}


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("events", help="look at the event log")
    sub = parser.add_subparsers(dest="events_command", required=True)
    tail = sub.add_parser("tail", help="print events as they happen")
    tail.add_argument("--from-seq", type=int, default=0, help="start here (default: the end)")
    tail.add_argument("--count", type=int, help="stop after this many events")
    tail.add_argument("--nats-url")
    tail.set_defaults(handler=_handle_tail)


def format_event(seq: int, event: Any) -> str:
    """One line: sequence, time, type, actor and the body's short fields."""
    if isinstance(event, UnknownEvent):
        return f"{seq:>8}  ?  {event.type} (unknown to this version)"
    body = " ".join(
        f"{name}={value}"
        for name in event.__struct_fields__
        if name not in _SKIP and (value := getattr(event, name)) not in (None, "", [], {})
    )
    when = event.occurred_at.strftime("%H:%M:%S.%f")[:-3]
    return f"{seq:>8}  {when}  {event.type:<16} {event.actor:<20} {body}"


def _handle_tail(args: argparse.Namespace) -> int:
    settings = load_settings(config_file=args.config)
    url = nats_url_for(args.nats_url, settings)
    try:
        aio.run(_tail(url, args.from_seq, args.count))
    except KeyboardInterrupt:
        return 0
    return 0


async def _tail(url: str, from_seq: int, count: int | None) -> None:
    log = await EventLog.connect(url, name="kz-events-tail")
    try:
        start = from_seq or (await log.last_seq()) + 1
        seen = 0
        async for seq, event in log.subscribe(from_seq=start):
            print(format_event(seq, event), flush=True)
            seen += 1
            if count is not None and seen >= count:
                return
    finally:
        await log.close()
        sys.stdout.flush()
