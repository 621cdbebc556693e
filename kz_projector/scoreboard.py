"""The scoreboard fold: a kernel's accepted results → its `bench_result.yaml`, as pure functions.

A `Board` holds what the kernel repo needs per kernel: the declared metric, an imported seed
scoreboard, the accepted results still standing (disqualified ones are dropped), and which
package's source main carries. `scoreboard(board)` renders the document CONTRACTS.md fixes.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from kz_events.result import NO_METRIC, Metric, ResultDocument

__all__ = [
    "Accepted",
    "Board",
    "best_entry",
    "board_accept",
    "board_disqualify",
    "board_import",
    "entry_of",
    "iso",
    "metric_of_result",
    "render_yaml",
    "scoreboard",
]


def iso(moment: datetime) -> str:
    """RFC 3339 in UTC with a `Z`, the one time format of every projection."""
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


@dataclass(frozen=True, slots=True, kw_only=True)
class Accepted:
    """One accepted result, as the scoreboard shows it. `result` is the document as stored (its
    workloads and correctness are copied into the scoreboard as they are)."""

    seq: int
    submission_id: str
    submitter: str
    runner_id: str
    digest: str
    value: float
    at: str
    result: dict[str, Any]
    environment: dict[str, str]
    commit: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Board:
    """Everything the repo's scoreboard of one kernel is folded from."""

    kernel_id: str
    metric: Metric | None = None
    seed: dict[str, Any] | None = None
    base_digest: str | None = None
    accepted: tuple[Accepted, ...] = ()
    source_digest: str | None = None
    best: Accepted | None = None  # the best of `accepted`, kept so a fold stays linear


def metric_of_result(result: ResultDocument | dict[str, Any]) -> Metric | None:
    """The metric a result was measured in, without its value."""
    metric = ResultDocument.of(result).metric
    return metric.spec() if metric is not None else None


def board_import(
    board: Board, digest: str, seed: dict[str, Any] | None, metric: Metric | None
) -> Board:
    """An imported package becomes the kernel's base: its source, and its scoreboard as a seed."""
    has_entries = seed is not None and "best" in seed
    return replace(
        board,
        metric=metric or board.metric,
        seed=seed if has_entries else None,
        base_digest=digest,
        source_digest=digest,
    )


def board_accept(board: Board, accepted: Accepted, metric: Metric | None) -> Board:
    new_metric = metric or board.metric or metric_of_result(accepted.result)
    best = board.best
    if best is None or (new_metric or NO_METRIC).better_than(accepted.value, best.value):
        best = accepted
    return replace(
        board,
        metric=new_metric,
        accepted=(*board.accepted, accepted),
        source_digest=accepted.digest,
        best=best,
    )


def board_disqualify(board: Board, submission_id: str) -> Board | None:
    """The board without `submission_id`; main's source falls back to the best result left.

    None when the submission is not among the standing results (nothing to re-fold).
    """
    left = tuple(a for a in board.accepted if a.submission_id != submission_id)
    if len(left) == len(board.accepted):
        return None
    fallback = _direction(board).best(left, lambda item: item.value)
    source = fallback.digest if fallback is not None else board.base_digest
    return replace(board, accepted=left, source_digest=source or board.source_digest, best=fallback)


def _direction(board: Board) -> Metric:
    """The board's metric, whose direction decides which result is best (lower without one)."""
    return board.metric or NO_METRIC


def _workloads(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Per-workload values; sample lists shrink to their count so the file stays small. Copied
    from the stored document as it is, extra fields and key order included: the scoreboard's
    bytes, and so the commits of a replay, must not depend on what the typed view knows."""
    out = []
    for workload in result.get("workloads") or []:
        item = {k: workload[k] for k in ("name", "value") if k in workload}
        stats = workload.get("stats")
        if isinstance(stats, dict):
            stats = dict(stats)
            if isinstance(stats.get("samples"), list):
                stats["samples"] = len(stats["samples"])
            item["stats"] = stats
        out.append(item)
    return out


def entry_of(item: Accepted) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "value": item.value,
        "workloads": _workloads(item.result),
        "submission_id": item.submission_id,
        "submitter": item.submitter,
        "runner_id": item.runner_id,
        "at": item.at,
    }
    if item.commit is not None:
        entry["commit"] = item.commit
    for key, against in (("comparison", "incumbent"), ("score", "reference")):
        figures = item.result.get(key)  # as stored; absent from results before side by side
        if isinstance(figures, dict) and figures.get("against") == against:
            entry[key] = {k: figures[k] for k in _SIDE_BY_SIDE if k in figures}
    return entry


# What the scoreboard keeps of a result's side-by-side figures (its verdict against the
# incumbent, its score against the board's reference): ratio and interval.
_SIDE_BY_SIDE = ("against", "speedup", "interval", "confidence")


def best_entry(board: Board) -> dict[str, Any] | None:
    """The best standing entry: an accepted result, or the imported seed's best."""
    best = board.best
    seed_best = (board.seed or {}).get("best")
    if best is None:
        return dict(seed_best) if isinstance(seed_best, dict) else None
    seed_value = float(seed_best["value"]) if isinstance(seed_best, dict) else None
    if seed_value is not None and not _direction(board).better_than(best.value, seed_value):
        return dict(seed_best)  # type: ignore[arg-type]
    return entry_of(best)


def _environment(item: Accepted) -> dict[str, str]:
    merged = dict(ResultDocument.of(item.result).environment)
    merged.update(item.environment)
    return dict(sorted(merged.items()))


def scoreboard(board: Board) -> dict[str, Any]:
    """`bench_result.yaml` of the board: current, best, count, environment, correctness."""
    doc: dict[str, Any] = {"schema_version": 1, "kernel_id": board.kernel_id}
    if board.metric is not None:
        doc["metric"] = board.metric.fields()
    seed = board.seed or {}
    count = int(seed.get("accepted_count", 0)) + len(board.accepted)
    best = best_entry(board)
    if board.accepted:
        latest = board.accepted[-1]
        doc["current"] = entry_of(latest)
        doc["environment"] = _environment(latest)
        correctness = latest.result.get("correctness")  # as stored, like the workloads
        if isinstance(correctness, dict):
            doc["correctness"] = correctness
    elif isinstance(seed.get("current"), dict):
        doc["current"] = dict(seed["current"])
        for key in ("environment", "correctness"):
            if key in seed:
                doc[key] = seed[key]
    if best is not None:
        doc["best"] = best
    if "current" in doc or board.metric is not None:
        doc["accepted_count"] = count
    if "current" in doc and "metric" not in doc:
        metric = metric_of_result(board.accepted[-1].result) if board.accepted else None
        doc["metric"] = metric.fields() if metric is not None else {}
    return doc


_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


def _scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        text = repr(value)
        if text in ("inf", "-inf", "nan"):
            return {"inf": ".inf", "-inf": "-.inf", "nan": ".nan"}[text]
        mantissa, _, exponent = text.partition("e")
        if "." not in mantissa:
            mantissa += ".0"
        return mantissa + ("e" + exponent if exponent else "")
    return json.dumps(str(value), ensure_ascii=False)


def _key(key: Any) -> str:
    text = str(key)
    plain = _PLAIN_KEY.fullmatch(text) and text.lower() not in _RESERVED
    return text if plain else json.dumps(text, ensure_ascii=False)


_RESERVED = frozenset({"true", "false", "null", "yes", "no", "on", "off", "y", "n", "~"})


def _emit(value: Any, indent: str, out: list[str]) -> None:
    """Block-style YAML lines for a mapping or a list; scalars are JSON-quoted when strings."""
    items = value.items() if isinstance(value, dict) else enumerate(value)
    for key, item in items:
        head = f"{indent}{_key(key)}:" if isinstance(value, dict) else f"{indent}-"
        if isinstance(item, dict | list) and item:
            out.append(head)
            _emit(item, indent + "  ", out)
        elif isinstance(item, dict | list):
            out.append(f"{head} {'{}' if isinstance(item, dict) else '[]'}")
        else:
            out.append(f"{head} {_scalar(item)}")


def render_yaml(doc: dict[str, Any]) -> bytes:
    """Deterministic block YAML (strings double-quoted): the same document, the same bytes.

    A small emitter of our own: the general one is the slowest step of a replay.
    """
    out: list[str] = []
    _emit(doc, "", out)
    return ("\n".join(out) + "\n").encode()
