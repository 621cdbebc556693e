"""The API's state that clients could grow stays bounded: the live feed's ring, the time-travel
index cache and its line, the idempotency locks, and package paths git can check out."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from kz_api.errors import ApiError
from kz_api.http_server import bounded_protocol, server_config
from kz_api.idempotency import KeyedLocks
from kz_api.index_cache import RenderedIndex, rendered
from kz_api.live_feed import EventHub, raw_message
from kz_api.time_travel import TimeTravel
from kz_events.config import Settings, load_settings
from kz_events.events import RunnerRegistered
from kz_package.archive import path_problem

pytestmark = pytest.mark.unit


def _event(i: int, pad: int = 0) -> RunnerRegistered:
    return RunnerRegistered(
        event_id=f"e{i}",
        occurred_at=datetime(2026, 1, 1, tzinfo=UTC),
        actor="t",
        runner_id=f"r{i}",
        arches=["cpu"],
        device="d" * pad,
    )


def test_hub_keeps_nothing_without_streams() -> None:
    """With no stream open the hub keeps no event; its window starts at the last one."""
    hub = EventHub()
    for i in range(1, 101):
        hub.push(i, _event(i))
    assert len(hub) == 0 and hub.floor == hub.last == 100
    assert hub.since(100) == [] and hub.since(99) is None


def test_hub_ring_is_bounded_by_count_and_bytes() -> None:
    """The ring drops its oldest events past `capacity` or `max_bytes`; a cursor before the
    ring gets None (read the log), one inside gets what follows it."""
    hub = EventHub(capacity=10, max_bytes=10**9)
    hub.streams = 1
    for i in range(1, 51):
        hub.push(i, _event(i))
    assert len(hub) == 10 and hub.floor == 40 and hub.last == 50
    assert hub.since(39) is None
    assert [seq for seq, _ in hub.since(45) or []] == [46, 47, 48, 49, 50]
    heavy = EventHub(capacity=1000, max_bytes=50_000)
    heavy.streams = 1
    for i in range(1, 101):
        heavy.push(i, _event(i, pad=10_000))
    assert len(heavy) <= 5 and heavy.bytes <= 50_000


async def test_hub_wakes_a_waiting_stream() -> None:
    """A stream waiting past its cursor wakes when the next event is pushed."""
    hub = EventHub()
    hub.streams = 1
    waiter = asyncio.create_task(hub.wait_past(0, 5.0))
    await asyncio.sleep(0)
    hub.push(1, _event(1))
    assert await waiter is True
    assert await hub.wait_past(1, 0.01) is False


def test_raw_messages_of_undecodable_events() -> None:
    """A stored event read as bytes becomes a message even when it does not decode."""
    assert raw_message(3, b'{"type": "registered"}').event == "registered"
    assert raw_message(4, b"\xff not json").event == "undecodable"


def _index(seq: int) -> RenderedIndex:
    return rendered(b'{"kernels": []}', seq)


async def test_time_travel_builds_each_position_once_and_keeps_a_few() -> None:
    """Concurrent requests for one position share one build; built ones are kept up to `keep`."""
    travel = TimeTravel(keep=2, max_waiting=4)
    gate = asyncio.Event()

    async def build(at: int) -> RenderedIndex:
        await gate.wait()
        return _index(at)

    same = [asyncio.create_task(travel.get(5, build)) for _ in range(10)]
    await asyncio.sleep(0)
    gate.set()
    assert {index.seq for index in await asyncio.gather(*same)} == {5}
    assert travel.builds == 1
    for at in (6, 7, 5):
        await travel.get(at, build)
    assert travel.builds == 4  # 5 fell out when 7 came in, so it was built again


async def test_time_travel_line_is_bounded() -> None:
    """Past `max_waiting` distinct positions in line, a request is 429 with retry_after_s."""
    travel = TimeTravel(max_waiting=2)
    gate = asyncio.Event()

    async def build(at: int) -> RenderedIndex:
        await gate.wait()
        return _index(at)

    line = [asyncio.create_task(travel.get(at, build)) for at in (1, 2)]
    await asyncio.sleep(0)
    with pytest.raises(ApiError) as refused:
        await travel.get(3, build)
    assert refused.value.status == 429 and refused.value.details["retry_after_s"] > 0
    gate.set()
    await asyncio.gather(*line)
    assert travel.builds == 2


async def test_idempotency_locks_are_dropped_after_use() -> None:
    """A key's lock exists while it is held or waited for, and not after."""
    locks = KeyedLocks()
    order: list[str] = []

    async def hold(name: str) -> None:
        async with locks.hold(("alice", "k")):
            order.append(f"{name} in")
            await asyncio.sleep(0.01)
            order.append(f"{name} out")

    await asyncio.gather(hold("a"), hold("b"))
    assert order == ["a in", "a out", "b in", "b out"]
    assert len(locks) == 0


@pytest.mark.parametrize(
    ("name", "ok"),
    [
        ("src/kernel.cu", True),
        ("src/" + "n" * 255, True),
        ("src/" + "n" * 256, False),
        ("src/" + "\u00e9" * 128, False),
        ("src/.git/config", False),
        ("src/.Git", False),
        ("src/.git...", False),
        ("src/GIT~1/x", False),
        ("src/.git\u200c/x", False),
        ("src/.github/workflows/ci.yml", True),
        ("src/.gitignore", True),
        ("src/tab\there", False),
        ("src/\udcff", False),
    ],
)
def test_path_problem(name: str, ok: bool) -> None:
    """Paths git can check out pass; long names, `.git` in any protected spelling, control
    characters and non-UTF-8 names do not."""
    assert (path_problem(name) is None) is ok, path_problem(name)


def test_server_timeouts_come_from_settings() -> None:
    """KZ_HEAD_TIMEOUT_S and KZ_SLOW_READER_S set the protocol's timeouts; zero is refused."""
    settings = load_settings({"KZ_HEAD_TIMEOUT_S": "2.5", "KZ_SLOW_READER_S": "7"})
    protocol = bounded_protocol(settings)
    assert protocol.head_timeout_s == 2.5 and protocol.stall_s == 7.0
    config = server_config(object(), Settings())
    assert config.h11_max_incomplete_event_size == 16 * 1024
    with pytest.raises(Exception, match="KZ_HEAD_TIMEOUT_S"):
        load_settings({"KZ_HEAD_TIMEOUT_S": "0"})
