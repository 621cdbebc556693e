"""How a board ranks its kernels (JUDGING.md items 5, 7 and 8; docs/judging.md, "Ranks, ties
and what stands"): pure functions over the index's kernel entries.

- A kernel is ranked by the score of its **standing** result: its newest accepted result that a
  confirmation run did not dispute, that no uncleared suspect mark holds back, and whose score
  is *settled* (`kz_harness.validity.is_settled` on its interval; the board's reference as
  pinned, exactly 1, counts as settled). A kernel whose current result does not stand is ranked
  by the one before that does (`held_back` says which and why), or is listed unranked with the
  reason (`unranked`), after the ranked ones.
- Ties only between settled intervals: a kernel shares the rank of the first kernel of the rank
  above when their intervals overlap. Settled intervals are at most 10 % wide, so 0.5x never
  ties 1.5x.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kz_harness.validity import SETTLED_FACTOR, is_settled

__all__ = ["Score", "leaderboards", "unsettled_reason"]

DISPUTED = "disputed: a second run did not agree with it"
SUSPECT = "suspect: held back until a maintainer clears it"


@dataclass(frozen=True, slots=True)
class Score:
    """A kernel's speed-up over its board's pinned reference: measured side by side in one
    task (`side_by_side`, with its interval), the reference itself (`reference`, 1 exactly), or
    estimated from absolute figures measured apart (`absolute`, no interval: results from before
    side-by-side scoring)."""

    speedup: float
    low: float | None
    high: float | None
    basis: str

    def doc(self) -> dict[str, Any]:
        interval = None if self.low is None or self.high is None else [self.low, self.high]
        return {"speedup": self.speedup, "interval": interval, "basis": self.basis}

    @property
    def settled(self) -> bool:
        """Whether the score can rank: the reference as pinned, or a settled interval."""
        if self.basis == "reference":
            return True
        return self.low is not None and self.high is not None and is_settled(self.low, self.high)

    def overlaps(self, other: Score) -> bool:
        """Whether the two intervals overlap: the board cannot tell the two kernels apart."""
        if None in (self.low, self.high, other.low, other.high):
            return False
        assert self.low is not None and self.high is not None
        assert other.low is not None and other.high is not None
        return self.low <= other.high and other.low <= self.high

    @classmethod
    def of_doc(cls, doc: dict[str, Any] | None) -> Score | None:
        if doc is None:
            return None
        low, high = doc["interval"] if doc["interval"] else (None, None)
        return cls(doc["speedup"], low, high, doc["basis"])


def unsettled_reason(score: Score | None) -> str | None:
    """Why a score cannot rank (None when it can)."""
    if score is None:
        return "no score against the board's reference"
    if score.settled:
        return None
    if score.low is None or score.high is None:
        return "no interval: an estimate from figures measured apart"
    return (
        f"unsettled: its score's interval ({score.low:.3g}-{score.high:.3g}x) is "
        f"{score.high / score.low - 1:.0%} wide, where a settled one is within "
        f"{SETTLED_FACTOR - 1:.0%}"
    )


def why_not_standing(confirmation: str | None, suspect: bool, score: Score | None) -> str | None:
    """Why a result does not stand for its kernel on the board (None when it does)."""
    if confirmation == "disputed":
        return DISPUTED
    if suspect:
        return SUSPECT
    return unsettled_reason(score)


def leaderboards(kernels: list[dict[str, Any]], reviewed: bool) -> dict[str, list[dict[str, Any]]]:
    """The ranked boards that are (or are not) reviewed: the two are listed apart, so a board
    whose judge no maintainer accepted yet is never shown among the reviewed ones."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for doc in kernels:
        if (doc["best"] is None and doc["current"] is None) or doc[
            "board_reviewed"
        ] is not reviewed:
            continue
        group = "/".join(doc["id"].split("/")[:4])
        groups.setdefault(group, []).append(doc)
    return {group: _ranked(docs) for group, docs in sorted(groups.items())}


def _ranked(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A board's rows: the kernels with a standing score by that score, ties by overlap with
    the first kernel of the rank above; then the others, unranked, by their current score."""
    standing = sorted(
        (doc for doc in docs if doc["standing"] is not None),
        key=lambda doc: (-doc["standing"]["score"]["speedup"], doc["id"]),
    )
    rows: list[dict[str, Any]] = []
    leader: Score | None = None
    for position, doc in enumerate(standing, start=1):
        score = Score.of_doc(doc["standing"]["score"])
        tied = leader is not None and score is not None and score.overlaps(leader)
        rank = rows[-1]["rank"] if tied else position
        if not tied:
            leader = score
        rows.append(_row(doc, rank, tied))
    rest = sorted(
        (doc for doc in docs if doc["standing"] is None),
        key=lambda doc: (-(doc["score"] or {}).get("speedup", 0.0), doc["id"]),
    )
    return rows + [_row(doc, None, False) for doc in rest]


def _row(doc: dict[str, Any], rank: int | None, tied: bool) -> dict[str, Any]:
    standing = doc["standing"]
    shown = standing or doc["current"] or doc["best"]
    row: dict[str, Any] = {
        "kernel_id": doc["id"],
        "rank": rank,
        "value": shown["value"],
        "score": standing["score"] if standing else doc["score"],
        "submission": shown.get("submission"),
    }
    if tied:
        row["tied"] = True
    confirmation = shown.get("confirmation")
    if confirmation:
        row["confirmation"] = confirmation
    if (doc["current"] or doc["best"] or {}).get("suspect"):
        row["suspect"] = True
    if doc.get("held_back"):
        row["held_back"] = doc["held_back"]
    if rank is None:
        row["unranked"] = doc["unranked"]
    return row
