"""Value types for the identifiers that travel between the parts: parsed once, at the edge.

A `KernelId` is `<arch>/<op_class>/<sub_class>/<quant>/<name>` (CONTRACTS.md); it is also the
package's path in the kernel repo and, encoded, a token of a NATS subject.
"""

from __future__ import annotations

import functools
import re
import uuid
from dataclasses import dataclass
from typing import NewType

from kz_events.errors import InvalidInput, InvalidKernelId

__all__ = [
    "Arch",
    "Digest",
    "KernelId",
    "SubmissionId",
    "is_digest",
    "new_submission_id",
    "parse_arch",
    "parse_digest",
    "parse_submission_id",
]

_SEGMENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+\-]{0,63}")
_PARTS = ("arch", "op_class", "sub_class", "quant", "name")
_DIGEST = re.compile(r"[0-9a-f]{64}")

Arch = NewType("Arch", str)
Digest = NewType("Digest", str)
SubmissionId = NewType("SubmissionId", str)


def _check_segment(part: str, value: str) -> None:
    if not _SEGMENT.fullmatch(value):
        raise InvalidKernelId(
            f"kernel id segment {part} must be 1-64 characters of A-Z a-z 0-9 _ . + - "
            f"starting with a letter or digit, got {value!r}",
            details={"field": part, "value": value},
        )


@dataclass(frozen=True, slots=True, order=True)
class KernelId:
    """A kernel's identity: five validated segments."""

    arch: str
    op_class: str
    sub_class: str
    quant: str
    name: str

    def __post_init__(self) -> None:
        for part in _PARTS:
            _check_segment(part, getattr(self, part))

    @classmethod
    def parse(cls, text: str) -> KernelId:
        """Parse `a/b/c/d/e`; a single %2F-encoded form is accepted too."""
        if not isinstance(text, str):
            raise InvalidKernelId(f"kernel id must be a string, got {type(text).__name__}")
        return _parse_kernel_id(text) if cls is KernelId else cls._parse(text)

    @classmethod
    def _parse(cls, text: str) -> KernelId:
        normalised = text.replace("%2F", "/").replace("%2f", "/")
        segments = normalised.split("/")
        if len(segments) != len(_PARTS):
            raise InvalidKernelId(
                "kernel id must have exactly five segments "
                f"<arch>/<op_class>/<sub_class>/<quant>/<name>, got {text!r}",
                details={"value": text},
            )
        return cls(*segments)

    def __str__(self) -> str:
        return "/".join(self.parts)

    @property
    def parts(self) -> tuple[str, str, str, str, str]:
        return (self.arch, self.op_class, self.sub_class, self.quant, self.name)

    @property
    def group(self) -> str:
        """The leaderboard this kernel competes on: `arch/op_class/sub_class/quant`."""
        return "/".join(self.parts[:4])

    @property
    def repo_path(self) -> str:
        return str(self)


@functools.lru_cache(maxsize=4096)
def _parse_kernel_id(text: str) -> KernelId:
    """Kernel ids are parsed on every event read; they are immutable, so share the results."""
    return KernelId._parse(text)


def parse_arch(text: str) -> Arch:
    try:
        _check_segment("arch", text)
    except InvalidKernelId as exc:
        raise InvalidInput(exc.message, code="invalid_arch") from exc
    return Arch(text)


def is_digest(text: str) -> bool:
    """Whether `text` is a package digest: a SHA-256 in lowercase hex."""
    return _DIGEST.fullmatch(text) is not None


def parse_digest(text: str) -> Digest:
    if not is_digest(text):
        raise InvalidInput(f"digest must be 64 lowercase hex characters, got {text!r}")
    return Digest(text)


def parse_submission_id(text: str) -> SubmissionId:
    try:
        value = uuid.UUID(text)
    except (ValueError, AttributeError, TypeError) as exc:
        raise InvalidInput(
            f"submission id must be a UUID, got {text!r}", code="unknown_submission"
        ) from exc
    return SubmissionId(str(value))


def new_submission_id() -> SubmissionId:
    return SubmissionId(str(uuid.uuid4()))
