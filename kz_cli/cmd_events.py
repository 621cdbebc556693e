"""`kz events tail`: a readable live view of the event log, or one JSON object per line."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import msgspec

from kz_cli import aio
from kz_cli.local import nats_url_for
from kz_events.config import load_settings
from kz_events.eventlog import EventLog
from kz_events.events import UnknownEvent

__all__ = ["event_json", "following_line", "format_event", "register"]

_SKIP = {"event_id", "schema_version", "occurred_at", "actor", "type", "result", "environment"}


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("events", help="look at the event log")
    sub = parser.add_subparsers(dest="events_command", required=True, metavar="SUBCOMMAND")
    tail = sub.add_parser("tail", help="print events as they happen")
    tail.add_argument(
        "--from-seq", type=int, default=0, metavar="SEQ", help="start here (default: the end)"
    )
    tail.add_argument("--count", type=int, metavar="N", help="stop after this many events")
    tail.add_argument("--json", action="store_true", help="one JSON object per event and line")
    tail.add_argument("--nats-url", metavar="URL", help="NATS of the stack (default KZ_NATS_URL)")
    tail.set_defaults(handler=_handle_tail)


def _short(value: Any) -> str:
    """A field's value as text: scalars as they are, structures as compact JSON."""
    if isinstance(value, str | int | float | bool):
        return str(value)
    return json.dumps(value, separators=(",", ":"), sort_keys=True, default=str)


def format_event(seq: int, event: Any) -> str:
    """One line: sequence, time, type, actor and the body's short fields."""
    if isinstance(event, UnknownEvent):
        return f"{seq:>8}  ?  {event.type} (unknown to this version)"
    fields = msgspec.to_builtins(event)
    body = " ".join(
        f"{name}={_short(value)}"
        for name, value in fields.items()
        if name not in _SKIP and value not in (None, "", [], {})
    )
    when = event.occurred_at.strftime("%H:%M:%S.%f")[:-3]
    return f"{seq:>8}  {when}  {event.type:<16} {event.actor:<20} {body}".rstrip()


def event_json(seq: int, event: Any) -> str:
    """The event as one line of JSON, with its stream sequence as `seq`."""
    if isinstance(event, UnknownEvent):
        doc: dict[str, Any] = {"type": event.type, "unknown": True, "skipped": event.skipped}
    else:
        doc = msgspec.to_builtins(event)
    return json.dumps({"seq": seq, **doc}, separators=(",", ":"), default=str)


def following_line(start: int, last: int) -> str:
    """Where the tail starts, said before the first event arrives (the log may be quiet)."""
    if start > last:
        return f"following the event log from seq {start} (it holds {last}; waiting for new ones)"
    return f"following the event log from seq {start} (it holds {last})"


def _handle_tail(args: argparse.Namespace) -> int:
    settings = load_settings(config_file=args.config)
    url = nats_url_for(args.nats_url, settings)
    try:
        aio.run(_tail(url, args.from_seq, args.count, as_json=args.json))
    except KeyboardInterrupt:
        return 0
    return 0


async def _tail(url: str, from_seq: int, count: int | None, *, as_json: bool = False) -> None:
    log = await EventLog.connect(url, name="kz-events-tail")
    show = event_json if as_json else format_event
    try:
        last = await log.last_seq()
        start = from_seq or last + 1
        print(f"kz: {following_line(start, last)} at {url}", file=sys.stderr, flush=True)
        seen = 0
        async for seq, event in log.subscribe(from_seq=start):
            print(show(seq, event), flush=True)
            seen += 1
            if count is not None and seen >= count:
                return
    finally:
        await log.close()
        sys.stdout.flush()
