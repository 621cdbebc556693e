"""Web UI first paint: how soon the overview shows its first board with 10,000 kernels.

Starts an embedded NATS server, appends `--kernels` accepted results spread over `--boards`
boards (the index the 10,000-kernel browser test uses), starts `kz api` as its own process and
waits until it has folded them. Then opens `/webui/#/` in headless Chromium `--runs` times, each
in a fresh context with the HTTP cache disabled, and reads the page's `kz:boards-rendered`
performance mark (milliseconds after navigation started). Side by side, in the same browser on
the same server and interleaved with those runs: a bare page that only fetches
`/api/index.json` and `JSON.parse`s it. One unmeasured warm-up of each comes first.
Target: the first board in under 1,000 ms (median).

    .venv/bin/python bench/webui.py [--kernels 10000] [--boards 200] [--runs 7] [--json OUT]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from kz_events.eventlog import EventLog
from kz_events.events import SubmissionAccepted
from kz_events.server import EmbeddedServer, free_port
from kz_testing import KzProcess, kz_argv, stack_env

TARGET_MS = 1000.0
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]
T0 = datetime(2026, 5, 1, tzinfo=UTC)
BARE_PAGE = """<!doctype html><meta charset="utf-8"><title>bare</title><script>
fetch('/api/index.json', { cache: 'no-cache', headers: { Accept: 'application/json' } })
  .then((response) => response.text())
  .then((text) => {
    window.kernels = JSON.parse(text).kernels.length;
    performance.mark('bare:parsed');
  });
</script>"""
OURS_MARK = "kz:boards-rendered"
BARE_MARK = "bare:parsed"


@dataclass
class Figures:
    kernels: int
    boards: int
    runs: int
    index_bytes: int
    index_gzip_bytes: int
    first_board_ms: list[float] = field(default_factory=list)
    bare_parse_ms: list[float] = field(default_factory=list)
    index_arrived_ms: list[float] = field(default_factory=list)
    median_ms: float = 0.0
    min_ms: float = 0.0
    max_ms: float = 0.0
    bare_median_ms: float = 0.0
    ratio: float = 0.0
    target_ms: float = TARGET_MS
    passed: bool = False
    load_average_start: float = 0.0
    load_average_end: float = 0.0


def accepted(n: int, boards: int) -> SubmissionAccepted:
    """The n-th accepted result: a kernel of board n % boards, a value and a 1 % spread."""
    g = n % boards
    value = 100 + (n * 7919 % 1000) / 10
    lo, hi = value * 0.99, value * 1.01
    stats = {"median": value, "mean": value, "min": lo, "max": hi, "p10": lo, "p90": hi,
             "stdev": 0.0, "samples": 5}  # fmt: skip
    return SubmissionAccepted(
        event_id=f"bench-webui-{n}",
        occurred_at=T0 + timedelta(minutes=n),
        actor="referee",
        submission_id=f"00000000-0000-4000-8000-{n:012d}",
        kernel_id=f"sm{g % 10}0/Op{g // 10}/main/fp16/k{n}",
        submitter_id=f"s{n % 17}",
        runner_id="r1",
        attempt=1,
        package_digest="0" * 64,
        result={
            "schema_version": 1,
            "accepted": True,
            "reason": "faster",
            "metric": {"name": "latency", "unit": "us", "better": "lower", "value": value},
            "workloads": [{"name": "w", "value": value, "stats": stats}],
            "correctness": {"passed": True, "checks": []},
            "environment": {"device": "bench"},
        },
        result_seq=n + 1,
    )


async def seed(url: str, kernels: int, boards: int) -> None:
    elog = await EventLog.connect(url)
    try:
        await elog.ensure()
        for start in range(0, kernels, 500):
            batch = range(start, min(kernels, start + 500))
            await asyncio.gather(*(elog.append(accepted(n, boards)) for n in batch))
    finally:
        await elog.close()


@contextmanager
def running_api(tmp: Path, kernels: int, boards: int) -> Iterator[str]:
    """NATS seeded with the results and `kz api` folded up to them; yields the base URL."""
    with EmbeddedServer(tmp / "nats", sync_always=False) as nats:
        print(f"seeding {kernels:,} accepted results on {boards} boards ...", flush=True)
        asyncio.run(seed(nats.url, kernels, boards))
        port = free_port()
        env = stack_env(tmp, nats.url, port)
        with KzProcess("kz api", kz_argv("api"), env, tmp / "api.log") as api:
            base = f"http://127.0.0.1:{port}"
            wait_folded(base, api, kernels)
            yield base


def wait_folded(base: str, api: KzProcess, seq: int) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if not api.alive:
            raise SystemExit(f"kz api exited with {api.returncode}:\n{api.tail()}")
        try:
            fold = httpx.get(base + "/api/health", timeout=2).json().get("fold", {})
            if fold.get("seq", 0) >= seq:
                return
        except (httpx.HTTPError, ValueError):
            pass
        time.sleep(0.2)
    raise SystemExit(f"kz api did not fold {seq} events within 120 s")


def load_average() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def open_once(browser: Any, url: str, mark: str, bare: bool) -> tuple[float, float]:
    """Navigate a fresh, cache-less context to `url`; (mark's startTime, index.json's responseEnd).

    The page is polled with small evaluations from the moment it commits: waiting with
    Playwright's selectors would inject its script into the page while the page works.
    """
    context = browser.new_context(viewport={"width": 1360, "height": 900})
    try:
        page = context.new_page()
        cdp = context.new_cdp_session(page)
        cdp.send("Network.enable", {"maxResourceBufferSize": 0, "maxTotalBufferSize": 0})
        cdp.send("Network.setCacheDisabled", {"cacheDisabled": True})
        if bare:
            page.route(url, lambda route: route.fulfill(content_type="text/html", body=BARE_PAGE))
        page.goto(url, wait_until="commit")
        deadline = time.monotonic() + 60
        while not page.evaluate(f"performance.getEntriesByName('{mark}').length > 0"):
            if time.monotonic() > deadline:
                raise SystemExit(f"{url}: no {mark} mark within 60 s")
            page.wait_for_timeout(25)
        if not bare and page.locator("section[data-board] table.board").count() == 0:
            raise SystemExit(f"{url}: the mark was set but no board is on screen")
        found = page.evaluate(
            f"""() => [performance.getEntriesByName('{mark}')[0].startTime,
              performance.getEntriesByType('resource')
                .find((r) => r.name.includes('/api/index.json'))?.responseEnd ?? -1]"""
        )
        return float(found[0]), float(found[1])
    finally:
        context.close()


def measure(base: str, runs: int, figures: Figures) -> None:
    from playwright.sync_api import sync_playwright

    ours_url, bare_url = f"{base}/webui/#/", f"{base}/bench-bare.html"
    executable = CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            open_once(browser, ours_url, OURS_MARK, bare=False)
            open_once(browser, bare_url, BARE_MARK, bare=True)
            for _ in range(runs):
                first, arrived = open_once(browser, ours_url, OURS_MARK, bare=False)
                figures.first_board_ms.append(round(first, 1))
                figures.index_arrived_ms.append(round(arrived, 1))
                parsed, _ = open_once(browser, bare_url, BARE_MARK, bare=True)
                figures.bare_parse_ms.append(round(parsed, 1))
        finally:
            browser.close()


def summarise(fig: Figures) -> None:
    fig.median_ms = round(statistics.median(fig.first_board_ms), 1)
    fig.min_ms, fig.max_ms = min(fig.first_board_ms), max(fig.first_board_ms)
    fig.bare_median_ms = round(statistics.median(fig.bare_parse_ms), 1)
    fig.ratio = round(fig.median_ms / fig.bare_median_ms, 2)
    fig.passed = fig.median_ms < fig.target_ms


def report(fig: Figures) -> str:
    verdict = "PASS" if fig.passed else "MISS"
    runs = ", ".join(f"{ms:.0f}" for ms in fig.first_board_ms)
    bare = ", ".join(f"{ms:.0f}" for ms in fig.bare_parse_ms)
    return "\n".join(
        [
            f"web UI first board: {fig.kernels:,} kernels on {fig.boards} boards, index.json "
            f"{fig.index_bytes / 1e6:.1f} MB ({fig.index_gzip_bytes / 1e6:.2f} MB gzip); "
            f"load average {fig.load_average_start:.2f} -> {fig.load_average_end:.2f}",
            f"  first board rendered  median {fig.median_ms:.0f} ms  min {fig.min_ms:.0f}  "
            f"max {fig.max_ms:.0f}   target < {fig.target_ms:.0f} ms: {verdict}",
            f"  runs (ms): {runs}",
            f"  index.json arrived    median {statistics.median(fig.index_arrived_ms):.0f} ms",
            f"  bare fetch + JSON.parse  median {fig.bare_median_ms:.0f} ms  (runs: {bare})",
            f"  ratio first board / bare: {fig.ratio:.2f}x",
        ]
    )


def index_sizes(base: str) -> tuple[int, int]:
    plain = httpx.get(base + "/api/index.json", headers={"Accept-Encoding": "identity"})
    with httpx.stream("GET", base + "/api/index.json", headers={"Accept-Encoding": "gzip"}) as r:
        if r.headers.get("content-encoding") != "gzip" or not r.headers.get("etag"):
            raise SystemExit("the API did not answer index.json with gzip and an ETag")
        gz = sum(len(chunk) for chunk in r.iter_raw())
    return len(plain.content), gz


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", type=int, default=10_000)
    parser.add_argument("--boards", type=int, default=200)
    parser.add_argument("--runs", type=int, default=7, help="measured page loads of each page")
    parser.add_argument("--json", type=Path, help="also write the figures here as JSON")
    args = parser.parse_args(argv)
    with (
        tempfile.TemporaryDirectory(prefix="kz-bench-webui-") as tmp,
        running_api(Path(tmp), args.kernels, args.boards) as base,
    ):
        plain, gz = index_sizes(base)
        figures = Figures(args.kernels, args.boards, args.runs, plain, gz)
        figures.load_average_start = load_average()
        measure(base, args.runs, figures)
        figures.load_average_end = load_average()
    summarise(figures)
    print(report(figures))
    if args.json:
        args.json.write_text(json.dumps(asdict(figures), indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
