"""Browser test harness: headless Chromium (Debian's) driven by Playwright against the real
stack, `kz up --backend stub` on a free port with a fresh data dir, seeded with the example
kernels and the demo variants (`stack.py`). Set `KZ_WEBUI_BASE_URL` (e.g.
http://127.0.0.1:8000) to run the same tests against a stack that is already running. Set
`KZ_WEBUI_SCREENSHOTS` to a folder to keep the screenshots (docs/screenshots).
"""

from __future__ import annotations

import json
import os
import shutil
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from .stack import Stack, start_stack

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack | None]:
    """The running stack: started here (process group killed at the end) unless external."""
    if os.environ.get("KZ_WEBUI_BASE_URL"):
        yield None
        return
    running = start_stack(tmp_path_factory.mktemp("kz-up"))
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="session")
def webui_base_url(stack: Stack | None) -> str:
    """Where the stack answers: /webui/ is the UI, /api/... the API."""
    if stack is None:
        return os.environ["KZ_WEBUI_BASE_URL"].rstrip("/")
    return stack.base_url


@pytest.fixture(scope="session")
def api_get(webui_base_url: str) -> Any:
    """GET a JSON document from the stack under test."""

    def get(path: str) -> Any:
        with urllib.request.urlopen(f"{webui_base_url}{path}", timeout=10) as response:
            return json.load(response)

    return get


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    if not Path(CHROMIUM).exists() and not shutil.which("chromium"):
        pytest.skip(f"browser tests need Chromium at {CHROMIUM} (apt-get install chromium)")
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="browser tests need the playwright package"
    )
    with sync_api.sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@dataclass
class Problems:
    """What went wrong on a page: console errors, page errors, failed or non-2xx requests."""

    items: list[str] = field(default_factory=list)
    allowed: bool = False

    def allow(self) -> None:
        """This test provokes failures on purpose (API down)."""
        self.allowed = True


def _watch(page: Any, problems: Problems) -> None:
    def console(message: Any) -> None:
        if message.type == "error":
            problems.items.append(f"console: {message.text}")

    def response(answer: Any) -> None:
        if answer.status >= 300 and answer.status != 304:
            problems.items.append(f"HTTP {answer.status} {answer.url}")

    def failed(request: Any) -> None:
        if "ERR_ABORTED" not in (request.failure or ""):
            problems.items.append(f"failed {request.url}: {request.failure}")

    page.on("console", console)
    page.on("pageerror", lambda error: problems.items.append(f"pageerror: {error}"))
    page.on("response", response)
    page.on("requestfailed", failed)


@pytest.fixture
def page_problems() -> Problems:
    return Problems()


def _context(browser: Any, **options: Any) -> Any:
    return browser.new_context(
        viewport=options.pop("viewport", {"width": 1360, "height": 900}), **options
    )


@pytest.fixture
def new_page(browser: Any, page_problems: Problems) -> Iterator[Any]:
    """Make pages (options as for new_context); every page is checked for problems."""
    contexts: list[Any] = []

    def make(**options: Any) -> Any:
        context = _context(browser, **options)
        contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(10_000)
        _watch(page, page_problems)
        return page

    yield make
    problems = list(page_problems.items)
    for context in contexts:
        context.close()
    if not page_problems.allowed:
        assert problems == [], "the page reported problems:\n" + "\n".join(problems)


@pytest.fixture
def page(new_page: Any) -> Any:
    """A desktop-sized page."""
    return new_page()


@pytest.fixture(scope="session")
def shot(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Save a screenshot: into KZ_WEBUI_SCREENSHOTS when set, else a temporary folder."""
    folder = Path(os.environ.get("KZ_WEBUI_SCREENSHOTS") or tmp_path_factory.mktemp("screenshots"))
    folder.mkdir(parents=True, exist_ok=True)

    def save(page: Any, name: str, full_page: bool = False) -> Path:
        path = folder / name
        page.evaluate("window.scrollTo(0, 0)")
        page.screenshot(path=str(path), full_page=full_page)
        return path

    return save
