"""The batch reader's parsing of JetStream reply subjects."""

from __future__ import annotations

import pytest

from kz_events.reader import _sequence_and_pending

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("$JS.ACK.KZ_EVENTS.c1.1.42.7.1700000000000000000.9", (42, 9)),
        ("$JS.ACK.hub.ACCHASH.KZ_EVENTS.c1.1.42.7.1700000000000000000.9.r4nd", (42, 9)),
        ("$JS.ACK.hub.ACCHASH.KZ_EVENTS.c1.1.5.5.1700000000000000000.0", (5, 0)),
    ],
)
def test_sequence_and_pending_from_both_reply_forms(reply: str, expected: tuple[int, int]) -> None:
    """The stream sequence and pending count are read from v1 and v2 (domain) ack subjects."""
    assert _sequence_and_pending(reply) == expected
