"""Rivals measured honestly, through the real sandbox: each implementation has its own slots, a
rival that sabotages or fails is voided, and the candidate beside it is judged on and never
blamed.

Each saboteur really attempts its trick and prints `TRIED <family>` (so a cheat that broke
itself cannot pass for a defence); the candidate beside it is an honest kernel four times
faster than the rivals' own work (the control), accepted in the same task, with no flag and
its score against the reference measured where the reference stood.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from kz_runner.execute import TaskOutcome

pytestmark = pytest.mark.integration

JudgePackage = Callable[..., TaskOutcome]

JUDGE = """
import numpy as np
from kz_harness import Benchmark, Timing, Workload

def make_inputs(workload, rng):
    return (rng.standard_normal((workload["rows"], 256), dtype=np.float32),)

def reference(x):
    return np.cumsum(x.astype(np.float64), axis=1)

BENCHMARK = Benchmark(
    entry="kernel:scan",
    workloads=[Workload("r32", {"rows": 32}), Workload("r64", {"rows": 64})],
    make_inputs=make_inputs, reference=reference, dtype="fp32",
    timing=Timing(warmup_s=0.02, budget_s=0.3, calibration_calls=40),
)
raise SystemExit(BENCHMARK.main())
"""

# The work done `times` times over: the rivals do it four times, the candidate once.
KERNEL = """
import numpy as np

def scan(x):
    out = None
    for _ in range({times}):
        out = np.cumsum(x, axis=1, dtype=np.float32)
    return out
"""
HONEST = KERNEL.format(times=1)
SLOW = KERNEL.format(times=4)
# Main's scoreboard has a best far behind: with the incumbent voided, the judge's own
# verdict falls back to it (the platform decides against the reference alone).
BASELINE = "schema_version: 1\nkernel_id: cpu/Norm/RMSNorm/fp32/sandbox_test\nbest:\n  value: 1e9\n"


def _judged_on(outcome: TaskOutcome, voided: str, code: str) -> dict[str, Any]:
    """The rival `voided` is voided for `code`; the candidate is accepted, correct, unflagged
    and no failure of its own is recorded."""
    assert outcome.reason == "accepted", outcome.log.decode()[-4000:]
    result = outcome.result
    assert result is not None and result["correctness"]["passed"] is True
    assert result["rivals"][voided]["status"] == "voided", result["rivals"]
    assert result["rivals"][voided]["code"] == code, result["rivals"]
    assert result["flags"] == [] and "failure" not in result
    assert all(voided not in w for w in result["workloads"])  # its figures are dropped
    return result


def _tried(outcome: TaskOutcome, family: str) -> None:
    assert f"TRIED {family}".encode() in outcome.log, outcome.log.decode()[-4000:]


def _scored(result: dict[str, Any]) -> None:
    """The score against the honest reference: about 4x by construction."""
    score = result["score"]
    assert score["against"] == "reference" and score["interval"][1] > 2.0, score


WRITE_RIVAL_INPUTS = (
    SLOW
    + """
import gc, mmap, os, threading
import numpy as np

def _scribble():
    # Every slot mapping in reach (they were shared by every worker once): denormals
    # written into every input region, over and over, from a thread.
    while True:
        for slot in [o for o in gc.get_objects() if type(o).__name__ == "_Slot"]:
            for dtype, shape, offset in slot.inputs:
                view = np.ndarray(shape, dtype=dtype, buffer=slot.memory, offset=offset)
                view[...] = np.float32(1e-40)
        for fd in os.listdir("/proc/self/fd"):
            try:
                target = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:
                continue
            if "memfd:" in target:
                os.pwrite(int(fd), b"\\0" * 4096, 0)

_started = []
def scan(x, _honest=scan):
    if not _started:
        threading.Thread(target=_scribble, daemon=True).start()
        _started.append(1)
        print("TRIED write_rival_inputs", flush=True)
    return _honest(x)
"""
)


def test_an_incumbent_writing_into_the_challengers_inputs_reaches_only_its_own(
    judge_package: JudgePackage,
) -> None:
    """The incumbent scribbles over every slot it maps: they are its own now, so the
    challenger's inputs are untouched; the incumbent is voided and the honest challenger,
    four times faster, is accepted with its score against the reference."""
    outcome = judge_package(
        JUDGE, {"kernel.py": HONEST}, incumbent={"kernel.py": WRITE_RIVAL_INPUTS},
        reference={"kernel.py": SLOW}, baseline=BASELINE,
    )  # fmt: skip
    _tried(outcome, "write_rival_inputs")
    result = outcome.result
    assert result is not None
    code = result["rivals"]["incumbent"]["code"]
    assert code in ("inputs_changed", "work_left_running"), result["rivals"]
    _scored(_judged_on(outcome, "incumbent", code))


RAISE_IN_CALL = (
    SLOW
    + """
_calls = [0]
def scan(x, _honest=scan):
    _calls[0] += 1
    if _calls[0] == 3:
        print("TRIED rival_raises", flush=True)
        raise ValueError("the incumbent gives up")
    return _honest(x)
"""
)


def test_an_incumbent_that_raises_in_a_call_is_voided_not_the_challenger(
    judge_package: JudgePackage,
) -> None:
    outcome = judge_package(
        JUDGE, {"kernel.py": HONEST}, incumbent={"kernel.py": RAISE_IN_CALL},
        reference={"kernel.py": SLOW}, baseline=BASELINE,
    )  # fmt: skip
    _tried(outcome, "rival_raises")
    result = _judged_on(outcome, "incumbent", "call_failed")
    assert "ValueError: the incumbent gives up" in result["rivals"]["incumbent"]["reason"]
    assert result["comparison"]["against"] is None
    _scored(result)


SKIP_WORK = (
    SLOW
    + """
import numpy as np
_calls = [0]
def scan(x, _honest=scan):
    _calls[0] += 1
    if _calls[0] <= 2:
        return _honest(x)
    if _calls[0] == 3:
        print("TRIED rival_skips_work", flush=True)
    return np.zeros_like(x)  # instant, and wrong: every challenger would look slow
"""
)


def test_an_incumbent_that_skips_its_work_is_voided_for_its_wrong_outputs(
    judge_package: JudgePackage,
) -> None:
    outcome = judge_package(
        JUDGE, {"kernel.py": HONEST}, incumbent={"kernel.py": SKIP_WORK},
        reference={"kernel.py": SLOW}, baseline=BASELINE,
    )  # fmt: skip
    _tried(outcome, "rival_skips_work")
    _scored(_judged_on(outcome, "incumbent", "wrong_output"))


CHANGE_OWN_INPUTS = (
    SLOW
    + """
def scan(x, _honest=scan):
    out = _honest(x)
    x.flags.writeable = True
    x[...] = 0
    print("TRIED rival_changes_inputs", flush=True)
    return out
"""
)


@pytest.mark.parametrize("rival", ["incumbent", "reference"])
def test_a_rival_that_changes_its_own_inputs_is_voided(
    judge_package: JudgePackage, rival: str
) -> None:
    """The incumbent, or the reference, writes into its inputs: voided for it; the challenger
    goes on against the rival that remains."""
    other = "reference" if rival == "incumbent" else "incumbent"
    rivals = {rival: {"kernel.py": CHANGE_OWN_INPUTS}, other: {"kernel.py": SLOW}}
    outcome = judge_package(JUDGE, {"kernel.py": HONEST}, baseline=BASELINE, **rivals)
    _tried(outcome, "rival_changes_inputs")
    result = _judged_on(outcome, rival, "inputs_changed")
    assert result["rivals"][other]["status"] == "measured"
    if rival == "incumbent":
        _scored(result)
    else:
        assert result["score"]["against"] is None
        assert result["comparison"]["outcome"] == "faster"


GROW_SLOTS = (
    SLOW
    + """
import mmap, os

_kept = []
_real_mmap = mmap.mmap
def _keeping(fd, *args, **kwargs):  # the worker maps its slots then closes the descriptor
    _kept.append(os.dup(fd))
    return _real_mmap(fd, *args, **kwargs)
mmap.mmap = _keeping

def scan(x, _honest=scan):
    for fd in _kept:
        for size in (os.fstat(fd).st_size * 2, 4096):
            try:
                os.ftruncate(fd, size)
                print("GREW", size, flush=True)
            except OSError as exc:
                print("SEALED", exc.errno, flush=True)
    if _kept:
        print("TRIED grow_slots", flush=True)
        _kept.clear()
    return _honest(x)
"""
)


def test_a_worker_that_dups_its_slots_cannot_resize_them(judge_package: JudgePackage) -> None:
    """The incumbent keeps a duplicate of its slots' descriptor and tries to grow and shrink
    it (a covert channel, or a fault in the judge): the file is sealed, the attempt fails, and
    the incumbent is measured as the honest kernel it otherwise is; the honest challenger
    beside it is accepted, faster."""
    outcome = judge_package(
        JUDGE, {"kernel.py": HONEST}, incumbent={"kernel.py": GROW_SLOTS},
        reference={"kernel.py": SLOW}, baseline=BASELINE,
    )  # fmt: skip
    _tried(outcome, "grow_slots")
    assert b"SEALED" in outcome.log and b"GREW" not in outcome.log
    assert outcome.reason == "accepted", outcome.log.decode()[-4000:]
    result = outcome.result
    assert result is not None and result["flags"] == []
    assert result["rivals"]["incumbent"]["status"] == "measured"
    assert result["comparison"]["outcome"] == "faster"
