"""Throughput and latency of the HTTP API against a bare Litestar endpoint in the same process.

Starts an embedded NATS server, seeds 10,000 kernels, serves the app with uvicorn (plus
`GET /bench/const`, a bare handler returning a constant), then measures with `wrk` when it is
installed (else an asyncio httpx load generator): GET /api/kernels, GET /api/index.json, and
POST /api/submissions (always httpx: every request needs its own package).

    python bench/api.py [--kernels 10000] [--duration 5] [--connections 32] [--submissions 300]

With `--cpu`, it measures instead the CPU one accepted `POST /api/submissions` costs a `kz api`
process (from /proc, user + system, all threads): an embedded NATS server, four imported kernels
with judge bundles (as after their first commits), then `--rounds` rounds of `--submissions`
distinct small packages sent as prepared requests over two keep-alive connections, so the load
generator leaves the cores to the server. Compare CPU, not wall time, on a shared machine.

    python bench/api.py --cpu [--submissions 400] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import io
import logging
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import httpx
import uvicorn
from litestar import get

from kz_api import create_app
from kz_events.config import Settings
from kz_events.eventlog import EventLog
from kz_events.events import KernelImported
from kz_events.server import EmbeddedServer, free_port
from kz_events.subjects import PACKAGES_BUCKET, judge_key
from kz_package import pack_directory
from kz_testing import (
    KzProcess,
    RawClient,
    kz_argv,
    package_files,
    package_tarball,
    process_cpu_s,
    stack_env,
    stop_all,
    submission_request,
    wait_healthy,
)

DESC = """schema_version: 1
kernel_id: {kid}
title: Bench kernel
description: A kernel for the benchmark.
authors: [Bench <bench@example.org>]
language: python
metric: {{name: latency, unit: us, better: lower}}
workloads: [{{name: w}}]
"""


@dataclass
class Figures:
    name: str
    rps: float
    p50_ms: float
    p99_ms: float


def package(tmp: Path, kid: str, salt: str) -> bytes:
    root = tmp / salt
    (root / ".kernel_package").mkdir(parents=True)
    (root / ".kernel_package" / "desc.yaml").write_text(DESC.format(kid=kid))
    (root / ".kernel_package" / "bench_result.yaml").write_text(
        f"schema_version: 1\nkernel_id: {kid}\n"
    )
    (root / ".kernel_package" / "benchmark.py").write_text("print('bench')\n")
    (root / ".kernel_package" / "build_test_env.py").write_text("print('ok')\n")
    (root / "src").mkdir()
    (root / "src" / "k.py").write_text(f"SALT = {salt!r}\n")
    out = io.BytesIO()
    pack_directory(root, out)
    return out.getvalue()


async def seed(url: str, count: int, tmp: Path) -> None:
    elog = await EventLog.connect(url)
    await elog.ensure()
    data = package(tmp, "cpu/Bench/seed/fp32/k0", "seed")
    digest = hashlib.sha256(data).hexdigest()
    await elog.put_object(PACKAGES_BUCKET, digest, data)
    now = datetime.now(UTC)

    def imported(i: int) -> KernelImported:
        kid = f"sm{80 + i % 20}/Op{i % 7}/sub{i % 5}/fp{8 * (1 + i % 4)}/k{i}"
        return KernelImported(
            event_id=str(uuid.uuid4()),
            occurred_at=now,
            actor="bench",
            kernel_id=kid,
            package_digest=digest,
            submitter_id="bench",
        )

    for start in range(0, count, 500):
        await asyncio.gather(
            *(elog.append(imported(i)) for i in range(start, min(count, start + 500)))
        )
    await elog.close()


def serve(settings: Settings, port: int) -> tuple[uvicorn.Server, threading.Thread]:
    app = create_app(settings)

    @get("/bench/const", sync_to_thread=False)
    def const() -> dict[str, str]:
        return {"ok": "constant"}

    app.register(const)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        if not thread.is_alive():
            raise SystemExit("the server did not start")
        time.sleep(0.05)
    return server, thread


def _ms(text: str) -> float:
    value, unit = re.fullmatch(r"([\d.]+)(us|ms|s)", text.strip()).groups()  # type: ignore[union-attr]
    return float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]


def wrk(name: str, url: str, duration: int, connections: int, headers: dict[str, str]) -> Figures:
    extra = [arg for k, v in headers.items() for arg in ("-H", f"{k}: {v}")]
    out = subprocess.run(
        ["wrk", "-t1", f"-c{connections}", f"-d{duration}s", "--latency", *extra, url],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    p50 = _ms(re.search(r"\s50%\s+(\S+)", out).group(1))  # type: ignore[union-attr]
    p99 = _ms(re.search(r"\s99%\s+(\S+)", out).group(1))  # type: ignore[union-attr]
    if "Non-2xx" in out and "If-None-Match" not in headers:
        raise SystemExit(f"{name}: non-2xx answers under load:\n{out}")
    return Figures(name, rps, p50, p99)


async def httpx_load(
    name: str, url: str, duration: int, connections: int, headers: dict[str, str]
) -> Figures:
    latencies: list[float] = []
    deadline = time.perf_counter() + duration
    limits = httpx.Limits(max_connections=connections)
    async with httpx.AsyncClient(limits=limits, headers=headers) as client:

        async def worker() -> None:
            while time.perf_counter() < deadline:
                started = time.perf_counter()
                resp = await client.get(url)
                if resp.status_code not in (200, 304):
                    resp.raise_for_status()
                latencies.append(time.perf_counter() - started)

        began = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(connections)))
        elapsed = time.perf_counter() - began
    return _figures(name, latencies, elapsed)


def _figures(name: str, latencies: list[float], elapsed: float) -> Figures:
    cuts = statistics.quantiles(latencies, n=100)
    return Figures(name, len(latencies) / elapsed, cuts[49] * 1000, cuts[98] * 1000)


async def submissions(base: str, bodies: list[bytes], concurrency: int) -> Figures:
    latencies: list[float] = []
    queue: asyncio.Queue[bytes] = asyncio.Queue()
    for body in bodies:
        queue.put_nowait(body)
    async with httpx.AsyncClient(base_url=base, timeout=30) as client:

        async def worker() -> None:
            while not queue.empty():
                data = queue.get_nowait()
                started = time.perf_counter()
                resp = await client.post(
                    "/api/submissions",
                    files={"package": ("p.tar.gz", data, "application/gzip")},
                    data={"kernel_id": "cpu/Bench/submit/fp32/k"},
                    headers={"X-Submitter-Id": "bench"},
                )
                latencies.append(time.perf_counter() - started)
                if resp.status_code != 202:
                    raise SystemExit(f"submission refused: {resp.status_code} {resp.text}")

        began = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        elapsed = time.perf_counter() - began
    return _figures("POST /api/submissions", latencies, elapsed)


CPU_KERNELS = [f"cpu/Bench/api/fp32/k{i}" for i in range(4)]


async def send_all(port: int, requests: list[bytes], connections: int = 2) -> None:
    """Send prepared requests over keep-alive connections; each must be answered 202."""
    queue = list(reversed(requests))

    async def connection() -> None:
        client = await RawClient.open(port)
        try:
            while queue:
                status, body = await client.send(queue.pop())
                if status != 202:
                    raise SystemExit(f"submission refused: {status} {body[:300]!r}")
        finally:
            await client.close()

    await asyncio.gather(*(connection() for _ in range(connections)))


async def seed_judged_kernels(url: str) -> None:
    """Import the CPU bench's kernels with their packages and judge bundles stored."""
    elog = await EventLog.connect(url)
    await elog.ensure()
    for kid in CPU_KERNELS:
        files = package_files(kid)
        data = package_tarball(files)
        digest = hashlib.sha256(data).hexdigest()
        await elog.put_object(PACKAGES_BUCKET, digest, data)
        judge = {path: blob for path, blob in files.items() if not path.startswith("src/")}
        await elog.put_object(PACKAGES_BUCKET, judge_key(kid), package_tarball(judge))
        await elog.append(
            KernelImported(
                event_id=str(uuid.uuid4()),
                occurred_at=datetime.now(UTC),
                actor="bench",
                kernel_id=kid,
                package_digest=digest,
                submitter_id="bench",
            )
        )
    await elog.close()


def cpu_per_submission(submissions: int, rounds: int) -> int:
    """Print the API process's CPU ms per accepted submission, per round and the median."""
    with (
        tempfile.TemporaryDirectory(prefix="kz-bench-") as tmp_dir,
        EmbeddedServer(Path(tmp_dir) / "nats", sync_always=True) as nats,
    ):
        tmp, port = Path(tmp_dir), free_port()
        asyncio.run(seed_judged_kernels(nats.url))
        env = stack_env(
            tmp,
            nats.url,
            port,
            KZ_MAX_OPEN_SUBMISSIONS="1000000",
            KZ_RESUBMIT_LIMIT="0",  # throughput, not the resubmission rate, is measured
            KZ_LEASE_SECRET="bench-lease-secret-0123456789abcdef",
        )
        api = KzProcess("api", kz_argv("api"), env, tmp / "api.log").start()
        try:
            wait_healthy(f"http://127.0.0.1:{port}", 60.0, [api])
            host, warm = f"127.0.0.1:{port}", 50
            requests = [
                submission_request(
                    host,
                    CPU_KERNELS[i % 4],
                    package_tarball(package_files(CPU_KERNELS[i % 4], salt=f"s{i}")),
                    f"bench{i % 4}",
                )
                for i in range(warm + submissions * rounds)
            ]
            asyncio.run(send_all(port, requests[:warm]))
            pid, nats_pid, api_ms, nats_ms = api.pid or 0, nats.pid or 0, [], []
            for done in range(warm, len(requests), submissions):
                api_before, nats_before = process_cpu_s(pid), process_cpu_s(nats_pid)
                asyncio.run(send_all(port, requests[done : done + submissions]))
                api_ms.append((process_cpu_s(pid) - api_before) * 1000 / submissions)
                nats_ms.append((process_cpu_s(nats_pid) - nats_before) * 1000 / submissions)
                print(f"round: api {api_ms[-1]:.2f} ms, nats-server {nats_ms[-1]:.2f} ms")
        finally:
            stop_all([api])
    print(
        f"CPU ms per submission (median of {rounds} x {submissions}): "
        f"api {statistics.median(api_ms):.2f}, nats-server {statistics.median(nats_ms):.2f}"
    )
    return 0


def main() -> int:
    logging.getLogger("httpx").setLevel(logging.WARNING)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", type=int, default=10_000)
    parser.add_argument("--duration", type=int, default=5)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--submissions", type=int, default=300)
    parser.add_argument("--submit-concurrency", type=int, default=1)
    parser.add_argument("--cpu", action="store_true", help="API CPU per submission instead")
    parser.add_argument("--rounds", type=int, default=3, help="with --cpu")
    args = parser.parse_args()
    if args.cpu:
        return cpu_per_submission(args.submissions, args.rounds)
    with (
        tempfile.TemporaryDirectory(prefix="kz-bench-") as tmp_dir,
        EmbeddedServer(Path(tmp_dir) / "nats", sync_always=True) as nats,
    ):
        tmp = Path(tmp_dir)
        print(f"seeding {args.kernels} kernels ...", flush=True)
        asyncio.run(seed(nats.url, args.kernels, tmp))
        port = free_port()
        settings = Settings(
            nats_url=nats.url,
            data_dir=tmp / "data",
            kernel_repo_path=tmp / "repo",
            max_open_submissions=1_000_000,
        )
        server, thread = serve(settings, port)
        base = f"http://127.0.0.1:{port}"
        try:
            load = wrk if shutil.which("wrk") else None
            etag = httpx.get(base + "/api/index.json").headers["etag"]
            targets: list[tuple[str, str, dict[str, str]]] = [
                ("GET /bench/const (bare)", "/bench/const", {}),
                ("GET /api/kernels", "/api/kernels", {}),
                ("GET /api/kernels?arch=sm90", "/api/kernels?arch=sm90&sort=-id", {}),
                ("GET /api/index.json", "/api/index.json", {}),
                ("GET /api/index.json gzip", "/api/index.json", {"Accept-Encoding": "gzip"}),
                ("GET /api/index.json 304", "/api/index.json", {"If-None-Match": etag}),
            ]
            figures = []
            for name, path, headers in targets:
                url = base + path
                if load is not None:
                    figures.append(load(name, url, args.duration, args.connections, headers))
                else:
                    run = httpx_load(name, url, args.duration, args.connections, headers)
                    figures.append(asyncio.run(run))
            bodies = [
                package(tmp / "subs", "cpu/Bench/submit/fp32/k", f"s{i}")
                for i in range(args.submissions)
            ]
            figures.append(asyncio.run(submissions(base, bodies, args.submit_concurrency)))
        finally:
            server.should_exit = True
            thread.join(30)
    bare = figures[0].rps
    generator = "wrk" if shutil.which("wrk") else "httpx"
    print(
        f"\nload generator: {generator} (GETs, {args.connections} connections), "
        f"httpx x{args.submit_concurrency} (POSTs); {args.kernels} kernels"
    )
    print(f"{'endpoint':<28}{'req/s':>10}{'p50 ms':>10}{'p99 ms':>10}{'bare/this':>11}")
    for fig in figures:
        print(
            f"{fig.name:<28}{fig.rps:>10.0f}{fig.p50_ms:>10.2f}{fig.p99_ms:>10.2f}"
            f"{bare / fig.rps:>11.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
