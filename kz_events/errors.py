"""The project's error tree: one root, a shallow hierarchy, each error saying what was expected.

KzError
├── InvalidInput            bad input from outside (ids, settings, packages); carries a code
│   ├── InvalidKernelId
│   ├── InvalidResult       a result document that does not decode; names the field
│   └── ConfigError
├── EventLogError           the log could not do what was asked
│   ├── ConcurrencyConflict     an aggregate moved since the caller last saw it
│   ├── LogUnavailable          NATS is unreachable after bounded retries
│   ├── ObjectCorrupt           a stored object does not match its recorded digest
│   └── ServerTooOld            the server lacks a feature the design needs
├── ObjectNotFound          no object stored under that digest
├── UnknownEventType        a stored event whose type this build does not know
└── RuleViolation           a lifecycle command refused by `decide`
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "ConcurrencyConflict",
    "ConfigError",
    "EventLogError",
    "InvalidInput",
    "InvalidKernelId",
    "InvalidResult",
    "KzError",
    "LogUnavailable",
    "ObjectCorrupt",
    "ObjectNotFound",
    "RuleViolation",
    "ServerTooOld",
    "UnknownEventType",
]


class KzError(Exception):
    """Root of every error this project raises on purpose."""

    code = "internal_error"

    def __init__(self, message: str, *, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details: dict[str, Any] = details or {}


class InvalidInput(KzError):
    """Input from outside the process failed a check; `code` names which kind."""

    code = "invalid_input"

    def __init__(
        self, message: str, *, code: str | None = None, details: dict[str, Any] | None = None
    ) -> None:
        super().__init__(message, details=details)
        if code is not None:
            self.code = code


class InvalidKernelId(InvalidInput):
    code = "invalid_kernel_id"


class InvalidResult(InvalidInput):
    """A result document that does not decode into the typed view; `field` names where
    (`metric.value`, `workloads[0].stats.median`; empty for the document itself)."""

    code = "invalid_result"

    def __init__(self, message: str, *, field: str = "") -> None:
        super().__init__(message, details={"field": field})
        self.field = field


class ConfigError(InvalidInput):
    code = "invalid_config"


class EventLogError(KzError):
    code = "log_error"


class ConcurrencyConflict(EventLogError):
    """The aggregate's last sequence was not the one the caller expected."""

    code = "conflict"


class LogUnavailable(EventLogError):
    code = "log_unavailable"


class ObjectCorrupt(EventLogError):
    code = "object_corrupt"


class ServerTooOld(EventLogError):
    code = "server_too_old"


class ObjectNotFound(KzError):
    code = "object_not_found"


class UnknownEventType(KzError):
    code = "unknown_event_type"


class RuleViolation(KzError):
    """A command that the lifecycle rules refuse in the current state."""

    def __init__(self, message: str, *, code: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message, details=details)
        self.code = code
