"""Where a set came from: the checkout's commit and origin (read with dulwich, nothing run),
and its licence, recognised among the common permissive ones or carried with its conditions.
"""

from __future__ import annotations

import re
from pathlib import Path

from dulwich.errors import NotGitRepository
from dulwich.repo import Repo

from kz_problems.model import Licence, Provenance

__all__ = ["LICENCE_FILES", "find_licence", "find_root", "provenance"]

LICENCE_FILES = ("LICENSE", "LICENCE", "LICENSE.md", "LICENSE.txt", "LICENCE.md", "COPYING")
# A licence is recognised by how its text begins; anything else carries its conditions.
_PERMISSIVE = (
    (re.compile(r"^\s*MIT License", re.IGNORECASE), "MIT"),
    (re.compile(r"^\s*Apache License\s+Version 2\.0", re.IGNORECASE), "Apache-2.0"),
    (re.compile(r"^\s*BSD 3-Clause License", re.IGNORECASE), "BSD-3-Clause"),
    (re.compile(r"^\s*BSD 2-Clause License", re.IGNORECASE), "BSD-2-Clause"),
)
_MAX_TEXT = 200_000


def find_root(path: Path) -> Path:
    """The top of the checkout holding `path`: the nearest folder above (or at) it with `.git`,
    else `path`'s own folder."""
    start = (path if path.is_dir() else path.parent).resolve()
    for folder in (start, *start.parents):
        if (folder / ".git").exists():
            return folder
    return start


def _git(root: Path) -> tuple[str, str]:
    """(origin URL, HEAD commit) of a clone; ("", "") when it is none."""
    try:
        with Repo(str(root)) as repo:
            try:
                commit = repo.head().decode()
            except KeyError:
                commit = ""
            try:
                origin = repo.get_config().get((b"remote", b"origin"), b"url").decode()
            except KeyError:
                origin = ""
    except (NotGitRepository, OSError):
        return "", ""
    return origin, commit


def find_licence(path: Path, root: Path) -> Licence | None:
    """The licence nearest above `path` (a set inside a larger checkout has its own), up to
    the checkout's top `root`; recognised, or carried with its conditions."""
    start = (path if path.is_dir() else path.parent).resolve()
    for folder in (start, *start.parents):
        for name in LICENCE_FILES:
            file = folder / name
            if file.is_file():
                text = file.read_text(errors="replace")[:_MAX_TEXT]
                return _licence(text, name)
        if folder == root:
            break
    return None


def _licence(text: str, file: str) -> Licence:
    title = next((line.strip() for line in text.splitlines() if line.strip()), file)[:200]
    for pattern, spdx in _PERMISSIVE:
        if pattern.match(text):
            return Licence(spdx, title, "", text, file)
    ref = re.sub(r"[^A-Za-z0-9.]+", "-", title).strip("-")[:100] or "custom"
    conditions = (
        f"{title}: this set's licence puts conditions on its use (not a permissive licence "
        f"kernel zoo recognises); its full text travels with this board (desc.yaml "
        f"x-problem.licence) - read it before using the problem or its results"
    )
    return Licence(f"LicenseRef-{ref}", title, conditions, text, file)


def provenance(path: Path) -> Provenance:
    """Source, version and licence of the set holding `path`."""
    root = find_root(path)
    origin, commit = _git(root)
    return Provenance(origin or root.name, commit, find_licence(path, root))
