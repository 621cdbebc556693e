"""`index.json` as a fold of the log: `fold_index(state, seq, event)` and `render_index(state)`.

No clock, disk or network: `generated_at` is the time of the last folded event, so the same log
position renders the same bytes. Titles and languages come from the package summary the
`submitted` (or `imported`) event carries; for older events without one, the shell reads the
package's desc.yaml and adds it with `with_facts` (contents are immutable per digest). For
speed over long logs `fold_index` updates the state it is given and returns it; keep a copy if
you need the old one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, TypeGuard

import msgspec

from kz_events.events import (
    BoardReviewed,
    Event,
    KernelClaimed,
    KernelImported,
    KernelReleased,
    PackageSummary,
    ReferencePinned,
    RunnerDeregistered,
    RunnerRegistered,
    SubmissionAccepted,
    SubmissionCancelled,
    SubmissionClaimed,
    SubmissionCommitted,
    SubmissionConfirmed,
    SubmissionDisputed,
    SubmissionDisqualified,
    SubmissionFailed,
    SubmissionRejected,
    SubmissionRequeued,
    SubmissionSubmitted,
    SubmissionSuspectCleared,
    SubmissionSuspected,
    UnknownEvent,
)
from kz_events.ids import KernelId
from kz_events.result import ResultDocument
from kz_projector.errors import ProjectorError
from kz_projector.ranking import Score, leaderboards, unsettled_reason, why_not_standing
from kz_projector.scoreboard import iso

__all__ = [
    "HISTORY_LENGTH",
    "BoardInfo",
    "IndexState",
    "KernelInfo",
    "ValueRec",
    "board_of",
    "digest_needed",
    "fold_index",
    "headline_spread",
    "render_index",
    "with_facts",
]

HISTORY_LENGTH = 20


def score_of(result: ResultDocument | dict[str, Any]) -> Score | None:
    """The side-by-side score a result document carries (its `score` against the reference)."""
    score = ResultDocument.of(result).score
    figures = score.figures() if score is not None else None
    if figures is None:
        return None
    speedup, low, high = figures
    return Score(speedup, low, high, "side_by_side")


@dataclass(slots=True)
class ValueRec:
    """One accepted value with its spread and provenance."""

    value: float
    submitter: str
    submission: str
    at: str
    seq: int
    p10: float | None = None
    p90: float | None = None
    commit: str | None = None
    disqualified: bool = False
    suspect: bool = False
    score: Score | None = None  # the speed-up over the board's reference, side by side
    device: str | None = None
    # A result that took rank 1 is run again: unconfirmed until then, confirmed or disputed.
    confirmation: str | None = None
    bench_commit: str | None = None  # the scoreboard commit that followed its source commit
    provenance: dict[str, Any] | None = None  # who made it: agent, model, tokens, cost, link

    def doc(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "value": self.value,
            "submitter": self.submitter,
            "submission": self.submission,
            "at": self.at,
            "commit": self.commit,
        }
        if self.p10 is not None and self.p90 is not None:
            out["spread"] = {"p10": self.p10, "p90": self.p90}
        if self.score is not None:
            out["score"] = self.score.doc()
        if self.device:
            out["device"] = self.device
        if self.shown_confirmation:
            out["confirmation"] = self.shown_confirmation
        if self.suspect:
            out["suspect"] = True
        if self.provenance:
            out["provenance"] = dict(self.provenance)
        if self.score is not None and not self.score.settled:
            out["unsettled"] = unsettled_reason(self.score)
        return out

    @property
    def shown_confirmation(self) -> str | None:
        """The confirmation mark as shown: a suspect result is never shown confirmed until a
        maintainer clears it (it reads unconfirmed meanwhile)."""
        if self.suspect and self.confirmation == "confirmed":
            return "unconfirmed"
        return self.confirmation


@dataclass(slots=True)
class BoardInfo:
    """One board (`arch/op_class/sub_class/quant`): its kernels in the order they reached main,
    and whether a maintainer accepted its judge. A board whose first kernel was imported is
    reviewed (a maintainer imported it); one a submission opened waits for `board_reviewed`."""

    key: str
    kernels: list[str] = field(default_factory=list)
    reviewed: bool = False
    reviewed_by: str | None = None
    reviewed_at: str | None = None
    judge_kernel: str | None = None  # named by the latest review; else the first kernel's
    reference_commit: str | None = None  # the first kernel's first commit the log names
    reference_value: float | None = None  # its first accepted (or imported) value
    pinned_kernel: str | None = None  # a maintainer's `reference_pinned`, in their place
    pinned_seq: int = 0  # where it is in the log: scores measured before are estimates

    @property
    def reference(self) -> str | None:
        """The kernel whose source is the board's pinned reference."""
        return self.pinned_kernel or (self.kernels[0] if self.kernels else None)

    @property
    def judge(self) -> str | None:
        """The kernel whose judge files are the board's judge."""
        return self.judge_kernel or (self.kernels[0] if self.kernels else None)

    def doc(self) -> dict[str, Any]:
        arch, op_class, sub_class, quant = self.key.split("/")
        return {
            "board": self.key,
            "arch": arch,
            "op_class": op_class,
            "sub_class": sub_class,
            "quant": quant,
            "reviewed": self.reviewed,
            "reviewed_by": self.reviewed_by,
            "reviewed_at": self.reviewed_at,
            "judge_kernel": self.judge,
            "kernels": list(self.kernels),
            "reference": (
                {"kernel_id": self.reference, "commit": self.reference_commit}
                if self.reference
                else None
            ),
        }


@dataclass(slots=True)
class KernelInfo:
    kernel_id: str
    digest: str | None = None
    metric: dict[str, str] | None = None
    seed: dict[str, Any] | None = None
    accepted: dict[str, ValueRec] = field(default_factory=dict)
    history: list[ValueRec] = field(default_factory=list)
    disqualified: list[str] = field(default_factory=list)
    last_activity_at: str | None = None


@dataclass(slots=True)
class IndexState:
    log_seq: int = 0
    generated_at: str | None = None
    head_commit: str | None = None
    kernels: dict[str, KernelInfo] = field(default_factory=dict)
    open_subs: dict[str, tuple[str, str]] = field(default_factory=dict)  # sid → (arch, status)
    runners: dict[str, dict[str, Any]] = field(default_factory=dict)
    facts: dict[str, PackageSummary] = field(default_factory=dict)  # package digest → summary
    pending: dict[str, PackageSummary] = field(default_factory=dict)  # open sid → its summary
    boards: dict[str, BoardInfo] = field(default_factory=dict)
    suspects: set[str] = field(default_factory=set)  # sids marked suspect and not cleared
    confirming: dict[str, str] = field(default_factory=dict)  # open confirmation run → result
    made: dict[str, dict[str, Any]] = field(default_factory=dict)  # open sid → its provenance


def board_of(kernel_id: str) -> str:
    """The board key of a kernel id: its first four segments."""
    return kernel_id.rsplit("/", 1)[0]


def _on_board(state: IndexState, kernel_id: str, *, imported: bool) -> BoardInfo:
    key = board_of(kernel_id)
    board = state.boards.get(key)
    if board is None:
        board = state.boards[key] = BoardInfo(key, reviewed=imported)
    if kernel_id not in board.kernels:
        board.kernels.append(kernel_id)
    return board


def digest_needed(state: IndexState, event: Event | UnknownEvent) -> str | None:
    """The package digest whose summary the fold of `event` wants and neither the state nor
    the event carries (events written before `submitted` carried the summary)."""
    if isinstance(event, KernelImported) and event.summary is None:
        return None if event.package_digest in state.facts else event.package_digest
    if isinstance(event, SubmissionAccepted) and event.submission_id not in state.pending:
        return None if event.package_digest in state.facts else event.package_digest
    return None


def with_facts(state: IndexState, digest: str, facts: PackageSummary) -> IndexState:
    state.facts[digest] = facts
    return state


def headline_spread(result: ResultDocument | dict[str, Any]) -> tuple[float | None, float | None]:
    """The p10-p90 spread of a result's headline value.

    A headline that is one workload's value has that workload's spread. One that aggregates
    several (the examples' geometric mean of medians) has each bound at the geometric mean of
    the workloads' p10/median and p90/median ratios, times the headline: the board compares
    and ties results by this spread, so it must be the headline's, not any one workload's.
    (The web UI derives the same when a score comes without one.)
    """
    document = ResultDocument.of(result)
    headline = document.value
    if not _positive(headline):
        return None, None
    rows: list[tuple[float | None, float, float, float]] = []  # value, p10, p90, median
    for workload in document.workloads:
        stats = workload.stats
        if stats is None:
            continue
        p10, p90, mid = stats.p10, stats.p90, stats.centre
        if _positive(p10) and _positive(p90) and _positive(mid):
            rows.append((workload.value, p10, p90, mid))
    for value, p10, p90, _ in rows:
        if value == headline:
            return p10, p90
    if not rows:
        return None, None
    low = _geomean([p10 / mid for _, p10, _, mid in rows])
    high = _geomean([p90 / mid for _, _, p90, mid in rows])
    return headline * low, headline * high


def _positive(x: object) -> TypeGuard[float]:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) and x > 0


def _geomean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def _kernel(state: IndexState, kernel_id: str) -> KernelInfo:
    if kernel_id not in state.kernels:
        state.kernels[kernel_id] = KernelInfo(kernel_id)
    return state.kernels[kernel_id]


def _touch(state: IndexState, kernel_id: str, at: str) -> None:
    if kernel_id in state.kernels:
        state.kernels[kernel_id].last_activity_at = at


def _accepted(state: IndexState, seq: int, event: SubmissionAccepted, at: str) -> None:
    info = _kernel(state, event.kernel_id)
    document = ResultDocument.of(event.result)
    if document.metric is None or document.value is None:  # the referee accepts only a value
        raise ProjectorError(f"accepted {event.submission_id} carries no metric.value")
    p10, p90 = headline_spread(document)
    rec = ValueRec(
        document.value,
        event.submitter_id,
        event.submission_id,
        at,
        seq,
        p10,
        p90,
        suspect=event.submission_id in state.suspects,
        score=score_of(document),
        device=document.device,
        provenance=state.made.pop(event.submission_id, None),
    )
    board = _on_board(state, event.kernel_id, imported=False)
    if board.reference == event.kernel_id and board.reference_value is None:
        board.reference_value = rec.value
    info.accepted[event.submission_id] = rec
    info.history = [*info.history, rec][-HISTORY_LENGTH:]
    info.digest = event.package_digest
    info.metric = info.metric or document.metric.fields()
    state.open_subs.pop(event.submission_id, None)


def _submission(state: IndexState, seq: int, event: Event, at: str) -> None:
    sid = getattr(event, "submission_id", "")
    match event:
        case SubmissionSubmitted():
            state.open_subs[sid] = (event.kernel.arch, "queued")
            if event.summary is not None:
                state.pending[sid] = event.summary
            if event.confirms is not None:
                _confirming(state, event.kernel_id, sid, event.confirms)
            _remember_made(state, sid, event)
        case SubmissionClaimed() | SubmissionRequeued() if sid in state.open_subs:
            # a claim runs it; a retry (requeued) waits for a runner again
            running = isinstance(event, SubmissionClaimed)
            state.open_subs[sid] = (state.open_subs[sid][0], "running" if running else "queued")
        case SubmissionAccepted():
            summary = state.pending.pop(sid, None)
            if summary is not None:
                state.facts[event.package_digest] = summary
            _accepted(state, seq, event, at)
        case (
            SubmissionRejected()
            | SubmissionFailed()
            | SubmissionCancelled()
            | SubmissionConfirmed()
            | SubmissionDisputed()
        ):
            state.open_subs.pop(sid, None)
            state.pending.pop(sid, None)
            state.made.pop(sid, None)
            _confirmation(state, event)
        case SubmissionCommitted() if event.kernel_id in state.kernels:
            _committed(state, event)
        case SubmissionDisqualified() if event.kernel_id in state.kernels:
            info = state.kernels[event.kernel_id]
            rec = info.accepted.pop(sid, None)
            if rec is not None:
                rec.disqualified = True
                info.disqualified.append(sid)
        case SubmissionSuspected() | SubmissionSuspectCleared():
            _suspect(state, event)


def _remember_made(state: IndexState, sid: str, event: SubmissionSubmitted) -> None:
    """Who made an open submission, when it says: its accepted result carries it."""
    if event.provenance is not None:
        state.made[sid] = event.provenance.fields()


def _confirming(state: IndexState, kernel_id: str, sid: str, confirms: str) -> None:
    info = state.kernels.get(kernel_id)
    rec = info.accepted.get(confirms) if info else None
    if rec is not None:
        state.confirming[sid] = confirms
        rec.confirmation = "unconfirmed"


def _confirmation(state: IndexState, event: Event) -> None:
    """Mark the result a confirmation run is about: `unconfirmed` while it is open, then
    `confirmed` or `disputed`; a run that failed leaves it unconfirmed."""
    confirms = state.confirming.pop(getattr(event, "submission_id", ""), None)
    info = state.kernels.get(getattr(event, "kernel_id", ""))
    rec = info.accepted.get(confirms) if info and confirms else None
    if rec is not None and isinstance(event, SubmissionConfirmed | SubmissionDisputed):
        rec.confirmation = event.type


def _pinned(state: IndexState, seq: int, event: ReferencePinned) -> None:
    """A maintainer's reference for the board: the kernel as `commit` holds it, with the
    value its result at that commit had (the estimates of older scores are taken against it)."""
    board = _on_board(state, event.kernel_id, imported=False)
    info = state.kernels.get(event.kernel_id)
    recs = [*info.accepted.values(), *info.history] if info else []
    values = [rec.value for rec in recs if event.commit in (rec.commit, rec.bench_commit)]
    board.pinned_kernel, board.pinned_seq = event.kernel_id, seq
    board.reference_commit = event.commit
    board.reference_value = values[0] if values else None


def _committed(state: IndexState, event: SubmissionCommitted) -> None:
    rec = state.kernels[event.kernel_id].accepted.get(event.submission_id)
    if rec is not None:
        rec.commit, rec.bench_commit = event.source_commit, event.bench_result_commit
    board = state.boards.get(board_of(event.kernel_id))
    if board and board.reference == event.kernel_id and board.reference_commit is None:
        board.reference_commit = event.source_commit
    state.head_commit = event.bench_result_commit


def _suspect(state: IndexState, event: SubmissionSuspected | SubmissionSuspectCleared) -> None:
    """A suspect mark comes before the verdict; a clear may come after: the records shown
    (history, and the best it may be) lose the mark."""
    if isinstance(event, SubmissionSuspected):
        state.suspects.add(event.submission_id)
        return
    state.suspects.discard(event.submission_id)
    known = state.kernels.get(event.kernel_id)
    for rec in [*known.accepted.values(), *known.history] if known else []:
        if rec.submission == event.submission_id:
            rec.suspect = False


def fold_index(state: IndexState, seq: int, event: Event | UnknownEvent) -> IndexState:
    """The index after the event stored at `seq`."""
    if isinstance(event, UnknownEvent):
        state.log_seq = seq
        return state
    at = iso(event.occurred_at)
    state.log_seq, state.generated_at = seq, at
    match event:
        case KernelImported():
            if event.summary is not None:
                state.facts[event.package_digest] = event.summary
            info = _kernel(state, event.kernel_id)
            board = _on_board(state, event.kernel_id, imported=True)
            info.digest = event.package_digest
            bench = event.bench_result or {}
            info.seed = bench if "best" in bench else None
            seeded = (info.seed or {}).get("current") or (info.seed or {}).get("best")
            if board.reference == event.kernel_id and board.reference_value is None:
                value = seeded.get("value") if isinstance(seeded, dict) else None
                board.reference_value = float(value) if _positive(value) else None
            facts = state.facts.get(event.package_digest)
            info.metric = (facts.metric if facts else None) or bench.get("metric") or info.metric
        # A runner as the log knows it: registered or deregistered, and when. Heartbeats live
        # on KZ_LIVE, outside the log, so liveness (idle, busy, gone) is /api/runners'.
        case RunnerRegistered():
            state.runners[event.runner_id] = {
                "id": event.runner_id,
                "arches": list(event.arches),
                "device": event.device or None,
                "registered_at": at,
                "state": "registered",
            }
        case RunnerDeregistered() if event.runner_id in state.runners:
            state.runners[event.runner_id] |= {"state": "deregistered", "deregistered_at": at}
        case BoardReviewed():
            board = _on_board(state, event.kernel_id, imported=False)
            board.reviewed, board.reviewed_by, board.reviewed_at = True, event.actor, at
            board.judge_kernel = event.kernel_id
        case ReferencePinned():
            _pinned(state, seq, event)
        case KernelClaimed() | KernelReleased():
            pass
        case _ if getattr(event, "aggregate", "") == "submission":
            _submission(state, seq, event, at)
    kernel_id = getattr(event, "kernel_id", None)
    if kernel_id is not None:
        _touch(state, kernel_id, at)
    return state


# --- rendering ------------------------------------------------------------------------------


def _wins(a: float, b: float, better: str) -> bool:
    return a > b if better == "higher" else a < b


def _best(info: KernelInfo) -> dict[str, Any] | None:
    better = (info.metric or {}).get("better", "lower")
    best: ValueRec | None = None
    for rec in info.accepted.values():
        if rec.score is not None and not rec.score.settled:
            continue  # noise is no best (an unsettled result from an older judge)
        if best is None or _wins(rec.value, best.value, better):
            best = rec
    seed = (info.seed or {}).get("best")
    if isinstance(seed, dict) and (best is None or not _wins(best.value, seed["value"], better)):
        return {
            "value": seed["value"],
            "submitter": seed.get("submitter"),
            "submission": seed.get("submission_id"),
            "at": seed.get("at"),
            "commit": seed.get("commit"),
        }
    return best.doc() if best is not None else None


def _current(info: KernelInfo) -> dict[str, Any] | None:
    if info.accepted:
        return next(reversed(info.accepted.values())).doc()
    seed = (info.seed or {}).get("current")
    if isinstance(seed, dict):
        return {
            "value": seed["value"],
            "submitter": seed.get("submitter"),
            "submission": seed.get("submission_id"),
            "at": seed.get("at"),
            "commit": seed.get("commit"),
        }
    return None


def _kernel_score(state: IndexState, info: KernelInfo) -> Score | None:
    """The kernel's score on its board: its current result's (`_rec_score`), or for a kernel
    with none (imported) its seeded scoreboard's value against the reference's."""
    current = next(reversed(info.accepted.values())) if info.accepted else None
    if current is not None:
        return _rec_score(state, info, current)
    doc = _current(info) or _best(info)
    value = doc.get("value") if doc else None
    return _estimate(state, info, value) if _positive(value) else None


def _rec_score(state: IndexState, info: KernelInfo, rec: ValueRec) -> Score | None:
    """One result's speed-up over the board's pinned reference: measured side by side (after
    the reference now pinned); exactly 1 for the reference as pinned; else an estimate from
    the absolute values (the reference's pinned one over the result's)."""
    board = state.boards.get(board_of(info.kernel_id))
    pinned_seq = board.pinned_seq if board else 0
    if rec.score is not None and rec.seq > pinned_seq:
        return rec.score  # measured against the reference pinned now
    return _estimate(state, info, rec.value)


def _estimate(state: IndexState, info: KernelInfo, value: float) -> Score | None:
    board = state.boards.get(board_of(info.kernel_id))
    if board is None or not board.kernels:
        return None
    reference = board.reference_value
    if board.reference == info.kernel_id and (not info.accepted or value == reference):
        return Score(1.0, 1.0, 1.0, "reference")
    if not _positive(reference):
        return None
    higher = (info.metric or {}).get("better") == "higher"
    return Score(value / reference if higher else reference / value, None, None, "absolute")


def _standing(state: IndexState, info: KernelInfo) -> dict[str, Any]:
    """What ranks the kernel (kz_projector.ranking): its newest result that stands, with its
    score; `held_back` when that is not its current result (which, and why); `unranked` with
    the reason when none stands."""
    held: dict[str, Any] | None = None
    for rec in reversed(info.accepted.values()):
        score = _rec_score(state, info, rec)
        why = why_not_standing(rec.confirmation, rec.suspect, score)
        if why is None:
            assert score is not None
            standing = {"submission": rec.submission, "value": rec.value, "score": score.doc()}
            if rec.confirmation:
                standing["confirmation"] = rec.confirmation
            return {"standing": standing, **({"held_back": held} if held else {})}
        held = held or {"submission": rec.submission, "reason": why}
    if held is not None:
        return {"standing": None, "unranked": held["reason"]}
    score = _kernel_score(state, info)  # an imported kernel: its seeded scoreboard
    seeded = _current(info) or _best(info)
    if score is not None and score.settled and seeded is not None:
        standing = {"submission": seeded["submission"], "value": seeded["value"]}
        return {"standing": {**standing, "score": score.doc()}}
    return {"standing": None, "unranked": unsettled_reason(score)}


def _kernel_doc(state: IndexState, info: KernelInfo) -> dict[str, Any]:
    kid = KernelId.parse(info.kernel_id)
    facts = state.facts.get(info.digest or "")
    seed_count = int((info.seed or {}).get("accepted_count", 0))
    return {
        "id": info.kernel_id,
        **dict(zip(("arch", "op_class", "sub_class", "quant", "name"), kid.parts, strict=True)),
        "title": facts.title if facts else kid.name,
        "language": facts.language if facts else "other",
        "metric": (facts.metric if facts and facts.metric else None) or info.metric,
        **({"problem": facts.problem} if facts and facts.problem else {}),
        "best": _best(info),
        "current": _current(info),
        "score": score.doc() if (score := _kernel_score(state, info)) else None,
        **_standing(state, info),
        "accepted_count": seed_count + len(info.accepted),
        "last_activity_at": info.last_activity_at,
        "disqualified": list(info.disqualified),
        "board_reviewed": _reviewed(state, info.kernel_id),
        "history": [
            {
                "value": r.value,
                "at": r.at,
                "submission": r.submission,
                "disqualified": r.disqualified,
                **({"suspect": True} if r.suspect else {}),
                **({"score": r.score.doc()} if r.score else {}),
                **({"spread": {"p10": r.p10, "p90": r.p90}} if r.p10 and r.p90 else {}),
                **({"confirmation": r.shown_confirmation} if r.confirmation else {}),
                **({"unsettled": unsettled_reason(r.score)} if _unsettled(r) else {}),
            }
            for r in info.history
        ],
    }


def _reviewed(state: IndexState, kernel_id: str) -> bool:
    board = state.boards.get(board_of(kernel_id))
    return board is not None and board.reviewed


def _unsettled(rec: ValueRec) -> bool:
    return rec.score is not None and not rec.score.settled


def _queue(state: IndexState) -> dict[str, dict[str, int]]:
    queue: dict[str, dict[str, int]] = {}
    for arch, status in state.open_subs.values():
        counts = queue.setdefault(arch, {"queued": 0, "running": 0})
        counts[status] += 1
    return dict(sorted(queue.items()))


def render_index(state: IndexState) -> bytes:
    """index.json bytes: same state, same bytes (keys sorted, kernels by id)."""
    kernels = [_kernel_doc(state, state.kernels[k]) for k in sorted(state.kernels)]
    doc = {
        "schema_version": 1,
        "log_seq": state.log_seq,
        "head_commit": state.head_commit,
        "generated_at": state.generated_at,
        "kernels": kernels,
        "leaderboards": leaderboards(kernels, True),
        "unreviewed_leaderboards": leaderboards(kernels, False),
        "boards": {key: state.boards[key].doc() for key in sorted(state.boards)},
        "queue": _queue(state),
        "runners": [state.runners[r] for r in sorted(state.runners)],
    }
    return msgspec.json.encode(doc, order="sorted")
