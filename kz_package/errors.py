"""Package errors: every problem found is a `Problem`, and one `PackageError` carries them all.

The error codes are the API's (CONTRACTS.md): `invalid_package`, `unsafe_archive`,
`package_too_large`, `invalid_kernel_id`, and `invalid_result` for result documents.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from kz_events.errors import InvalidInput

__all__ = [
    "INVALID_KERNEL_ID",
    "INVALID_PACKAGE",
    "INVALID_RESULT",
    "PACKAGE_TOO_LARGE",
    "UNSAFE_ARCHIVE",
    "PackageError",
    "Problem",
]

INVALID_PACKAGE = "invalid_package"
UNSAFE_ARCHIVE = "unsafe_archive"
PACKAGE_TOO_LARGE = "package_too_large"
INVALID_KERNEL_ID = "invalid_kernel_id"
INVALID_RESULT = "invalid_result"


@dataclass(frozen=True, slots=True, order=True)
class Problem:
    """One thing wrong with a package: the file, the field inside it ("" for the file itself)."""

    path: str
    field: str
    message: str

    def __str__(self) -> str:
        if self.field:
            return f"{self.path}: {self.field}: {self.message}"
        return f"{self.path}: {self.message}"

    def to_dict(self) -> dict[str, str]:
        return asdict(self)


class PackageError(InvalidInput):
    """A package, archive or result document failed its checks; `problems` lists every one."""

    code = INVALID_PACKAGE

    def __init__(self, code: str, problems: Sequence[Problem]) -> None:
        if not problems:
            raise ValueError("PackageError needs at least one problem")
        self.problems: tuple[Problem, ...] = tuple(problems)
        details: dict[str, Any] = {"problems": [p.to_dict() for p in self.problems]}
        super().__init__(_summary(code, self.problems), code=code, details=details)

    @classmethod
    def one(cls, code: str, path: str, field: str, message: str) -> PackageError:
        """An error holding a single problem."""
        return cls(code, [Problem(path, field, message)])


_LEADS = {
    INVALID_PACKAGE: "invalid package",
    UNSAFE_ARCHIVE: "unsafe archive",
    PACKAGE_TOO_LARGE: "package too large",
    INVALID_KERNEL_ID: "invalid kernel id",
    INVALID_RESULT: "invalid result document",
}


def _summary(code: str, problems: Sequence[Problem]) -> str:
    lead = _LEADS.get(code, code.replace("_", " "))
    first = str(problems[0])
    if len(problems) == 1:
        return f"{lead}: {first}"
    return f"{lead}: {first} (and {len(problems) - 1} more)"
