"""One log format for the long-running `kz` commands (`up`, `api`, `projector`, `runner`).

A line is the time, the level and the message. Most messages name their part already
("referee: …", "git projector: …"); a message that does not is preceded by its logger's name,
so every line says where it came from once, never twice.
"""

from __future__ import annotations

import logging
import re

__all__ = ["PartFormatter", "configure_logging"]

QUIET = ("uvicorn.access", "httpx", "httpcore")  # a line per request would bury the rest
_NAMED = re.compile(r"[a-z][a-z ]{0,30}: ")  # "git projector: …", not "task 5f8b…: …"


class PartFormatter(logging.Formatter):
    """`TIME LEVEL message`, with `logger: ` before a message that names no part itself."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(message)s")

    def formatMessage(self, record: logging.LogRecord) -> str:
        if not _NAMED.match(record.message):
            record.message = f"{record.name}: {record.message}"
        return super().formatMessage(record)


def configure_logging(level: int = logging.INFO) -> None:
    """INFO for the platform's own loggers on stderr; the HTTP libraries only warn, so the
    request lines of the demo and the runners do not bury what the platform says."""
    handler = logging.StreamHandler()
    handler.setFormatter(PartFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for noisy in QUIET:
        logging.getLogger(noisy).setLevel(logging.WARNING)
