"""Slots: the layout of a window's calls in one worker's sealed shared memory, the judge's
writes, copies and comparisons over it, and the worker's calls on it (in this process)."""

from __future__ import annotations

import fcntl
import itertools
import mmap
import os
import struct
from typing import Any

import numpy as np
import pytest

from kz_harness.channel import ALIGN, make_slots, new_shared_memory, slot_indices
from kz_harness.errors import HarnessError
from kz_harness.slots import POISON_BYTE, Draw, SlotSet
from kz_harness.worker import _error, _Worker

pytestmark = pytest.mark.unit

INPUTS = [("float32", (3, 5), 4), ("int16", (7,), 2)]
OUTPUT = ("float32", (3, 5), 4)


def _draw(count: int, seed: int = 0) -> Draw:
    rng = np.random.default_rng(seed)
    return Draw(
        np,
        [
            (rng.standard_normal((3, 5)).astype(np.float32), rng.integers(0, 99, 7, np.int16))
            for _ in range(count)
        ],
    )


def test_every_copy_of_every_array_is_aligned_and_the_file_is_whole_pages() -> None:
    layout = make_slots(INPUTS, OUTPUT, count=4)
    for spec in (*layout.inputs, layout.output):
        assert spec.offset % ALIGN == 0 and spec.stride % ALIGN == 0
        assert spec.stride >= spec.nbytes
        assert spec.at(3) + spec.nbytes <= layout.size
    ends = sorted((s.offset, s.at(3) + s.nbytes) for s in (*layout.inputs, layout.output))
    assert all(end <= start for (_, end), (start, _) in itertools.pairwise(ends))
    assert layout.size % mmap.PAGESIZE == 0 and layout.to_dict()["count"] == 4
    with pytest.raises(HarnessError, match="at least one slot"):
        make_slots(INPUTS, OUTPUT, count=0)


def test_a_window_names_its_slots_in_order() -> None:
    payload = struct.pack("<3I", 4, 0, 2)
    assert slot_indices(payload) == (4, 0, 2) and slot_indices(b"") == ()
    with pytest.raises(HarnessError, match="no whole slots"):
        slot_indices(b"\x01\x02\x03")


def test_a_slot_file_cannot_be_grown_or_shrunk_through_any_descriptor() -> None:
    """Sealed against growing, shrinking and any further seal: a worker that dups its slots'
    descriptor can write into them but never resize them (a shrink would fault the judge)."""
    fd, memory = new_shared_memory(2 * mmap.PAGESIZE)
    twin = os.dup(fd)
    try:
        for size in (4 * mmap.PAGESIZE, mmap.PAGESIZE):
            with pytest.raises(PermissionError):
                os.ftruncate(twin, size)
        with pytest.raises(PermissionError):
            fcntl.fcntl(twin, fcntl.F_ADD_SEALS, fcntl.F_SEAL_WRITE)
        assert os.fstat(twin).st_size == 2 * mmap.PAGESIZE
        os.pwrite(twin, b"x", 0)  # writing stays possible: the slots are the worker's own
        assert memory[0:1] == b"x"
    finally:
        os.close(twin)
        os.close(fd)


def test_the_judge_writes_poisons_copies_and_compares_a_window() -> None:
    """Each slot gets its own call's inputs and a poisoned output; the copy taken as the window
    ends is what a later write is compared against; inputs are compared bitwise per call."""
    slots = SlotSet(np, make_slots(INPUTS, OUTPUT, count=4))
    draw = _draw(3)
    assert slots.prepare(draw) is False
    for index in range(3):
        assert np.array_equal(slots.inputs[0][index], draw.call(index)[0])
        assert np.array_equal(slots.inputs[1][index], draw.call(index)[1])
    assert np.isnan(slots.output[:3]).all()
    slots.output[:3] = 1.0
    got = slots.collect(3)
    assert slots.unfinished(got) == [] and slots.changed(draw) == [] and not slots.late()
    slots.output[1, 0, 0] = 2.0  # a thread finishing after the window
    slots.inputs[1][2, 6] += 1  # a call that wrote into its inputs
    assert slots.late() and slots.changed(draw) == [2]
    assert slots.prepare(_draw(3, seed=1)) is True


def test_outputs_left_poisoned_or_not_finite_are_found_per_call() -> None:
    floats = SlotSet(np, make_slots(INPUTS, OUTPUT, count=3))
    floats.prepare(_draw(3))
    floats.output[0] = 1.0
    floats.output[2] = 1.0
    floats.output[2, 1, 1] = np.inf
    assert floats.unfinished(floats.collect(3)) == [1, 2]
    ints = SlotSet(np, make_slots(INPUTS, ("int32", (4,), 4), count=2))
    ints.prepare(_draw(2))
    assert (ints.output_raw[:2] == POISON_BYTE).all()
    ints.output[0] = 7
    assert ints.unfinished(ints.collect(2)) == [1]


def _worker(calibrate: bool = False, fn: Any = None) -> tuple[_Worker, SlotSet]:
    layout = make_slots(INPUTS, OUTPUT, count=3)
    judge = SlotSet(np, layout)
    worker = _Worker(None, np)  # type: ignore[arg-type]  # no channel: calls made directly
    worker.calibrate = calibrate
    worker.fn = fn
    worker.set_slots(layout.to_dict(), [os.dup(judge.fd)])
    judge.release_fd()
    return worker, judge


def test_every_call_of_a_window_gets_new_read_only_arrays_over_its_own_slot() -> None:
    seen: list[tuple[Any, Any]] = []

    def kernel(x: Any, n: Any) -> Any:
        seen.append((x, n))
        assert not x.flags.writeable and not n.flags.writeable
        return x * 2 + n[:5].astype(np.float32)

    worker, judge = _worker(fn=kernel)
    draw = _draw(3)
    judge.prepare(draw)
    assert worker.window((0, 1, 2)) == b""
    assert len({id(x) for x, _ in seen}) == 3  # three objects, each alive at once
    for index in range(3):
        x, n = draw.call(index)
        assert np.array_equal(judge.output[index], x * 2 + n[:5].astype(np.float32))


def test_the_no_op_goes_the_whole_way_but_for_the_work_and_the_copy() -> None:
    """The trusted no-op checks its ready output like any call and copies nothing: its output
    region keeps the judge's poison."""
    worker, judge = _worker(calibrate=True)
    judge.prepare(_draw(3))
    worker.window((0, 1, 2))
    assert np.isnan(judge.output[:3]).all()


def test_a_failure_names_its_step_and_says_exc_type_and_message() -> None:
    def boom(x: Any, n: Any) -> Any:
        raise ValueError("no good")

    worker, judge = _worker(fn=boom)
    judge.prepare(_draw(1))
    with pytest.raises(ValueError, match="no good") as raised:
        worker.window((0,))
    assert worker.stage == "call" and _error(raised.value) == "ValueError: no good"
    worker.fn = lambda x, n: x.astype(np.float64)
    with pytest.raises(TypeError, match="must be float32") as raised:
        worker.window((0,))
    assert worker.stage == "output"
    assert _error(SystemExit(3)) == "SystemExit: the candidate stopped the worker"
    long = _error(ValueError("x" * 5000))  # a document's reason holds 2,000 characters
    assert long.startswith("ValueError: xxx") and len(long) == 2000
