"""A problem read from a set, in the one shape every importer produces and the board writer
reads: what it computes, its workloads, its judge's description and sources, its reference
kernel's `src/`, and where it came from.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "FORMATS",
    "OP_CLASS",
    "Licence",
    "Problem",
    "Provenance",
    "segment",
]

FORMATS = ("kernelbench", "gpumode", "flashinfer")
# The board's op_class names the set, so a set's boards sit together and apart from the rest.
OP_CLASS = {"kernelbench": "KernelBench", "gpumode": "GPUMODE", "flashinfer": "FlashInfer"}
_NOT_ALLOWED = re.compile(r"[^A-Za-z0-9_.+\-]+")
SEGMENT_ROOM = 58  # a board segment's base, leaving room for a version suffix ".v999"


@dataclass(frozen=True, slots=True)
class Licence:
    """A set's licence: an SPDX id (or `LicenseRef-…`), its title, the conditions it puts on
    use ("" for a permissive one) and its full text, carried with every board of the set."""

    spdx: str
    title: str
    conditions: str
    text: str
    file: str

    def to_dict(self) -> dict[str, str]:
        return {"spdx": self.spdx, "title": self.title, "conditions": self.conditions,
                "file": self.file, "text": self.text}  # fmt: skip


@dataclass(frozen=True, slots=True)
class Provenance:
    """Where a set came from: its source (a clone's origin, else the folder's name) and
    version (the checkout's commit, "" outside git), and its licence."""

    source: str
    version: str
    licence: Licence | None = None


@dataclass(frozen=True, slots=True)
class Problem:
    """One problem of a set, ready to become a board.

    `judge` is the board's judge description for `kz_harness.problemsets.problem_benchmark`
    (less the device, which the architecture decides); `sources` the problem's own files by
    module name, verbatim; `reference_src` the files of the reference kernel's `src/`, a
    candidate in the set's own convention; `extra` the format's own provenance fields.
    """

    format: str
    problem_id: str
    sub_class: str
    quant: str
    title: str
    description: str
    judge: dict[str, Any]
    sources: dict[str, str]
    reference_src: dict[str, str]
    provenance: Provenance
    tags: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def op_class(self) -> str:
        return OP_CLASS[self.format]

    @property
    def workloads(self) -> list[dict[str, Any]]:
        return list(self.judge["workloads"])

    @property
    def digest(self) -> str:
        """What makes a version of the problem: its judge, sources and reference, hashed.
        Provenance (the commit, the licence) is not part of it: the same problem from a later
        commit is the same board."""
        content = {
            "format": self.format,
            "problem": self.problem_id,
            "judge": self.judge,
            "sources": self.sources,
            "reference_src": self.reference_src,
        }
        data = json.dumps(content, sort_keys=True, separators=(",", ":")).encode()
        return hashlib.sha256(data).hexdigest()


def segment(text: str, room: int = SEGMENT_ROOM) -> str:
    """`text` as a kernel-id segment: characters outside `A-Za-z0-9_.+-` become `_`, it starts
    with a letter or digit, and a long one is cut with a short hash of the whole kept."""
    cleaned = _NOT_ALLOWED.sub("_", text).lstrip("_.+-") or "x"
    if len(cleaned) <= room:
        return cleaned
    short = hashlib.sha256(text.encode()).hexdigest()[:8]
    return f"{cleaned[: room - 9].rstrip('_.+-')}-{short}"
