"""The MCP resources: the docs an agent needs (the package format, the rules of judging, the
agents' guide) and each board's judge (its `benchmark.py` and `build_test_env.py` as text).
"""

from __future__ import annotations

import io
import tarfile
from dataclasses import dataclass
from pathlib import Path

from kz_cli.contract import CliError
from kz_mcp.api import Api, Identity, failure

__all__ = ["DOCS", "DOCS_DIR", "JUDGE_TEMPLATE", "DocResource", "read_resource"]

DOCS_DIR = Path(__file__).resolve().parents[1] / "docs"
JUDGE_TEMPLATE = "kz://boards/{arch}/{op_class}/{sub_class}/{quant}/judge"
_JUDGE_PREFIX = "kz://boards/"


@dataclass(frozen=True)
class DocResource:
    uri: str
    name: str
    title: str
    description: str
    file: str


DOCS = (
    DocResource(
        "kz://docs/package-format",
        "package-format",
        "The kernel package format",
        "What a package holds: .kernel_package/ (desc.yaml, bench_result.yaml, "
        "build_test_env.py, benchmark.py) and src/, and the limits a submission must keep.",
        "kernel_package_format.md",
    ),
    DocResource(
        "kz://docs/judging",
        "judging",
        "The rules of judging",
        "How a kernel is judged: its own worker, secret inputs, checked outputs, side by side "
        "with the incumbent and the board's reference, the verdict rule, what counts as "
        "cheating and how it is caught.",
        "judging.md",
    ),
    DocResource(
        "kz://docs/agents",
        "agents",
        "Working as an agent",
        "The workflow from a board to a committed kernel, the tools, the CLI contract.",
        "agents.md",
    ),
)


def _doc(uri: str) -> str | None:
    for doc in DOCS:
        if doc.uri == uri:
            path = DOCS_DIR / doc.file
            if not path.is_file():
                raise failure("resource_unavailable", f"{doc.file} is not installed beside kz")
            return path.read_text(encoding="utf-8")
    return None


def _judge_text(bundle: bytes) -> str:
    """The judge scripts of a bundle, each under a header naming it."""
    parts = []
    with tarfile.open(fileobj=io.BytesIO(bundle), mode="r:gz") as tar:
        for name in (".kernel_package/benchmark.py", ".kernel_package/build_test_env.py"):
            try:
                member = tar.extractfile(name)
            except KeyError:
                continue
            if member is not None:
                parts.append(f"# ==> {name} <==\n{member.read().decode(errors='replace')}")
    return "\n".join(parts)


async def _judge(api: Api, who: Identity, uri: str) -> str:
    board = uri.removeprefix(_JUDGE_PREFIX).removesuffix("/judge")
    if board.count("/") != 3:
        raise failure("unknown_resource", f"expected {JUDGE_TEMPLATE}, got {uri}")
    detail = await api.json("GET", f"/api/boards/{board}", who)
    judge_kernel = detail.get("judge_kernel")
    if not judge_kernel:
        raise failure("unknown_board", f"board {board} has no judge yet")
    bundle = (await api.ok("GET", f"/api/kernels/{judge_kernel}/judge", who)).content
    return _judge_text(bundle)


async def read_resource(api: Api, who: Identity, uri: str) -> tuple[str, str]:
    """The resource's text and MIME type; `unknown_resource` for any other URI."""
    text = _doc(uri)
    if text is not None:
        return text, "text/markdown"
    if uri.startswith(_JUDGE_PREFIX) and uri.endswith("/judge"):
        return await _judge(api, who, uri), "text/x-python"
    raise CliError(
        "unknown_resource",
        f"no resource {uri}",
        fix="list the resources and their templates (resources/list, resources/templates/list)",
    )
