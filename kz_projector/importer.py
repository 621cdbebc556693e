"""`kz import`: existing packages (a kernel repo, or a folder of packages) → `kernel.imported`.

Each package is validated, packed canonically, stored in `KZ_PACKAGES` by its sha256, and
announced once: the event id derives from kernel id and digest, and a package the kernel's
log already imported is skipped, so importing twice changes nothing.
"""

from __future__ import annotations

import io
import tempfile
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from dulwich.objects import Commit
from dulwich.refs import Ref
from dulwich.repo import Repo

from kz_events.events import KernelImported
from kz_events.port import LogPort
from kz_events.subjects import PACKAGES_BUCKET, aggregate_filter
from kz_package.archive import PACKAGE_DIR, pack_directory
from kz_package.validate import validate_package_dir
from kz_projector.gitstore import MAIN, ref_value, walk_files

__all__ = ["IMPORT_NS", "Imported", "find_packages", "import_path"]

IMPORT_NS = uuid.UUID("0d7e0e55-3c0b-4f43-a3c5-8d2b9f6b1a20")


@dataclass(frozen=True, slots=True)
class Imported:
    kernel_id: str
    digest: str
    seq: int | None  # None: the log had it already


def find_packages(root: Path) -> Iterator[Path]:
    """Every directory below `root` holding `.kernel_package/desc.yaml`, sorted."""
    for desc in sorted(root.rglob(f"{PACKAGE_DIR}/desc.yaml")):
        if ".git" not in desc.parts:
            yield desc.parent.parent


def _export_main(repo_path: Path, into: Path) -> None:
    """Write main's tree of a git repo (bare or not) into `into`."""
    with Repo(str(repo_path)) as repo:
        _export_tree(repo, into)


def _export_tree(repo: Repo, into: Path) -> None:
    head = ref_value(repo, MAIN) or ref_value(repo, Ref(b"HEAD"))
    if head is None:
        return
    commit = repo.object_store[head]
    assert isinstance(commit, Commit)
    for path, mode, sha in walk_files(repo.object_store, commit.tree):
        target = into / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(repo.object_store[sha].as_raw_string())
        target.chmod(0o755 if mode & 0o111 else 0o644)


def _is_repo(path: Path) -> bool:
    return (path / ".git").exists() or ((path / "HEAD").is_file() and (path / "objects").is_dir())


async def _already(elog: LogPort, kernel_id: str, digest: str) -> bool:
    arch = kernel_id.split("/", 1)[0]
    for _, event in await elog.load(aggregate_filter("kernel", arch, kernel_id)):
        if isinstance(event, KernelImported) and event.package_digest == digest:
            return True
    return False


async def _import_one(
    elog: LogPort, package_dir: Path, submitter: str, clock: Callable[[], datetime]
) -> Imported:
    package = validate_package_dir(package_dir)
    kernel_id = str(package.kernel_id)
    buffer = io.BytesIO()
    digest = pack_directory(package_dir, buffer)
    if await _already(elog, kernel_id, digest):
        return Imported(kernel_id, digest, None)
    await elog.put_object(PACKAGES_BUCKET, digest, buffer.getvalue())
    event = KernelImported(
        event_id=str(uuid.uuid5(IMPORT_NS, f"{kernel_id}@{digest}")),
        occurred_at=clock(),
        actor=submitter,
        kernel_id=kernel_id,
        package_digest=digest,
        submitter_id=submitter,
        message=f"imported from {package_dir.name}",
        bench_result=package.bench_result,
        summary=package.desc.summary(),
    )
    return Imported(kernel_id, digest, await elog.append(event))


async def import_path(
    elog: LogPort, path: Path, *, submitter: str, clock: Callable[[], datetime]
) -> list[Imported]:
    """Import every package found at `path` (a repo's main, or a folder); returns each outcome."""
    if _is_repo(path):
        with tempfile.TemporaryDirectory(prefix="kz-import-") as tmp:
            _export_main(path, Path(tmp))
            return [await _import_one(elog, p, submitter, clock) for p in find_packages(Path(tmp))]
    return [await _import_one(elog, p, submitter, clock) for p in find_packages(path)]
