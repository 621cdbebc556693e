"""The event loop every `kz` command runs on: uvloop where it is installed, else asyncio's own.

uvloop does the socket and timer work of the loop in C; a process that mostly talks to NATS
and HTTP spends noticeably less CPU per message on it (see docs/performance.md).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

__all__ = ["loop_factory", "run", "uvicorn_loop"]

T = TypeVar("T")


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency on Linux and macOS
        return None
    return uvloop.new_event_loop


def uvicorn_loop() -> str:
    """uvicorn's `loop` setting matching `loop_factory`."""
    return "uvloop" if loop_factory() is not None else "asyncio"


def run(main: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(main)` on the loop `loop_factory` picks."""
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(main)
