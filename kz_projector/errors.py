"""Errors of the projectors, below `KzError`.

KzError
└── ProjectorError          a projection could not be written as the rules require
    ├── BranchMoved             another writer moved the ref first (compare-and-swap lost)
    ├── RefLocked               a live writer keeps a `<ref>.lock` file (a dead one's is removed)
    ├── HistoryDiverged         the branch is not where the projection expects (moved by hand)
    └── PackageUnavailable      a package the projection needs is in no store it can read
"""

from __future__ import annotations

from kz_events.errors import KzError

__all__ = [
    "BranchMoved",
    "HistoryDiverged",
    "PackageUnavailable",
    "PartStalled",
    "ProjectorError",
    "RefLocked",
]


class ProjectorError(KzError):
    code = "projector_error"


class RefLocked(ProjectorError):
    """Another live writer keeps renewing the ref's lock file (one left by a writer that died
    is removed; see `gitstore.Writer.move`)."""

    code = "ref_locked"


class HistoryDiverged(ProjectorError):
    """The branch head is not a commit this projection made."""

    code = "history_diverged"


class PackageUnavailable(ProjectorError):
    code = "package_unavailable"


class BranchMoved(ProjectorError):
    """Another writer moved the ref first: the fold is stale and resumes from the new head."""

    code = "branch_moved"


class PartStalled(ProjectorError):
    """A part of the projector stopped moving through the log while the log went on."""

    code = "part_stalled"
