"""Helpers of the API suite: kernel packages as real tarballs and a handle on the running app."""

from __future__ import annotations

import hashlib
import io
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dulwich.objects import Blob, Tree
from dulwich.repo import Repo
from litestar.testing import AsyncTestClient

import kz_testing
from kz_api.context import ApiContext
from kz_events.config import Settings
from kz_events.eventlog import EventLog
from kz_events.events import (
    KernelImported,
    SubmissionAccepted,
    SubmissionClaimed,
    SubmissionCommitted,
    SubmissionResult,
)
from kz_events.server import EmbeddedServer
from kz_events.subjects import JUDGES_BUCKET, PACKAGES_BUCKET, judge_key

KERNEL = "cpu/Norm/RMSNorm/fp32/numpy_ref"
SECRET = b"test-lease-secret-0123456789abcdef"

TITLE = "RMSNorm reference"


def package(
    kernel_id: str = KERNEL,
    *,
    better: str = "lower",
    benchmark: str = kz_testing.TRIVIAL_BENCHMARK,
    src: str = "x = 1\n",
) -> dict[str, bytes]:
    """The files of a valid package for `kernel_id` with `src` as its `src/kernel.py`; its
    workload is the one `RESULT_DOC` reports."""
    return kz_testing.package_files(
        kernel_id,
        title=TITLE,
        better=better,
        workload="small",
        benchmark=benchmark,
        src={"kernel.py": src},
    )


def tarball(**kw: Any) -> bytes:
    """The gzip tarball of a fresh valid package, built in memory."""
    return kz_testing.package_tarball(package(**kw))


@dataclass
class Api:
    """The test client, the app's context and a second log connection for assertions."""

    client: AsyncTestClient[Any]
    log: EventLog
    settings: Settings
    tmp: Path

    @property
    def ctx(self) -> ApiContext:
        ctx = self.client.app.state.ctx
        assert isinstance(ctx, ApiContext)
        return ctx

    def on_app(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run a coroutine function on the app's event loop and return its result."""
        return self.client.blocking_portal.call(fn, *args)

    def seen(self, seq: int) -> None:
        """Block until the app's read models have folded `seq`."""
        assert self.on_app(self.ctx.models.wait_seq, seq, 10.0)

    async def submit(
        self,
        data: bytes,
        *,
        kernel_id: str = KERNEL,
        who: str = "alice",
        headers: dict[str, str] | None = None,
        **fields: str,
    ) -> Any:
        return await self.client.post(
            "/api/submissions",
            files={"package": ("package.tar.gz", data, "application/gzip")},
            data={"kernel_id": kernel_id, **fields},
            headers={"X-Submitter-Id": who, **(headers or {})},
        )


def make_settings(nats: EmbeddedServer, tmp: Path, **overrides: Any) -> Settings:
    base: dict[str, Any] = {
        "nats_url": nats.url,
        "data_dir": tmp / "data",
        "kernel_repo_path": tmp / "kernel_repo",
        "maintainers": ["maintainer"],
        "lease_s": 5.0,
        "max_open_submissions": 3,
    }
    base.update(overrides)
    return Settings(**base)


async def stream_events(log: EventLog) -> list[Any]:
    """Every event on the stream, in order."""
    return [event async for _seq, event in log.replay(1)]


def meta(actor: str) -> dict[str, Any]:
    """Event metadata fields for a test-written event."""
    return {"event_id": str(uuid.uuid4()), "occurred_at": datetime.now(UTC), "actor": actor}


async def seed(api: Api, event: Any) -> int:
    """Append `event` with the test's own connection and wait until the app folded it."""
    seq = await api.log.append(event)
    api.seen(seq)
    return seq


async def import_kernel(api: Api, kernel_id: str = KERNEL) -> int:
    """Store a package for `kernel_id` and announce it as imported."""
    data = tarball(kernel_id=kernel_id)
    digest = hashlib.sha256(data).hexdigest()
    await api.log.put_object(PACKAGES_BUCKET, digest, data)
    return await seed(
        api,
        KernelImported(
            **meta("importer"), kernel_id=kernel_id, package_digest=digest, submitter_id="importer"
        ),
    )


async def put_judge(api: Api, kernel_id: str = KERNEL, **judge: Any) -> None:
    """Store a judge bundle for `kernel_id` as the git projector would."""
    files = {p: d for p, d in package(kernel_id, **judge).items() if not p.startswith("src/")}
    bundle = io.BytesIO(kz_testing.package_tarball(files))
    await api.log.put_object(JUDGES_BUCKET, judge_key(kernel_id), bundle)


RESULT_DOC: dict[str, Any] = {
    "schema_version": 1,
    "accepted": True,
    "reason": "1.2x faster than the current best",
    "metric": {"name": "latency", "unit": "us", "better": "lower", "value": 12.5},
    "workloads": [
        {
            "name": "small",
            "value": 12.5,
            "stats": {
                "median": 12.5,
                "mean": 12.6,
                "stdev": 0.1,
                "min": 12.4,
                "max": 12.9,
                "p10": 12.4,
                "p90": 12.8,
                "samples": [12.5 + 0.01 * (i % 5 - 2) for i in range(30)],  # settled
            },
        }
    ],
    "correctness": {"passed": True, "checks": []},
    "environment": {"device": "cpu"},
}


async def accept(api: Api, sid: str, *, value: float = 12.5, commit: bool = True) -> None:
    """Drive a queued submission through claim, result, accepted (and committed)."""
    view = api.ctx.models.submissions[sid]
    kid = view.state.kernel_id
    ids = {"submission_id": sid, "kernel_id": kid}
    result = {**RESULT_DOC, "metric": {**RESULT_DOC["metric"], "value": value}}
    await seed(
        api, SubmissionClaimed(**meta("r1"), **ids, runner_id="r1", attempt=1, lease_id="L1")
    )
    rseq = await seed(
        api,
        SubmissionResult(
            **meta("r1"),
            **ids,
            runner_id="r1",
            attempt=1,
            lease_id="L1",
            outcome="accepted",
            result=result,
        ),
    )
    aseq = await seed(
        api,
        SubmissionAccepted(
            **meta("referee"),
            **ids,
            submitter_id=view.state.submitter_id,
            runner_id="r1",
            attempt=1,
            package_digest=view.state.package_digest,
            result=result,
            result_seq=rseq,
        ),
    )
    if commit:
        await seed(
            api,
            SubmissionCommitted(
                **meta("git"),
                **ids,
                source_commit="a" * 40,
                bench_result_commit="b" * 40,
                accepted_seq=aseq,
            ),
        )


def _tree(repo: Repo, files: dict[str, bytes]) -> bytes:
    tree = Tree()
    groups: dict[str, dict[str, bytes]] = {}
    for path, data in files.items():
        head, _, rest = path.partition("/")
        if rest:
            groups.setdefault(head, {})[rest] = data
        else:
            blob = Blob.from_string(data)
            repo.object_store.add_object(blob)
            tree.add(head.encode(), 0o100644, blob.id)
    for name, sub in groups.items():
        tree.add(name.encode(), 0o040000, _tree(repo, sub))
    repo.object_store.add_object(tree)
    return tree.id


def commit_kernel(repo_path: Path, files: dict[str, bytes], message: str = "update") -> str:
    """Commit `files` (repo paths → bytes) as the whole tree of main; returns the commit id."""
    repo = (
        Repo(str(repo_path))
        if (repo_path / ".git").exists() or (repo_path / "HEAD").exists()
        else Repo.init_bare(str(repo_path), mkdir=True)
    )
    with repo:
        commit = (
            repo.get_worktree().commit(
                message=message.encode(),
                tree=_tree(repo, files),
                ref=b"refs/heads/main",
                author=b"Ada <ada@example.org>",
                committer=b"kz <kz@example.org>",
            )
            if hasattr(repo, "get_worktree")
            else repo.do_commit(
                message=message.encode(),
                tree=_tree(repo, files),
                ref=b"refs/heads/main",
                author=b"Ada <ada@example.org>",
                committer=b"kz <kz@example.org>",
            )
        )
    return str(commit.decode())


def package_files(kernel_id: str = KERNEL, **kw: Any) -> dict[str, bytes]:
    """The files of a valid package, keyed by their path in the kernel repo."""
    return {f"{kernel_id}/{path}": data for path, data in sorted(package(kernel_id, **kw).items())}
