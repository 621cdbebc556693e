"""One workload measured: the candidate, its rivals and the trusted no-op in timed windows of
the same N calls on the same fresh inputs, each in its own slots.

Per workload: every worker gets its own sealed slots; the no-op's empty windows give the
channel's round trip (information only); each implementation makes an untimed first call and
a few short probe windows, from which N is chosen (the same for everyone); warm-up rounds
then timed rounds follow, each round one window per implementation in a random order on the
same freshly drawn inputs, everyone but the one timed stopped. The no-op is timed in every
round by the same method: its per-call figure is the workload's resolution. Sampling stops by
the side-by-side rule or at the budget, extended while the validity gate says the figures
are measured but not settled yet (`kz_harness.stoprule`), and in any case at a time limit.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
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
from kz_harness.link import CandidateFailed, Link
from kz_harness.rivals import void_code
from kz_harness.slots import Draw, SlotSet
from kz_harness.stats import Stats, percentile
from kz_harness.stoprule import settled, unsettled
from kz_harness.task import Beside, Measured, Task, check_alone, cpu_account, summarised

if TYPE_CHECKING:
    from kz_harness.judge import Benchmark

__all__ = ["MAX_BATCH", "WorkloadRun"]

_T = TypeVar("_T")
MAX_BATCH = 1024  # calls per window at most, whatever the memory budget allows
_PROBE_CALLS = 4
_PROBE_WINDOWS = 3
# Calls under this many times a no-op's are hardly slower than a call that does nothing. Both
# are taken at their fastest windows' tenth percentile: a busy host lengthens the no-op's
# short windows far more, in proportion, than a kernel's, and would flag honest kernels.
_FLOOR_RESOLUTIONS = 3.0
_FLOOR_QUANTILE = 0.1
# A workload's sampling never lasts longer than this many budgets and seconds more (on a busy
# host the least number of rounds may take several budgets).
_HARD_BUDGETS = 10
_HARD_EXTRA_S = 10.0
# Sampling past the budget while the gate reads the figures as measured but not settled: up
# to this many budgets more, one at a time, so a noisy moment costs time, not a verdict (on this
# 2-core host a window's figure moves by 15-20 % quiet or busy, and the demo boards' scores
# needed 20-45 rounds a workload to settle; four more budgets left a third of them unsettled).
_EXTENSIONS = 9
_BROKEN_KEPT = 3  # failed cheap checks kept per workload (one fails the check already)


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
        self._first_checked()
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
        self._buffers: tuple[Any, ...] = ()  # the draws' arrays, grown as windows grow
        links = {"calibrate": task.calibration, "candidate": task.candidate, **task.rivals}
        for name, link in links.items():
            reservoir = Reservoir(self.timing.checked_calls, task.pick_rng)
            self.impls[name] = _Impl(
                name, link, SlotSet(np, layout), reservoir, trusted=name == "calibrate"
            )
        for impl in self.impls.values():  # every worker is stopped but in its own windows
            task.control.cont(impl.link)
        for impl in self.impls.values():
            impl.link.send(Op.SLOTS, layout.to_dict(), [impl.slots.fd])
        for impl in list(self.impls.values()):
            self._guard(impl, impl.link.answered)
            impl.slots.release_fd()
        for impl in self.impls.values():
            task.control.stop(impl.link)

    def _round_trip(self) -> None:
        """The channel's cost of one round trip: the no-op's empty windows (information)."""
        link, control = self.task.calibration, self.task.control
        control.cont(link)
        walls = [link.window(())[0] for _ in range(max(self.timing.calibration_calls, 1))]
        control.stop(link)
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
        """Timed rounds until the stop rule says or the budget is spent (extended while
        the validity gate finds the figures measured but not settled); whatever the least
        number of rounds, never past `_HARD_BUDGETS` budgets and `_HARD_EXTRA_S` (a worker can
        make its own windows as long as it likes: threads it leaves behind run in them)."""
        timing = self.timing
        sided = bool(self._rivals())
        budget = (2 if sided else 1) * timing.budget_s
        least = timing.min_block_pairs if sided else timing.min_samples
        started = time.perf_counter()
        deadline = started + budget
        hard = started + _HARD_BUDGETS * budget + _HARD_EXTRA_S
        extensions = 0
        self.log_ratios = {impl.name: [] for impl in self._rivals()}
        self._stop = "max_samples"
        for rounds in range(1, timing.max_samples + 1):
            self._round(record=True)
            if rounds >= 2 and time.perf_counter() >= hard:
                self._stop = "time_limit"
                break
            if rounds < least:
                continue
            live = {impl.name: self.log_ratios[impl.name] for impl in self._rivals()}
            if live and settled(live, self.bench.margin, confirming=self.task.confirming):
                self._stop = "decided"
                break
            if time.perf_counter() >= deadline:
                if extensions < _EXTENSIONS and self._unsettled():  # measured, not settled
                    deadline += budget
                    extensions += 1
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
        outputs checked (the trusted no-op goes the same way, unchecked). None when it is a
        rival that failed (and is now voided)."""
        control = self.task.control
        count = draw.count
        if impl.name not in self.impls:  # voided earlier in this round
            return None
        if impl.slots.prepare(draw) and not impl.trusted:
            self._fault(impl, "late_output", "an output changed after its window")
            if impl.name not in self.impls:
                return None
        control.cont(impl.link)
        try:
            done = self._guard(impl, lambda: impl.link.window(range(count)))
            got = impl.slots.collect(count) if done and not impl.trusted else None
        finally:
            if impl.name in self.impls:
                control.stop(impl.link)
        if done is None or impl.trusted:
            return done
        if got is None:
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
                self._void(impl, "wrong_output", f"{self.workload.name}: {reason}")
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
            self._void(impl, void_code(stage=exc.stage), f"{self.workload.name}: {exc}")
            return None

    def _fault(self, impl: _Impl, code: str, message: str) -> None:
        """A fault of `impl`: the candidate's is flagged, a rival is voided for it."""
        text = f"{self.workload.name}: {message}"
        if impl.name == "candidate":
            self.task.flags.add(code, text)
        else:
            self._void(impl, void_code(flag=code), text)

    def _void(self, impl: _Impl, code: str, message: str) -> None:
        """A rival out of the task: voided with its reason, measured no further."""
        if impl.name in self.impls:
            self.task.void(impl.name, code, message)
            del self.impls[impl.name]

    # --- the end ---------------------------------------------------------------------

    def _finish(self) -> Measured:
        for impl in self._untrusted():
            if impl.slots.late():
                self._fault(impl, "late_output", "an output changed after its window")
        self._alone("after the timed calls")
        cpu = {}
        for impl in self._untrusted():
            after = self.task.control.inspect(impl.link)
            account, faults = cpu_account(impl.before, after, impl.windows_ns)
            for code, message in faults:
                self._fault(impl, code, message)
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
        checks = [
            Check(f"{self.workload.name}#broken{n}", math.inf, math.inf, 0.0, 0.0, False, reason)
            for n, reason in enumerate(impl.broken)
        ]
        for number, kept in enumerate(impl.kept):
            checks.append(self._compare(kept, f"{self.workload.name}#{number}"))
        return summarised(self.workload.name, checks)

    def _first_checked(self) -> None:
        """Each first call's output against the reference at once: an output that is wrong
        from the start ends the candidate's task (or voids the rival) before a single timed
        round is spent on it. Every later call stays in the reservoir's draw, so a kernel right
        on its first call and wrong after is caught at the end as before."""
        for impl in self._untrusted():
            if not impl.kept:
                continue
            check = self._compare(impl.kept[0], f"{self.workload.name}#first")
            if check.passed:
                continue
            if impl.name == "candidate":
                raise CandidateFailed(
                    f"{check.name}: {check.reason}", stage="output",
                    error=f"WrongOutput: {check.name}: {check.reason}",
                )  # fmt: skip
            self._void(impl, "wrong_output", f"{check.name}: {check.reason}")

    def _compare(self, kept: _Kept, name: str) -> Check:
        bench = self.bench
        return compare(
            kept.output, bench.reference(*kept.inputs), dtype=bench.dtype, atol=bench.atol,
            rtol=bench.rtol, name=name,
        )  # fmt: skip

    def _check_rival(self, impl: _Impl) -> None:
        for check in self._checks(impl):
            if not check.passed:
                self._void(impl, "wrong_output", f"{check.name}: {check.reason}")
                return

    # --- helpers ---------------------------------------------------------------------

    def _unsettled(self) -> bool:
        rivals = {impl.name: impl.values for impl in self._rivals()}
        return unsettled(
            self.workload.name, self.impls["calibrate"].values, self.impls["candidate"].values,
            rivals, {name: self.log_ratios[name] for name in rivals},
            workloads=len(self.bench.workloads),
        )  # fmt: skip

    def _fresh_inputs(self) -> tuple[Any, ...]:
        return self.bench.fresh_inputs(self.workload, self.task.inputs_rng)

    def _draw(self, count: int) -> Draw:
        """`count` calls' fresh inputs, drawn into the workload's buffers."""
        if not self._buffers or len(self._buffers[0]) < count:
            np = self.np
            self._buffers = tuple(np.empty((count, *a.shape), dtype=a.dtype) for a in self._first)
        for index in range(count):
            for buffer, array in zip(self._buffers, self._fresh_inputs(), strict=True):
                buffer[index] = array
        return Draw.filled(self.np, self._buffers, count)

    def _order(self, impls: Sequence[_Impl]) -> list[_Impl]:
        return [impls[int(i)] for i in self.task.pick_rng.permutation(len(impls))]

    def _untrusted(self) -> list[_Impl]:
        return [impl for impl in self.impls.values() if not impl.trusted]

    def _rivals(self) -> list[_Impl]:
        return [impl for name, impl in self.impls.items() if name not in ("calibrate", "candidate")]

    def _stats(self, values: list[float]) -> Stats:
        stats = Stats.from_samples(values, unit="ns", stop=self._stop)
        return stats.to_unit(self.bench.time_unit)
