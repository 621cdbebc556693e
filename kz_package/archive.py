"""Safe, streaming unpacking of submission tarballs, and canonical packing of a directory.

Unpacking reads the gzip stream once, checks every entry before writing it into a private
temporary directory next to `dest`, and renames that directory into place only when the whole
archive passed; on any refusal the temporary directory is removed and `dest` never appears.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import os
import shutil
import tarfile
import tempfile
import zlib
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import BinaryIO

from kz_package.errors import INVALID_PACKAGE, PACKAGE_TOO_LARGE, UNSAFE_ARCHIVE, PackageError
from kz_package.limits import Limits

__all__ = [
    "ARCHIVE",
    "MAX_PATH_BYTES",
    "MAX_PATH_PART_BYTES",
    "PACKAGE_DIR",
    "pack_directory",
    "pack_files",
    "path_problem",
    "unpack_tarball",
    "write_tree",
]

ARCHIVE = "(archive)"
PACKAGE_DIR = ".kernel_package"
_GZIP_MAGIC = b"\x1f\x8b"
_CHUNK = 1024 * 1024
_SKIPPED_DIRS = frozenset({"__pycache__", ".git"})
_SKIPPED_SUFFIXES = (".pyc",)
_EMPTY_PARTS = ("", ".")
# A path git can check out on the file systems people use: each part a file name the kernel
# accepts (NAME_MAX), the whole under PATH_MAX, and no part git refuses to write (`.git` in any
# case, or as NTFS and HFS+ spell it, which git protects by default).
MAX_PATH_PART_BYTES = 255
MAX_PATH_BYTES = 4096
_GIT_IGNORABLE = frozenset(  # what HFS+ drops from a name, as git's is_hfs_dotgit lists it
    "\u200c\u200d\u200e\u200f\u202a\u202b\u202c\u202d\u202e"
    "\u206a\u206b\u206c\u206d\u206e\u206f\ufeff"
)
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class _CountingReader:
    """A forward-only reader over the source that refuses to read past the compressed limit."""

    def __init__(self, raw: BinaryIO, limit: int, head: bytes) -> None:
        self._raw = raw
        self._limit = limit
        self._head = head
        self.count = len(head)

    def read(self, size: int = -1) -> bytes:
        if self._head:
            data, self._head = self._head, b""
            return data
        data = self._raw.read(size if size >= 0 else _CHUNK)
        self.count += len(data)
        if self.count > self._limit:
            raise PackageError.one(
                PACKAGE_TOO_LARGE,
                ARCHIVE,
                "size",
                f"compressed package must be at most {self._limit} bytes, got more",
            )
        return data


class _Budget:
    """Running totals checked against the limits while the archive streams."""

    def __init__(self, limits: Limits, reader: _CountingReader) -> None:
        self.limits = limits
        self.reader = reader
        self.entries = 0
        self.unpacked = 0

    def add_entry(self, name: str) -> None:
        self.entries += 1
        if self.entries > self.limits.max_entries:
            raise PackageError.one(
                PACKAGE_TOO_LARGE,
                name,
                "entries",
                f"package must hold at most {self.limits.max_entries} entries, got more",
            )

    def add_file(self, name: str, size: int) -> None:
        if size > self.limits.max_file_bytes:
            raise PackageError.one(
                PACKAGE_TOO_LARGE,
                name,
                "size",
                f"each file must be at most {self.limits.max_file_bytes} bytes, got {size}",
            )
        if self.unpacked + size > self.limits.max_unpacked_bytes:
            raise PackageError.one(
                PACKAGE_TOO_LARGE,
                name,
                "size",
                f"unpacked package must be at most {self.limits.max_unpacked_bytes} bytes, "
                f"got at least {self.unpacked + size}",
            )

    def add_bytes(self, name: str, count: int) -> None:
        self.unpacked += count
        if self.unpacked <= self.limits.ratio_floor_bytes:
            return
        ratio = self.unpacked / max(self.reader.count, 1)
        if ratio > self.limits.max_ratio:
            raise PackageError.one(
                UNSAFE_ARCHIVE,
                name,
                "ratio",
                f"compression ratio must be at most {self.limits.max_ratio}, got {ratio:.0f}",
            )


def _absolute(name: str) -> bool:
    """Rooted, or Windows-style (a backslash or a drive letter): never a package path."""
    return name.startswith("/") or "\\" in name or (len(name) > 1 and name[1] == ":")


def _is_dot_git(part: str) -> bool:
    """`.git` as git's own path check sees it: any case, trailing dots or spaces (NTFS), its
    8.3 short name, or with characters HFS+ ignores."""
    folded = "".join(ch for ch in part if ch not in _GIT_IGNORABLE).lower()
    return folded.rstrip(". ") == ".git" or folded.split(":", 1)[0] in {".git", "git~1"}


def path_problem(name: str) -> str | None:
    """Why `name` (a relative package path) cannot be stored in the kernel repo and checked
    out, or None when it can."""
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:
        return "paths must be valid UTF-8"
    for part in name.split("/"):
        part_size = len(part.encode("utf-8"))
        if part_size > MAX_PATH_PART_BYTES:
            return (
                f"each file or folder name must be at most {MAX_PATH_PART_BYTES} bytes, "
                f"got one of {part_size}"
            )
        if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in part):
            return "names must not contain control characters"
        if _is_dot_git(part):
            return f"git refuses to check out a path with a {part!r} part"
    if size > MAX_PATH_BYTES:
        return f"paths must be at most {MAX_PATH_BYTES} bytes, got {size}"
    return None


def _shown(name: str) -> str:
    """A path as an error shows it: whole when short, its start and length when not."""
    return name if len(name) <= 200 else f"{name[:160]}… ({len(name)} characters)"


def _member_parts(member: tarfile.TarInfo) -> tuple[str, ...]:
    """The entry's path as safe relative parts; refuse absolute paths and `..`."""
    name = member.name
    if _absolute(name):
        raise PackageError.one(
            UNSAFE_ARCHIVE, name, "name", "entry paths must be relative, got an absolute path"
        )
    parts = tuple(p for p in name.split("/") if p not in _EMPTY_PARTS)  # as PurePosixPath
    if ".." in parts:
        raise PackageError.one(UNSAFE_ARCHIVE, name, "name", "entry paths must not contain '..'")
    problem = path_problem("/".join(parts))
    if problem is not None:
        raise PackageError.one(INVALID_PACKAGE, _shown(name), "name", problem)
    return parts


def _check_type(member: tarfile.TarInfo) -> None:
    if member.isreg() or member.isdir():
        return
    if member.issym() or member.islnk():
        kind = "a symbolic link" if member.issym() else "a hard link"
        message = f"links of any kind are not allowed, got {kind} to {member.linkname!r}"
    elif member.isdev():
        kind = "a FIFO" if member.isfifo() else "a device"
        message = f"devices and FIFOs are not allowed, got {kind}"
    else:
        message = f"only regular files and directories are allowed, got type {member.type!r}"
    raise PackageError.one(UNSAFE_ARCHIVE, member.name, "type", message)


def _write_file(
    stream: tarfile.TarFile, member: tarfile.TarInfo, target: Path, budget: _Budget
) -> None:
    source = stream.extractfile(member)
    if source is None:  # pragma: no cover - regular members always have data
        raise PackageError.one(INVALID_PACKAGE, member.name, "", "entry has no data")
    mode = 0o755 if member.mode & 0o111 else 0o644
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    with source, os.fdopen(os.open(target, flags, mode), "wb") as out:
        while chunk := source.read(_CHUNK):
            budget.add_bytes(member.name, len(chunk))
            out.write(chunk)


def admit_member(member: tarfile.TarInfo, budget: _Budget, seen: set[str]) -> tuple[str, ...]:
    """The checks every archive entry passes before it is read: count, type, path, once only.

    Returns the entry's path parts (empty for the archive's root entry, which is skipped).
    """
    budget.add_entry(member.name)
    _check_type(member)
    parts = _member_parts(member)
    if not parts:
        return ()
    key = "/".join(parts)
    if key in seen:
        raise PackageError.one(UNSAFE_ARCHIVE, member.name, "name", "duplicate entry in archive")
    seen.add(key)
    return parts


def _extract_member(
    stream: tarfile.TarFile, member: tarfile.TarInfo, into: Path, budget: _Budget, seen: set[str]
) -> None:
    parts = admit_member(member, budget, seen)
    if not parts:
        return
    target = into.joinpath(*parts)
    try:
        if member.isdir():
            target.mkdir(mode=0o755, parents=True, exist_ok=True)
            return
        budget.add_file(member.name, member.size)
        target.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        _write_file(stream, member, target, budget)
    except (FileExistsError, NotADirectoryError) as exc:
        raise PackageError.one(
            UNSAFE_ARCHIVE, member.name, "name", "entry collides with another entry's path"
        ) from exc


def _open_source(source: Path | BinaryIO) -> contextlib.AbstractContextManager[BinaryIO]:
    if isinstance(source, Path):
        return source.open("rb")
    return contextlib.nullcontext(source)


def _stream_members(reader: _CountingReader) -> Iterator[tuple[tarfile.TarFile, tarfile.TarInfo]]:
    with tarfile.open(fileobj=reader, mode="r|gz") as stream:  # type: ignore[call-overload]
        for member in stream:
            yield stream, member


def _package_root(tmp: Path) -> Path:
    """The package root: the archive root, or its one top-level folder holding the package."""
    if (tmp / PACKAGE_DIR).exists():
        return tmp
    children = list(tmp.iterdir())
    if len(children) == 1 and children[0].is_dir() and (children[0] / PACKAGE_DIR).is_dir():
        return children[0]
    return tmp


def open_members(
    source: BinaryIO, limits: Limits
) -> tuple[Iterator[tuple[tarfile.TarFile, tarfile.TarInfo]], _Budget]:
    """The archive's entries, streamed, and the budget that bounds them; refuses non-gzip."""
    head = source.read(2)
    if head != _GZIP_MAGIC:
        raise PackageError.one(
            INVALID_PACKAGE,
            ARCHIVE,
            "format",
            f"package must be a gzip tarball (.tar.gz), got data starting with {head!r}",
        )
    reader = _CountingReader(source, limits.max_compressed_bytes, head)
    return _stream_members(reader), _Budget(limits, reader)


@contextlib.contextmanager
def archive_errors(seen: set[str]) -> Iterator[None]:
    """Turn a corrupt stream into a PackageError; refuse an archive with no entries."""
    try:
        yield
    except (tarfile.TarError, zlib.error, EOFError, gzip.BadGzipFile) as exc:
        raise PackageError.one(
            INVALID_PACKAGE,
            ARCHIVE,
            "format",
            f"package must be a valid gzip tarball, got a corrupt or truncated one ({exc})",
        ) from None
    if not seen:
        raise PackageError.one(INVALID_PACKAGE, ARCHIVE, "", "package archive is empty")


def _unpack_into(source: BinaryIO, tmp: Path, limits: Limits) -> None:
    seen: set[str] = set()
    with archive_errors(seen):
        members, budget = open_members(source, limits)
        for stream, member in members:
            _extract_member(stream, member, tmp, budget, seen)


def unpack_tarball(source: Path | BinaryIO, dest: Path, limits: Limits = Limits()) -> None:  # noqa: B008
    """Unpack a submission tarball into `dest` (which must not exist) or raise PackageError."""
    if dest.exists() or dest.is_symlink():
        raise FileExistsError(f"unpack destination must not exist, got existing {dest}")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".kz-unpack-", dir=dest.parent))
    try:
        with _open_source(source) as raw:
            _unpack_into(raw, tmp, limits)
        _package_root(tmp).rename(dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# ---------------------------------------------------------------- writing a tree from memory


def _tree_dirs(files: Mapping[str, tuple[int, bytes]], dirs: Iterable[str]) -> list[str]:
    """Every folder the tree needs, parents first; refuses paths that leave the tree and files
    that collide with folders."""
    needed = set(dirs)
    for name in (*needed, *files):
        if _absolute(name):
            raise PackageError.one(
                UNSAFE_ARCHIVE, name, "name", "tree paths must be relative, got an absolute path"
            )
        parts = name.split("/")
        if any(p in _EMPTY_PARTS or p == ".." for p in parts):
            raise PackageError.one(
                UNSAFE_ARCHIVE, name, "name", "tree paths must not contain '..', '.' or '//'"
            )
        needed.update("/".join(parts[:i]) for i in range(1, len(parts)))
    for name in files:
        if name in needed:
            raise PackageError.one(
                UNSAFE_ARCHIVE, name, "name", "entry collides with another entry's path"
            )
    return sorted(needed)


def _write_new_file(path: Path, mode: int, data: bytes) -> None:
    fd = os.open(path, _NEW_FILE, 0o755 if mode & 0o111 else 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


def write_tree(
    files: Mapping[str, tuple[int, bytes]], dest: Path, dirs: Iterable[str] = ()
) -> None:
    """Write a tree held in memory (path → (mode, bytes), as `read_package` gives it) into
    `dest`, which must not exist; `dirs` adds folders that hold no file.

    Every folder, `dest` included, is made once with mode 0o755; each file is one open, write
    and close, 0o755 when its mode has an execute bit, else 0o644 (the modes `unpack_tarball`
    gives; the umask applies to both). Paths are checked before anything is written: one that
    would leave `dest`, or a file where a folder must be, raises PackageError and `dest` never
    appears. A failed write removes what was written.
    """
    folders = _tree_dirs(files, dirs)
    try:
        dest.mkdir(mode=0o755)
    except FileNotFoundError:
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.mkdir(mode=0o755)
    except FileExistsError:
        raise FileExistsError(f"tree destination must not exist, got existing {dest}") from None
    try:
        for folder in folders:
            (dest / folder).mkdir(mode=0o755)
        for name, (mode, data) in files.items():
            _write_new_file(dest / name, mode, data)
    except BaseException:
        shutil.rmtree(dest, ignore_errors=True)
        raise


# ---------------------------------------------------------------- packing


class _HashingWriter:
    def __init__(self, out: BinaryIO) -> None:
        self._out = out
        self.sha256 = hashlib.sha256()

    def write(self, data: bytes) -> int:
        self.sha256.update(data)
        return self._out.write(data)

    def flush(self) -> None:
        self._out.flush()


def _canonical_entries(src: Path) -> list[tuple[str, Path]]:
    """Every directory and file under `src`, as sorted (archive name, path) pairs."""
    entries: list[tuple[str, Path]] = []
    for dirpath, dirnames, filenames in os.walk(src, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIPPED_DIRS)
        here = Path(dirpath)
        for name in dirnames:
            entries.append(((here / name).relative_to(src).as_posix(), here / name))
        for name in filenames:
            if not name.endswith(_SKIPPED_SUFFIXES):
                entries.append(((here / name).relative_to(src).as_posix(), here / name))
    return sorted(entries)


def _tarinfo(name: str, path: Path) -> tarfile.TarInfo:
    stat = path.lstat()
    info = tarfile.TarInfo(name)
    if path.is_symlink() or not (path.is_file() or path.is_dir()):
        raise PackageError.one(
            UNSAFE_ARCHIVE, name, "type", "only regular files and directories can be packed"
        )
    info.type = tarfile.DIRTYPE if path.is_dir() else tarfile.REGTYPE
    info.size = 0 if path.is_dir() else stat.st_size
    info.mode = 0o755 if path.is_dir() or stat.st_mode & 0o111 else 0o644
    info.mtime = 0
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def _file_info(
    name: str, *, directory: bool, size: int = 0, executable: bool = False
) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE if directory else tarfile.REGTYPE
    info.size = size
    info.mode = 0o755 if directory or executable else 0o644
    info.mtime = 0
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def pack_files(files: Mapping[str, tuple[int, bytes]], out: BinaryIO) -> str:
    """Pack path → (mode, bytes) into the tarball `pack_directory` makes of the same tree.

    Folders come from the paths; a mode with any execute bit packs as 0o755. Returns the sha256.
    """
    dirs = {"/".join(name.split("/")[:i]) for name in files for i in range(1, name.count("/") + 1)}
    entries = sorted([(d, None) for d in dirs] + [(n, files[n]) for n in files])
    hashing = _HashingWriter(out)
    with (
        gzip.GzipFile(filename="", mode="wb", fileobj=hashing, mtime=0, compresslevel=9) as gz,
        tarfile.open(fileobj=gz, mode="w|", format=tarfile.PAX_FORMAT) as tar,
    ):
        for name, entry in entries:
            if entry is None:
                tar.addfile(_file_info(name, directory=True))
            else:
                info = _file_info(
                    name, directory=False, size=len(entry[1]), executable=bool(entry[0] & 0o111)
                )
                tar.addfile(info, io.BytesIO(entry[1]))
    out.flush()
    return hashing.sha256.hexdigest()


def pack_directory(src: Path, out: Path | BinaryIO) -> str:
    """Pack `src` into a canonical gzip tarball (same tree, same bytes); return its sha256 hex."""
    if not src.is_dir():
        raise PackageError.one(INVALID_PACKAGE, str(src), "", "package must be a directory")
    entries = _canonical_entries(src)
    with contextlib.ExitStack() as stack:
        raw: BinaryIO = stack.enter_context(out.open("wb")) if isinstance(out, Path) else out
        hashing = _HashingWriter(raw)
        # An empty file name and mtime 0 keep the gzip header identical everywhere.
        gz = stack.enter_context(
            gzip.GzipFile(filename="", mode="wb", fileobj=hashing, mtime=0, compresslevel=9)
        )
        tar = stack.enter_context(tarfile.open(fileobj=gz, mode="w|", format=tarfile.PAX_FORMAT))
        for name, path in entries:
            info = _tarinfo(name, path)
            if info.isdir():
                tar.addfile(info)
            else:
                with path.open("rb") as fh:
                    tar.addfile(info, fh)
        tar.close()
        gz.close()
        raw.flush()
    return hashing.sha256.hexdigest()
