"""Publishing under an expected last sequence, as JetStream answers it solo and clustered.

A server checks `Nats-Expected-Last-Subject-Sequence` and answers 10071 ("wrong last
sequence: N") when the subject has moved past it. The leader of a clustered stream also
refuses, with 10164 ("wrong last sequence", no number), while another message expecting on the
same subject is still being replicated: that one may yet land or fail, so the answer is not
known. `publish_expecting` waits that out and asks again, and callers see one answer for "the
subject moved": `SubjectMoved`.
"""

from __future__ import annotations

import asyncio
from typing import Any

import nats.js.errors
from nats.js import JetStreamContext

__all__ = [
    "SUBJECT_IN_PROCESS",
    "WRONG_LAST_SEQUENCE",
    "SubjectMoved",
    "publish_expecting",
]

WRONG_LAST_SEQUENCE = 10071
SUBJECT_IN_PROCESS = 10164
SETTLE_WAITS_S = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5)  # ~0.9 s in all for a replication to settle


class SubjectMoved(Exception):
    """The subject's last sequence is not the expected one (or another writer's message on it
    stayed unsettled past `SETTLE_WAITS_S`)."""


async def publish_expecting(
    js: JetStreamContext,
    subject: str,
    payload: bytes,
    headers: dict[str, str],
    stream: str | None = None,
) -> Any:
    """`js.publish` of a message that carries an expected last sequence; its ack. Raises
    `SubjectMoved` when the expectation fails; other errors as nats-py raises them."""
    for wait_s in (*SETTLE_WAITS_S, None):
        try:
            return await js.publish(subject, payload, stream=stream, headers=headers)
        except nats.js.errors.APIError as exc:
            if exc.err_code == WRONG_LAST_SEQUENCE:
                raise SubjectMoved(str(exc.description)) from exc
            if exc.err_code != SUBJECT_IN_PROCESS:
                raise
            if wait_s is None:
                raise SubjectMoved(f"{subject}: another message stayed in flight") from exc
            await asyncio.sleep(wait_s)
    raise AssertionError("unreachable")  # pragma: no cover
