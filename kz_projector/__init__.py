"""Projectors and reactors: the referee, the git projector, the index, the archive, the sweeper.

Every projection is a fold of the event log that a replay rebuilds byte for byte; `audit`
proves it. Public names are re-exported here.
"""

from __future__ import annotations

from kz_projector.archive import ARCHIVE_REF, Archive, ArchiveProjector
from kz_projector.audit import AuditReport, run_audit
from kz_projector.errors import (
    BranchMoved,
    HistoryDiverged,
    PackageUnavailable,
    ProjectorError,
    RefLocked,
)
from kz_projector.gitfold import Applied, GitFold
from kz_projector.gitproj import GitProjector, committed_event_id
from kz_projector.gitstore import MAIN, open_repo
from kz_projector.importer import Imported, import_path
from kz_projector.index import IndexState, fold_index, render_index, with_facts
from kz_projector.index_writer import IndexProjector, build_index, write_atomic
from kz_projector.packages import GitPackages, ObjectStorePackages, PackageSource
from kz_projector.referee import Referee
from kz_projector.repo_read import CommitInfo, KernelRepo
from kz_projector.scoreboard import Accepted, Board, scoreboard
from kz_projector.service import Projectors, run_projectors
from kz_projector.sweeper import Sweeper, lost_tasks

__all__ = [
    "ARCHIVE_REF",
    "MAIN",
    "Accepted",
    "Applied",
    "Archive",
    "ArchiveProjector",
    "AuditReport",
    "Board",
    "BranchMoved",
    "CommitInfo",
    "GitFold",
    "GitPackages",
    "GitProjector",
    "HistoryDiverged",
    "Imported",
    "IndexProjector",
    "IndexState",
    "KernelRepo",
    "ObjectStorePackages",
    "PackageSource",
    "PackageUnavailable",
    "ProjectorError",
    "Projectors",
    "RefLocked",
    "Referee",
    "Sweeper",
    "build_index",
    "committed_event_id",
    "fold_index",
    "import_path",
    "lost_tasks",
    "open_repo",
    "render_index",
    "run_audit",
    "run_projectors",
    "scoreboard",
    "with_facts",
    "write_atomic",
]
