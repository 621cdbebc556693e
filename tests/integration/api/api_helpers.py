"""Helpers of the API suite: kernel packages as real tarballs and a handle on the running app."""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from litestar.testing import AsyncTestClient

from kz_api.context import ApiContext
from kz_events.config import Settings
from kz_events.eventlog import EventLog
from kz_events.server import EmbeddedServer
from kz_package import pack_directory

KERNEL = "cpu/Norm/RMSNorm/fp32/numpy_ref"
SECRET = b"test-lease-secret-0123456789abcdef"

DESC = """schema_version: 1
kernel_id: {kernel_id}
title: RMSNorm reference
description: Root-mean-square normalisation in numpy.
authors: [Ada <ada@example.org>]
language: python
metric: {{name: latency, unit: us, better: {better}}}
workloads:
  - name: small
    params: {{rows: 4, cols: 64}}
"""


def write_package(
    root: Path,
    kernel_id: str = KERNEL,
    *,
    better: str = "lower",
    benchmark: str = "print(1)\n",
    src: str = "x = 1\n",
) -> Path:
    """A valid package directory for `kernel_id` at `root`."""
    meta = root / ".kernel_package"
    meta.mkdir(parents=True, exist_ok=True)
    (meta / "desc.yaml").write_text(DESC.format(kernel_id=kernel_id, better=better))
    (meta / "bench_result.yaml").write_text(f"schema_version: 1\nkernel_id: {kernel_id}\n")
    (meta / "build_test_env.py").write_text("print('ok')\n")
    (meta / "benchmark.py").write_text(benchmark)
    (root / "src").mkdir(exist_ok=True)
    (root / "src" / "kernel.py").write_text(src)
    return root


def tarball(tmp: Path, name: str = "pkg", **kw: Any) -> bytes:
    """The gzip tarball of a fresh valid package."""
    root = write_package(tmp / name, **kw)
    out = io.BytesIO()
    pack_directory(root, out)
    return out.getvalue()


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
