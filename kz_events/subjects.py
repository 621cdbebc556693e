"""Subject and stream layout of the event log, and the reversible token encoding.

Events live on `kz.ev.<aggregate>.<arch>.<id>.<type>`, heartbeats on `kz.live.<kind>.<arch>.<id>`.
A token may hold characters NATS forbids (a kernel id has `/` and `.`): every byte outside
`[A-Za-z0-9_+-]` is written as `%XX`, so the encoded token never holds `.`, `*`, `>` or spaces.
"""

from __future__ import annotations

import re

__all__ = [
    "EVENTS_STREAM",
    "EVENTS_SUBJECTS",
    "EXHAUSTED_ADVISORY",
    "JUDGES_BUCKET",
    "LIVE_STREAM",
    "LIVE_SUBJECTS",
    "LOGS_BUCKET",
    "PACKAGES_BUCKET",
    "TASK_EVENTS",
    "aggregate_filter",
    "consumer_name",
    "decode_token",
    "encode_token",
    "event_subject",
    "judge_key",
    "live_subject",
    "parse_event_subject",
    "reference_key",
    "submitted_filter",
    "task_filters",
]

EVENTS_STREAM = "KZ_EVENTS"
EVENTS_SUBJECTS = "kz.ev.>"
LIVE_STREAM = "KZ_LIVE"
LIVE_SUBJECTS = "kz.live.>"
PACKAGES_BUCKET = "KZ_PACKAGES"
LOGS_BUCKET = "KZ_LOGS"
JUDGES_BUCKET = "KZ_JUDGES"
"""Main's trusted judge bundles, written by the projector only (apart from uploads)."""
EXHAUSTED_ADVISORY = f"$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.{EVENTS_STREAM}.*"
"""Where JetStream says a task message ran out of deliveries (the sweeper listens)."""

_SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_+-")
_ESCAPE = re.compile(r"%([0-9A-F]{2})")
_PLAIN = re.compile(r"[A-Za-z0-9_+\-]+")


def encode_token(text: str) -> str:
    """Encode `text` as one NATS subject token; `decode_token` inverts it."""
    if not text:
        raise ValueError("a subject token cannot be empty")
    if _PLAIN.fullmatch(text):  # the common case (uuids, most arches): nothing to escape
        return text
    return "".join(chr(b) if b in _SAFE else f"%{b:02X}" for b in text.encode())


def decode_token(token: str) -> str:
    raw = bytearray()
    i = 0
    while i < len(token):
        if token[i] == "%":
            match = _ESCAPE.match(token, i)
            if match is None:
                raise ValueError(f"bad escape in subject token {token!r} at {i}")
            raw.append(int(match.group(1), 16))
            i += 3
        else:
            raw += token[i].encode()
            i += 1
    return raw.decode()


def event_subject(aggregate: str, arch: str, aggregate_id: str, event_type: str) -> str:
    return f"kz.ev.{aggregate}.{encode_token(arch)}.{encode_token(aggregate_id)}.{event_type}"


def aggregate_filter(aggregate: str, arch: str, aggregate_id: str) -> str:
    """Every event of one aggregate: the subject used for optimistic concurrency."""
    return f"kz.ev.{aggregate}.{encode_token(arch)}.{encode_token(aggregate_id)}.*"


def live_subject(kind: str, arch: str, ident: str) -> str:
    return f"kz.live.{kind}.{encode_token(arch)}.{encode_token(ident)}"


def submitted_filter(arch: str) -> str:
    return f"kz.ev.submission.{encode_token(arch)}.*.submitted"


TASK_EVENTS = ("submitted", "requeued")
"""The events a task queue delivers: a submission, and a submission returned to the queue."""


def task_filters(arch: str) -> list[str]:
    """The subjects of `arch`'s task queue: every `submitted` and `requeued` of the arch."""
    return [f"kz.ev.submission.{encode_token(arch)}.*.{kind}" for kind in TASK_EVENTS]


def consumer_name(arch: str) -> str:
    """The durable pull consumer shared by every runner of `arch`."""
    return "runners-" + encode_token(arch).replace("%", "_").replace("+", "_")


def judge_key(kernel_id: str) -> str:
    """Object key (in `KZ_JUDGES`) of a kernel's trusted judge bundle as main has it."""
    return f"judge/{kernel_id}"


def reference_key(board: str) -> str:
    """Object key (in `KZ_JUDGES`) of a board's pinned reference (`arch/op_class/sub_class/
    quant`): what a runner gets for a kernel that main does not hold yet."""
    return f"reference/{board}"


def parse_event_subject(subject: str) -> tuple[str, str, str, str]:
    """`kz.ev.<aggregate>.<arch>.<id>.<type>` → (aggregate, arch, id, type), decoded."""
    parts = subject.split(".")
    if len(parts) != 6 or parts[0] != "kz" or parts[1] != "ev":
        raise ValueError(f"not an event subject: {subject!r}")
    return parts[2], decode_token(parts[3]), decode_token(parts[4]), parts[5]
