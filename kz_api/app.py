"""The app factory: `create_app(settings)` builds the Litestar app without side effects; its
lifespan connects to NATS (or starts the embedded server), ensures the log, folds the read
models in the background until shutdown.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import anyio.to_thread
import nats.errors
from litestar import Litestar
from litestar.config.cors import CORSConfig
from litestar.datastructures import State
from litestar.di import Provide
from litestar.enums import ScopeType
from litestar.openapi import OpenAPIConfig
from litestar.openapi.plugins import JsonRenderPlugin, YamlRenderPlugin
from litestar.response.redirect import ASGIRedirectResponse
from litestar.static_files import create_static_files_router
from litestar.types import ASGIApp, Receive, Scope, Send

from kz_api.body_limit import body_limits
from kz_api.context import ApiContext
from kz_api.controllers import (
    EditsController,
    EventsController,
    KernelsController,
    RunnerController,
    SubmissionsController,
    SystemController,
)
from kz_api.controllers.boards import BoardsController
from kz_api.controllers.commits import CommitsController
from kz_api.controllers.exports import ExportController
from kz_api.controllers.runner import RunnersController
from kz_api.docs_page import OfflineDocsPlugin
from kz_api.errors import error_response
from kz_api.leases import LeaseSigner, lease_secret_from_env
from kz_api.live_feed import EventHub
from kz_api.mcp_mount import mcp_mount
from kz_api.metrics import metrics_middleware
from kz_api.readmodel import ReadModels
from kz_events.aio import stop_tasks
from kz_events.config import Settings
from kz_events.errors import LogUnavailable
from kz_events.eventlog import EventLog, LogOptions
from kz_events.server import EmbeddedServer
from kz_events.subjects import EVENTS_SUBJECTS, LIVE_STREAM, LIVE_SUBJECTS
from kz_projector.index import digest_needed, with_facts
from kz_projector.index_writer import facts_of
from kz_projector.packages import ObjectStorePackages, PackageSource

__all__ = ["WEBUI_DIR", "create_app"]

log = logging.getLogger(__name__)

WEBUI_DIR = Path(__file__).resolve().parent.parent / "webui"
CATCH_UP_S = 120.0
RESUME_S = 1.0
JSON_BODY_BYTES = 1024 * 1024


def _provide_ctx(state: State) -> ApiContext:
    ctx = state.get("ctx")
    if not isinstance(ctx, ApiContext):
        raise RuntimeError("the API context is not ready: the lifespan has not run")
    return ctx


async def _fold_events(
    log_: EventLog, models: ReadModels, packages: PackageSource, hub: EventHub
) -> None:
    async for seq, event in log_.subscribe(EVENTS_SUBJECTS, models.seq + 1, screen=models.screen):
        digest = digest_needed(models.index, event)
        if digest is not None:
            with_facts(models.index, digest, await facts_of(packages, digest))
        models.apply(seq, event)
        hub.push(seq, event)


async def _fold_live(log_: EventLog, models: ReadModels) -> None:
    async for _seq, event in log_.subscribe(LIVE_SUBJECTS, 1, stream=LIVE_STREAM):
        models.apply_live(event)


async def _supervised(name: str, fold: Callable[[], Awaitable[None]]) -> None:
    """Run a fold; when the log drops it, log it and resume (the fold restarts where it was)."""
    while True:
        try:
            await fold()
        except (LogUnavailable, nats.errors.Error) as exc:
            log.warning("api: %s stopped (%r); resuming in %.0f s", name, exc, RESUME_S)
        except Exception:  # a fold that dies unseen leaves health "catching up" for good
            log.exception("api: %s failed; resuming in %.0f s", name, RESUME_S)
        await asyncio.sleep(RESUME_S)


@contextlib.asynccontextmanager
async def _embedded(settings: Settings) -> AsyncIterator[str]:
    if settings.nats_url is not None:
        yield settings.nats_url
        return
    server = EmbeddedServer(settings.data_dir / "nats", sync_always=settings.nats_sync_always)
    await anyio.to_thread.run_sync(server.start)
    try:
        yield server.url
    finally:
        await anyio.to_thread.run_sync(server.stop)


@contextlib.asynccontextmanager
async def _connected(settings: Settings, given: EventLog | None) -> AsyncIterator[EventLog]:
    if given is not None:
        yield given
        return
    async with _embedded(settings) as url:
        elog = await EventLog.connect(url, LogOptions(replicas=settings.replicas), name="kz-api")
        try:
            yield elog
        finally:
            await elog.close()


def _lifespan(settings: Settings, given: EventLog | None, signer: LeaseSigner):  # type: ignore[no-untyped-def]
    @contextlib.asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        async with _connected(settings, given) as elog:
            await elog.ensure()
            models = ReadModels()
            packages = ObjectStorePackages(elog)
            hub = EventHub(models.seq, max_streams=settings.max_event_streams)
            app.state.ctx = ApiContext(
                settings=settings,
                log=elog,
                models=models,
                signer=signer,
                packages=packages,
                event_hub=hub,
            )
            target = await elog.last_seq()
            tasks = [
                asyncio.create_task(
                    _supervised("event fold", lambda: _fold_events(elog, models, packages, hub))
                ),
                asyncio.create_task(_supervised("live fold", lambda: _fold_live(elog, models))),
            ]
            try:
                if not await models.wait_seq(target, CATCH_UP_S):
                    log.warning(
                        "api: read models still catching up (at %d of %d)", models.seq, target
                    )
                yield
            finally:
                await stop_tasks(*tasks)

    return lifespan


def webui_slash_middleware(app: ASGIApp) -> ASGIApp:
    """`/webui` → `/webui/`: the UI's asset URLs are relative to the folder."""

    async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
        # Litestar strips a trailing slash from `path`; the raw path still tells them apart.
        raw = scope.get("raw_path") or b""
        if scope["type"] == ScopeType.HTTP and raw.split(b"?", 1)[0] == b"/webui":
            query = scope.get("query_string", b"").decode("latin-1")
            location = "/webui/" + (f"?{query}" if query else "")
            await ASGIRedirectResponse(path=location, status_code=308)(scope, receive, send)
            return
        await app(scope, receive, send)

    return middleware


def create_app(
    settings: Settings, *, event_log: EventLog | None = None, lease_secret: bytes | None = None
) -> Litestar:
    """The API for `settings`; with `event_log` it uses that connection and leaves it open."""
    configured = settings.lease_secret.encode() if settings.lease_secret else None
    signer = LeaseSigner(lease_secret or configured or lease_secret_from_env())
    route_handlers: list[object] = [
        SystemController,
        KernelsController,
        BoardsController,
        CommitsController,
        SubmissionsController,
        RunnersController,
        RunnerController,
        EditsController,
        EventsController,
        ExportController,
    ]
    mcp_route, mcp_lifespan = mcp_mount(settings)
    route_handlers.append(mcp_route)
    if WEBUI_DIR.is_dir():
        route_handlers.append(
            create_static_files_router(
                path="/webui", directories=[WEBUI_DIR], html_mode=True, include_in_schema=False
            )
        )
    return Litestar(
        route_handlers=route_handlers,  # type: ignore[arg-type]
        dependencies={"ctx": Provide(_provide_ctx, sync_to_thread=False)},
        lifespan=[_lifespan(settings, event_log, signer), mcp_lifespan],
        exception_handlers={Exception: error_response},
        middleware=[
            metrics_middleware,
            webui_slash_middleware,
            body_limits(settings.max_upload_bytes),
        ],
        cors_config=CORSConfig(allow_origins=["*"]),
        openapi_config=OpenAPIConfig(
            title="kernel zoo API",
            version="1.0.0",
            path="/schema",
            render_plugins=[OfflineDocsPlugin(), JsonRenderPlugin(), YamlRenderPlugin()],
        ),
        # JSON bodies; the upload routes lift it and bound their own by KZ_MAX_UPLOAD_BYTES.
        request_max_body_size=JSON_BODY_BYTES,
        debug=False,
        logging_config=None,  # the process configures logging once (kz_cli.logs)
    )
