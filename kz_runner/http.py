"""The HTTP transport: a runner that reaches the platform only through the API's runner
endpoints, which claim, heartbeat and finish leases on its behalf."""

from __future__ import annotations

from typing import Any, BinaryIO

import httpx

from kz_events.errors import KzError, LogUnavailable
from kz_runner.transport import Lease, LeaseLost, Report, RunnerInfo

__all__ = ["HttpTransport"]

MAX_LOG_BYTES = 1024 * 1024


def _lost(lease: Lease, response: httpx.Response) -> LeaseLost:
    """The API's 409 (`stale_lease`) on a download: the task is not this runner's any more."""
    try:
        said = str(response.json()["error"]["message"])
    except (ValueError, KeyError, TypeError):
        said = response.text[:300]
    return LeaseLost(
        f"task {lease.submission_id} attempt {lease.attempt} is no longer this runner's: {said}",
        details={"submission_id": lease.submission_id, "attempt": lease.attempt},
    )


class HttpTransport:
    """Talks to `POST /api/runner/*` with the runner key; the lease token rides in each call."""

    def __init__(self, server_url: str, runner_key: str, *, timeout_s: float = 60.0) -> None:
        self.client = httpx.AsyncClient(
            base_url=server_url.rstrip("/"),
            headers={"X-Runner-Key": runner_key},
            timeout=httpx.Timeout(timeout_s, connect=5.0),
        )
        self.info: RunnerInfo | None = None

    async def _post(self, path: str, body: dict[str, Any]) -> httpx.Response:
        try:
            response = await self.client.post(path, json=body)
        except httpx.TransportError as exc:
            raise LogUnavailable(f"cannot reach the API at {self.client.base_url}: {exc}") from exc
        if response.status_code >= 400 and response.status_code != 409:
            raise KzError(f"{path}: HTTP {response.status_code}: {response.text[:300]}")
        return response

    async def register(self, info: RunnerInfo) -> None:
        self.info = info
        await self._post(
            "/api/runner/register",
            {
                "runner_id": info.runner_id,
                "arches": list(info.arches),
                "device": info.device,
                "backend": info.backend,
                "labels": info.labels,
            },
        )

    async def next_task(self, wait_s: float) -> Lease | None:
        assert self.info is not None
        response = await self._post(
            "/api/runner/claim", {"runner_id": self.info.runner_id, "wait_s": min(wait_s, 30.0)}
        )
        if response.status_code != 200:
            return None
        task = response.json()
        return Lease(
            submission_id=task["submission_id"],
            kernel_id=task["kernel_id"],
            arch=task["arch"],
            attempt=int(task["attempt"]),
            lease_id=task["lease_id"],
            package_digest=task["package_digest"],
            package_size=task.get("package_size"),  # small packages are read in memory
            confirms=task.get("confirms"),
            handle=task,
        )

    async def heartbeat(self, lease: Lease, phase: str) -> bool:
        token = lease.handle["lease_token"]
        response = await self._post("/api/runner/heartbeat", {"lease_token": token, "phase": phase})
        if response.status_code == 409:
            return True  # the lease is gone: stop working on it
        return bool(response.json().get("cancelled", False))

    async def fetch_package(self, lease: Lease, sink: BinaryIO) -> None:
        url = lease.handle["package_url"]
        headers = {"X-Lease-Token": lease.handle["lease_token"]}
        async with self.client.stream("GET", url, headers=headers) as response:
            if response.status_code == 404:
                raise KzError(f"package of {lease.submission_id} not found")
            if response.status_code == 409:
                await response.aread()
                raise _lost(lease, response)
            if response.status_code != 200:
                raise KzError(f"{url}: HTTP {response.status_code}")
            async for chunk in response.aiter_bytes():
                sink.write(chunk)

    async def fetch_judge(self, lease: Lease) -> bytes | None:
        url = lease.handle.get("judge_url")
        if not url:
            return None
        token = {"X-Lease-Token": lease.handle["lease_token"]}
        response = await self.client.get(url, headers=token)
        if response.status_code == 404:
            return None
        if response.status_code == 409:
            raise _lost(lease, response)
        if response.status_code != 200:
            raise KzError(f"{url}: HTTP {response.status_code}")
        return response.content

    async def report(self, lease: Lease, report: Report) -> None:
        log = report.log[-MAX_LOG_BYTES:]
        await self._post(
            f"/api/submissions/{lease.submission_id}/result",
            {
                "lease_token": lease.handle["lease_token"],
                "outcome": report.outcome,
                "result": report.result,
                "environment": report.environment,
                "duration_s": report.duration_s,
                "timings": report.timings,
                "log": log.decode("utf-8", errors="replace"),
            },
        )

    async def runner_heartbeat(self, busy_with: str | None) -> None:
        """Nothing to send: the API counts claim polls and task heartbeats as signs of life."""

    async def hand_back(self, lease: Lease) -> None:
        await self._post(
            "/api/runner/heartbeat",
            {"lease_token": lease.handle["lease_token"], "phase": "handed_back"},
        )

    async def close(self) -> None:
        await self.client.aclose()
