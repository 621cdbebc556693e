"""What the referee remembers of the boards, folded from the log: which accepted results took
rank 1 and need a confirmation run, where each kernel's incumbent stands, and which of main's
sources a voided rival flags for maintainers.

- **Rank 1**: an accepted result whose settled score beats the board's reference (exactly 1)
  and every other kernel's standing score is run again (a board's first scored result too).
- **Standing**: a kernel's newest accepted result that a confirmation run did not dispute, with
  a settled score (`standing`): what a challenger whose incumbent was voided is judged against.
- **Rival flags**: a verdict whose document says a rival was voided (after its retry) flags
  that rival's source on main: the incumbent's current accepted submission, or the submission
  that committed the board's reference. Each flag is one `SuspectReason` with source `rival`,
  named after the challenger, so it is appended once however often the log is replayed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kz_events.events import (
    Event,
    KernelImported,
    ReferencePinned,
    SubmissionAccepted,
    SubmissionCommitted,
    SubmissionConfirmed,
    SubmissionDisputed,
    SubmissionDisqualified,
    SubmissionRejected,
    SubmissionRequeued,
    SubmissionSubmitted,
    SubmissionSuspected,
    SuspectReason,
    UnknownEvent,
)
from kz_events.ids import KernelId
from kz_events.ruling import RIVAL_RETRY, rival_reason, voided_rivals
from kz_harness.sidebyside import document_score
from kz_harness.validity import is_settled

__all__ = ["Records", "RivalFlag"]

Score = tuple[float, float, float]
RECENT_IDS = 4096  # far more than the verdicts in flight (the referee judges 32 at once)


@dataclass(frozen=True, slots=True)
class RivalFlag:
    """A rival voided beside a challenger: the submission of main's source it flags."""

    kernel_id: str
    submission_id: str
    reason: SuspectReason


@dataclass(slots=True)
class _Kernel:
    accepted: list[tuple[str, Score | None]] = field(default_factory=list)  # in log order
    disputed: set[str] = field(default_factory=set)
    commits: dict[str, str] = field(default_factory=dict)  # source commit → submission

    def standing(self) -> Score | None:
        """The score of the newest accepted result that stands (not disputed, settled)."""
        for sid, score in reversed(self.accepted):
            if sid not in self.disputed and score is not None and is_settled(score[1], score[2]):
                return score
        return None

    def current(self) -> str | None:
        return self.accepted[-1][0] if self.accepted else None


class Records:
    """The fold the module docstring describes; `track` each event in log order."""

    def __init__(self) -> None:
        self.kernels: dict[str, _Kernel] = {}
        self.waiting: dict[str, SubmissionAccepted] = {}  # results that need a confirmation
        self.sizes: dict[str, int] = {}  # submission → its package size
        self.confirming: set[str] = set()  # results whose confirmation run is open or done
        self.references: dict[str, tuple[str, str | None]] = {}  # board → (kernel, commit)
        self.flags: dict[tuple[str, str], RivalFlag] = {}  # flags to append, by their key
        self.flagged: set[tuple[str, str]] = set()  # (submission, message) appended already
        self.rival_retried: set[str] = set()  # submissions measured again for a voided rival
        # The referee folds its own verdicts as it appends them, and the log delivers them too,
        # before or after: the ids of the latest events folded make each one count once.
        self.recent: dict[str, None] = {}

    def _kernel(self, kernel_id: str) -> _Kernel:
        return self.kernels.setdefault(kernel_id, _Kernel())

    def track(self, event: Event | UnknownEvent) -> None:  # noqa: C901 - one case per event
        """Fold one event, once however often it is handed over."""
        if isinstance(event, UnknownEvent) or event.event_id in self.recent:
            return
        self.recent[event.event_id] = None
        if len(self.recent) > RECENT_IDS:
            del self.recent[next(iter(self.recent))]  # the oldest: long folded by both paths
        match event:
            case SubmissionSubmitted(confirms=None):
                self.sizes[event.submission_id] = event.package_size
            case SubmissionSubmitted(confirms=str() as confirmed):
                self.opened(confirmed)
            case SubmissionAccepted():  # the rivals first: the incumbent is main's source before
                self._rivals(event.kernel_id, event.submission_id, event.result)
                self._accepted(event)
            case SubmissionRequeued(code=code) if code == RIVAL_RETRY:
                self.rival_retried.add(event.submission_id)
            case SubmissionRejected() | SubmissionConfirmed():
                self._rivals(event.kernel_id, event.submission_id, event.result)
            case SubmissionDisputed():
                self._kernel(event.kernel_id).disputed.add(event.confirms)
                self._rivals(event.kernel_id, event.submission_id, event.result)
            case SubmissionDisqualified():
                known = self._kernel(event.kernel_id)
                known.accepted = [a for a in known.accepted if a[0] != event.submission_id]
            case SubmissionCommitted():
                self._kernel(event.kernel_id).commits[event.source_commit] = event.submission_id
                self._reference(event.kernel_id, event.source_commit)
            case KernelImported():
                self._reference(event.kernel_id, None)
            case ReferencePinned():
                board = KernelId.parse(event.kernel_id).group
                self.references[board] = (event.kernel_id, event.commit)
            case SubmissionSuspected():
                for reason in event.reasons:
                    self.flagged.add((event.submission_id, reason.message))
                    self.flags.pop((event.submission_id, reason.message), None)

    def _reference(self, kernel_id: str, commit: str | None) -> None:
        """The board's first kernel on main, as first committed, is its reference until a
        maintainer pins another."""
        self.references.setdefault(KernelId.parse(kernel_id).group, (kernel_id, commit))

    def _accepted(self, event: SubmissionAccepted) -> None:
        score = document_score(event.result)
        self._kernel(event.kernel_id).accepted.append((event.submission_id, score))
        if score is None or not is_settled(score[1], score[2]):
            return
        board = KernelId.parse(event.kernel_id).group
        others = [
            standing[0]
            for kernel_id, known in self.kernels.items()
            if kernel_id != event.kernel_id
            and KernelId.parse(kernel_id).group == board
            and (standing := known.standing()) is not None
        ]
        if score[0] > max([1.0, *others]) and event.submission_id not in self.confirming:
            self.waiting[event.submission_id] = event

    def _rivals(self, kernel_id: str, challenger: str, document: dict[str, Any] | None) -> None:
        """Flags for the rivals a final verdict's document says were voided (voided again after
        their retry: a run whose candidate failed first says nothing of the rivals' fault)."""
        if challenger not in self.rival_retried:
            return
        for who in voided_rivals(document):
            assert document is not None
            target = self._source_of(kernel_id, who)
            if target is None:
                continue  # an imported kernel: no submission of it to mark (the log says why)
            message = (
                f"voided as the {who} in the side-by-side run of submission {challenger}: "
                f"{rival_reason(document, who)}"
            )[:500]
            if (target[1], message) in self.flagged:
                continue
            reason = SuspectReason(source="rival", code=f"{who}_voided", message=message)
            self.flags[(target[1], message)] = RivalFlag(target[0], target[1], reason)

    def _source_of(self, kernel_id: str, who: str) -> tuple[str, str] | None:
        """(kernel, submission) of main's source that was measured as `who`."""
        if who == "incumbent":
            current = self._kernel(kernel_id).current()
            return (kernel_id, current) if current is not None else None
        reference = self.references.get(KernelId.parse(kernel_id).group)
        if reference is None:
            return None
        ref_kernel, commit = reference
        known = self._kernel(ref_kernel)
        sid = known.commits.get(commit) if commit else None
        sid = sid or (known.accepted[0][0] if known.accepted else None)
        return (ref_kernel, sid) if sid is not None else None

    def standing(self, kernel_id: str) -> Score | None:
        known = self.kernels.get(kernel_id)
        return known.standing() if known is not None else None

    def opened(self, submission_id: str) -> None:
        self.confirming.add(submission_id)
        self.waiting.pop(submission_id, None)

    def awaiting(self) -> list[SubmissionAccepted]:
        return list(self.waiting.values())

    def pending_flags(self) -> list[RivalFlag]:
        return list(self.flags.values())

    def flag_done(self, flag: RivalFlag) -> None:
        self.flagged.add((flag.submission_id, flag.reason.message))
        self.flags.pop((flag.submission_id, flag.reason.message), None)
