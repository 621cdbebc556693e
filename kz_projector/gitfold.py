"""The kernel repo as a fold of the log: `accepted`, `kernel.imported` and `disqualified` → commits.

Each event that changes a kernel becomes a source commit (the package, old scoreboard) and a
bench-result commit (the new scoreboard), then one compare-and-swap of main. Events at or below
the head's `Kz-Event-Seq` are only folded into memory, so a restart applies nothing twice.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from dulwich.objects import Commit, ObjectID
from dulwich.repo import BaseRepo

from kz_events.events import (
    Event,
    KernelImported,
    SubmissionAccepted,
    SubmissionCancelled,
    SubmissionDisqualified,
    SubmissionFailed,
    SubmissionRejected,
    SubmissionSubmitted,
    UnknownEvent,
)
from kz_events.ids import KernelId
from kz_events.provenance import Provenance, provenance_trailers
from kz_events.result import Metric, ResultDocument
from kz_package.archive import PACKAGE_DIR
from kz_projector.errors import BranchMoved, HistoryDiverged, ProjectorError
from kz_projector.gitstore import (
    FILE_MODE,
    MAIN,
    FileMap,
    Person,
    Writer,
    commit_trailers,
    ref_value,
)
from kz_projector.packages import PackageSource, desc_of, files_of_tree
from kz_projector.scoreboard import (
    Accepted,
    Board,
    board_accept,
    board_disqualify,
    board_import,
    iso,
    metric_of_result,
    render_yaml,
    scoreboard,
)

__all__ = ["Applied", "GitFold", "author_of"]

BENCH = f"{PACKAGE_DIR}/bench_result.yaml"


@dataclass(frozen=True, slots=True)
class Applied:
    """What one event did to the repo."""

    seq: int
    kernel_id: str
    submission_id: str | None
    source: str | None
    bench_result: str
    files: FileMap
    announce: bool


def author_of(ident: str) -> Person:
    safe = "".join(c if c.isalnum() or c in "._+-" else "-" for c in ident) or "unknown"
    return Person(ident, f"{safe}@submitters.kernel-zoo.invalid")


def _metric_of_desc(files: FileMap) -> Metric | None:
    return Metric.of(desc_of(files).get("metric"))


class GitFold:
    """Folds events into `repo`'s main branch; `position` is the last sequence folded."""

    def __init__(self, repo: BaseRepo, packages: PackageSource, service: Person) -> None:
        self.repo = repo
        self.packages = packages
        self.service = service
        self.writer = Writer(repo)
        self.boards: dict[str, Board] = {}
        self.head = ref_value(repo, MAIN)
        self.durable = self.head
        self.pending_tree: ObjectID | None = None
        self.resume_seq = self._head_seq()
        self.position = 0
        self._rendered: dict[str, tuple[Board, bytes]] = {}
        # Open submissions that said who made them: their source commit carries it as trailers.
        self.provenance: dict[str, Provenance] = {}

    def _head_seq(self) -> int:
        if self.head is None:
            return 0
        trailers = commit_trailers(self._commit(self.head))
        if "Kz-Event-Seq" not in trailers:
            raise HistoryDiverged(
                f"main's head {self.head.decode()} has no Kz-Event-Seq trailer: expected a commit "
                "made by the projector; someone moved the branch by hand"
            )
        return int(trailers["Kz-Event-Seq"])

    def _commit(self, sha: ObjectID) -> Commit:
        commit = self.writer[sha]
        assert isinstance(commit, Commit)
        return commit

    # --- the fold -------------------------------------------------------------------------

    async def apply(self, seq: int, event: Event | UnknownEvent) -> Applied | None:
        """Fold one event; commit it when it lies past the head, else remember it only."""
        if seq <= self.position:
            return None
        self.position = seq
        live = seq > self.resume_seq
        self._remember_provenance(event)
        match event:
            case SubmissionAccepted():
                return await self._accepted(seq, event, live)
            case KernelImported():
                return await self._imported(seq, event, live)
            case SubmissionDisqualified():
                return await self._disqualified(seq, event, live)
        return None

    def _remember_provenance(self, event: Event | UnknownEvent) -> None:
        """Keep a submission's provenance from `submitted` until it ends (only those that
        carry one, so a log without provenance makes the same commits as before)."""
        match event:
            case SubmissionSubmitted(provenance=Provenance() as made):
                self.provenance[event.submission_id] = made
            case SubmissionRejected() | SubmissionFailed() | SubmissionCancelled():
                self.provenance.pop(event.submission_id, None)

    def _board(self, kernel_id: str) -> Board:
        return self.boards.get(kernel_id) or Board(kernel_id=kernel_id)

    async def _accepted(self, seq: int, event: SubmissionAccepted, live: bool) -> Applied | None:
        document = ResultDocument.of(event.result)
        if document.value is None:  # the referee accepts only a finite value
            raise ProjectorError(f"accepted {event.submission_id} carries no metric.value")
        value = document.value
        item = Accepted(
            seq=seq,
            submission_id=event.submission_id,
            submitter=event.submitter_id,
            runner_id=event.runner_id,
            digest=event.package_digest,
            value=value,
            at=iso(event.occurred_at),
            result=event.result,
            environment=dict(event.environment),
        )
        board = self._board(event.kernel_id)
        metric = metric_of_result(document)
        made = provenance_trailers(self.provenance.pop(event.submission_id, None))
        if not live:
            self.boards[event.kernel_id] = board_accept(board, item, metric)
            return None
        files = await self.packages.files(event.package_digest)
        subject = f"{event.kernel_id}: {event.message or 'submission ' + event.submission_id}"
        trailers = self._trailers(event.submission_id, seq, event.kernel_id)
        source, root = self._write(
            board,
            files,
            author_of(event.submitter_id),
            event,
            subject,
            [*trailers, ("Kz-Package", event.package_digest), ("Kz-Commit", "source"), *made],
        )
        new_board = board_accept(board, replace(item, commit=source.decode()), metric)
        return self._finish(
            seq,
            event,
            new_board,
            files,
            source,
            root,
            trailers,
            f"{event.kernel_id}: bench result {value:g} "
            f"{new_board.metric.unit if new_board.metric else ''}".rstrip(),
            True,
        )

    async def _imported(self, seq: int, event: KernelImported, live: bool) -> Applied | None:
        files = await self.packages.files(event.package_digest)
        board = board_import(
            self._board(event.kernel_id),
            event.package_digest,
            event.bench_result,
            _metric_of_desc(files),
        )
        if not live:
            self.boards[event.kernel_id] = board
            return None
        trailers = [
            ("Kz-Event-Seq", str(seq)),
            ("Kz-Kernel", event.kernel_id),
            ("Kz-Package", event.package_digest),
            ("Kz-Commit", "import"),
        ]
        tree_files = {**files, BENCH: (FILE_MODE, self._yaml(board))}
        root = self._root_with(event.kernel_id, tree_files)
        subject = f"{event.kernel_id}: import{' - ' + event.message if event.message else ''}"
        commit = self.writer.commit(
            tree=root,
            parent=self.head,
            author=author_of(event.submitter_id),
            committer=self.service,
            when=event.occurred_at,
            subject=subject,
            trailers=trailers,
        )
        self._move(commit, root)
        self.boards[event.kernel_id] = board
        return Applied(seq, event.kernel_id, None, None, commit.decode(), tree_files, False)

    async def _disqualified(
        self, seq: int, event: SubmissionDisqualified, live: bool
    ) -> Applied | None:
        board = self._board(event.kernel_id)
        new_board = board_disqualify(board, event.submission_id)
        if new_board is None:
            return None
        if not live:
            self.boards[event.kernel_id] = new_board
            return None
        digest = new_board.source_digest
        files = await self.packages.files(digest) if digest else self._current_files(board)
        trailers = self._trailers(event.submission_id, seq, event.kernel_id)
        source, root = self._write(
            board,
            files,
            author_of(event.actor),
            event,
            f"{event.kernel_id}: disqualify {event.submission_id}",
            [*trailers, ("Kz-Package", digest or ""), ("Kz-Commit", "disqualify-source")],
        )
        return self._finish(
            seq,
            event,
            new_board,
            files,
            source,
            root,
            trailers,
            f"{event.kernel_id}: bench result after disqualification ({event.reason})",
            False,
        )

    # --- writing --------------------------------------------------------------------------

    def _yaml(self, board: Board) -> bytes:
        """The board's bench_result.yaml; the last one rendered per kernel is kept."""
        cached = self._rendered.get(board.kernel_id)
        if cached is not None and cached[0] is board:
            return cached[1]
        data = render_yaml(scoreboard(board))
        self._rendered[board.kernel_id] = (board, data)
        return data

    @staticmethod
    def _trailers(submission_id: str, seq: int, kernel_id: str) -> list[tuple[str, str]]:
        return [
            ("Kz-Submission", submission_id),
            ("Kz-Event-Seq", str(seq)),
            ("Kz-Kernel", kernel_id),
        ]

    def _head_tree(self) -> ObjectID | None:
        return self._commit(self.head).tree if self.head is not None else None

    def head_tree(self) -> ObjectID | None:
        """The tree of main's head; None before the first commit."""
        return self._head_tree()

    def _root_with(self, kernel_id: str, files: FileMap) -> ObjectID:
        kernel_tree = self.writer.tree_of(files)
        return self.writer.put_path(
            self._head_tree(), list(KernelId.parse(kernel_id).parts), kernel_tree
        )

    def _write(
        self,
        board: Board,
        files: FileMap,
        author: Person,
        event: Any,
        subject: str,
        trailers: list[tuple[str, str]],
    ) -> tuple[ObjectID, ObjectID]:
        """The source commit: the package with the old scoreboard, on top of main."""
        tree_files = {**files, BENCH: (FILE_MODE, self._yaml(board))}
        root = self._root_with(board.kernel_id, tree_files)
        commit = self.writer.commit(
            tree=root,
            parent=self.head,
            author=author,
            committer=self.service,
            when=event.occurred_at,
            subject=subject,
            trailers=trailers,
        )
        return commit, root

    def _finish(
        self,
        seq: int,
        event: Any,
        board: Board,
        files: FileMap,
        source: ObjectID,
        root: ObjectID,
        trailers: list[tuple[str, str]],
        subject: str,
        announce: bool,
    ) -> Applied:
        """The bench-result commit with the new scoreboard; main moves at the next flush."""
        tree_files = {**files, BENCH: (FILE_MODE, self._yaml(board))}
        kernel_tree = self.writer.tree_of(tree_files)
        new_root = self.writer.put_path(
            root, list(KernelId.parse(board.kernel_id).parts), kernel_tree
        )
        bench = self.writer.commit(
            tree=new_root,
            parent=source,
            author=self.service,
            committer=self.service,
            when=event.occurred_at,
            subject=subject,
            trailers=[*trailers, ("Kz-Commit", "bench-result")],
        )
        self._move(bench, new_root)
        self.boards[board.kernel_id] = board
        return Applied(
            seq,
            board.kernel_id,
            event.submission_id,
            source.decode(),
            bench.decode(),
            tree_files,
            announce,
        )

    def _move(self, new: ObjectID, tree: ObjectID) -> None:
        self.head = new
        self.pending_tree = tree

    def flush(self) -> bool:
        """Write the pending objects, then move main once from where it was; True if it moved."""
        if self.head == self.durable:
            return False
        assert self.head is not None and self.pending_tree is not None
        if not self.writer.move(self.durable, self.head):
            raise BranchMoved(
                f"main moved away from {self.durable.decode() if self.durable else 'nothing'} "
                "while this projector wrote; it must resume from the new head"
            )
        self.durable = self.head
        self.writer.refresh_checkout(self.pending_tree)
        return True

    def _current_files(self, board: Board) -> FileMap:
        tree = self._head_tree()
        return files_of_tree(self.writer, tree, board.kernel_id) if tree is not None else {}

    # --- resuming -------------------------------------------------------------------------

    def learn_commits(self) -> dict[str, tuple[str, str]]:
        """Fill in the commit ids of results folded without writing, from main's history.

        Returns submission id → (source, bench-result) for every result main holds.
        """
        wanted = {a.submission_id for b in self.boards.values() for a in b.accepted}
        found: dict[str, tuple[str, str]] = {}
        sha = self.head
        while sha is not None and len(found) < len(wanted):
            commit = self._commit(sha)
            trailers = commit_trailers(commit)
            sid = trailers.get("Kz-Submission")
            if (
                sid in wanted
                and trailers.get("Kz-Commit") == "bench-result"
                and (commit_trailers(self._commit(commit.parents[0])).get("Kz-Commit") == "source")
            ):
                found[sid] = (commit.parents[0].decode(), sha.decode())
            sha = commit.parents[0] if commit.parents else None
        for kernel_id, board in self.boards.items():
            items = tuple(
                replace(a, commit=found[a.submission_id][0]) if a.submission_id in found else a
                for a in board.accepted
            )
            best = next(
                (
                    a
                    for a in items
                    if board.best is not None and a.submission_id == board.best.submission_id
                ),
                None,
            )
            self.boards[kernel_id] = replace(board, accepted=items, best=best)
        return found

    def applied_of(self, kernel_id: str, submission_id: str, commits: tuple[str, str]) -> Applied:
        """An `Applied` for a result main already holds, so it can be (re-)announced."""
        assert self.head is not None
        files = files_of_tree(self.writer, self._commit(self.head).tree, kernel_id)
        return Applied(
            self.resume_seq, kernel_id, submission_id, commits[0], commits[1], files, True
        )
