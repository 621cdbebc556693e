"""The MCP tools' arguments: one msgspec Struct per tool (unknown fields refused), and the files
of a package as tools carry them (path, UTF-8 or base64 content, executable bit).

A bad argument becomes the structured error `invalid_argument` naming where (`$.files[0].path`)
and what was expected: msgspec's own message, never a traceback.
"""

from __future__ import annotations

import base64
import binascii
from typing import Annotated, Any, Literal, TypeVar

import msgspec
from msgspec import Meta

from kz_cli.contract import CliError
from kz_cli.documents import FileDoc

__all__ = [
    "BenchArgs",
    "BoardArgs",
    "ClaimArgs",
    "FileArg",
    "FilesArgs",
    "KernelArgs",
    "LogArgs",
    "NoArgs",
    "StatusArgs",
    "SubmitArgs",
    "as_file_docs",
    "decode_args",
    "file_map",
]

MAX_FILES = 2000
MAX_CONTENT = 16 * 1024 * 1024  # characters of one file (a package file is at most 16 MiB)

KernelIdText = Annotated[
    str,
    Meta(
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}(/[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}){4}$",
        description="arch/op_class/sub_class/quant/name, e.g. cpu/Norm/RMSNorm/fp32/my_rmsnorm",
    ),
]
BoardText = Annotated[
    str,
    Meta(
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}(/[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}){3}$",
        description="arch/op_class/sub_class/quant, e.g. cpu/Norm/RMSNorm/fp32",
    ),
]
SubmissionIdText = Annotated[
    str, Meta(pattern=r"^[0-9a-fA-F-]{8,64}$", description="the id submit_files returned")
]
Name = Annotated[str, Meta(min_length=1, max_length=100)]


class _Args(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    pass


class NoArgs(_Args):
    pass


class BoardArgs(_Args):
    board: BoardText
    model: Name | None = None
    agent: Name | None = None


class KernelArgs(_Args):
    kernel_id: KernelIdText


class FileArg(_Args):
    path: Annotated[str, Meta(min_length=1, max_length=512, description="e.g. src/rmsnorm.py")]
    content: Annotated[str, Meta(max_length=MAX_CONTENT)]
    encoding: Literal["utf-8", "base64"] = "utf-8"
    executable: bool = False


Files = Annotated[
    list[FileArg],
    Meta(
        min_length=1,
        max_length=MAX_FILES,
        description="the whole package: .kernel_package/ (as start_kernel gave it) and src/",
    ),
]


class FilesArgs(_Args):
    files: Files
    kernel_id: KernelIdText | None = None


class BenchArgs(_Args):
    files: Files
    timeout_s: Annotated[float, Meta(ge=10, le=600)] = 300.0


class SubmitArgs(_Args):
    files: Files
    kernel_id: KernelIdText | None = None
    message: Annotated[str, Meta(max_length=4096)] = ""
    wait: bool = True
    timeout_s: Annotated[float, Meta(ge=1, le=1800)] = 600.0
    agent: Name | None = None
    model: Name | None = None
    tokens: Annotated[int, Meta(ge=0, le=10**12)] | None = None
    cost_usd: Annotated[float, Meta(ge=0, le=1e6)] | None = None
    transcript_url: Annotated[str, Meta(max_length=2000)] | None = None


class StatusArgs(_Args):
    submission_id: SubmissionIdText
    wait_s: Annotated[float, Meta(ge=0, le=60)] = 0.0
    since: Annotated[int, Meta(ge=0)] = 0


class LogArgs(_Args):
    submission_id: SubmissionIdText
    tail_chars: Annotated[int, Meta(ge=1, le=200_000)] = 20_000


class ClaimArgs(_Args):
    kernel_id: KernelIdText
    ttl_s: Annotated[float, Meta(gt=0, le=86_400)] = 3600.0


T = TypeVar("T", bound=msgspec.Struct)


def decode_args(cls: type[T], arguments: dict[str, Any] | None) -> T:
    """The tool's arguments as its Struct, or `invalid_argument` saying where and what."""
    try:
        return msgspec.convert(arguments or {}, cls, strict=True)
    except msgspec.ValidationError as exc:
        where = str(exc).rsplit(" - at `", 1)[-1].rstrip("`") if " - at `" in str(exc) else "$"
        raise CliError(
            "invalid_argument",
            str(exc),
            fix="correct the argument at details.at as the tool's input schema says",
            details={"at": where},
        ) from exc


def _path(index: int, path: str) -> str:
    parts = path.split("/")
    if path.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise CliError(
            "invalid_argument",
            f"files[{index}].path: expected a relative path without . or .. parts, got {path!r}",
            fix="give paths like src/kernel.py or .kernel_package/desc.yaml",
            details={"at": f"$.files[{index}].path"},
        )
    return path


def _content(index: int, item: FileArg) -> bytes:
    if item.encoding == "utf-8":
        return item.content.encode()
    try:
        return base64.b64decode(item.content, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise CliError(
            "invalid_argument",
            f"files[{index}].content: expected base64, got something else ({exc})",
            details={"at": f"$.files[{index}].content"},
        ) from exc


def file_map(files: list[FileArg]) -> dict[str, tuple[int, bytes]]:
    """The package as path → (mode, bytes); a path given twice is refused."""
    out: dict[str, tuple[int, bytes]] = {}
    for index, item in enumerate(files):
        path = _path(index, item.path)
        if path in out:
            raise CliError(
                "invalid_argument",
                f"files[{index}].path: {path!r} is given twice",
                details={"at": f"$.files[{index}].path"},
            )
        out[path] = (0o755 if item.executable else 0o644, _content(index, item))
    return out


def as_file_docs(files: dict[str, tuple[int, bytes]]) -> list[dict[str, Any]]:
    """A package's files as the tools give them: text as it is, other bytes in base64."""
    docs = []
    for path, (mode, data) in sorted(files.items()):
        try:
            doc = FileDoc(path=path, content=data.decode(), executable=bool(mode & 0o111))
        except UnicodeDecodeError:
            text = base64.b64encode(data).decode()
            doc = FileDoc(path=path, content=text, encoding="base64", executable=bool(mode & 0o111))
        docs.append(msgspec.to_builtins(doc))
    return docs
