"""The kernel list: filter, sort and page the index's kernel entries (pure), with a cache of
encoded answers keyed by the fold position, so repeated queries cost one dictionary lookup.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import msgspec

from kz_api.errors import ApiError
from kz_api.models import KernelList

__all__ = ["SORT_KEYS", "KernelQuery", "KernelsCache", "query_kernels"]

SORT_KEYS = ("id", "title", "accepted_count", "last_activity_at", "best")
_PART_NAMES = ("arch", "op_class", "sub_class", "quant")


@dataclass(frozen=True)
class KernelQuery:
    """Filters, sort and page of `GET /api/kernels`."""

    arch: str | None = None
    op_class: str | None = None
    sub_class: str | None = None
    quant: str | None = None
    q: str | None = None
    model: str | None = None  # the current result's provenance (index.json's `current`)
    agent: str | None = None
    sort: str = "id"
    limit: int = 50
    offset: int = 0


def _parts(entry: dict[str, Any]) -> list[str]:
    return str(entry.get("id", "")).split("/")


def _matches(entry: dict[str, Any], query: KernelQuery) -> bool:
    parts = _parts(entry)
    for index, name in enumerate(_PART_NAMES):
        wanted = getattr(query, name)
        if wanted is not None and (len(parts) <= index or parts[index] != wanted):
            return False
    if not _made_by(entry, query):
        return False
    if query.q:
        haystack = " ".join(
            str(entry.get(k, "")) for k in ("id", "title", "language", "description")
        )
        tags = entry.get("tags")
        if isinstance(tags, list):
            haystack += " " + " ".join(map(str, tags))
        return query.q.lower() in haystack.lower()
    return True


def _made_by(entry: dict[str, Any], query: KernelQuery) -> bool:
    """The model/agent filters, on the provenance of the kernel's current result."""
    if query.model is None and query.agent is None:
        return True
    current = entry.get("current")
    made = current.get("provenance") if isinstance(current, dict) else None
    if not isinstance(made, dict):
        return False
    return (query.model is None or made.get("model") == query.model) and (
        query.agent is None or made.get("agent") == query.agent
    )


def _sort_value(entry: dict[str, Any], key: str) -> tuple[bool, Any]:
    value = entry.get(key)
    if key == "best":
        value = value.get("value") if isinstance(value, dict) else None
    if isinstance(value, bool) or value is None:
        return (True, "")
    return (False, value if isinstance(value, int | float) else str(value))


def query_kernels(entries: list[dict[str, Any]], query: KernelQuery, log_seq: int) -> KernelList:
    key = query.sort.removeprefix("-")
    if key not in SORT_KEYS:
        raise ApiError(
            400,
            "invalid_input",
            f"sort must be one of {', '.join(SORT_KEYS)} (prefix - for descending), "
            f"got {query.sort!r}",
        )
    found = [e for e in entries if _matches(e, query)]
    present = [e for e in found if not _sort_value(e, key)[0]]
    missing = [e for e in found if _sort_value(e, key)[0]]
    present.sort(
        key=lambda e: (_sort_value(e, key)[1], str(e.get("id"))), reverse=query.sort.startswith("-")
    )
    ordered = present + missing
    page = ordered[query.offset : query.offset + query.limit]
    return KernelList(
        items=page, total=len(ordered), limit=query.limit, offset=query.offset, log_seq=log_seq
    )


class KernelsCache:
    """Encoded answers by (fold position, query); cleared when the position moves."""

    def __init__(self, size: int = 256) -> None:
        self.size = size
        self.seq = -1
        self._answers: OrderedDict[KernelQuery, bytes] = OrderedDict()

    def get(self, seq: int, query: KernelQuery) -> bytes | None:
        if seq != self.seq:
            self.seq = seq
            self._answers.clear()
            return None
        answer = self._answers.get(query)
        if answer is not None:
            self._answers.move_to_end(query)
        return answer

    def put(self, query: KernelQuery, answer: KernelList) -> bytes:
        data = msgspec.json.encode(answer)
        self._answers[query] = data
        while len(self._answers) > self.size:
            self._answers.popitem(last=False)
        return data
