"""Places in the queue of an architecture: arrival order, kept as submissions come and go."""

from __future__ import annotations

import random

import pytest

from kz_api.readmodel import ArchQueue

pytestmark = pytest.mark.unit


def test_places_follow_arrival_and_close_up_when_one_leaves() -> None:
    """Positions count from 1 in arrival order; one that leaves moves the later ones up."""
    queue = ArchQueue()
    for sid in ("a", "b", "c"):
        queue.push(sid)
    assert [queue.position(s) for s in ("a", "b", "c")] == [1, 2, 3]
    queue.discard("b")
    assert (queue.position("a"), queue.position("b"), queue.position("c")) == (1, None, 2)
    assert len(queue) == 2


def test_one_queued_again_goes_to_the_back() -> None:
    """A submission that was running and is queued again waits behind the ones already there."""
    queue = ArchQueue()
    for sid in ("a", "b"):
        queue.push(sid)
    queue.discard("a")
    queue.push("a")
    assert (queue.position("b"), queue.position("a")) == (1, 2)


def test_positions_match_a_walk_of_an_ordered_dict() -> None:
    """Over a random run of arrivals and departures, every position is the one a walk of an
    insertion-ordered dict gives (the way positions were counted before)."""
    rng = random.Random(3)
    queue, reference = ArchQueue(), dict[str, None]()
    for _ in range(2000):
        sid = f"s{rng.randrange(60)}"
        if rng.random() < 0.5:
            queue.push(sid)
            reference.pop(sid, None)
            reference[sid] = None
        else:
            queue.discard(sid)
            reference.pop(sid, None)
        walk = {s: i for i, s in enumerate(reference, start=1)}
        assert all(queue.position(f"s{n}") == walk.get(f"s{n}") for n in range(60))
        assert len(queue) == len(reference)
