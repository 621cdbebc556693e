"""kz_events: the event vocabulary, subjects, the `EventLog` client, the lifecycle rules, the
embedded `nats-server` launcher and the settings. Depends on nothing else of the project."""

from __future__ import annotations

from kz_events.errors import (
    ConcurrencyConflict,
    ConfigError,
    EventLogError,
    InvalidInput,
    InvalidKernelId,
    InvalidResult,
    KzError,
    LogUnavailable,
    ObjectNotFound,
    RuleViolation,
    ServerTooOld,
    UnknownEventType,
)
from kz_events.eventlog import EventLog, LogOptions, Stored
from kz_events.events import Event, EventMeta, UnknownEvent, decode_event, encode_event, subject_of
from kz_events.ids import Arch, Digest, KernelId, SubmissionId
from kz_events.result import Metric, ResultDocument, decode_result
from kz_events.server import EmbeddedServer

__all__ = [
    "Arch",
    "ConcurrencyConflict",
    "ConfigError",
    "Digest",
    "EmbeddedServer",
    "Event",
    "EventLog",
    "EventLogError",
    "EventMeta",
    "InvalidInput",
    "InvalidKernelId",
    "InvalidResult",
    "KernelId",
    "KzError",
    "LogOptions",
    "LogUnavailable",
    "Metric",
    "ObjectNotFound",
    "ResultDocument",
    "RuleViolation",
    "ServerTooOld",
    "Stored",
    "SubmissionId",
    "UnknownEvent",
    "UnknownEventType",
    "decode_event",
    "decode_result",
    "encode_event",
    "subject_of",
]
