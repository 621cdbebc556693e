"""Batched timing's pure parts: the calls per window, a window's per-call figure, the checked
reservoir, the bound on a batch's device times, and what becomes of a rival."""

from __future__ import annotations

import collections

import numpy as np
import pytest

from kz_harness.batch import (
    Reservoir,
    choose_batch,
    median_spread,
    per_call_ns,
    window_time_problems,
)
from kz_harness.rivals import RivalBook, void_code

pytestmark = pytest.mark.unit

BLOCK = 20e6  # a 20 ms window, in ns


def test_a_window_lasts_about_the_block_time_for_the_fastest_implementation() -> None:
    """A 10 us kernel beside a 40 us one: 2,000 calls make the fast one's window 20 ms; the
    same N for both."""
    assert choose_batch([10e3, 40e3], block_ns=BLOCK, capacity=5000, longest_ns=50 * BLOCK) == 2000


@pytest.mark.parametrize(
    ("per_call", "capacity", "expected"),
    [
        ([10e3], 64, 64),  # the slots' memory caps it
        ([50e6], 1000, 1),  # a call longer than a window: one call, never none
        ([10e3, 100e6], 5000, 10),  # the slowest one's window stays within fifty blocks
        ([0.0], 10**6, 40_000),  # no call is taken as cheaper than half a microsecond
    ],
)
def test_the_batch_is_capped_and_never_empty(
    per_call: list[float], capacity: int, expected: int
) -> None:
    assert (
        choose_batch(per_call, block_ns=BLOCK, capacity=capacity, longest_ns=50 * BLOCK) == expected
    )


def test_a_windows_figure_is_per_call_and_device_times_win_on_a_gpu() -> None:
    """On a CPU the wall time over the calls; on a GPU the mean reported device time."""
    assert per_call_ns(1_000_000, 100, None) == 10_000
    assert per_call_ns(1_000_000, 4, [100, 200, 300, 400]) == 250
    assert median_spread([1.0, 2.0, 3.0, 10.0]) == (2.5, 1.0)


def test_every_call_is_equally_likely_to_be_checked_whatever_its_window() -> None:
    """Over many runs, the reservoir keeps each of 40 calls (in windows of 1, 3 and 36) about
    as often as any other: which calls are checked cannot be told from their place."""
    kept_count: collections.Counter[int] = collections.Counter()
    rng = np.random.default_rng(7)
    for _ in range(1500):
        reservoir = Reservoir(4, rng)
        kept: list[int] = []
        call = 0
        for window in (1, 3, 36):
            for index, place in reservoir.places(window):
                if place == len(kept):
                    kept.append(call + index)
                else:
                    kept[place] = call + index
            call += window
        assert len(kept) == 4 == len(set(kept))
        kept_count.update(kept)
    shares = [kept_count[c] / 1500 for c in range(40)]
    assert all(abs(share - 0.1) < 0.035 for share in shares), shares


def test_a_batch_reporting_more_device_time_than_its_window_breaks_the_bound() -> None:
    """One call claiming more than its whole window, or the calls together more than it."""
    honest = [(1_050_000, [100_000] * 10) for _ in range(20)]
    assert window_time_problems(honest, gap_ns=5_000) == []
    one_liar = [(1050000, [2000000] + [1] * 9), *honest]
    assert [code for code, _ in window_time_problems(one_liar, gap_ns=5_000)] == [
        "timing_bound_broken"
    ]


def test_work_hidden_outside_a_batchs_events_shows_in_the_gap_per_call() -> None:
    """Each call reports 10 us of a 100 us kernel: per call the window leaves 90 us more
    uncovered than the no-op's 5 us."""
    lying = [(1_050_000, [10_000] * 10) for _ in range(20)]
    assert [code for code, _ in window_time_problems(lying, gap_ns=5_000)] == [
        "work_outside_events"
    ]


@pytest.mark.parametrize(
    ("flag", "stage", "code"),
    [
        ("", "load", "load_failed"),
        ("", "call", "call_failed"),
        ("", "output", "mistyped_output"),
        ("inputs_changed", "", "inputs_changed"),
        ("extra_threads", "", "work_left_running"),
        ("background_work", "", "work_left_running"),
        ("late_output", "", "late_output"),
        ("work_outside_events", "", "timing_bound_broken"),
    ],
)
def test_a_rivals_fault_has_a_snake_case_code(flag: str, stage: str, code: str) -> None:
    assert void_code(flag=flag, stage=stage) == code


def test_the_book_has_one_entry_per_rival_offered_and_the_first_cause_stays() -> None:
    """Offered incumbent and reference: one voided (its first cause kept), one measured; an
    offered rival never measured is absent; one not offered has no entry."""
    book = RivalBook(["candidate", "reference", "incumbent"])
    book.measured("reference")
    book.void("incumbent", "call_failed", "r8: ValueError: boom")
    book.void("incumbent", "wrong_output", "later")
    assert book.voided("incumbent") and not book.voided("reference")
    assert book.live(["incumbent", "reference"]) == ["reference"]
    doc = book.to_dict()
    assert list(doc) == ["incumbent", "reference"]
    assert doc["incumbent"] == {
        "status": "voided",
        "code": "call_failed",
        "reason": "r8: ValueError: boom",
    }
    assert doc["reference"]["status"] == "measured"
    assert RivalBook(["candidate", "incumbent"]).to_dict()["incumbent"]["status"] == "absent"
    assert RivalBook(["candidate"]).to_dict() == {}
    long = RivalBook(["reference"])
    long.void("reference", "call_failed", "r8: " + "x" * 3000)
    assert len(long.to_dict()["reference"]["reason"]) == 2000
