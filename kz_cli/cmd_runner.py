"""`kz runner`: start one runner from settings (native NATS transport, or HTTP with --http)."""

from __future__ import annotations

import argparse
import asyncio
import signal
from pathlib import Path
from typing import Any

from kz_cli import aio
from kz_cli.contract import emit
from kz_cli.logs import configure_logging
from kz_events.config import Settings, load_settings
from kz_events.errors import ConfigError
from kz_events.eventlog import EventLog, LogOptions
from kz_runner.backends import get_backend
from kz_runner.core import Runner, RunnerOptions, default_runner_id
from kz_runner.http import HttpTransport
from kz_runner.native import NativeTransport
from kz_runner.transport import RunnerInfo, Transport

__all__ = ["backend_settings", "register", "run_runner"]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("runner", help="run a benchmark runner")
    parser.add_argument("--arch", action="append", help="architecture to serve (repeatable)")
    parser.add_argument("--backend", choices=["sandbox", "docker", "stub"])
    parser.add_argument("--http", action="store_true", help="use the API's runner endpoints")
    parser.add_argument("--nats-url", help="NATS URL (default KZ_NATS_URL)")
    parser.add_argument("--max-tasks", type=int, help="exit after this many tasks")
    parser.add_argument(
        "--cpu",
        type=int,
        help="the CPU its judges and their workers are pinned to (give runners sharing a host "
        "different ones; default KZ_RUNNER_CPU, else the last CPU)",
    )
    parser.set_defaults(handler=_handle)


def _handle(args: argparse.Namespace) -> int:
    settings = load_settings(config_file=args.config)
    configure_logging()
    arches = tuple(args.arch or settings.runner_arch)
    if not arches:
        raise ConfigError("KZ_RUNNER_ARCH: expected at least one architecture, e.g. cpu or sm90")
    if args.json:
        backend = args.backend or settings.runner_backend
        emit(args, {"state": "starting", "arches": list(arches), "backend": backend})
    aio.run(
        run_runner(
            settings,
            arches=arches,
            backend_name=args.backend or settings.runner_backend,
            use_http=args.http,
            nats_url=args.nats_url or settings.nats_url,
            max_tasks=args.max_tasks,
            cpu=args.cpu if args.cpu is not None else settings.runner_cpu,
        )
    )
    return 0


async def run_runner(
    settings: Settings,
    *,
    arches: tuple[str, ...],
    backend_name: str,
    use_http: bool = False,
    nats_url: str | None = None,
    max_tasks: int | None = None,
    stop: asyncio.Event | None = None,
    cpu: int | None = None,
) -> Runner:
    """Build a runner from settings and serve until SIGTERM/SIGINT (or `stop`)."""
    backend = get_backend(backend_name, **backend_settings(settings, backend_name))
    backend.check_available()  # a missing sandbox or engine stops start-up, before connecting
    info = RunnerInfo(
        runner_id=settings.runner_id or default_runner_id(),
        arches=arches,
        device=_device(arches),
        backend=backend.name,
    )
    transport: Transport
    event_log: EventLog | None = None
    if use_http:
        if not settings.runner_key:
            raise ConfigError("KZ_RUNNER_KEY: expected the runner's key for the HTTP endpoints")
        transport = HttpTransport(settings.server_url, settings.runner_key)
    else:
        if not nats_url:
            raise ConfigError("KZ_NATS_URL: expected the NATS URL for a native runner")
        log_options = LogOptions(replicas=settings.replicas)
        event_log = await EventLog.connect(nats_url, log_options, name=f"runner-{info.runner_id}")
        await event_log.ensure()
        transport = NativeTransport(
            event_log, lease_s=settings.lease_s, max_attempts=settings.max_attempts
        )
    options = RunnerOptions(
        workdir=Path(settings.runner_workdir),
        heartbeat_s=settings.heartbeat_s,
        task_timeout_s=settings.task_timeout_s,
        step_timeout_s=settings.step_timeout_s,
        cpu=cpu,
    )
    runner = Runner(info, transport, backend, options)
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await runner.run(stop, max_tasks=max_tasks)
    finally:
        await transport.close()
        if event_log is not None:
            await event_log.close()
    return runner


def backend_settings(settings: Settings, backend_name: str) -> dict[str, Any]:
    """The backend's settings from KZ_RUNNER_*: docker's image and GPUs; the sandbox's
    bubblewrap, GPUs and extra read-only paths (e.g. the Python packages a GPU board needs)."""
    chosen: dict[str, Any] = {}
    if backend_name == "docker":
        chosen["image"] = settings.runner_image
        if settings.runner_gpus is not None:
            chosen["gpus"] = settings.runner_gpus
    elif backend_name == "sandbox":
        if settings.runner_bwrap != "bwrap":
            chosen["bwrap"] = settings.runner_bwrap
        if settings.runner_gpus is not None:
            chosen["gpus"] = settings.runner_gpus
        if settings.runner_readonly:
            chosen["readonly_paths"] = tuple(Path(p) for p in settings.runner_readonly)
    return chosen


def _device(arches: tuple[str, ...]) -> str:
    import platform

    if all(arch == "cpu" for arch in arches):
        return f"cpu {platform.machine()} {platform.processor() or ''}".strip()
    return "gpu " + ",".join(arches)
