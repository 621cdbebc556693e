"""The result document as one typed value: `ResultDocument`, decoded once from the JSON the
judge sent (`ResultDocument.of`), with the metric's direction rule on `Metric`.

The events keep the document exactly as the runner sent it (`result: dict`), so a replay folds
the same bytes into the same commits; readers decode this view from it. The view is tolerant:
unknown fields (a newer judge's) are ignored, and every field added after version 1 has a
default, so version 1 documents and old events decode. The JSON Schema is the gate at the
runner; this is the reader's view of what passed it, and requires only what a reader cannot do
without (a metric's name, unit and direction; a workload's, check's and flag's name): anything
else absent reads as None or empty.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal, TypeVar

import msgspec

from kz_events.errors import InvalidResult

__all__ = [
    "NO_METRIC",
    "RESULT_SCHEMA_VERSION",
    "Ceilings",
    "Check",
    "Comparison",
    "Correctness",
    "Failure",
    "Flag",
    "Floor",
    "Metric",
    "ResultDocument",
    "Rival",
    "Score",
    "Speedup",
    "Stats",
    "Timing",
    "Validity",
    "WorkloadResult",
    "decode_result",
    "result_flags",
    "stored_result",
]

RESULT_SCHEMA_VERSION = 3  # what kz_harness writes; 1 and 2 still decode
T = TypeVar("T")
Better = Literal["lower", "higher"]


class _Part(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A part of the document: frozen, keyword-only, unknown fields ignored; encoded without
    the fields it was not given."""


class Metric(_Part, frozen=True, kw_only=True, omit_defaults=False):
    """A metric (name, unit, which direction is better) and, in a result, its headline value.

    The one place the direction rule lives: `better_than`, `speedup`, `best`, `rank_key`.
    """

    name: str
    unit: str
    better: Better
    value: float | None = None

    @property
    def higher_is_better(self) -> bool:
        return self.better == "higher"

    def better_than(self, a: float, b: float) -> bool:
        """Whether `a` is strictly better than `b` in this metric's direction."""
        return a > b if self.higher_is_better else a < b

    def speedup(self, of: float, over: float) -> float:
        """How many times better `of` is than `over` (above 1: `of` is better): `over / of`
        when lower is better (times), `of / over` when higher is (throughputs)."""
        return of / over if self.higher_is_better else over / of

    def rank_key(self, value: float) -> float:
        """A sort key that puts the best value first."""
        return -value if self.higher_is_better else value

    def best(self, items: Iterable[T], value: Callable[[T], float]) -> T | None:
        """The item with the best `value(item)`; the first of equals wins; None when empty."""
        found: T | None = None
        for item in items:
            if found is None or self.better_than(value(item), value(found)):
                found = item
        return found

    def fields(self) -> dict[str, str]:
        """Name, unit and direction, as the scoreboard and the index write them."""
        return {"name": self.name, "unit": self.unit, "better": self.better}

    def spec(self) -> Metric:
        """The metric without a value: what a kernel declares."""
        return Metric(name=self.name, unit=self.unit, better=self.better)

    @classmethod
    def of(cls, data: object) -> Metric | None:
        """A declared metric (desc.yaml's, a scoreboard's) as a Metric; None when `data` is not
        one (no metric, or not name, unit and lower/higher)."""
        try:
            return msgspec.convert(data, cls) if isinstance(data, Mapping) else None
        except msgspec.ValidationError:
            return None


# What a board or a history that knows no metric yet ranks by: lower is better (latencies).
NO_METRIC = Metric(name="", unit="", better="lower")


class Stats(_Part, frozen=True, kw_only=True):
    """Summary statistics of one implementation's timed samples on one workload."""

    median: float | None = None
    mean: float | None = None
    stdev: float | None = None
    min: float | None = None
    max: float | None = None
    p10: float | None = None
    p90: float | None = None
    samples: tuple[float, ...] | int | None = None  # every sample, or only their count
    sem: float | None = None
    n: int | None = None
    unit: str | None = None
    stop: str | None = None
    outliers: tuple[float, ...] = ()
    notes: tuple[str, ...] = ()

    def sample_values(self) -> tuple[float, ...]:
        """Every timed sample; empty when the document gave only their count."""
        return self.samples if isinstance(self.samples, tuple) else ()

    @property
    def count(self) -> int | None:
        """How many samples were timed, however the document said it."""
        if isinstance(self.samples, tuple):
            return len(self.samples)
        return self.samples if self.samples is not None else self.n

    @property
    def centre(self) -> float | None:
        """The median, else the mean."""
        return self.median if self.median is not None else self.mean


class Speedup(_Part, frozen=True, kw_only=True):
    """The candidate's speed-up over a rival measured beside it on one workload."""

    value: float | None = None
    interval: tuple[float, float] | None = None
    blocks: int | None = None
    log_ratios: tuple[float, ...] = ()  # one per block pair; the referee's verdict rests on them


class Floor(_Part, frozen=True, kw_only=True):
    """A workload's physical floor: the least time its declared work takes at the device's
    measured ceilings (in the metric's unit), which term bounds it, and `attained`, the floor
    over the median (1 is at the ceiling)."""

    value: float | None = None
    bound: str | None = None  # memory, compute
    bytes_moved: int | None = None
    flops: int | None = None
    attained: float | None = None


class Ceilings(_Part, frozen=True, kw_only=True):
    """What the device reached in the trusted worker: copy bandwidth (bytes read plus
    written per second) and a matrix product's rate in `dtype` (FLOP per second)."""

    bytes_per_s: float | None = None
    flops_per_s: float | None = None
    dtype: str | None = None
    device: str | None = None


class WorkloadResult(_Part, frozen=True, kw_only=True):
    """One workload: its headline value, the candidate's statistics and, side by side, each
    rival's statistics and the speed-up over it. Version 3 adds `resolution` (what a call that
    does nothing measures as by the same method, in the stats' unit) and `batch` (the calls
    per timed window); `channel_overhead` is then one round trip, for information."""

    name: str
    value: float | None = None
    stats: Stats | None = None
    resolution: float | None = None
    batch: int | None = None
    channel_overhead: float | None = None
    incumbent: Stats | None = None
    speedup: Speedup | None = None
    reference: Stats | None = None
    reference_speedup: Speedup | None = None
    floor: Floor | None = None


class Check(_Part, frozen=True, kw_only=True):
    """One correctness check against the reference."""

    name: str
    passed: bool
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    atol: float | None = None
    rtol: float | None = None
    message: str | None = None
    reason: str | None = None


class Correctness(_Part, frozen=True, kw_only=True):
    passed: bool
    checks: tuple[Check, ...] = ()


class Flag(_Part, frozen=True, kw_only=True):
    """Something the judge saw that asks a maintainer for a look."""

    code: str
    message: str = ""


class Timing(_Part, frozen=True, kw_only=True):
    """How the judge timed the calls: per workload, the resolution (in `resolution_unit`) and
    the calls per window (version 3), and the channel's round trip in ns."""

    method: str | None = None  # batched_window, cuda_events_bounded; judge_clock before v3
    clock: str | None = None
    cpu: int | None = None
    resolution: dict[str, float] = msgspec.field(default_factory=dict)
    resolution_unit: str | None = None
    batch: dict[str, int] = msgspec.field(default_factory=dict)
    channel_overhead: dict[str, float] = msgspec.field(default_factory=dict)
    channel_overhead_unit: str | None = None
    worker_cpu: dict[str, dict[str, int]] = msgspec.field(default_factory=dict)


class Validity(_Part, frozen=True, kw_only=True):
    """The judge's own reading of the validity gate (informational; the platform re-derives
    it with `kz_harness.validity`)."""

    measured: bool | None = None
    settled: bool | None = None
    spread: float | None = None
    reason: str | None = None


class Comparison(_Part, frozen=True, kw_only=True):
    """The side-by-side verdict against the incumbent; `against` None with a reason when none
    was measured."""

    against: str | None = None
    outcome: str | None = None  # faster, not_faster, inconclusive
    speedup: float | None = None
    interval: tuple[float, float] | None = None
    confidence: float | None = None
    margin: float | None = None
    reason: str | None = None


class Score(_Part, frozen=True, kw_only=True):
    """The speed-up over the board's pinned reference, combined over workloads."""

    against: str | None = None
    speedup: float | None = None
    interval: tuple[float, float] | None = None
    confidence: float | None = None
    blocks: int | None = None
    reason: str | None = None

    def figures(self) -> tuple[float, float, float] | None:
        """Speed-up, low and high when measured against the reference, all positive and
        finite; else None (no reference, or figures that cannot rank)."""
        if self.against != "reference" or self.speedup is None or self.interval is None:
            return None
        figures = (self.speedup, *self.interval)
        return figures if all(math.isfinite(x) and x > 0 for x in figures) else None


class Rival(_Part, frozen=True, kw_only=True):
    """What became of a rival measured beside the candidate (version 3): `measured`, `voided`
    (it failed, gave wrong outputs, changed its inputs or left work running: the comparison
    with it is void, and it is the rival's fault) or `absent`."""

    status: str = "measured"
    code: str | None = None
    reason: str | None = None

    @property
    def voided(self) -> bool:
        return self.status == "voided"


class Failure(_Part, frozen=True, kw_only=True):
    """The candidate's own failure (version 3): the stage (`load`, `call`, `output`, `inputs`)
    and the error (`ExcType: message`)."""

    who: str = "candidate"
    stage: str | None = None
    error: str | None = None


class ResultDocument(_Part, frozen=True, kw_only=True):
    """The judge's result document (CONTRACTS.md, version 1, 2 or 3), typed.

    Fields absent from a document read as None or empty; `accepted` and `reason` are the
    document's own word (the referee's verdict is the event's).
    """

    schema_version: int = 1
    accepted: bool | None = None
    reason: str | None = None
    metric: Metric | None = None
    workloads: tuple[WorkloadResult, ...] = ()
    correctness: Correctness | None = None
    environment: dict[str, str] = msgspec.field(default_factory=dict)
    flags: tuple[Flag, ...] = ()
    timing: Timing | None = None
    comparison: Comparison | None = None
    score: Score | None = None
    ceilings: Ceilings | None = None
    rivals: dict[str, Rival] = msgspec.field(default_factory=dict)
    failure: Failure | None = None
    validity: Validity | None = None

    @classmethod
    def of(cls, data: ResultDocument | Mapping[str, Any] | bytes | str) -> ResultDocument:
        """Decode `data` (a decoded JSON object, or JSON text); a ResultDocument is returned as
        it is. Raises InvalidResult naming the field that does not fit."""
        return data if isinstance(data, ResultDocument) else decode_result(data)

    @property
    def value(self) -> float | None:
        """The headline value."""
        return self.metric.value if self.metric is not None else None

    @property
    def device(self) -> str | None:
        """The device it ran on, as the environment names it."""
        return self.environment.get("device") or None

    def workload(self, name: str) -> WorkloadResult | None:
        return next((w for w in self.workloads if w.name == name), None)


def decode_result(data: Mapping[str, Any] | bytes | str) -> ResultDocument:
    """The typed view of a result document; InvalidResult names the field that does not fit."""
    if isinstance(data, bytes | str):
        try:
            data = msgspec.json.decode(data)
        except msgspec.DecodeError as exc:
            raise InvalidResult(f"the result document must be JSON: {exc}") from None
    if not isinstance(data, Mapping):
        msg = f"the result document must be a JSON object, got {type(data).__name__}"
        raise InvalidResult(msg)
    try:
        return msgspec.convert(data, ResultDocument)
    except msgspec.ValidationError as exc:
        raise _invalid(data, str(exc)) from None


def stored_result(data: Mapping[str, Any] | None) -> ResultDocument | None:
    """The typed view of a document a stored event carries, for readers that show it; None
    when there is none or it does not decode (only a document stored without the runner's
    schema check can fail: it shows no figures rather than stopping the reader)."""
    if data is None:
        return None
    try:
        return decode_result(data)
    except InvalidResult:
        return None


def result_flags(data: ResultDocument | Mapping[str, Any] | None) -> tuple[Flag, ...]:
    """The document's well-formed flags. From a raw document each entry is decoded alone and
    one that is not a flag is skipped: a malformed flag must not hide the others."""
    if isinstance(data, ResultDocument):
        return data.flags
    raw = data.get("flags") if isinstance(data, Mapping) else None
    flags = []
    for entry in raw if isinstance(raw, list) else []:
        try:
            flags.append(msgspec.convert(entry, Flag))
        except msgspec.ValidationError:
            continue
    return tuple(flags)


_AT = re.compile(r"^(?P<what>.*) - at `\$(?P<path>[^`]*)`$")
_EXPECTED = re.compile(r"^Expected `(?P<types>[^`]+)`, got `[^`]+`$")
_WORDS = {
    "float": "a finite number",
    "int": "an integer",
    "str": "a string",
    "bool": "true or false",
    "null": "null",
    "array": "a list",
    "object": "an object",
}


def _invalid(data: Mapping[str, Any], text: str) -> InvalidResult:
    """msgspec's complaint, said with the field's dotted name and the value found there."""
    match = _AT.match(text)
    if match is None:
        return InvalidResult(f"the result document is invalid: {text}")
    path = match["path"].lstrip(".")
    what = match["what"]
    expected = _EXPECTED.match(what)
    if expected is not None:
        words = " or ".join(_WORDS.get(t, t) for t in expected["types"].split(" | "))
        found, value = _value_at(data, path)
        got = repr(value) if found else what.rsplit("got ", 1)[-1].strip("`")
        return InvalidResult(f"{path} must be {words}, got {got}", field=path)
    where = path or "the result document"
    return InvalidResult(f"{where}: {what[:1].lower()}{what[1:]}", field=path)


_STEP = re.compile(r"\.?([^.\[]+)|\[(\d+|\.\.\.)\]")


def _value_at(data: Any, path: str) -> tuple[bool, Any]:
    """The value at a msgspec path (`metric.value`, `workloads[0].name`), if it can be found."""
    for key, index in _STEP.findall(path):
        if key and isinstance(data, Mapping) and key in data:
            data = data[key]
        elif index.isdigit() and isinstance(data, list) and int(index) < len(data):
            data = data[int(index)]
        else:
            return False, None
    return True, data
