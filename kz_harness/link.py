"""The judge's ends of its lines: one `Link` per worker, and the `Control` line to the runner.

A link sends a worker its requests and times each window of calls with the judge's own clock,
from the message that starts the window to the one that ends it. Whatever goes wrong on the
worker's side — a refusal, an exception in the submitted code, a death, a silence — is raised
as `CandidateFailed` with the step it happened in (`load`, `call`, `output`) and the error as
`ExcType: message`, so the judge can say whose fault it was and what happened.
"""

from __future__ import annotations

import os
import struct
import time
from collections.abc import Mapping, Sequence
from typing import Any

from kz_harness.channel import Channel, ChannelClosed, Op, decode_json
from kz_harness.errors import HarnessError

__all__ = ["MAX_ERROR", "CandidateFailed", "Control", "Link"]

MAX_ERROR = 2000  # characters of a worker's error kept: a document's reason holds 2,000


class CandidateFailed(HarnessError):
    """A worker could not load, raised in a call, returned a bad output, died or fell silent.

    `stage` is the step (`load`, `call` or `output`), `error` the worker's exception as
    `ExcType: message` (or what the judge saw: `WorkerDied: ...`, `Timeout: ...`)."""

    def __init__(self, message: str, *, stage: str = "call", error: str = "") -> None:
        super().__init__(message)
        self.stage = stage
        self.error = error or message


class Link:
    """The judge's end of one worker's channel."""

    def __init__(self, name: str, worker: int, channel: Channel, timeout_s: float) -> None:
        self.name = name
        self.worker = worker
        self.channel = channel
        self.timeout_s = timeout_s
        channel.sock.settimeout(timeout_s)
        self.stage = "load"  # the step the worker is in, for a failure's report

    def request(self, op: int, document: Mapping[str, Any], fds: Sequence[int] = ()) -> None:
        self.send(op, document, fds)
        self.answered()

    def send(self, op: int, document: Mapping[str, Any], fds: Sequence[int] = ()) -> None:
        """Send a request without waiting (`answered` waits), so workers work in parallel."""
        self.stage = "load" if op == Op.LOAD else "call"
        self.channel.send_json(op, document, fds)

    def answered(self) -> None:
        self._answered()

    def ask(self, op: int, document: Mapping[str, Any]) -> dict[str, Any]:
        """Send a request and return the document its OK carries."""
        self.send(op, document)
        return decode_json(self._answered())

    def _answered(self) -> bytes:
        answer, payload = self._answer()
        if answer != Op.OK:
            raise self._failed(answer, payload, f"the {self.name} worker refused")
        return payload

    def window(self, slots: Sequence[int]) -> tuple[int, list[int] | None]:
        """One timed window: a call in each of `slots`, back to back. The judge's wall time of
        the whole window in ns, and on a GPU the device time of each call the worker reports
        (None on a CPU)."""
        self.stage = "call"
        begin = time.perf_counter_ns()
        try:
            self.channel.send_calls(slots)
        except ChannelClosed as exc:
            raise self._died(exc) from None
        answer, payload = self._answer()
        elapsed = time.perf_counter_ns() - begin
        if answer != Op.DONE:
            raise self._failed(answer, payload, f"a call of the {self.name} failed")
        if not payload:
            return elapsed, None
        if len(payload) != 8 * len(slots):
            raise CandidateFailed(
                f"the {self.name} answered a window of {len(slots)} calls with "
                f"{len(payload)} bytes",
                error=f"ProtocolError: {len(payload)} bytes answered {len(slots)} calls",
            )
        return elapsed, list(struct.unpack(f"<{len(slots)}q", payload))

    def _answer(self) -> tuple[int, bytes]:
        try:
            return self.channel.receive_op()
        except TimeoutError:
            raise CandidateFailed(
                f"the {self.name} did not answer in time",
                stage=self.stage,
                error=f"Timeout: no answer within {self.timeout_s:g} s",
            ) from None
        except ChannelClosed as exc:
            raise self._died(exc) from None

    def _died(self, exc: ChannelClosed) -> CandidateFailed:
        return CandidateFailed(
            f"the {self.name} worker died ({exc})",
            stage=self.stage,
            error=f"WorkerDied: the worker exited or was killed ({exc})",
        )

    def _failed(self, answer: int, payload: bytes, what: str) -> CandidateFailed:
        if answer != Op.ERROR:
            error = f"ProtocolError: the worker answered with operation {answer}"
            return CandidateFailed(f"{what}: {error}", stage=self.stage, error=error)
        try:
            reply = decode_json(payload)
        except HarnessError:
            reply = {}
        error = str(reply.get("message") or "WorkerError: an unreadable answer")[:MAX_ERROR]
        stage = reply.get("stage")
        if stage not in ("load", "call", "output"):
            stage = self.stage
        return CandidateFailed(f"{what}: {error}", stage=str(stage), error=error)


class Control:
    """The judge's line to the runner: start, stop, inspect and kill workers."""

    def __init__(self, channel: Channel, timeout_s: float = 30.0) -> None:
        self.channel = channel
        self.timeout_s = timeout_s

    def _ask(self, op: int, document: Mapping[str, Any]) -> tuple[dict[str, Any], list[int]]:
        self.channel.send_json(op, document)
        answer, payload, fds = self.channel.receive()
        reply = decode_json(payload)
        if answer != Op.OK:
            for fd in fds:
                os.close(fd)
            raise HarnessError(f"the runner refused: {reply.get('message', '?')}")
        return reply, fds

    def spawn(self, implementation: str) -> Link:
        """A new worker for `implementation` (candidate, or `calibrate` for the no-op)."""
        reply, fds = self._ask(Op.SPAWN, {"implementation": implementation})
        if len(fds) != 1:
            raise HarnessError(f"the runner sent {len(fds)} descriptors for a worker, not 1")
        channel = Channel.from_fd(fds[0])
        return Link(implementation, int(reply["worker"]), channel, self.timeout_s)

    def inspect(self, link: Link) -> dict[str, Any]:
        """{processes, threads, cpu_ns} of the worker's sandbox, as the runner sees them."""
        return self._ask(Op.INSPECT, {"worker": link.worker})[0]

    def stop(self, link: Link) -> None:
        self._ask(Op.STOP, {"worker": link.worker})

    def cont(self, link: Link) -> None:
        self._ask(Op.CONT, {"worker": link.worker})

    def kill(self, link: Link) -> None:
        self._ask(Op.KILL, {"worker": link.worker})
