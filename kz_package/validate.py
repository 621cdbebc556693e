"""Validation of a whole package (directory or tarball) and of a result document.

Every check runs and every problem is reported at once, so an author fixes a package in one
round. The error code is the most serious kind found: `unsafe_archive`, then
`package_too_large`, then `invalid_package`; `invalid_kernel_id` when the kernel id is the only
thing wrong.
"""

from __future__ import annotations

import math
import os
import stat
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, BinaryIO, Protocol

import msgspec

from kz_events.errors import InvalidKernelId, InvalidResult
from kz_events.ids import KernelId
from kz_events.result import ResultDocument
from kz_package import schemas
from kz_package.archive import PACKAGE_DIR, path_problem, unpack_tarball
from kz_package.errors import (
    INVALID_KERNEL_ID,
    INVALID_PACKAGE,
    INVALID_RESULT,
    PACKAGE_TOO_LARGE,
    UNSAFE_ARCHIVE,
    PackageError,
    Problem,
)
from kz_package.limits import Limits
from kz_package.memo import by_content
from kz_package.memread import PackageFiles
from kz_package.model import PACKAGE_FILES, Desc, Package
from kz_package.pyparse import parse_python
from kz_package.yaml_safe import load_yaml

__all__ = [
    "validate_package_dir",
    "validate_package_files",
    "validate_result_document",
    "validate_tarball",
]

_CODE_ORDER = (UNSAFE_ARCHIVE, PACKAGE_TOO_LARGE, INVALID_PACKAGE, INVALID_KERNEL_ID)
_DESC = f"{PACKAGE_DIR}/desc.yaml"
_BENCH = f"{PACKAGE_DIR}/bench_result.yaml"
_SCRIPTS = (f"{PACKAGE_DIR}/build_test_env.py", f"{PACKAGE_DIR}/benchmark.py")
_RESULT = "result"

Found = list[tuple[str, Problem]]


def _raise_if_any(found: Found) -> None:
    if not found:
        return
    codes = {code for code, _ in found}
    code = (
        next(c for c in _CODE_ORDER if c in codes)
        if codes <= set(_CODE_ORDER)
        else (INVALID_PACKAGE)
    )
    raise PackageError(code, sorted({p for _, p in found}))


def _tree_problems(root: Path) -> Found:
    """Links, devices and FIFOs anywhere in the tree (a directory may hold what a tar cannot),
    and names the kernel repo could not check out."""
    found: Found = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in [*dirnames, *filenames]:
            path = Path(dirpath) / name
            mode = path.lstat().st_mode
            rel = path.relative_to(root).as_posix()
            if (problem := path_problem(rel)) is not None:
                found.append((INVALID_PACKAGE, Problem(rel, "name", problem)))
            if stat.S_ISLNK(mode):
                msg = "links of any kind are not allowed, got a symbolic link"
                found.append((UNSAFE_ARCHIVE, Problem(rel, "type", msg)))
            elif not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                msg = "only regular files and directories are allowed, got a special file"
                found.append((UNSAFE_ARCHIVE, Problem(rel, "type", msg)))
    return found


class _Tree(Protocol):
    """What the checks ask of a package tree: a directory on disk or a `PackageFiles`."""

    def is_dir(self, rel: str) -> bool: ...
    def is_file(self, rel: str) -> bool: ...
    def exists(self, rel: str) -> bool: ...
    def children(self, rel: str) -> set[str]: ...
    def read(self, rel: str, limit: int) -> bytes | None: ...


class _DiskTree:
    def __init__(self, root: Path) -> None:
        self.root = root

    def is_dir(self, rel: str) -> bool:
        path = self.root / rel
        return path.is_dir() and not path.is_symlink()

    def is_file(self, rel: str) -> bool:
        return (self.root / rel).is_file()

    def exists(self, rel: str) -> bool:
        path = self.root / rel
        return path.exists() or path.is_symlink()

    def children(self, rel: str) -> set[str]:
        return {p.name for p in (self.root / rel).iterdir()}

    def read(self, rel: str, limit: int) -> bytes | None:
        path = self.root / rel
        if not path.is_file() or path.is_symlink():
            return None
        with path.open("rb") as fh:
            return fh.read(limit + 1)


class _MemoryTree:
    def __init__(self, package: PackageFiles) -> None:
        self.package = package

    def is_dir(self, rel: str) -> bool:
        return rel in self.package.dirs

    def is_file(self, rel: str) -> bool:
        return rel in self.package.files

    def exists(self, rel: str) -> bool:
        return rel in self.package.files or rel in self.package.dirs

    def children(self, rel: str) -> set[str]:
        prefix = f"{rel}/"
        keys = (*self.package.files, *self.package.dirs)
        return {k[len(prefix) :].split("/", 1)[0] for k in keys if k.startswith(prefix)}

    def read(self, rel: str, limit: int) -> bytes | None:
        data = self.package.data(rel)
        return None if data is None else data[: limit + 1]


def _layout_problems(tree: _Tree) -> Found:
    if not tree.is_dir(PACKAGE_DIR):
        wanted = ", ".join(PACKAGE_FILES)
        msg = f"is required: a directory holding {wanted}"
        return [(INVALID_PACKAGE, Problem(PACKAGE_DIR, "", msg))]
    found: Found = []
    for name in PACKAGE_FILES:
        rel = f"{PACKAGE_DIR}/{name}"
        if not tree.exists(rel):
            found.append((INVALID_PACKAGE, Problem(rel, "", "is required")))
        elif not tree.is_file(rel):
            msg = "must be a regular file"
            found.append((INVALID_PACKAGE, Problem(rel, "", msg)))
    for extra in sorted(tree.children(PACKAGE_DIR) - set(PACKAGE_FILES)):
        msg = f"unexpected entry; {PACKAGE_DIR}/ holds only {', '.join(PACKAGE_FILES)}"
        found.append((INVALID_PACKAGE, Problem(f"{PACKAGE_DIR}/{extra}", "", msg)))
    return found


def _read(tree: _Tree, rel: str, limit: int) -> tuple[bytes | None, Found]:
    data = tree.read(rel, limit)
    if data is not None and len(data) > limit:
        msg = f"must be at most {limit} bytes, got more"
        return None, [(PACKAGE_TOO_LARGE, Problem(rel, "", msg))]
    return data, []


def _load_mapping(tree: _Tree, rel: str, schema: str, limits: Limits) -> tuple[Any, Found]:
    data, found = _read(tree, rel, limits.max_yaml_bytes)
    if data is None:
        return None, found
    value, problems = _check_mapping(data, rel, schema, limits)
    return _plain_copy(value), list(problems)


# A kernel's desc.yaml and bench_result.yaml rarely change between its submissions, and
# parsing and schema-checking them is most of a small package's validation: the outcome for
# the same bytes is kept, and each caller gets its own copy of the data.
_CACHED_FILE_BYTES = 64 * 1024


@by_content(_CACHED_FILE_BYTES)
def _check_mapping(
    data: bytes, rel: str, schema: str, limits: Limits
) -> tuple[Any, tuple[tuple[str, Problem], ...]]:
    """The YAML mapping in `data` and the problems of it against `schema`."""
    try:
        value = load_yaml(data, path=rel, limits=limits)
    except PackageError as exc:
        return None, tuple((exc.code, p) for p in exc.problems)
    if not isinstance(value, dict):
        kind = "empty" if value is None else type(value).__name__
        return None, ((INVALID_PACKAGE, Problem(rel, "", f"must be a YAML mapping, got {kind}")),)
    problems = schemas.validate(schema, value, path=rel)
    if problems:
        return None, tuple((_schema_code(p), p) for p in problems)
    return value, ()


def _plain_copy(value: Any) -> Any:
    """A deep copy of YAML data (dicts, lists and immutable scalars)."""
    if isinstance(value, dict):
        return {key: _plain_copy(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain_copy(item) for item in value]
    return value


def _schema_code(problem: Problem) -> str:
    return INVALID_KERNEL_ID if problem.field == "kernel_id" else INVALID_PACKAGE


def _desc_checks(desc: Desc, expected: KernelId | None) -> tuple[KernelId | None, Found]:
    found: Found = []
    try:
        kernel_id = KernelId.parse(desc.kernel_id)
    except InvalidKernelId as exc:
        return None, [(INVALID_KERNEL_ID, Problem(_DESC, "kernel_id", exc.message))]
    if expected is not None and kernel_id != expected:
        msg = f"must equal the submission's kernel id {expected}, got {kernel_id}"
        found.append((INVALID_KERNEL_ID, Problem(_DESC, "kernel_id", msg)))
    names = [w.name for w in desc.workloads]
    for index, name in enumerate(names):
        if name in names[:index]:
            msg = f"workload names must be unique, {name!r} repeats"
            found.append((INVALID_PACKAGE, Problem(_DESC, f"workloads[{index}].name", msg)))
    return kernel_id, found


def _bench_checks(bench: dict[str, Any], desc: Desc) -> Found:
    found: Found = []
    if bench["kernel_id"] != desc.kernel_id:
        msg = f"must equal desc.yaml's kernel_id {desc.kernel_id}, got {bench['kernel_id']}"
        found.append((INVALID_KERNEL_ID, Problem(_BENCH, "kernel_id", msg)))
    metric = bench.get("metric")
    if metric is not None and metric != desc.metric.fields():
        msg = f"must equal desc.yaml's metric {desc.metric.fields()}, got {metric}"
        found.append((INVALID_PACKAGE, Problem(_BENCH, "metric", msg)))
    return found


def _script_problems(tree: _Tree, limits: Limits) -> Found:
    found: Found = []
    for rel in _SCRIPTS:
        data, read_found = _read(tree, rel, limits.max_file_bytes)
        found += read_found
        if data is None:
            continue
        found += _python_problems(data, rel)
    return found


# A non-maintainer's submission carries main's judge scripts unchanged (the API refuses any
# other), so every submission of a kernel parses the same two scripts: the answer is kept.
@by_content(_CACHED_FILE_BYTES)
def _python_problems(data: bytes, rel: str) -> tuple[tuple[str, Problem], ...]:
    """Why `data` is not a Python script (empty when it parses)."""
    try:
        parse_python(data.decode("utf-8"), rel)
    except UnicodeDecodeError as exc:
        msg = f"must be UTF-8 text, got a bad byte at offset {exc.start}"
        return ((INVALID_PACKAGE, Problem(rel, "", msg)),)
    except (SyntaxError, ValueError) as exc:
        line = getattr(exc, "lineno", None) or 0
        reason = getattr(exc, "msg", str(exc))
        msg = f"line {line}: not valid Python: {reason}"
        return ((INVALID_PACKAGE, Problem(rel, "", msg)),)
    return ()


def _validate_tree(
    tree: _Tree, found: Found, root: Path, expected: KernelId | None, limits: Limits
) -> Package:
    found = found + _layout_problems(tree)
    desc_data, desc_found = _load_mapping(tree, _DESC, "desc", limits)
    bench, bench_found = _load_mapping(tree, _BENCH, "bench_result", limits)
    found += desc_found + bench_found + _script_problems(tree, limits)
    desc = Desc.from_data(desc_data) if desc_data is not None else None
    kernel_id = None
    if desc is not None:
        kernel_id, id_found = _desc_checks(desc, expected)
        found += id_found
        if bench is not None:
            found += _bench_checks(bench, desc)
    _raise_if_any(found)
    assert desc is not None and kernel_id is not None  # no problems means both parsed
    empty = bench is None or set(bench) <= {"schema_version", "kernel_id"}
    return Package(kernel_id=kernel_id, desc=desc, root=root, bench_result=None if empty else bench)


def validate_package_dir(
    root: Path,
    *,
    expected_kernel_id: KernelId | None = None,
    limits: Limits = Limits(),  # noqa: B008
) -> Package:
    """Check a package directory completely; return the typed Package or raise PackageError."""
    if not root.is_dir():
        raise PackageError.one(INVALID_PACKAGE, str(root), "", "package must be a directory")
    return _validate_tree(_DiskTree(root), _tree_problems(root), root, expected_kernel_id, limits)


def validate_package_files(
    package: PackageFiles,
    *,
    expected_kernel_id: KernelId | None = None,
    limits: Limits = Limits(),  # noqa: B008
) -> Package:
    """Check a package read into memory (`read_package`) with the checks and messages of
    `validate_package_dir`; the Package's `root` is `Path(".")`, as it was never on disk."""
    return _validate_tree(_MemoryTree(package), [], Path(), expected_kernel_id, limits)


def validate_tarball(
    path: Path | BinaryIO,
    *,
    expected_kernel_id: KernelId | None = None,
    limits: Limits = Limits(),  # noqa: B008
) -> Package:
    """Unpack a submission tarball into a temporary directory, validate it, and clean up."""
    with tempfile.TemporaryDirectory(prefix="kz-validate-") as tmp:
        root = Path(tmp) / "package"
        unpack_tarball(path, root, limits)
        return validate_package_dir(root, expected_kernel_id=expected_kernel_id, limits=limits)


def _result_semantics(doc: Mapping[str, Any]) -> list[Problem]:
    value = doc["metric"].get("value")
    if isinstance(value, float) and not math.isfinite(value):
        return [Problem(_RESULT, "metric.value", f"must be a finite number, got {value}")]
    return []


def validate_result_document(
    data: bytes | Mapping[str, Any],
    *,
    limits: Limits = Limits(),  # noqa: B008
) -> dict[str, Any]:
    """Check a result document (JSON bytes or a mapping) against its schema; return it as a dict."""
    if isinstance(data, bytes | bytearray):
        if len(data) > limits.max_result_bytes:
            msg = f"must be at most {limits.max_result_bytes} bytes, got {len(data)}"
            raise PackageError.one(INVALID_RESULT, _RESULT, "", msg)
        try:
            data = msgspec.json.decode(data)
        except msgspec.DecodeError as exc:
            raise PackageError.one(INVALID_RESULT, _RESULT, "", f"must be JSON: {exc}") from None
    if not isinstance(data, Mapping):
        msg = f"must be a JSON object, got {type(data).__name__}"
        raise PackageError.one(INVALID_RESULT, _RESULT, "", msg)
    doc = dict(data)
    problems = schemas.validate("result", doc, path=_RESULT) or _result_semantics(doc)
    if problems:
        raise PackageError(INVALID_RESULT, problems)
    try:  # the readers' typed view must hold what the schema let through
        ResultDocument.of(doc)
    except InvalidResult as exc:
        raise PackageError.one(INVALID_RESULT, _RESULT, exc.field, exc.message) from None
    return doc
