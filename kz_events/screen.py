"""The one rule by which every reader of the log skips what no fold may apply.

A stored message is skipped when it does not decode, when it is filed under a subject its body
does not belong to (both decided by `checked_event`, per message), or when it repeats an
`event_id` its aggregate already holds (decided here, per reader: a copy stored under another
`Nats-Msg-Id`, or an append retried after the de-duplication window). A skipped message comes
back as an `UnknownEvent` with `skipped` set, so a fold moves its position past it and changes
nothing else; the screen counts it and keeps the latest few for health, metrics and the audit.
Events of types this build does not know are counted too (`unknown_type`), never dropped.
"""

from __future__ import annotations

import hashlib
import logging
from collections import Counter, deque
from dataclasses import dataclass

from kz_events.errors import KzError
from kz_events.events import (
    Event,
    UnknownEvent,
    checked_event,
    decode_event,
    encode_event,
    subject_of,
)

__all__ = ["SKIP_KINDS", "Screen", "Skipped", "skip_kind"]

log = logging.getLogger(__name__)

SKIP_KINDS = ("undecodable", "misfiled", "repeated", "unknown_type")
KEEP = 50  # skipped messages a screen remembers in detail
LOGGED = 20  # skipped messages a screen logs one by one before it only counts


@dataclass(frozen=True, slots=True)
class Skipped:
    """One stored message a reader skipped: where it is, which rule, and why in words."""

    seq: int
    subject: str
    kind: str
    reason: str


def skip_kind(event: Event | UnknownEvent) -> str | None:
    """Which of `SKIP_KINDS` an event read from the log falls under; None for a known event."""
    if not isinstance(event, UnknownEvent):
        return None
    return event.skipped or "unknown_type"


def _aggregate(subject: str) -> str:
    return subject.rsplit(".", 1)[0]


class Screen:
    """Applies the rule for one reader that folds the log (or one aggregate) from its start.

    It remembers a 16-byte digest of (aggregate, event_id) per event it let through, so a
    repeat is found whatever lies between the two copies; keyed by aggregate, a whole-log reader
    and a reader of one aggregate (`EventLog.load`) skip exactly the same messages.
    """

    def __init__(
        self,
        name: str = "reader",
        *,
        keep: int | None = KEEP,
        repeats: bool = True,
        quiet: bool = False,
    ) -> None:
        self.name = name
        self.quiet = quiet  # for one-aggregate loads: the readers of the whole log log each skip
        self.repeats = repeats  # off for KZ_LIVE: heartbeats are not folded, only the newest read
        self.counts: Counter[str] = Counter()
        self.recent: deque[Skipped] = deque(maxlen=keep)
        self._seen: set[bytes] = set()

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def read(self, seq: int, subject: str, data: bytes) -> Event | UnknownEvent:
        """Decode a message as stored and apply the rule."""
        return self.admit(seq, checked_event(subject, data), subject)

    def read_unfiled(self, seq: int, data: bytes) -> Event | UnknownEvent:
        """Decode a message kept without its subject (the archive) and apply the rule, but for
        misfiling, which needs the subject it was stored under."""
        event = checked_event("", data)
        if isinstance(event, UnknownEvent) and event.skipped == "misfiled":
            decoded = decode_event(data)  # it decodes: only the subject it came on is unknown
            try:
                return self.admit(seq, decoded, subject_of(decoded))  # type: ignore[arg-type]
            except (ValueError, KzError):
                return self.admit(seq, event, "")
        return self.admit(seq, event, "")

    def admit(
        self, seq: int, event: Event | UnknownEvent, subject: str | None = None
    ) -> Event | UnknownEvent:
        """Apply the rule to an event decoded by `checked_event` (stored at `seq`)."""
        if isinstance(event, UnknownEvent):
            self._note(
                seq,
                subject or "",
                skip_kind(event) or "unknown_type",
                event.reason or f"an event of the unknown type {event.type!r}",
            )
            return event
        if not self.repeats:
            return event
        home = subject or subject_of(event)
        key = hashlib.blake2b(
            f"{_aggregate(home)}\0{event.event_id}".encode(), digest_size=16
        ).digest()
        if key in self._seen:
            reason = (
                f"an event of type {event.type} repeating event_id {event.event_id} "
                "of its aggregate"
            )
            self._note(seq, home, "repeated", reason)
            return UnknownEvent(
                type=f"repeated:{event.type}",
                raw=encode_event(event),
                skipped="repeated",
                reason=reason,
            )
        self._seen.add(key)
        return event

    def _note(self, seq: int, subject: str, kind: str, reason: str) -> None:
        self.counts[kind] += 1
        self.recent.append(Skipped(seq, subject, kind, reason))
        total = self.total
        if self.quiet:
            return
        if total <= LOGGED:
            log.warning(
                "%s: skipping event %d on %s (%s): %s", self.name, seq, subject, kind, reason
            )
        elif total % 1000 == 0:
            log.warning("%s: %d events skipped so far", self.name, total)
