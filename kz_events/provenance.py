"""Who made a submission: the agent and model that wrote it, the tokens and money it cost, and a
link to its transcript. Every field is optional; a submission without any carries none.

`parse_provenance` is the one check, used by the API's form, the `kz submit` flags and the MCP
tools alike: it refuses a wrong type, an over-long text, a control character (a value becomes
a commit trailer, one line) or a transcript link that is not http(s), naming the field.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

import msgspec

from kz_events.errors import InvalidInput

__all__ = [
    "PROVENANCE_FIELDS",
    "PROVENANCE_LIMITS",
    "Provenance",
    "made_by",
    "parse_provenance",
    "provenance_trailers",
]

# Field → what it may hold, as said in an error and in the docs.
PROVENANCE_LIMITS: dict[str, str] = {
    "agent": "the agent or tool that wrote the kernel, 1-100 printable characters",
    "model": "the model behind it, 1-100 printable characters",
    "tokens": "the tokens it spent, an integer from 0 to 10^12",
    "cost_usd": "what it cost in US dollars, a number from 0 to 10^6",
    "transcript_url": "a link to its transcript, an http:// or https:// URL of at most 2000 "
    "characters",
}
PROVENANCE_FIELDS = tuple(PROVENANCE_LIMITS)
MAX_NAME = 100
MAX_URL = 2000
MAX_TOKENS = 10**12
MAX_COST_USD = 1e6
_PRINTABLE = re.compile(r"[^\x00-\x1f\x7f]+")
_URL = re.compile(r"https?://[^\s\x00-\x1f\x7f]+", re.IGNORECASE)


class Provenance(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Who made a submission; recorded in its `submitted` event and its commit's trailers."""

    agent: str | None = None
    model: str | None = None
    tokens: int | None = None
    cost_usd: float | None = None
    transcript_url: str | None = None

    def fields(self) -> dict[str, Any]:
        """The fields that are set."""
        return {k: v for k, v in msgspec.structs.asdict(self).items() if v is not None}


def _refuse(name: str, got: object) -> InvalidInput:
    shown = repr(got[:60] + ("…" if len(got) > 60 else "")) if isinstance(got, str) else repr(got)
    return InvalidInput(
        f"{name}: expected {PROVENANCE_LIMITS[name]}, got {shown}",
        code="invalid_provenance",
        details={"field": name, "expected": PROVENANCE_LIMITS[name]},
    )


def _text(name: str, value: object, limit: int) -> str:
    if not isinstance(value, str) or not 1 <= len(value) <= limit:
        raise _refuse(name, value)
    if not _PRINTABLE.fullmatch(value):
        raise _refuse(name, value)
    return value


def _number(name: str, value: object, *, integer: bool, limit: float) -> int | float:
    if isinstance(value, str):  # a form field or a command-line flag
        try:
            value = int(value) if integer else float(value)
        except ValueError as exc:
            raise _refuse(name, value) from exc
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _refuse(name, value)
    if integer and not isinstance(value, int):
        raise _refuse(name, value)
    if not math.isfinite(value) or not 0 <= value <= limit:
        raise _refuse(name, value)
    return value if integer else float(value)


def _url(value: object) -> str:
    text = _text("transcript_url", value, MAX_URL)
    if not _URL.fullmatch(text):
        raise _refuse("transcript_url", value)
    return text


def parse_provenance(fields: Mapping[str, object]) -> Provenance | None:
    """The provenance among `fields` (others are ignored); None when none is given. An empty
    string counts as not given, so an empty form field is not an error."""
    given = {k: v for k, v in fields.items() if k in PROVENANCE_LIMITS and v not in (None, "")}
    if not given:
        return None
    agent, model = given.get("agent"), given.get("model")
    tokens, cost, url = given.get("tokens"), given.get("cost_usd"), given.get("transcript_url")
    return Provenance(
        agent=_text("agent", agent, MAX_NAME) if agent is not None else None,
        model=_text("model", model, MAX_NAME) if model is not None else None,
        tokens=int(_number("tokens", tokens, integer=True, limit=MAX_TOKENS))
        if tokens is not None
        else None,
        cost_usd=_number("cost_usd", cost, integer=False, limit=MAX_COST_USD)
        if cost is not None
        else None,
        transcript_url=_url(url) if url is not None else None,
    )


def made_by(provenance: Provenance | None, *, model: str | None, agent: str | None) -> bool:
    """Whether a submission with `provenance` passes the filters `model` and `agent` (None:
    any), compared exactly; a submission without provenance passes no filter."""
    if model is None and agent is None:
        return True
    if provenance is None:
        return False
    return (model is None or provenance.model == model) and (
        agent is None or provenance.agent == agent
    )


# The commit trailer of each field, in the order they are written.
_TRAILERS = (
    ("agent", "Kz-Agent"),
    ("model", "Kz-Model"),
    ("tokens", "Kz-Tokens"),
    ("cost_usd", "Kz-Cost-USD"),
    ("transcript_url", "Kz-Transcript"),
)


def provenance_trailers(provenance: Provenance | None) -> list[tuple[str, str]]:
    """The commit trailers of a provenance (none for None or an empty one)."""
    if provenance is None:
        return []
    fields = provenance.fields()
    return [(trailer, _trailer_value(fields[n])) for n, trailer in _TRAILERS if n in fields]


def _trailer_value(value: object) -> str:
    return f"{value:.10g}" if isinstance(value, float) else str(value)
