"""Subject layout and the reversible token encoding, with property tests over any input."""

from __future__ import annotations

import operator
import re
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kz_events.ids import KernelId
from kz_events.subjects import (
    aggregate_filter,
    consumer_name,
    decode_token,
    encode_token,
    event_subject,
    judge_key,
    live_subject,
    parse_event_subject,
    submitted_filter,
)

pytestmark = pytest.mark.unit

SEGMENT_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.+-"
segment = st.builds(
    operator.add,  # not a lambda: hypothesis would parse its source to describe it
    st.sampled_from(SEGMENT_CHARS[:62]),
    st.text(alphabet=SEGMENT_CHARS, max_size=63),
)
kernel_ids = st.builds(KernelId, segment, segment, segment, segment, segment)
FORBIDDEN = re.compile(r"[.*>\s]")
TOKEN = re.compile(r"(?:[A-Za-z0-9_+\-]|%[0-9A-F]{2})+")


@pytest.mark.parametrize(
    ("text", "token"),
    [
        ("sm90/Attention/MHA/fp16/flash_v3", "sm90%2FAttention%2FMHA%2Ffp16%2Fflash_v3"),
        ("sm_9.0", "sm_9%2E0"),
        ("a b", "a%20b"),
        ("*>", "%2A%3E"),
        ("%", "%25"),
        ("é", "%C3%A9"),
        ("keep_+-", "keep_+-"),
    ],
)
def test_encoding_table(text: str, token: str) -> None:
    """Known inputs encode to the documented percent-encoded tokens and back."""
    assert encode_token(text) == token
    assert decode_token(token) == text


@given(kernel_ids)
def test_kernel_id_round_trips_and_is_one_token(kid: KernelId) -> None:
    """Any valid kernel id encodes to one safe token that decodes back to the same id."""
    token = encode_token(str(kid))
    assert not FORBIDDEN.search(token)
    assert TOKEN.fullmatch(token)
    assert KernelId.parse(decode_token(token)) == kid


@given(st.text(min_size=1))
def test_any_text_round_trips_to_a_safe_token(text: str) -> None:
    """Any non-empty text encodes to a token without `.`, `*`, `>` or whitespace and back."""
    token = encode_token(text)
    assert not FORBIDDEN.search(token)
    assert TOKEN.fullmatch(token)
    assert decode_token(token) == text


@given(st.text(min_size=1), st.text(min_size=1))
def test_encoding_is_injective(a: str, b: str) -> None:
    """Two different texts never encode to the same token."""
    if a != b:
        assert encode_token(a) != encode_token(b)


@given(kernel_ids, st.uuids(), st.sampled_from(["submitted", "claimed", "committed"]))
def test_event_subject_parses_back(kid: KernelId, sid: uuid.UUID, kind: str) -> None:
    """An event subject has six tokens and parses back to its decoded parts."""
    subject = event_subject("submission", kid.arch, str(sid), kind)
    assert len(subject.split(".")) == 6
    assert parse_event_subject(subject) == ("submission", kid.arch, str(sid), kind)


@given(kernel_ids)
def test_kernel_aggregate_subject_parses_back(kid: KernelId) -> None:
    """A kernel event subject carries the whole kernel id as one token."""
    subject = event_subject("kernel", kid.arch, str(kid), "claimed")
    assert parse_event_subject(subject) == ("kernel", kid.arch, str(kid), "claimed")


def test_empty_token_is_refused() -> None:
    """An empty token would break the subject's shape, so encoding refuses it."""
    with pytest.raises(ValueError, match="empty"):
        encode_token("")


@pytest.mark.parametrize("token", ["%", "%2", "%zz", "%2f", "abc%"])
def test_bad_escapes_are_refused(token: str) -> None:
    """A token with a malformed or lowercase escape is not decoded silently."""
    with pytest.raises(ValueError, match="bad escape"):
        decode_token(token)


@pytest.mark.parametrize(
    "subject", ["kz.ev.submission.sm90.x", "kz.live.task.a.b.c", "x.ev.a.b.c.d"]
)
def test_parse_refuses_non_event_subjects(subject: str) -> None:
    """Only `kz.ev.<aggregate>.<arch>.<id>.<type>` parses as an event subject."""
    with pytest.raises(ValueError, match="not an event subject"):
        parse_event_subject(subject)


def test_fixed_layout() -> None:
    """Filters, live subjects, consumer names and judge keys follow the fixed wire layout."""
    sid = "0b7c2a9e-1d2f-4e5a-9b8c-7d6e5f4a3b2c"
    assert event_subject("submission", "sm_9.0", sid, "submitted") == (
        f"kz.ev.submission.sm_9%2E0.{sid}.submitted"
    )
    assert aggregate_filter("kernel", "sm90", "sm90/A/B/fp16/k") == (
        "kz.ev.kernel.sm90.sm90%2FA%2FB%2Ffp16%2Fk.*"
    )
    assert live_subject("task", "sm90", sid) == f"kz.live.task.sm90.{sid}"
    assert live_subject("runner", "sm90", "gpu box/1") == "kz.live.runner.sm90.gpu%20box%2F1"
    assert submitted_filter("sm_9.0") == "kz.ev.submission.sm_9%2E0.*.submitted"
    assert consumer_name("sm90") == "runners-sm90"
    assert judge_key("sm90/A/B/fp16/k") == "judge/sm90/A/B/fp16/k"


@given(segment)
def test_consumer_names_are_valid_nats_names(arch: str) -> None:
    """A consumer name for any architecture holds no character NATS forbids in names."""
    name = consumer_name(arch)
    assert re.fullmatch(r"runners-[A-Za-z0-9_\-]+", name)
