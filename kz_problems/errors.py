"""Errors of the problem-set importers and exporters.

KzError
└── InvalidInput
    └── ProblemError      a problem (or set) that cannot be read: names the file, the field
                          and what was expected; `code` is `invalid_problem`
"""

from __future__ import annotations

from dataclasses import dataclass

from kz_events.errors import InvalidInput

__all__ = ["INVALID_PROBLEM", "ProblemError", "Skipped"]

INVALID_PROBLEM = "invalid_problem"


class ProblemError(InvalidInput):
    """A problem set's file failed a check: `where` is the file (and field), `message` what was
    expected and what came."""

    code = INVALID_PROBLEM

    def __init__(self, where: str, message: str) -> None:
        super().__init__(f"{where}: {message}", details={"where": where, "message": message})
        self.where = where
        self.reason = message


@dataclass(frozen=True, slots=True)
class Skipped:
    """A problem of a set that is not imported, and why (unsupported, or unreadable)."""

    problem: str
    reason: str
    where: str = ""

    @classmethod
    def of(cls, problem: str, error: ProblemError) -> Skipped:
        return cls(problem, error.reason, error.where)

    def to_dict(self) -> dict[str, str]:
        return {"problem": self.problem, "reason": self.reason, "where": self.where}
