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

    def summary(self) -> PackageSummary:
        """What the board shows of this package, carried by its `submitted` event."""
        return PackageSummary(
            title=self.title,
            language=self.language,
            metric=self.metric.fields(),
        )

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> Desc:
        """Build from schema-valid data; `x-` fields are left out."""
        plain = {k: v for k, v in data.items() if not k.startswith("x-")}
        return msgspec.convert(plain, cls)


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
