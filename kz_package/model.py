"""Typed views of a validated package: `Desc` is desc.yaml, `Package` is a whole checked package."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import msgspec

from kz_events.events import PackageSummary
from kz_events.ids import KernelId
from kz_events.result import Metric  # the one metric type, with its direction rule

__all__ = ["PACKAGE_FILES", "Desc", "Metric", "Package", "Workload"]

# The four files of `.kernel_package/`, in the order a reader meets them.
PACKAGE_FILES = ("desc.yaml", "bench_result.yaml", "build_test_env.py", "benchmark.py")

Language = Literal["cuda", "hip", "triton", "cutlass", "tilelang", "cpp", "python", "other"]


class Workload(msgspec.Struct, frozen=True, kw_only=True):
    """A named shape or parameter set the benchmark runs."""

    name: str
    description: str = ""
    params: dict[str, Any] = msgspec.field(default_factory=dict)


class Desc(msgspec.Struct, frozen=True, kw_only=True):
    """desc.yaml, after it passed its schema (the `x-` extension fields are dropped)."""

    schema_version: int
    kernel_id: str
    title: str
    description: str
    authors: tuple[str, ...]
    language: Language
    metric: Metric
    workloads: tuple[Workload, ...]
    reference: str | None = None
    tags: tuple[str, ...] = ()
    license: str | None = None
    problem: dict[str, Any] | None = None  # `x-problem`: where an imported board came from

    def summary(self) -> PackageSummary:
        """What the board shows of this package, carried by its `submitted` event."""
        return PackageSummary(
            title=self.title,
            language=self.language,
            metric=self.metric.fields(),
            problem=problem_note(self.problem),
        )

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> Desc:
        """Build from schema-valid data; `x-` fields are left out but for `x-problem`."""
        plain = {k: v for k, v in data.items() if not k.startswith("x-")}
        problem = data.get("x-problem")
        return msgspec.convert(
            {**plain, "problem": problem if isinstance(problem, dict) else None}, cls
        )


_PROBLEM_FIELDS = ("format", "id", "board_version", "source", "commit")
_LICENCE_FIELDS = ("spdx", "title", "conditions")
_NOTE_CHARS = 2000


def problem_note(problem: object) -> dict[str, Any] | None:
    """What a board shows of an imported problem (`x-problem`): its plain fields and its
    licence's, as strings of bounded length; None for anything else."""
    if not isinstance(problem, dict):
        return None
    note: dict[str, Any] = {
        k: str(problem[k])[:_NOTE_CHARS] for k in _PROBLEM_FIELDS if problem.get(k) is not None
    }
    licence = problem.get("licence")
    if isinstance(licence, dict):
        note["licence"] = {
            k: str(licence[k])[:_NOTE_CHARS] for k in _LICENCE_FIELDS if licence.get(k)
        }
    return note or None


@dataclass(frozen=True, slots=True)
class Package:
    """A package that passed every check.

    `root` is where it was checked (for `validate_tarball`, a temporary directory that no longer
    exists); `bench_result` is the scoreboard, or None when it is the empty one a new kernel ships.
    """

    kernel_id: KernelId
    desc: Desc
    root: Path
    bench_result: dict[str, Any] | None
