"""Hostile clients against a `kz api` process: the memory of the API and of nats-server before,
during and after each load, and what an innocent client's requests got meanwhile.

Starts an embedded NATS server, seeds the log with `--events` runner registrations (about
4 KiB each), starts `kz api` in token mode, then runs one load after another:

- `sse`: `--streams` unauthenticated `GET /api/events` from sequence 0 that read nothing for
  `--hold` seconds (then whether the server had dropped them);
- `labels`: ten registrations with 7 MiB of labels each, then `GET /api/runners`;
- `loris`: 200 connections sending a request head one byte every 0.5 s;
- `cursor`: `Last-Event-ID: 10^26` (what comes back within 3 s);
- `index_at`: 40 concurrent `GET /api/index.json?at=<distinct seq>`;
- `health`: `GET /api/health` after the event stream is deleted (last: it breaks the stack).

    python bench/hostile.py [--events 3000] [--streams 100] [--hold 20] [--json out.json]

Control requests (`GET /api/kernels`, 10 s timeout) run every 0.5 s during each load; the
table gives their count, failures, median and worst latency. Memory is VmRSS from /proc.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from kz_events.eventlog import EventLog
from kz_events.events import EventMeta, RunnerRegistered
from kz_events.server import EmbeddedServer, free_port
from kz_events.subjects import EVENTS_STREAM
from kz_testing import KzProcess, kz_argv, stack_env

MIB = 1024 * 1024
TOKEN = "bench-hostile-token"
RUNNER_KEY = "bench-hostile-runner-key"


def rss(pid: int | None) -> int:
    if pid is None:
        return 0
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


@dataclass
class Control:
    """What the innocent client's requests got during one load."""

    latencies: list[float] = field(default_factory=list)
    failures: int = 0

    def summary(self) -> dict[str, Any]:
        lat = sorted(self.latencies)
        return {
            "requests": len(lat) + self.failures,
            "failures": self.failures,
            "median_ms": round(statistics.median(lat) * 1000, 1) if lat else None,
            "max_ms": round(lat[-1] * 1000, 1) if lat else None,
        }


async def control_loop(base: str, stop: asyncio.Event, out: Control) -> None:
    async with httpx.AsyncClient(base_url=base, timeout=10) as client:
        while not stop.is_set():
            start = time.perf_counter()
            try:
                resp = await client.get("/api/kernels")
                if resp.status_code == 200:
                    out.latencies.append(time.perf_counter() - start)
                else:
                    out.failures += 1
            except httpx.HTTPError:
                out.failures += 1
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(0.5):
                    await stop.wait()


@dataclass
class Stack:
    tmp: Path
    nats: EmbeddedServer
    api: KzProcess
    port: int

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def memory(self) -> dict[str, float]:
        return {
            "api_mib": round(rss(self.api.pid) / MIB, 1),
            "nats_mib": round(rss(self.nats.pid) / MIB, 1),
        }


async def seed(url: str, events: int) -> None:
    elog = await EventLog.connect(url, name="bench-seed")
    try:
        await elog.ensure()
        labels = {f"label{i:02d}": "x" * 240 for i in range(16)}
        for start in range(0, events, 50):
            batch = []
            for i in range(start, min(start + 50, events)):
                meta = EventMeta.now(f"seed-{i}")
                batch.append(
                    RunnerRegistered(
                        **meta.fields(),
                        runner_id=f"seed-{i}",
                        arches=["cpu"],
                        device="bench",
                        labels=labels,
                    )
                )
            await asyncio.gather(*(elog.append(e) for e in batch))
    finally:
        await elog.close()


async def measured(
    stack: Stack, name: str, load: Callable[[], Awaitable[dict[str, Any]]], settle_s: float
) -> dict[str, Any]:
    before = stack.memory()
    stop, control = asyncio.Event(), Control()
    controls = asyncio.create_task(control_loop(stack.base, stop, control))
    result = await load()
    during = result.pop("_during", stack.memory())
    stop.set()
    await controls
    await asyncio.sleep(settle_s)
    after = stack.memory()
    alive = stack.api.alive
    row = {"load": name, "before": before, "during": during, "after": after}
    return {**row, "control": control.summary(), "api_alive": alive, **result}


async def _status_of(reader: asyncio.StreamReader, timeout_s: float) -> tuple[int, bytes]:
    data = b""
    with contextlib.suppress(TimeoutError, ConnectionError):
        async with asyncio.timeout(timeout_s):
            while b"\r\n\r\n" not in data and (chunk := await reader.read(4096)):
                data += chunk
    head = data.split(b"\r\n", 1)[0].split()
    return (int(head[1]) if len(head) > 1 else 0), data


async def _ended(reader: asyncio.StreamReader, timeout_s: float) -> bool:
    """Whether the server ended the connection: what it sent is read out, then end of file."""
    try:
        async with asyncio.timeout(timeout_s):
            while await reader.read(65536):
                pass
    except TimeoutError:
        return False
    except ConnectionError:
        return True
    return True


async def sse_load(stack: Stack, streams: int, hold_s: float) -> dict[str, Any]:
    conns = []
    for _ in range(streams):
        # A small receive buffer, as a client on a slow link has: it reads the head, then stops.
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", stack.port))
        reader, writer = await asyncio.open_connection(sock=sock, limit=4096)
        writer.write(b"GET /api/events HTTP/1.1\r\nHost: b\r\nLast-Event-ID: 0\r\n\r\n")
        conns.append((reader, writer))
    statuses = [(await _status_of(r, 10))[0] for r, _ in conns]
    peak = stack.memory()
    deadline = time.monotonic() + hold_s
    while time.monotonic() < deadline:
        await asyncio.sleep(1)
        now = stack.memory()
        peak = {k: max(peak[k], now[k]) for k in peak}
    dropped = sum(await asyncio.gather(*(_ended(r, 5) for r, _ in conns)))
    for _, writer in conns:
        writer.close()
    codes = {str(s): statuses.count(s) for s in set(statuses)}
    return {"_during": peak, "answers": codes, "dropped_by_server": dropped}


async def labels_load(stack: Stack) -> dict[str, Any]:
    labels = {f"l{i}": "y" * (1024 * 1024) for i in range(7)}
    body = json.dumps({"runner_id": "big", "arches": ["cpu"], "labels": labels}).encode()
    codes: list[int] = []
    async with httpx.AsyncClient(base_url=stack.base, timeout=60) as client:
        peak = stack.memory()
        for i in range(10):
            resp = await client.post(
                "/api/runner/register",
                content=body.replace(b'"big"', f'"big{i}"'.encode()),
                headers={"X-Runner-Key": RUNNER_KEY, "Content-Type": "application/json"},
            )
            codes.append(resp.status_code)
            now = stack.memory()
            peak = {k: max(peak[k], now[k]) for k in peak}
        runners = await client.get("/api/runners")
    return {
        "_during": peak,
        "answers": {str(c): codes.count(c) for c in set(codes)},
        "runners_bytes": len(runners.content),
    }


async def _loris(port: int, stop: asyncio.Event) -> bool:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(b"GET /api/kernels HTTP/1.1\r\nHost: b\r\nX-Slow: ")
        while not stop.is_set() and not reader.at_eof():
            writer.write(b"a")
            await writer.drain()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(0.5):
                    await reader.read(1)
        return reader.at_eof()
    except ConnectionError:
        return True
    finally:
        writer.close()


async def loris_load(stack: Stack, hold_s: float) -> dict[str, Any]:
    stop = asyncio.Event()
    tasks = [asyncio.create_task(_loris(stack.port, stop)) for _ in range(200)]
    await asyncio.sleep(hold_s)
    during = stack.memory()
    stop.set()
    cut = sum(await asyncio.gather(*tasks))
    return {"_during": during, "cut_off_by_server": cut, "of": 200}


async def cursor_load(stack: Stack) -> dict[str, Any]:
    reader, writer = await asyncio.open_connection("127.0.0.1", stack.port)
    writer.write(
        b"GET /api/events HTTP/1.1\r\nHost: b\r\nLast-Event-ID: "
        + str(10**26).encode()
        + b"\r\nConnection: close\r\n\r\n"
    )
    status, data = await _status_of(reader, 3)
    with contextlib.suppress(TimeoutError, ConnectionError):
        async with asyncio.timeout(3):
            data += await reader.read(65536)
    writer.close()
    body = data.partition(b"\r\n\r\n")[2]
    return {"status": status, "body_3s": body[:200].decode("latin-1")}


async def index_at_load(stack: Stack, last: int) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=stack.base, timeout=120) as client:
        start = time.perf_counter()
        peak = stack.memory()

        async def one(at: int) -> int:
            try:
                return (await client.get(f"/api/index.json?at={at}")).status_code
            except httpx.HTTPError:
                return 0

        async def sample() -> None:
            nonlocal peak
            while True:
                await asyncio.sleep(0.5)
                now = stack.memory()
                peak = {k: max(peak[k], now[k]) for k in peak}

        sampler = asyncio.create_task(sample())
        codes = await asyncio.gather(*(one(last - i * 7) for i in range(40)))
        sampler.cancel()
        elapsed = time.perf_counter() - start
    return {
        "_during": peak,
        "answers": {str(c): codes.count(c) for c in set(codes)},
        "seconds": round(elapsed, 1),
    }


async def health_load(stack: Stack) -> dict[str, Any]:
    elog = await EventLog.connect(stack.nats.url, name="bench-delete")
    try:
        await elog.js.delete_stream(EVENTS_STREAM)
    finally:
        await elog.close()
    async with httpx.AsyncClient(base_url=stack.base, timeout=30) as client:
        resp = await client.get("/api/health")
    return {"status": resp.status_code, "body": resp.text[:160]}


def start_stack(tmp: Path, events: int) -> Stack:
    nats = EmbeddedServer(tmp / "nats")
    nats.start()
    asyncio.run(seed(nats.url, events))
    port = free_port()
    env = stack_env(
        tmp,
        nats.url,
        port,
        KZ_SUBMITTER_TOKENS_JSON=json.dumps({TOKEN: "alice"}),
        KZ_RUNNER_KEYS_JSON=json.dumps({RUNNER_KEY: ["cpu"]}),
        KZ_LEASE_SECRET="bench-hostile-lease-secret-0123456789",
    )
    api = KzProcess("api", kz_argv("api"), env, tmp / "api.log").start()
    api.wait_healthy(f"http://127.0.0.1:{port}", 120)
    return Stack(tmp, nats, api, port)


async def run_loads(stack: Stack, args: argparse.Namespace) -> list[dict[str, Any]]:
    async with httpx.AsyncClient(base_url=stack.base) as client:
        last = (await client.get("/api/health")).json()["nats"]["stream_seq"]
    rows = [
        await measured(stack, "sse", lambda: sse_load(stack, args.streams, args.hold), 10),
        await measured(stack, "labels", lambda: labels_load(stack), 5),
        await measured(stack, "loris", lambda: loris_load(stack, 15), 5),
        await measured(stack, "cursor", lambda: cursor_load(stack), 1),
        await measured(stack, "index_at", lambda: index_at_load(stack, last), 5),
    ]
    rows.append(await measured(stack, "health", lambda: health_load(stack), 0))
    return rows


def _fmt(mem: dict[str, float]) -> str:
    return f"{mem['api_mib']:>7.1f} / {mem['nats_mib']:>7.1f}"


def print_table(rows: list[dict[str, Any]]) -> None:
    print("memory MiB as api / nats-server; control = GET /api/kernels every 0.5 s during the load")
    print(f"{'load':<9} {'before':>17} {'during (peak)':>17} {'after':>17}  control  outcome")
    for row in rows:
        ctl = row["control"]
        extra = {
            k: v
            for k, v in row.items()
            if k not in {"load", "before", "during", "after", "control"}
        }
        print(
            f"{row['load']:<9} {_fmt(row['before'])} {_fmt(row['during'])} {_fmt(row['after'])}"
            f"  {ctl['requests'] - ctl['failures']}/{ctl['requests']} ok,"
            f" median {ctl['median_ms']} ms, max {ctl['max_ms']} ms  {json.dumps(extra)}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=3000)
    parser.add_argument("--streams", type=int, default=100)
    parser.add_argument("--hold", type=float, default=40.0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="kz-bench-hostile-") as tmp:
        stack = start_stack(Path(tmp), args.events)
        try:
            rows = asyncio.run(run_loads(stack, args))
        finally:
            stack.api.stop(15)
            stack.nats.stop()
    print_table(rows)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    print(f"({' '.join(sys.argv)}, in {Path.cwd()})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
