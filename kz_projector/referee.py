"""The referee: turns each `result` into a verdict through `decide(Judge)`, by the rules' order
(`kz_events.ruling`): `failed` for the runner's or the judge's fault, `rejected` for the
candidate's own, `requeued` for a result the validity gate or a voided rival sends back for one
more attempt, then `accepted` or `rejected` (`confirmed` or `disputed` for a confirmation run).

The facts it gathers: the kernel's metric (main's trusted desc.yaml for an existing kernel, read
from the judge bundle the git projector keeps for runners, so the referee judges by the judge
files the task ran with; the submitted package's desc.yaml for a new kernel), whether main's
scoreboard holds a best yet, and where the kernel's incumbent stands (`Records`). Appends carry
the concurrency check; a result already judged or no longer current is skipped, so the referee
is idempotent, and a restarted one decides the same.

A result about to be accepted whose package tripped the static tripwire (the hits its
`submitted` event carries) or whose judge raised runtime `flags` is first marked `suspect`
(docs/review.md); the mark changes neither the verdict nor any commit. A result that takes
rank 1 on its board gets a confirmation run; a rival voided after its retry flags main's
source of it for maintainers (a `suspect` mark with source `rival`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from kz_events.commands import Submission, execute
from kz_events.errors import ConcurrencyConflict, ObjectNotFound, RuleViolation
from kz_events.eventlog import EventLog
from kz_events.events import (
    Event,
    EventMeta,
    SubmissionAccepted,
    SubmissionResult,
    UnknownEvent,
)
from kz_events.fanout import Follower
from kz_events.ids import KernelId
from kz_events.lifecycle import (
    TERMINAL,
    Command,
    FlagRival,
    Judge,
    MarkSuspect,
    MetricSpec,
    Status,
    SubmissionState,
    Submit,
    decide,
    evolve,
    suspect_reasons,
)
from kz_events.screen import Screen
from kz_events.subjects import JUDGES_BUCKET, aggregate_filter, judge_key
from kz_harness.sidebyside import document_score
from kz_package.archive import PACKAGE_DIR
from kz_package.errors import PackageError
from kz_package.yaml_safe import load_yaml
from kz_projector.errors import PackageUnavailable
from kz_projector.gitstore import FileMap
from kz_projector.packages import PackageSource, desc_of, files_from_tarball
from kz_projector.records import Records

__all__ = ["Referee", "metric_spec"]

log = logging.getLogger(__name__)

IN_FLIGHT = 32  # judgements awaiting their requests at once


def metric_spec(desc: dict[str, object]) -> MetricSpec | None:
    metric = desc.get("metric")
    if not isinstance(metric, dict) or not {"name", "unit", "better"} <= set(metric):
        return None
    return MetricSpec(str(metric["name"]), str(metric["unit"]), str(metric["better"]))


@dataclass(frozen=True, slots=True)
class Trusted:
    """What main's trusted bundle of a kernel says: its metric, whether its scoreboard holds a
    best yet, and the scoreboard's current value."""

    metric: MetricSpec | None = None
    has_best: bool = False
    current: float | None = None


def _bundle_facts(bundle: bytes) -> Trusted:
    try:
        files = files_from_tarball(bundle)
    except PackageError:
        return Trusted()
    desc = desc_of(files)
    board = _scoreboard(files)
    return Trusted(
        metric_spec(desc) if desc else None,
        _value(board.get("best")) is not None,
        _value(board.get("current")),
    )


def _scoreboard(files: FileMap) -> dict[str, object]:
    entry = files.get(f"{PACKAGE_DIR}/bench_result.yaml")
    try:
        board = load_yaml(entry[1], path="bench_result.yaml") if entry else None
    except PackageError:
        return {}
    return board if isinstance(board, dict) else {}


def _value(entry: object) -> float | None:
    value = entry.get("value") if isinstance(entry, dict) else None
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return float(value)
    return None


@dataclass(frozen=True, slots=True)
class _Judged(Submission):
    """A submission as the referee decides it: the verdict of `lifecycle.decide(Judge)`,
    preceded by the `suspect` mark when it accepts a result that tripped the tripwire or
    carries runtime flags (one batch, appended in order with the concurrency check)."""

    referee: Referee | None = field(default=None, compare=False)

    def decide(self, state: SubmissionState, command: Command) -> list[Event]:
        verdict = decide(state, command)
        if self.referee is None or not isinstance(command, Judge):
            return verdict
        return self.referee.suspect(state, command.result_event, verdict)


CONFIRMATIONS = uuid.UUID("6c1f3b9e-4a3e-4f0c-9b1e-2f4d7a9c0e51")


def confirmation_id(submission_id: str) -> str:
    """The id of the confirmation run of `submission_id`: one per result, whoever opens it."""
    return str(uuid.uuid5(CONFIRMATIONS, submission_id))


class Referee:
    """Judges results; keeps an in-memory fold of open submissions to find what is pending."""

    def __init__(
        self,
        elog: EventLog,
        packages: PackageSource,
        *,
        clock: Callable[[], datetime],
        new_id: Callable[[], str],
        actor: str = "referee",
        follow: Follower | None = None,
    ) -> None:
        self.elog = elog
        self.follow: Follower = follow or elog
        # kernel → its bundle, main's metric, whether main's scoreboard holds a best
        self.trusted: dict[str, tuple[bytes, Trusted]] = {}
        self.packages = packages
        self.clock = clock
        self.new_id = new_id
        self.actor = actor
        self.subs: dict[str, SubmissionState] = {}
        self.results: dict[str, tuple[int, SubmissionResult]] = {}
        self.position = 0
        self.screen = Screen("referee")  # what it skips (kz_events.screen)
        self.records = Records()

    def track(self, seq: int, event: Event | UnknownEvent) -> None:
        self.position = max(self.position, seq)
        self.records.track(event)  # imports and pins too: they name a board's reference
        sid = getattr(event, "submission_id", None)
        if sid is None or getattr(event, "aggregate", "") != "submission":
            return
        state = evolve(self.subs.get(sid, SubmissionState()), event, seq)
        if isinstance(event, SubmissionResult):
            self.results[sid] = (seq, event)
        if state.status in TERMINAL or state.status is Status.ACCEPTED:
            self.subs.pop(sid, None)
            self.results.pop(sid, None)
        else:
            self.subs[sid] = state

    def pending(self) -> list[tuple[int, str]]:
        """(result seq, submission id) of every result not judged yet, oldest first."""
        return sorted(
            (s.result_seq, sid)
            for sid, s in self.subs.items()
            if s.status is Status.RUNNING and s.result_seq is not None
        )

    async def catch_up(self) -> int:
        """Fold the log to its end, then judge every pending result; returns the position."""
        async for seq, event in self.elog.replay(self.position + 1, screen=self.screen):
            self.track(seq, event)
        for _, sid in self.pending():
            await self.judge(sid)
        await self.open_confirmations()
        await self.flag_rivals()
        return self.position

    async def run(self) -> None:
        """Judge every result as it arrives, up to `IN_FLIGHT` at once: each judgement waits
        on requests (the judge bundle, the append), and one at a time would make the round
        trip, not the work, set the pace."""
        await self.catch_up()
        log.info("referee: caught up to %d; following the log", self.position)
        slots = asyncio.Semaphore(IN_FLIGHT)

        async def judging(submission_id: str) -> None:
            try:
                await self.judge(submission_id)
            finally:
                slots.release()

        try:
            async with asyncio.TaskGroup() as group:
                async for seq, event in self.follow.subscribe(
                    from_seq=self.position + 1, screen=self.screen
                ):
                    self.track(seq, event)
                    if isinstance(event, SubmissionResult):
                        await slots.acquire()
                        group.create_task(judging(event.submission_id))
        except ExceptionGroup as failed:  # what stopped a judgement stops the referee, as is
            raise failed.exceptions[0] from None

    async def judge(self, submission_id: str) -> None:
        """Judge the submission's current result through the one command path: a conflict
        decides again on the stored submission, a refusal (judged already, no longer current)
        is skipped, so judging is idempotent."""
        state = self.subs.get(submission_id)
        if state is None or state.result_seq is None or state.status is not Status.RUNNING:
            return
        aggregate = _Judged(KernelId.parse(state.kernel_id).arch, submission_id, self)
        try:
            done = await execute(self.elog, aggregate, self._judge_command, expected=state)
        except RuleViolation as exc:
            log.info("referee: skipping %s: %s", submission_id, exc.message)
            return
        except ConcurrencyConflict:
            log.warning("referee: gave up on %s after repeated conflicts", submission_id)
            return
        log.info("referee: %s %s", submission_id, " then ".join(e.type for e in done.events))
        for event in done.events:
            self.records.track(event)
        await self.open_confirmations()
        await self.flag_rivals()

    async def open_confirmations(self) -> None:
        """Open a confirmation run for each accepted result that took rank 1 on its board and
        has none yet (`Records`); idempotent: a run is named after the result it confirms."""
        for accepted in self.records.awaiting():
            submit = Submit(
                meta=EventMeta(event_id=self.new_id(), occurred_at=self.clock(), actor=self.actor),
                submission_id=confirmation_id(accepted.submission_id),
                kernel_id=accepted.kernel_id,
                submitter_id=accepted.submitter_id,
                package_digest=accepted.package_digest,
                package_size=self.records.sizes.get(accepted.submission_id, 0),
                message=f"confirmation run of {accepted.submission_id}",
                confirms=accepted.submission_id,
                avoid_runner=accepted.runner_id,
            )
            aggregate = Submission.of(accepted.kernel_id, submit.submission_id)
            with contextlib.suppress(RuleViolation):  # opened already, before a restart
                await execute(self.elog, aggregate, submit)
            self.records.opened(accepted.submission_id)
            log.info("referee: %s took rank 1; confirming it", accepted.submission_id)

    async def flag_rivals(self) -> None:
        """Mark main's source suspect where a verdict says it was voided as a rival (after its
        retry): the maintainers' cue (docs/review.md). Idempotent: the mark names the
        challenger, and one already appended is not appended again."""
        for flag in self.records.pending_flags():
            meta = EventMeta(event_id=self.new_id(), occurred_at=self.clock(), actor=self.actor)
            aggregate = Submission.of(flag.kernel_id, flag.submission_id)
            try:
                await execute(self.elog, aggregate, FlagRival(meta=meta, reason=flag.reason))
            except RuleViolation as exc:
                log.warning("referee: cannot flag %s: %s", flag.submission_id, exc.message)
            except ConcurrencyConflict:
                log.warning("referee: %s kept changing; flagging it later", flag.submission_id)
                continue
            self.records.flag_done(flag)
            log.info("referee: %s flagged: %s", flag.submission_id, flag.reason.message)

    async def _judge_command(self, state: SubmissionState) -> Judge:
        """The `Judge` command for the state it is decided on (built again on a retry)."""
        result = await self._result_event(state) if state.result_seq is not None else None
        if result is None or state.result_seq is None:
            raise RuleViolation("the submission has no current result", code="stale_result")
        metric, trusted = await self.trusted_facts(state)
        standing = self.records.standing(state.kernel_id)
        return Judge(
            meta=EventMeta(event_id=self.new_id(), occurred_at=self.clock(), actor=self.actor),
            result_seq=state.result_seq,
            result_event=result,
            metric=metric,
            first_result=not trusted.has_best,
            confirming=await self._confirmed_score(state),
            standing=list(standing) if standing is not None else None,
            standing_value=trusted.current,
        )

    async def _confirmed_score(self, state: SubmissionState) -> list[float] | None:
        """For a confirmation run, the score of the result it confirms, as accepted."""
        if state.confirms is None:
            return None
        stored = await self.elog.load(Submission.of(state.kernel_id, state.confirms).subject_filter)
        for _, event in stored:
            if isinstance(event, SubmissionAccepted):
                score = document_score(event.result)
                return list(score) if score else None
        return None

    def suspect(
        self, state: SubmissionState, result: SubmissionResult, verdict: list[Event]
    ) -> list[Event]:
        """`verdict`, preceded by a `suspect` mark when it accepts a result that tripped the
        tripwire or carries runtime flags (and the result is not marked yet)."""
        if not verdict or not isinstance(verdict[0], SubmissionAccepted):
            return verdict
        reasons = suspect_reasons(state.tripwire, result.result)
        if not reasons or state.result_seq is None:
            return verdict
        meta = EventMeta(event_id=self.new_id(), occurred_at=self.clock(), actor=self.actor)
        mark = decide(state, MarkSuspect(meta=meta, result_seq=state.result_seq, reasons=reasons))
        return [*mark, *verdict]

    async def _result_event(self, state: SubmissionState) -> SubmissionResult | None:
        known = self.results.get(state.submission_id)
        if known is not None and known[0] == state.result_seq:
            return known[1]
        arch = KernelId.parse(state.kernel_id).arch
        stored = await self.elog.load(aggregate_filter("submission", arch, state.submission_id))
        for seq, event in stored:
            if seq == state.result_seq and isinstance(event, SubmissionResult):
                return event
        return None

    async def metric_for(self, state: SubmissionState) -> MetricSpec | None:
        """Main's trusted metric for an existing kernel; the submitted desc's for a new one."""
        return (await self.trusted_facts(state))[0]

    async def trusted_facts(self, state: SubmissionState) -> tuple[MetricSpec | None, Trusted]:
        """The kernel's metric (main's trusted one; the submitted desc's for a new kernel) and
        what main's bundle says of it (`Trusted`: no best yet means the result is the kernel's
        first, which the verdict rule takes as it is)."""
        try:
            bundle = await self.elog.get_object_bytes(JUDGES_BUCKET, judge_key(state.kernel_id))
        except ObjectNotFound:
            bundle = None
        trusted = Trusted()
        if bundle is not None:
            known = self.trusted.get(state.kernel_id)
            if known is None or known[0] != bundle:
                known = (bundle, _bundle_facts(bundle))
                self.trusted[state.kernel_id] = known
            trusted = known[1]
            if trusted.metric is not None:
                return trusted.metric, trusted
        try:
            files = await self.packages.files(state.package_digest)
        except PackageUnavailable:
            return None, trusted
        return metric_spec(desc_of(files)), trusted
