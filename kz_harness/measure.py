"""One workload measured: the candidate, its rivals and the trusted no-op in timed windows of
the same N calls on the same fresh inputs, each in its own slots.

Per workload: every worker gets its own sealed slots; the no-op's empty windows give the
channel's round trip (information only); each implementation makes an untimed first call and
a few short probe windows, from which N is chosen (the same for everyone); warm-up rounds
then timed rounds follow, each round one window per implementation in a random order on the
same freshly drawn inputs, everyone but the one timed stopped. The no-op is timed in every
round by the same method: its per-call figure is the workload's resolution. Sampling stops by
the side-by-side rule (`_settled`) or at the budget, once extended when the validity gate says
the figures are not settled yet.
"""

from __future__ import annotations

import contextlib
import math
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from kz_harness.batch import (
    LONGEST_WINDOW_BLOCKS,
    Reservoir,
    choose_batch,
    median_spread,
    per_call_ns,
    window_time_problems,
)
from kz_harness.channel import Op, make_slots, slot_bytes
from kz_harness.checks import Check, compare
from kz_harness.errors import HarnessError
from kz_harness.link import CandidateFailed, Control, Link
from kz_harness.rivals import RivalBook, void_code
from kz_harness.sidebyside import decisive, speedup_interval
from kz_harness.slots import Draw, SlotSet
from kz_harness.stats import Stats, percentile
from kz_harness.validity import validity

if TYPE_CHECKING:
    from kz_harness.judge import Benchmark

__all__ = [
    "MAX_BATCH",
    "Beside",
    "Flags",
    "Measured",
    "Task",
    "WorkloadRun",
    "check_alone",
    "summarised",
]

_T = TypeVar("_T")
MAX_BATCH = 1024  # calls per window at most, whatever the memory budget allows
_PROBE_CALLS = 4
_PROBE_WINDOWS = 3
_CPU_SLACK_NS = 25_000_000  # two 10 ms clock ticks, where CPU time is counted in ticks
_CPU_RATIO = 1.05
# Calls under this many times a no-op's are hardly slower than a call that does nothing. Both
# are taken at their fastest windows' tenth percentile: a busy host lengthens the no-op's
# short windows far more, in proportion, than a kernel's, and would flag honest kernels.
_FLOOR_RESOLUTIONS = 3.0
_FLOOR_QUANTILE = 0.1
# A look after each round only decides whether to sample on: a coarser bootstrap will do (the
# verdict's interval, the judge's and the referee's, takes the full RESAMPLES).
_LOOK_RESAMPLES = 500
_BROKEN_KEPT = 3  # failed cheap checks kept per workload (one fails the check already)


@dataclass(slots=True)
class Flags:
    """What the judge saw of the candidate that asks a maintainer for a look."""

    items: dict[str, str] = field(default_factory=dict)

    def add(self, code: str, message: str) -> None:
        self.items.setdefault(code, message)

    def to_list(self) -> list[dict[str, str]]:
        return [{"code": code, "message": message} for code, message in self.items.items()]


@dataclass(slots=True)
class Task:
    """What every workload of one judge task shares: the workers, the secret streams, the
    candidate's flags and the rivals' fates."""

    np: Any
    control: Control
    calibration: Link
    candidate: Link
    rivals: dict[str, Link]  # the live ones; a voided rival is removed (and killed)
    book: RivalBook
    flags: Flags
    inputs_rng: Any
    pick_rng: Any
    baseline: Mapping[str, int]
    confirming: bool = False

    def void(self, name: str, code: str, reason: str) -> None:
        """Void rival `name`: its comparison is dropped for the task, its worker killed."""
        self.book.void(name, code, reason)
        link = self.rivals.pop(name, None)
        if link is not None:
            with contextlib.suppress(HarnessError):  # gone already: nothing of it is read again
                self.control.kill(link)


@dataclass(frozen=True, slots=True)
class Beside:
    """A rival measured beside the candidate: its figures, and one log-ratio (candidate over
    rival) per round."""

    stats: Stats
    log_ratios: list[float]


@dataclass(slots=True)
class Measured:
    stats: Stats
    resolution_ns: float
    batch: int
    round_trip_ns: float
    checks: list[Check]
    cpu: dict[str, int]
    beside: dict[str, Beside] = field(default_factory=dict)


@dataclass(slots=True)
class _Kept:
    inputs: tuple[Any, ...]
    output: Any


@dataclass(slots=True)
class _Impl:
    """One implementation's part in a workload."""

    name: str
    link: Link
    slots: SlotSet
    reservoir: Reservoir
    trusted: bool = False
    kept: list[_Kept] = field(default_factory=list)
    broken: list[str] = field(default_factory=list)
    values: list[float] = field(default_factory=list)  # per-call ns of the timed windows
    device: list[tuple[int, list[int]]] = field(default_factory=list)
    windows_ns: int = 0  # every window's wall time since the CPU account began
    before: dict[str, Any] = field(default_factory=dict)


def check_alone(
    control: Control, link: Link, baseline: Mapping[str, int], when: str
) -> list[tuple[str, str]]:
    """What the runner sees of a worker beyond what the trusted calibration worker, loaded
    the same way, has: one process, its serving thread and the threads the device's runtime
    starts (CUDA's, on a GPU). (code, message) per excess."""
    seen = control.inspect(link)
    found = []
    if seen["processes"] > 1:
        found.append(("extra_processes", f"the worker had {seen['processes']} processes {when}"))
    allowed = max(int(baseline["threads"]), 1) + seen["processes"] - 1
    if seen["threads"] > allowed:
        found.append(
            (
                "extra_threads",
                f"the worker had {seen['threads']} threads {when}, the trusted one {allowed}",
            )
        )
    return found


class WorkloadRun:
    """One workload; `measure()` runs it. See the module docstring."""

    def __init__(self, bench: Benchmark, task: Task, workload: Any) -> None:
        self.bench = bench
        self.task = task
        self.np = task.np
        self.workload = workload
        self.timing = bench.timing
        self.impls: dict[str, _Impl] = {}
        self.log_ratios: dict[str, list[float]] = {}
        self.round_trip_ns = 0.0
        self.batch = 1
        self._stop = "given"
        self._first = self._fresh_inputs()

    # --- the run ---------------------------------------------------------------------

    def measure(self) -> Measured:
        self._open()
        self._round_trip()
        draw = Draw(self.np, [self._first])
        for impl in self._order(self._untrusted()):
            self._window(impl, draw)  # the untimed first call, checked like any
        self._alone("after its first call")
        self.batch = self._probe()
        for impl in self._untrusted():
            impl.before = self.task.control.inspect(impl.link)
            impl.windows_ns = 0
        for _ in range(max(1, round(self.timing.warmup_s / self.timing.block_s))):
            self._round(record=False)
        self._sample()
        return self._finish()

    def _open(self) -> None:
        """Everyone's own sealed slots, sized by the memory budget, handed over."""
        task, np = self.task, self.np
        out = self.bench.output_of(self.workload, self._first)
        out_dtype = np.dtype(out.dtype)
        specs = [(str(a.dtype), a.shape, a.itemsize) for a in self._first]
        out_spec = (out_dtype.name, tuple(out.shape), out_dtype.itemsize)
        per_slot = slot_bytes(specs, out_spec)
        capacity = max(1, min(MAX_BATCH, self.timing.slot_bytes // max(per_slot, 1)))
        layout = make_slots(specs, out_spec, capacity)
        links = {"calibrate": task.calibration, "candidate": task.candidate, **task.rivals}
        for name, link in links.items():
            reservoir = Reservoir(self.timing.checked_calls, task.pick_rng)
            self.impls[name] = _Impl(
                name, link, SlotSet(np, layout), reservoir, trusted=name == "calibrate"
            )
        untrusted = self._untrusted()
        for impl in untrusted:
            task.control.cont(impl.link)
        for impl in self.impls.values():
            impl.link.send(Op.SLOTS, layout.to_dict(), [impl.slots.fd])
        for impl in list(self.impls.values()):
            self._guard(impl, impl.link.answered)
            impl.slots.release_fd()
        for impl in self._untrusted():
            task.control.stop(impl.link)

    def _round_trip(self) -> None:
        """The channel's cost of one round trip: the no-op's empty windows (information)."""
        link = self.task.calibration
        walls = [link.window(())[0] for _ in range(max(self.timing.calibration_calls, 1))]
        self.round_trip_ns = float(statistics.median(walls))

    def _probe(self) -> int:
        """Short windows of every implementation; the calls per window for the rest."""
        count = min(_PROBE_CALLS, self.impls["candidate"].slots.layout.count)
        walls: dict[str, list[int]] = {}
        for _ in range(_PROBE_WINDOWS):
            draw = self._draw(count)
            for impl in self._order(self._untrusted()):
                done = self._window(impl, draw)
                if done is not None:
                    walls.setdefault(impl.name, []).append(done[0])
        estimates = [
            max(statistics.median(w) - self.round_trip_ns, 0.0) / count
            for name, w in walls.items()
            if name in self.impls
        ]
        block_ns = self.timing.block_s * 1e9
        return choose_batch(
            estimates, block_ns=block_ns, capacity=self.impls["candidate"].slots.layout.count,
            longest_ns=LONGEST_WINDOW_BLOCKS * block_ns,
        )  # fmt: skip

    def _sample(self) -> None:
        """Timed rounds until the stop rule says or the budget is spent (extended once when
        the validity gate finds the figures measured but not settled)."""
        timing = self.timing
        sided = bool(self._rivals())
        budget = (2 if sided else 1) * timing.budget_s
        least = timing.min_block_pairs if sided else timing.min_samples
        deadline = time.perf_counter() + budget
        extended = False
        self.log_ratios = {impl.name: [] for impl in self._rivals()}
        self._stop = "max_samples"
        for rounds in range(1, timing.max_samples + 1):
            self._round(record=True)
            if rounds < least:
                continue
            if self._rivals() and self._settled():
                self._stop = "decided"
                break
            if time.perf_counter() >= deadline:
                if not extended and self._unsettled():
                    deadline += 2 * budget
                    extended = True
                    continue
                self._stop = "budget"
                break

    def _round(self, *, record: bool) -> None:
        """One window of every implementation on the same fresh inputs, in a random order."""
        draw = self._draw(self.batch)
        figures: dict[str, float] = {}
        for impl in self._order(list(self.impls.values())):
            done = self._window(impl, draw)
            if done is None or not record:
                continue
            wall, devices = done
            figures[impl.name] = per_call_ns(wall, draw.count, devices)
            impl.values.append(figures[impl.name])
            if devices is not None:
                impl.device.append((wall, devices))
        if not record:
            return
        for impl in self._rivals():
            if impl.name in figures and "candidate" in figures:
                ratio = math.log(figures["candidate"] / max(figures[impl.name], 1e-9))
                self.log_ratios[impl.name].append(ratio)

    # --- one window ------------------------------------------------------------------

    def _window(self, impl: _Impl, draw: Draw) -> tuple[int, list[int] | None] | None:
        """One window of `impl` on `draw`: inputs written and outputs poisoned while it is
        stopped, continued, timed, copied, stopped again, then its inputs compared and its
        outputs checked. None when it is a rival that failed (and is now voided)."""
        control = self.task.control
        count = draw.count
        if impl.slots.prepare(draw) and not impl.trusted:
            self._fault(impl, "late_output", "an output changed after its window")
            if impl.name not in self.impls:
                return None
        if impl.trusted:
            return self._guard(impl, lambda: impl.link.window(range(count)))
        control.cont(impl.link)
        try:
            done = self._guard(impl, lambda: impl.link.window(range(count)))
            got = impl.slots.collect(count) if done is not None else None
        finally:
            if impl.name in self.impls:
                control.stop(impl.link)
        if done is None or got is None:
            return None
        impl.windows_ns += done[0]
        if not self._after(impl, draw, got):
            return None
        return done

    def _after(self, impl: _Impl, draw: Draw, got: Any) -> bool:
        """Every call's inputs compared, every output checked cheaply, the reservoir fed.
        False when `impl` is a rival that failed them (and is now voided)."""
        changed = impl.slots.changed(draw)
        if changed:
            message = f"{len(changed)} of {draw.count} calls of a window changed their inputs"
            self._fault(impl, "inputs_changed", message)
            if impl.name == "candidate":
                raise CandidateFailed(
                    f"{self.workload.name}: {message}", stage="inputs",
                    error=f"InputsChanged: {message}",
                )  # fmt: skip
            return False
        unfinished = impl.slots.unfinished(got)
        if unfinished:
            reason = (
                f"{len(unfinished)} of {draw.count} calls of a window left NaN, Inf or the "
                "judge's poison in their output"
            )
            if impl.name != "candidate":
                self.task.void(impl.name, "wrong_output", f"{self.workload.name}: {reason}")
                del self.impls[impl.name]
                return False
            if len(impl.broken) < _BROKEN_KEPT:
                impl.broken.append(reason)
        for index, place in impl.reservoir.places(draw.count):
            kept = _Kept(tuple(a.copy() for a in draw.call(index)), got[index].copy())
            if place == len(impl.kept):
                impl.kept.append(kept)
            else:
                impl.kept[place] = kept
        return True

    def _guard(self, impl: _Impl, step: Callable[[], _T]) -> _T | None:
        """Run `step` (a worker's answer); a rival's failure voids it (None), the candidate's
        is raised, the trusted no-op's means this runner cannot run the board."""
        try:
            return step()
        except CandidateFailed as exc:
            if impl.name == "candidate":
                raise
            if impl.trusted:
                raise HarnessError(f"the trusted no-op failed: {exc}") from exc
            code = void_code(stage=exc.stage)
            self.task.void(impl.name, code, f"{self.workload.name}: {exc}")
            self.impls.pop(impl.name, None)
            return None

    def _fault(self, impl: _Impl, code: str, message: str) -> None:
        """A fault of `impl`: the candidate's is flagged, a rival is voided for it."""
        text = f"{self.workload.name}: {message}"
        if impl.name == "candidate":
            self.task.flags.add(code, text)
        elif impl.name in self.impls:
            self.task.void(impl.name, void_code(flag=code), text)
            del self.impls[impl.name]

    # --- the end ---------------------------------------------------------------------

    def _finish(self) -> Measured:
        for impl in self._untrusted():
            if impl.slots.late():
                self._fault(impl, "late_output", "an output changed after its window")
        self._alone("after the timed calls")
        cpu = {}
        for impl in self._untrusted():
            account = self._account(impl)
            if impl.name == "candidate":
                cpu = account
        noop = self.impls["calibrate"]
        resolution = float(statistics.median(noop.values))
        self._bounds(noop)
        candidate = self.impls["candidate"]
        checks = self._checks(candidate)
        for impl in self._rivals():
            self._check_rival(impl)
        stats = self._stats(candidate.values)
        fastest = percentile(sorted(candidate.values), _FLOOR_QUANTILE)
        noop_fastest = percentile(sorted(noop.values), _FLOOR_QUANTILE)
        if not candidate.device and fastest < _FLOOR_RESOLUTIONS * noop_fastest:
            self.task.flags.add(
                "below_channel_floor",
                f"{self.workload.name}: calls took hardly longer than the trusted no-op's "
                f"{noop_fastest / 1e3:.2f} us (their fastest windows): no work was measured, "
                "or the work is smaller than the harness can time",
            )
        beside = {}
        for impl in self._rivals():
            self.task.book.measured(impl.name)
            beside[impl.name] = Beside(self._stats(impl.values), self.log_ratios[impl.name])
        return Measured(stats, resolution, self.batch, self.round_trip_ns, checks, cpu, beside)

    def _alone(self, when: str) -> None:
        for impl in self._untrusted():
            for code, message in check_alone(
                self.task.control, impl.link, self.task.baseline, when
            ):
                self._fault(impl, code, message)

    def _account(self, impl: _Impl) -> dict[str, int]:
        """Flag CPU time the worker spent outside its windows, or in anything but its serving
        thread (another thread or process doing the work)."""
        after = self.task.control.inspect(impl.link)
        before = impl.before
        main = max(after["main_cpu_ns"] - before["main_cpu_ns"], 0)
        other = max(after["cpu_ns"] - before["cpu_ns"] - main, 0)  # ticks can disagree by one
        windows = impl.windows_ns
        if main > windows * _CPU_RATIO + _CPU_SLACK_NS:
            self._fault(
                impl,
                "work_outside_window",
                f"the worker's serving thread used {main / 1e6:.1f} ms of CPU in calls that "
                f"took {windows / 1e6:.1f} ms",
            )
        if other > _CPU_SLACK_NS:
            self._fault(
                impl,
                "background_work",
                f"other threads or processes of the worker used {other / 1e6:.1f} ms of CPU "
                "while it was timed",
            )
        return {"main_cpu_ns": main, "other_cpu_ns": other, "windows_ns": windows}

    def _bounds(self, noop: _Impl) -> None:
        """On a GPU: the judge's windows bound the device times every worker reports."""
        if not noop.device:
            return
        gaps = [(wall - sum(d)) / max(len(d), 1) for wall, d in noop.device]
        gap, spread = median_spread(gaps)
        for impl in self._untrusted():
            for code, message in window_time_problems(impl.device, gap, spread):
                self._fault(impl, code, message)

    def _checks(self, impl: _Impl) -> list[Check]:
        bench = self.bench
        checks = [
            Check(f"{self.workload.name}#broken{n}", math.inf, math.inf, 0.0, 0.0, False, reason)
            for n, reason in enumerate(impl.broken)
        ]
        for number, kept in enumerate(impl.kept):
            reference = bench.reference(*kept.inputs)
            checks.append(
                compare(kept.output, reference, dtype=bench.dtype, atol=bench.atol,
                        rtol=bench.rtol, name=f"{self.workload.name}#{number}")
            )  # fmt: skip
        return summarised(self.workload.name, checks)

    def _check_rival(self, impl: _Impl) -> None:
        for check in self._checks(impl):
            if not check.passed:
                self.task.void(impl.name, "wrong_output", f"{check.name}: {check.reason}")
                del self.impls[impl.name]
                return

    # --- helpers ---------------------------------------------------------------------

    def _settled(self) -> bool:
        """Whether sampling can stop: at once when the interval against the incumbent falls
        short of the margin (a result not faster goes on no board); when it clears the
        margin, once it is also narrower than the margin, since a faster result's speed-up is
        a figure the board and the commit show and must come out the same in another task;
        and once the interval against the reference, whose speed-up is the board's score, is
        narrower than the margin. A confirmation run measures as the run it confirms did, its
        incumbent being main's copy of the same source, and so waits for the score alone."""
        margin = self.bench.margin
        intervals = {
            name: speedup_interval([r], resamples=_LOOK_RESAMPLES)[1:]
            for name, r in self.log_ratios.items()
            if name in self.impls and len(r) >= 2
        }
        if self.task.confirming:
            intervals.pop("incumbent", None)
        if "incumbent" in intervals:
            low, high = intervals["incumbent"]
            if not decisive(low, high, margin):
                return False
            if high < 1 + margin:
                return True
            if high > low * (1 + margin):
                return False
        if "reference" in intervals:
            low, high = intervals["reference"]
            return high <= low * (1 + margin)
        return bool(intervals)

    def _unsettled(self) -> bool:
        """Whether the validity gate reads this workload's figures as measured but not yet
        settled (sampling longer may settle them; it cannot make them measured)."""
        noop = self.impls["calibrate"]
        entry: dict[str, Any] = {
            "name": self.workload.name,
            "resolution": statistics.median(noop.values) if noop.values else None,
            "stats": {"median": _median(self.impls["candidate"].values),
                      "samples": list(self.impls["candidate"].values)},
        }  # fmt: skip
        for impl in self._rivals():
            entry[impl.name] = {"median": _median(impl.values)}
            key = "speedup" if impl.name == "incumbent" else f"{impl.name}_speedup"
            entry[key] = {"log_ratios": list(self.log_ratios[impl.name])}
        document: dict[str, Any] = {"metric": {"unit": "ns"}, "workloads": [entry]}
        if "incumbent" in self.impls:
            document["comparison"] = {"against": "incumbent"}
        gate = validity(document)
        return gate.measured and not gate.settled

    def _fresh_inputs(self) -> tuple[Any, ...]:
        return self.bench.fresh_inputs(self.workload, self.task.inputs_rng)

    def _draw(self, count: int) -> Draw:
        return Draw(self.np, [self._fresh_inputs() for _ in range(count)])

    def _order(self, impls: Sequence[_Impl]) -> list[_Impl]:
        return [impls[int(i)] for i in self.task.pick_rng.permutation(len(impls))]

    def _untrusted(self) -> list[_Impl]:
        return [impl for impl in self.impls.values() if not impl.trusted]

    def _rivals(self) -> list[_Impl]:
        return [impl for name, impl in self.impls.items() if name not in ("calibrate", "candidate")]

    def _stats(self, values: list[float]) -> Stats:
        stats = Stats.from_samples(values, unit="ns", stop=self._stop)
        return stats.to_unit(self.bench.time_unit)


def _median(values: Sequence[float]) -> float | None:
    return float(statistics.median(values)) if values else None


def summarised(name: str, checks: list[Check]) -> list[Check]:
    """One check per workload: the worst of its checked calls (all of them must pass)."""
    if not checks:
        return []
    failed = [c for c in checks if not c.passed]
    if failed:
        worst = failed[0]
        reason = f"{len(failed)} of {len(checks)} checked calls failed: {worst.reason}"
        return [Check(name, worst.max_abs_err, worst.max_rel_err, worst.atol, worst.rtol, False,
                      reason)]  # fmt: skip
    worst_abs = max(c.max_abs_err for c in checks)
    worst_rel = max(c.max_rel_err for c in checks)
    first = checks[0]
    return [Check(name, worst_abs, worst_rel, first.atol, first.rtol, True)]
