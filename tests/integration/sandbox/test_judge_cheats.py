"""Every cheating family of JUDGING.md, attempted for real through the sandbox and the judge.

Each candidate really attempts its trick (and prints `TRIED <family>` once it has, so a cheat
that broke itself cannot pass for a defence); the judge is a real board's shape (RMSNorm,
fp32) with short timing. A family is defended when the cheat gains nothing: it is rejected,
or measured for what it really does, or flagged for a maintainer (suspect), as docs/judging.md
lists family by family.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kz_harness.validity import RESOLVED_FACTOR
from kz_runner.execute import TaskOutcome
from kz_runner.limits import StepLimits
from kz_testing.cheats import BUSY_THREAD, FORK_PER_CALL, HONEST, JUDGE

pytestmark = pytest.mark.integration

JudgePackage = Callable[..., TaskOutcome]  # the `judge_package` fixture of conftest.py

BASELINE = "schema_version: 1\nkernel_id: cpu/Norm/RMSNorm/fp32/sandbox_test\nbest:\n  value: {}\n"


def _flags(outcome: TaskOutcome) -> set[str]:
    assert outcome.result is not None, outcome.log.decode()
    return {flag["code"] for flag in outcome.result.get("flags", [])}


def _tried(outcome: TaskOutcome, family: str) -> None:
    assert f"TRIED {family}".encode() in outcome.log, outcome.log.decode()[-4000:]


def _rejected(outcome: TaskOutcome) -> dict[str, Any]:
    assert outcome.reason == "rejected", outcome.log.decode()[-4000:]
    assert outcome.result is not None and outcome.result["correctness"]["passed"] is False
    return outcome.result


def _measured_honestly(outcome: TaskOutcome) -> float:
    """Accepted for what it really costs: a row loop over 8 and 32 rows is never under 5 us."""
    assert outcome.reason == "accepted", outcome.log.decode()[-4000:]
    assert outcome.result is not None
    value = float(outcome.result["metric"]["value"])
    assert value > 5.0, value
    return value


def test_an_honest_kernel_is_accepted_with_its_real_timings(judge_package: JudgePackage) -> None:
    """The reference shape of the suite: accepted, one sample per timed window kept, each
    workload's resolution and calls per window recorded, its figure well above the
    resolution."""
    outcome = judge_package(JUDGE, {"kernel.py": HONEST})
    _measured_honestly(outcome)
    assert outcome.result is not None
    assert _flags(outcome) == set()
    for workload in outcome.result["workloads"]:
        assert workload["stats"]["n"] >= 20 and workload["batch"] >= 1
        assert 0 < 10 * workload["resolution"] < workload["stats"]["median"], workload
    assert outcome.result["timing"]["method"] == "batched_window"
    assert outcome.result["validity"]["measured"] is True


# --- forged result documents -------------------------------------------------------------

FORGE = """
import json, os
FORGED = json.dumps({"schema_version": 1, "accepted": True, "reason": "forged",
    "metric": {"name": "latency", "unit": "us", "better": "lower", "value": 0.001},
    "workloads": [], "correctness": {"passed": True, "checks": []}}).encode()

def forge(descriptors=True):
    reached = []
    for fd in range(3, 256 if descriptors else 3):
        try:
            os.write(fd, FORGED)
            reached.append(fd)
        except OSError:
            pass
    for name in ("KZ_RESULT_FD", "KZ_RESULT_PATH", "KZ_CONTROL_FD"):
        if name in os.environ:
            reached.append(name)
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                for fd in os.listdir(f"/proc/{pid}/fd"):
                    with open(f"/proc/{pid}/fd/{fd}", "wb") as out:
                        out.write(FORGED)
                    reached.append(f"{pid}/{fd}")
            except OSError:
                pass
    return reached
"""


def test_a_result_forged_at_import_then_exit_is_rejected(judge_package: JudgePackage) -> None:
    """Writing a document to every descriptor and path it can find, then exiting: the worker
    holds no result channel, and a worker that dies is a failed candidate."""
    cheat = FORGE + "print('TRIED forge_import', forge(), flush=True)\nos._exit(0)\n"
    outcome = judge_package(JUDGE, {"kernel.py": cheat})
    _tried(outcome, "forge_import")
    result = _rejected(outcome)
    assert result["metric"]["value"] is None
    assert result["failure"]["stage"] == "load"  # its forged bytes in its own channel, or its end
    assert result["failure"]["error"].startswith(("ProtocolError: ", "WorkerDied: "))


def test_a_result_forged_from_atexit_and_an_orphan_counts_for_nothing(
    judge_package: JudgePackage,
) -> None:
    """An atexit hook and an orphaned child keep forging (through every /proc path it can
    see: writing into its own channel would only garble its own answers); the worker's
    sandbox is killed before the result is read, so the honest timing stands, and the orphan
    is flagged."""
    cheat = (
        FORGE
        + HONEST
        + """
import atexit, time
atexit.register(forge)
if os.fork() == 0:
    print("TRIED forge_orphan", flush=True)
    while True:
        forge(descriptors=False)
        time.sleep(0.01)
"""
    )
    outcome = judge_package(JUDGE, {"kernel.py": cheat})
    _tried(outcome, "forge_orphan")
    _measured_honestly(outcome)
    assert "extra_processes" in _flags(outcome)


# --- the harness, the judge and the clock patched in memory ------------------------------


def test_patching_the_harness_and_main_in_memory_changes_nothing(
    judge_package: JudgePackage,
) -> None:
    """kz_harness's timing, checks and result writer, __main__ and the clock replaced in the
    worker's process: the judge's own process is untouched."""
    cheat = (
        HONEST
        + """
import sys, time
import kz_harness, kz_harness.judge, kz_harness.checks, kz_harness.result
kz_harness.bench_cpu = lambda *a, **k: None
kz_harness.judge.Benchmark.run = lambda *a, **k: {"accepted": True}
kz_harness.checks.compare = lambda *a, **k: None
kz_harness.result.write_result = lambda *a, **k: None
sys.modules["__main__"].BENCHMARK = None
time.perf_counter_ns = lambda: 0
time.perf_counter = lambda: 0.0
time.monotonic = lambda: 0.0
print("TRIED patch_memory", flush=True)
"""
    )
    outcome = judge_package(JUDGE, {"kernel.py": cheat})
    _tried(outcome, "patch_memory")
    _measured_honestly(outcome)


def test_frame_walking_to_skip_the_work_is_caught_by_the_checks(
    judge_package: JudgePackage,
) -> None:
    """Walking up the frames to the worker loop and making calls answer at once leaves the
    output region as the judge poisoned it: every checked call fails."""
    cheat = (
        HONEST
        + """
import sys
def rmsnorm(x, w, _honest=rmsnorm):
    frame = sys._getframe(1)
    while frame is not None and "self" not in frame.f_locals:
        frame = frame.f_back
    worker = frame.f_locals["self"]
    worker.call = lambda index: None
    print("TRIED frame_walk", type(worker).__name__, flush=True)
    return _honest(x, w)
"""
    )
    outcome = judge_package(JUDGE, {"kernel.py": cheat})
    _tried(outcome, "frame_walk")
    _rejected(outcome)


def test_the_judges_checks_are_not_in_reach_of_gc(judge_package: JudgePackage) -> None:
    """Scanning gc for check objects and expected outputs finds none of the judge's: a wrong
    kernel stays wrong."""
    cheat = """
import gc, numpy as np
def rmsnorm(x, w):
    found = [o for o in gc.get_objects() if type(o).__name__ in ("Check", "_Kept", "Benchmark")]
    for obj in found:
        try:
            object.__setattr__(obj, "passed", True)
        except Exception:
            pass
    print("TRIED gc_checks", len(found), flush=True)
    return np.ones_like(x)
"""
    outcome = judge_package(JUDGE, {"kernel.py": cheat})
    _tried(outcome, "gc_checks")
    _rejected(outcome)


# --- outputs memoised, inputs mutated ----------------------------------------------------


def test_memoising_by_content_never_hits(judge_package: JudgePackage) -> None:
    """Every call gets new contents from the secret seed: a content cache never hits."""
    cheat = (
        HONEST
        + """
_cache = {}
print("TRIED memo_content", flush=True)
def rmsnorm(x, w, _honest=rmsnorm):
    key = (x.tobytes(), w.tobytes())
    if key in _cache:
        print("HIT", flush=True)
        return _cache[key]
    _cache[key] = _honest(x, w)
    return _cache[key]
"""
    )
    outcome = judge_package(JUDGE, {"kernel.py": cheat})
    _tried(outcome, "memo_content")
    _measured_honestly(outcome)
    assert b"HIT" not in outcome.log


def test_memoising_by_address_returns_stale_outputs_and_is_rejected(
    judge_package: JudgePackage,
) -> None:
    """Slots are reused, contents are not: an address cache hits and answers wrongly."""
    cheat = (
        HONEST
        + """
_cache = {}
def rmsnorm(x, w, _honest=rmsnorm):
    key = x.__array_interface__["data"][0]
    if key in _cache:
        print("TRIED memo_address", flush=True)
        return _cache[key]
    _cache[key] = _honest(x, w)
    return _cache[key]
"""
    )
    outcome = judge_package(JUDGE, {"kernel.py": cheat})
    _tried(outcome, "memo_address")
    _rejected(outcome)


def test_mutating_the_inputs_is_flagged_and_rejected(judge_package: JudgePackage) -> None:
    """Writing into the inputs (after unlocking them) is seen against the judge's pristine
    copies; the reference is computed from those, never from what the worker saw."""
    cheat = (
        HONEST
        + """
def rmsnorm(x, w, _honest=rmsnorm):
    out = _honest(x, w)
    x.flags.writeable = True
    x[...] = 0
    print("TRIED mutate_inputs", flush=True)
    return out
"""
    )
    outcome = judge_package(JUDGE, {"kernel.py": cheat})
    _tried(outcome, "mutate_inputs")
    result = _rejected(outcome)
    assert "inputs_changed" in _flags(outcome)
    assert result["failure"]["stage"] == "inputs"


def test_zeroing_every_array_in_reach_does_not_touch_the_pristine_copies(
    judge_package: JudgePackage,
) -> None:
    """Zeroing every array gc can find and answering zeros: the judge's copies are in another
    process, so the all-zero output fails against the real reference."""
    cheat = """
import gc, numpy as np
def rmsnorm(x, w):
    hit = 0
    for obj in gc.get_objects():
        if type(obj) is np.ndarray and obj.flags.writeable:
            obj[...] = 0
            hit += 1
    print("TRIED zero_pristine", hit, flush=True)
    return np.zeros_like(x)
"""
    outcome = judge_package(JUDGE, {"kernel.py": cheat})
    _tried(outcome, "zero_pristine")
    _rejected(outcome)


# --- lazy outputs, call counting, threads ------------------------------------------------


def test_a_lazy_or_subclassed_output_is_refused(judge_package: JudgePackage) -> None:
    """An ndarray subclass (or any object with __array__) is not a plain array."""
    cheat = (
        HONEST
        + """
import numpy as np
class Lazy(np.ndarray):
    pass
def rmsnorm(x, w, _honest=rmsnorm):
    print("TRIED lazy_output", flush=True)
    return _honest(x, w).view(Lazy)
"""
    )
    outcome = judge_package(JUDGE, {"kernel.py": cheat})
    _tried(outcome, "lazy_output")
    result = _rejected(outcome)
    assert "numpy.ndarray" in result["reason"]
    assert result["failure"]["stage"] == "output"
    assert result["failure"]["error"].startswith("TypeError: the output must be")


def test_cheating_after_the_warm_up_is_caught_by_the_checked_sample(
    judge_package: JudgePackage,
) -> None:
    """Honest for the first calls (what a warm-up would be), then a constant: the checked
    calls are picked after their windows among all calls."""
    cheat = (
        HONEST
        + """
import numpy as np
_calls = [0]
def rmsnorm(x, w, _honest=rmsnorm):
    _calls[0] += 1
    if _calls[0] <= 5:
        return _honest(x, w)
    if _calls[0] == 6:
        print("TRIED count_calls", flush=True)
    return np.full_like(x, 0.5)
"""
    )
    outcome = judge_package(JUDGE, {"kernel.py": cheat})
    _tried(outcome, "count_calls")
    _rejected(outcome)


def test_finishing_in_a_background_thread_is_late_and_flagged(
    judge_package: JudgePackage,
) -> None:
    """Answering at once and writing the real output into the slot from a thread afterwards:
    the judge copied the output when the call ended, and sees the slot change later."""
    cheat = (
        HONEST
        + """
import gc, threading, time
import numpy as np
def _late(x, w, _honest=rmsnorm):
    time.sleep(0.002)
    slots = [o for o in gc.get_objects() if type(o).__name__ == "_Slot"]
    for slot in slots:
        dtype, shape, offset = slot.output
        if shape == x.shape:
            out = np.ndarray(shape, dtype=dtype, buffer=slot.memory, offset=offset)
            out[...] = _honest(x, w)
def rmsnorm(x, w):
    threading.Thread(target=_late, args=(x.copy(), w.copy())).start()
    print("TRIED late_thread", flush=True)
    return np.empty_like(x)
"""
    )
    outcome = judge_package(JUDGE, {"kernel.py": cheat})
    _tried(outcome, "late_thread")
    _rejected(outcome)
    assert {"late_output", "extra_threads"} & _flags(outcome)


def test_work_between_calls_is_flagged(judge_package: JudgePackage) -> None:
    """A thread that keeps working beside the calls (spinning on the slots to get a head
    start) stays alive and burns CPU the runner sees outside the serving thread: flagged."""
    cheat = BUSY_THREAD
    outcome = judge_package(JUDGE, {"kernel.py": cheat})
    _tried(outcome, "busy_thread")
    assert {"extra_threads", "background_work"} <= _flags(outcome)


# --- wrong answers ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("family", "body"),
    [
        ("zeros", "return np.zeros_like(x)"),
        ("constant", "return np.full_like(x, 0.7)"),
        ("fp16", "return _honest(x.astype(np.float16), w.astype(np.float16)).astype(np.float32)"),
        ("wrong_dtype", "return _honest(x, w).astype(np.float64)"),
    ],
)
def test_trivial_outputs_and_precision_downgrade_are_rejected(
    judge_package: JudgePackage, family: str, body: str
) -> None:
    """Zeros, a constant, half precision upcast, and a wider dtype than declared."""
    cheat = (
        HONEST
        + f"""
import numpy as np
_said = []
def rmsnorm(x, w, _honest=rmsnorm):
    if not _said:
        print("TRIED {family}", flush=True)
        _said.append(1)
    {body}
"""
    )
    outcome = judge_package(JUDGE, {"kernel.py": cheat})
    _tried(outcome, family)
    _rejected(outcome)


def test_a_worker_killed_for_its_output_is_the_candidates_failure(
    judge_package: JudgePackage,
) -> None:
    """A candidate that prints past its output limit is killed by the runner mid-run; every
    later stop, resume and count of it finds nothing left, and the task ends with the
    candidate's own failure, never the judge's."""
    cheat = (
        HONEST
        + """
def rmsnorm(x, w, _honest=rmsnorm):
    print("TRIED flood " + "x" * 4000, flush=True)
    return _honest(x, w)
"""
    )
    limits = StepLimits(max_output_bytes=64 * 1024)
    outcome = judge_package(JUDGE, {"kernel.py": cheat}, limits=limits)
    _tried(outcome, "flood")
    assert _rejected(outcome)["failure"]["who"] == "candidate"


# --- files, modules, environment ---------------------------------------------------------


def test_rewriting_judge_baseline_and_harness_files_is_impossible(
    judge_package: JudgePackage, tmp_path: Path
) -> None:
    """The worker sees src/ (read-only) and scratch only; the judge's files, the baseline and
    the harness are not in its view, so a claimed best of 1e-9 stays unread."""
    cheat = (
        HONEST
        + """
import os
targets = ["src/kernel.py", "../.kernel_package/benchmark.py", ".kernel_package/benchmark.py",
           "/kz/judge/benchmark.py", "/kz/judge/bench_result.yaml",
           "/kz/harness/kz_harness/judge.py", "/kz/harness/kz_harness/verdict.py"]
blocked = []
for target in targets:
    try:
        with open(target, "w") as out:
            out.write("raise SystemExit(0)\\n")
        print("WROTE", target, flush=True)
    except OSError:
        blocked.append(target)
os.environ.pop("KZ_BASELINE_PATH", None)
print("TRIED rewrite_files", len(blocked), flush=True)
"""
    )
    outcome = judge_package(JUDGE, {"kernel.py": cheat}, baseline=BASELINE.format(1e9))
    _tried(outcome, "rewrite_files")
    assert b"WROTE" not in outcome.log
    _measured_honestly(outcome)
    assert outcome.result is not None and "than current best" in outcome.result["reason"]


def test_modules_shadowed_from_src_never_reach_the_judge(judge_package: JudgePackage) -> None:
    """src/kz_harness, src/yaml.py, src/numpy.py and a sitecustomize: the judge never has src/
    on its path, and the worker imported what it needs before src/ was added."""
    shadow = "import os\nos.write(1, b'SHADOW LOADED\\n')\n"
    files = {
        "kernel.py": HONEST + "\nprint('TRIED shadow', flush=True)\n",
        "kz_harness/__init__.py": shadow,
        "yaml.py": shadow,
        "numpy.py": shadow,
        "sitecustomize.py": shadow,
        "usercustomize.py": shadow,
    }
    outcome = judge_package(JUDGE, files)
    _tried(outcome, "shadow")
    _measured_honestly(outcome)
    assert b"SHADOW LOADED" not in outcome.log


def test_home_and_user_site_tricks_stay_in_the_workers_tmpfs(judge_package: JudgePackage) -> None:
    """A .pth in the user site and files in HOME: HOME is the worker's own tmpfs and every
    process runs with -I, so nothing reaches the judge."""
    cheat = (
        HONEST
        + """
import os, site, sys
home = os.environ["HOME"]
user_site = os.path.join(home, ".local/lib/python%d.%d/site-packages" % sys.version_info[:2])
os.makedirs(user_site, exist_ok=True)
with open(os.path.join(user_site, "evil.pth"), "w") as out:
    out.write("import os; os.write(1, b'PTH RAN\\\\n')\\n")
with open(os.path.join(home, ".pythonrc"), "w") as out:
    out.write("print('RC RAN')\\n")
print("TRIED home_tricks", home, flush=True)
"""
    )
    outcome = judge_package(JUDGE, {"kernel.py": cheat})
    _tried(outcome, "home_tricks")
    _measured_honestly(outcome)
    assert b"PTH RAN" not in outcome.log and b"RC RAN" not in outcome.log


def test_the_secret_seed_and_other_processes_are_out_of_reach(judge_package: JudgePackage) -> None:
    """The worker looks for the seed in its environment, in every /proc it can see and on
    every path it knows; it finds none, and can signal nobody but itself."""
    cheat = (
        HONEST
        + """
import os, signal
found = [k for k in os.environ if k.startswith("KZ_")]
for pid in os.listdir("/proc"):
    if pid.isdigit():
        try:
            if b"KZ_SEED" in open(f"/proc/{pid}/environ", "rb").read():
                found.append(pid)
        except OSError:
            pass
for path in ("/kz/judge", "/kz/scratch", "/kz/harness/../judge"):
    if os.path.exists(path):
        found.append(path)
try:
    os.kill(-1, signal.SIGSTOP)
except OSError:
    pass
print("TRIED secrets", "FOUND" if found else "NOTHING", found, flush=True)
"""
    )
    outcome = judge_package(JUDGE, {"kernel.py": cheat})
    _tried(outcome, "secrets")
    assert b"TRIED secrets NOTHING" in outcome.log
    _measured_honestly(outcome)


def test_a_worker_that_forks_per_call_is_flagged(judge_package: JudgePackage) -> None:
    """Children left running after a call are seen by the runner, not reported by the worker."""
    cheat = FORK_PER_CALL
    outcome = judge_package(JUDGE, {"kernel.py": cheat})
    _tried(outcome, "fork_per_call")
    assert "extra_processes" in _flags(outcome)


def test_a_call_no_slower_than_the_channel_is_no_measurement(
    judge_package: JudgePackage,
) -> None:
    """A candidate that does nothing but hand back a ready array costs what the trusted no-op
    costs, measured by the same windows (plus the copy of its output): its figure sits within
    the validity gate's factor of the resolution, so the gate says it is no measurement. (Its
    `below_channel_floor` flag compares fastest windows with the no-op's, which copies no
    output; whether a 64 KiB copy stays under that bound depends on the host's load.)"""
    cheat = """
import numpy as np
_ready = {}
def rmsnorm(x, w):
    if x.shape not in _ready:  # the first call right, to be measured at all; then no work
        print("TRIED no_work", flush=True)
        inv = 1.0 / np.sqrt(np.mean(x.astype(np.float64) ** 2, axis=1, keepdims=True) + 1e-6)
        _ready[x.shape] = (x * inv * w).astype(np.float32)
    return _ready[x.shape]
"""
    outcome = judge_package(JUDGE, {"kernel.py": cheat})
    _tried(outcome, "no_work")
    result = _rejected(outcome)
    for workload in result["workloads"]:  # nothing subtracted, and no figure of work either
        assert workload["stats"]["median"] < RESOLVED_FACTOR * workload["resolution"], workload
    assert result["validity"]["measured"] is False
