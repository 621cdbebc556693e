"""Provenance of a submission: the one check every door uses, and its commit trailers."""

from __future__ import annotations

import pytest

from kz_events.errors import InvalidInput
from kz_events.provenance import Provenance, parse_provenance, provenance_trailers

pytestmark = pytest.mark.unit


def test_form_fields_become_typed_provenance() -> None:
    """Text fields (a form, a flag) are converted: tokens to int, cost to float."""
    got = parse_provenance(
        {
            "agent": "codex",
            "model": "gpt-5",
            "tokens": "1200",
            "cost_usd": "0.5",
            "transcript_url": "https://example.org/run/7",
            "message": "ignored",
        }
    )
    assert got == Provenance(
        agent="codex",
        model="gpt-5",
        tokens=1200,
        cost_usd=0.5,
        transcript_url="https://example.org/run/7",
    )


def test_nothing_given_is_no_provenance() -> None:
    """No field, or only empty ones, is None: a submission without provenance."""
    assert parse_provenance({}) is None
    assert parse_provenance({"agent": "", "tokens": None}) is None


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("agent", "x" * 101),
        ("agent", "two\nlines"),
        ("model", 7),
        ("tokens", "many"),
        ("tokens", -1),
        ("tokens", 1.5),
        ("tokens", True),
        ("tokens", 10**13),
        ("cost_usd", "nan"),
        ("cost_usd", -0.01),
        ("cost_usd", "inf"),
        ("transcript_url", "javascript:alert(1)"),
        ("transcript_url", "file:///etc/passwd"),
        ("transcript_url", "https://example.org/" + "a" * 2000),
        ("transcript_url", "https://exa mple.org"),
    ],
)
def test_a_bad_value_is_refused_naming_the_field(field: str, value: object) -> None:
    """Each bad value is refused with `invalid_provenance`, the field and what was expected."""
    with pytest.raises(InvalidInput) as caught:
        parse_provenance({field: value})
    assert caught.value.code == "invalid_provenance"
    assert caught.value.details["field"] == field
    assert caught.value.message.startswith(f"{field}: expected ")


def test_trailers_name_each_field_that_is_set() -> None:
    """Only the set fields become trailers, one line each; none for no provenance."""
    trailers = provenance_trailers(Provenance(model="m", tokens=3, cost_usd=1.25))
    assert trailers == [("Kz-Model", "m"), ("Kz-Tokens", "3"), ("Kz-Cost-USD", "1.25")]
    assert provenance_trailers(None) == []
