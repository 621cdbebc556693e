"""`kz up`: the whole platform in one process — embedded NATS, the API, the projectors and a
sandbox runner for this host — with the example kernels and a few real variants as a demo.

Ctrl-C stops everything cleanly; running it again resumes from the same store. Nothing it starts
outlives it: the embedded nats-server is tied to it (kz_events.lifeline), and its runner keeps
one id per data dir, so a `kz up` that was killed and started again is still one runner. A
busy port is one line and exit 2, before anything starts.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import shutil
import signal
import socket
import sys
from datetime import UTC, datetime
from pathlib import Path

import httpx
import msgspec
import uvicorn

from kz_api import create_app
from kz_api.http_server import listen_socket, server_config
from kz_cli import aio
from kz_cli.contract import document
from kz_cli.demo import EXAMPLES, submit_demo
from kz_cli.demo_problems import (
    import_problem_sets,
    submit_problem_candidates,
    torch_available,
)
from kz_cli.local import API_URL_FILE, URL_FILE, forget_local_url, remember_local_url
from kz_cli.logs import configure_logging
from kz_events.config import Settings, check_exposure, load_settings
from kz_events.eventlog import EventLog, LogOptions
from kz_events.events import KernelImported
from kz_events.server import EmbeddedServer
from kz_projector.importer import import_path
from kz_projector.service import Projectors
from kz_runner.backends import get_backend
from kz_runner.core import Runner, RunnerOptions, default_runner_id
from kz_runner.native import NativeTransport
from kz_runner.transport import RunnerInfo

__all__ = [
    "RUNNER_ID_FILE",
    "banner",
    "configure_logging",
    "local_runner_id",
    "register",
    "run_stack",
]

log = logging.getLogger("kz.up")

RUNNER_ID_FILE = "runner.id"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("up", help="run the whole platform locally")
    parser.add_argument("--port", type=int, help="HTTP port (default KZ_PORT or 8000)")
    parser.add_argument("--data-dir", type=Path, help="store directory (default .kz/)")
    parser.add_argument("--no-demo", action="store_true", help="start empty")
    parser.add_argument(
        "--backend",
        default="sandbox",
        choices=["sandbox", "stub"],
        help="the local runner's backend",
    )
    parser.set_defaults(handler=_handle)


def _handle(args: argparse.Namespace) -> int:
    settings = load_settings(config_file=args.config)
    changes: dict[str, object] = {}
    if args.port:
        changes["port"] = args.port
    if args.data_dir:
        changes["data_dir"] = args.data_dir
        if settings.kernel_repo_path == Path("kernel_data"):
            changes["kernel_repo_path"] = args.data_dir / "kernel_data"
    settings = msgspec.structs.replace(settings, **changes)
    configure_logging()
    aio.run(run_stack(settings, demo=not args.no_demo, backend=args.backend, as_json=args.json))
    return 0


def kz_command() -> str:
    """How to run `kz` from this shell: its name when on PATH, else its path in the venv."""
    beside = Path(sys.executable).parent / "kz"
    if shutil.which("kz") or not beside.is_file():
        return "kz"
    return str(beside)


def banner(base_url: str, nats_url: str, url_file: Path) -> str:
    kz = kz_command()
    path_hint = ""
    if kz != "kz":
        path_hint = f"  PATH:    kz is {kz}; export PATH={Path(kz).parent}:$PATH\n"
    return (
        f"\nkernel zoo is up: {base_url}/webui/\n"
        f"  submit:  kz submit DIR --server {base_url}   (a failed run: kz logs ID)\n"
        "  events:  kz events tail   (also kz audit, kz index: NATS at "
        f"{nats_url}, written to {url_file})\n"
        f"{path_hint}"
        "  stop:    Ctrl-C\n"
    )


async def run_stack(
    settings: Settings,
    *,
    demo: bool = True,
    backend: str = "sandbox",
    stop: asyncio.Event | None = None,
    as_json: bool = False,
) -> None:
    """Run every part until `stop` is set (or SIGINT, SIGTERM, SIGHUP); `as_json`: say it is
    up as one JSON document on stdout (kz up --json) instead of the banner.

    An API on an address other than loopback refuses to start without runner keys, submitter
    tokens (or open submissions chosen explicitly) and a lease secret (`check_exposure`)."""
    check_exposure(settings)
    sock = listen_socket(settings.host, settings.port)  # first: a busy port starts nothing
    try:
        await _run_stack(settings, sock, demo=demo, backend=backend, stop=stop, as_json=as_json)
    finally:
        sock.close()


async def _run_stack(
    settings: Settings,
    sock: socket.socket,
    *,
    demo: bool,
    backend: str,
    stop: asyncio.Event | None,
    as_json: bool = False,
) -> None:
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # HUP: its terminal closed
        loop.add_signal_handler(sig, stop.set)
    server: EmbeddedServer | None = None
    url = settings.nats_url
    if url is None:
        # Its own process group: the terminal's SIGINT reaches only us, and we stop it last,
        # after every part that talks to it has closed. Should we die without stopping it,
        # it gets SIGTERM from the kernel (kz_events.lifeline).
        server = EmbeddedServer(
            Path(settings.data_dir) / "nats",
            sync_always=settings.nats_sync_always,
            own_session=True,
        )
    try:
        if server is not None:
            await asyncio.to_thread(server.start)
            url = server.url
            remember_local_url(Path(settings.data_dir), url)
        assert url is not None
        await _serve_parts(
            msgspec.structs.replace(settings, nats_url=url), sock, demo, backend, stop, as_json
        )
    finally:
        if server is not None:
            forget_local_url(Path(settings.data_dir))
            await asyncio.to_thread(server.stop)


async def _serve_parts(
    settings: Settings,
    sock: socket.socket,
    demo: bool,
    backend: str,
    stop: asyncio.Event,
    as_json: bool = False,
) -> None:
    """The API, the projectors and the runner on the log at `settings.nats_url`."""
    url = str(settings.nats_url)
    elog = await EventLog.connect(url, LogOptions(replicas=settings.replicas), name="kz-up")
    tasks: list[asyncio.Task[object]] = []
    projectors: Projectors | None = None
    try:
        await elog.ensure()
        api = uvicorn.Server(
            server_config(
                create_app(settings, event_log=elog), settings, log_level="warning", lifespan="on"
            )
        )
        projectors = Projectors(elog, settings)
        runner = _local_runner(elog, settings, backend)
        tasks = [
            asyncio.create_task(api.serve(sockets=[sock]), name="api"),
            asyncio.create_task(projectors.run(), name="projectors"),
            asyncio.create_task(runner.run(stop), name="runner"),
        ]
        base_url = f"http://{settings.host}:{settings.port}"
        await _wait_started(api)
        remember_local_url(Path(settings.data_dir), base_url, API_URL_FILE)
        if demo:
            await _demo(elog, base_url)
        if as_json:
            ready = {"state": "ready", "url": base_url, "webui": f"{base_url}/webui/"}
            ready |= {"nats_url": url, "mcp_url": f"{base_url}/mcp"}
            print(json.dumps(document("up", ready)), flush=True)
        else:
            print(banner(base_url, url, Path(settings.data_dir) / URL_FILE), flush=True)
        await _until_stopped(stop, tasks)
    finally:
        stop.set()
        for task in tasks:
            if task.get_name() == "api":
                continue
            task.cancel()
        if tasks:
            api.should_exit = True
            await asyncio.gather(*tasks, return_exceptions=True)
            await runner.transport.close()
        if projectors is not None:
            projectors.close()
        await elog.close()
        forget_local_url(Path(settings.data_dir), API_URL_FILE)


def local_runner_id(settings: Settings) -> str:
    """`KZ_RUNNER_ID`, else the id this data dir's runner has always had (made on its first
    start): a `kz up` killed without deregistering and started again is the same runner, not a
    second one the health check would count until the first goes quiet."""
    if settings.runner_id:
        return settings.runner_id
    path = Path(settings.data_dir) / RUNNER_ID_FILE
    if path.is_file() and (known := path.read_text().strip()):
        return known
    made = f"local-{default_runner_id()}"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(made + "\n")
    return made


def _local_runner(elog: EventLog, settings: Settings, backend: str) -> Runner:
    info = RunnerInfo(
        runner_id=local_runner_id(settings),
        arches=("cpu",),
        device="cpu (this host)",
        backend=backend,
    )
    options = RunnerOptions(
        workdir=Path(settings.data_dir) / "work",
        heartbeat_s=settings.heartbeat_s,
        task_timeout_s=settings.task_timeout_s,
        step_timeout_s=settings.step_timeout_s,
        poll_s=1.0,
        cpu=settings.runner_cpu,
    )
    transport = NativeTransport(elog, lease_s=settings.lease_s, max_attempts=settings.max_attempts)
    return Runner(info, transport, get_backend(backend), options)


async def _wait_started(api: uvicorn.Server) -> None:
    for _ in range(300):
        if api.started:
            return
        await asyncio.sleep(0.05)
    raise RuntimeError("the API did not start within 15 s")


async def _until_stopped(stop: asyncio.Event, tasks: list[asyncio.Task[object]]) -> None:
    waiter = asyncio.create_task(stop.wait())
    done, _ = await asyncio.wait([waiter, *tasks], return_when=asyncio.FIRST_COMPLETED)
    waiter.cancel()
    for task in done:
        if task is not waiter and not task.cancelled() and task.exception() is not None:
            raise task.exception()  # type: ignore[misc]


async def _demo(elog: EventLog, base_url: str) -> None:
    """Import the examples and submit the variants, once per store."""
    async for _, event in elog.replay(1, subject_filter="kz.ev.kernel.*.*.imported"):
        if isinstance(event, KernelImported):
            log.info("demo content already present: resuming")
            return
    imported = await import_path(
        elog, EXAMPLES, submitter="examples", clock=lambda: datetime.now(UTC)
    )
    log.info("demo: imported %d example kernels", len(imported))
    try:
        ids = await asyncio.to_thread(submit_demo, base_url)
    except (OSError, httpx.HTTPError) as exc:
        log.warning("demo: submitting the variants failed (%s); the stack runs on", exc)
        return
    log.info("demo: submitted %d variants", len(ids))
    await _demo_problem_sets(elog, base_url)


async def _demo_problem_sets(elog: EventLog, base_url: str) -> None:
    """Boards imported from the example problem sets, judged on this CPU (where torch is)."""
    if not torch_available():
        log.info("demo: torch is not installed, so the imported problem sets are left out")
        return
    boards = await import_problem_sets(elog, clock=lambda: datetime.now(UTC))
    try:
        ids = await asyncio.to_thread(submit_problem_candidates, base_url, boards)
    except (OSError, httpx.HTTPError) as exc:
        log.warning("demo: submitting to the imported boards failed (%s)", exc)
        return
    log.info("demo: imported %d problem-set boards, submitted %d candidates", len(boards), len(ids))
