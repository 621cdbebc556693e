"""The judge: a board's `benchmark.py` declares a `Benchmark`; this module measures it.

The benchmark names the candidate's entry point (`module:function` in `src/`), the workloads,
the input generator, the reference and the tolerances; `Benchmark.main()` does the rest, as
JUDGING.md's shape asks:

- the candidate runs in its own worker, which the runner starts in a separate sandbox on
  request (`Control.spawn`); this process never imports a line of `src/`;
- every call, warm-up included, gets new inputs drawn from the run's secret seed, written into
  a shared-memory slot just before the call, with the output region poisoned first; a call
  is timed by this process's clock from the message that starts it to the one that ends it;
- the channel's own cost is measured on a trusted no-op worker (`@calibrate`) of the same
  shapes and subtracted (and reported);
- outputs of calls picked after their window (a reservoir over every call) are checked against
  the reference computed on pristine copies; inputs are compared with those copies after
  every call; an output slot that changes after its call is flagged, as are threads or
  processes alive in the worker after a call and CPU time spent outside the windows;
- the result document goes to the runner over `KZ_RESULT_FD`, which no worker holds.
"""

from __future__ import annotations

import json
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kz_harness.ceilings import SUSPECT_SHARE, Ceilings, floor_s
from kz_harness.channel import (
    Channel,
    ChannelClosed,
    Op,
    SlotLayout,
    decode_json,
    make_slot,
    new_shared_memory,
)
from kz_harness.checks import Check, compare
from kz_harness.errors import HarnessError, HarnessUnavailable
from kz_harness.result import RESULT_FD_ENV, build_result
from kz_harness.sidebyside import (
    Comparison,
    compare_side_by_side,
    decisive,
    reference_score,
    speedup_interval,
)
from kz_harness.stats import UNITS, Stats, below_physical_floor
from kz_harness.verdict import baseline_best, geomean, verdict
from kz_harness.worker import CALIBRATE, DEVICE_TIME

__all__ = [
    "CONTROL_FD_ENV",
    "RESULT_FD_ENV",
    "SEED_ENV",
    "Benchmark",
    "Control",
    "Output",
    "Timing",
    "Workload",
    "call_once",
    "device_time_problems",
]

CONTROL_FD_ENV = "KZ_CONTROL_FD"
SEED_ENV = "KZ_SEED"
CONFIRMATION_ENV = "KZ_CONFIRMATION"  # a confirmation run: sample until the score is settled
IMPLEMENTATIONS_ENV = "KZ_IMPLEMENTATIONS"
CPU_ENV = "KZ_CPU"
# What a runner can start beside the candidate, each measured side by side with it: the
# kernel's incumbent (main's src/, which the verdict is against) and the board's pinned
# reference (which the board's score is against).
RIVALS = ("incumbent", "reference")
_SLOTS_PER_WORKLOAD = 2
_CPU_SLACK_NS = 25_000_000  # two 10 ms clock ticks, where CPU time is counted in ticks
_CPU_RATIO = 1.05
# A call's figure under this share of the channel's own cost is not a measurement of the work.
_FLOOR_SHARE = 0.25
# A look after each round only decides whether to sample on: a coarser bootstrap will do (the
# verdict's interval, the judge's and the referee's, takes the full RESAMPLES).
_LOOK_RESAMPLES = 500
# Calls per block. A GPU's event clock is steady, so three calls make a block median there;
# a CPU's wall clock is not, and its calls are cheap.
_MIN_BLOCK_CALLS = 8
_MIN_BLOCK_CALLS_GPU = 3
_MAX_BLOCK_CALLS = 256


@dataclass(frozen=True, slots=True)
class Workload:
    """A named shape of the problem; `params` are what `make_inputs` reads.

    `bytes_moved` (each input read once, the output written once) and `flops` are the least
    work a call must do; with the device's measured ceilings they give the workload's
    physical floor, shown on the result, and a median under it marks the result suspect.
    """

    name: str
    params: Mapping[str, Any] = field(default_factory=dict)
    bytes_moved: int = 0
    flops: int = 0

    def __getitem__(self, key: str) -> Any:
        return self.params[key]


@dataclass(frozen=True, slots=True)
class Output:
    """The declared output of a call: the worker must return exactly this dtype and shape."""

    shape: tuple[int, ...]
    dtype: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Timing:
    """How long and how often each workload is sampled, and how many calls are checked."""

    warmup_s: float = 0.05
    budget_s: float = 0.4
    min_samples: int = 20
    max_samples: int = 5000
    checked_calls: int = 8
    calibration_calls: int = 200
    call_timeout_s: float = 30.0
    min_block_pairs: int = 6
    block_s: float = 0.02


@dataclass(slots=True)
class _Flags:
    items: dict[str, str] = field(default_factory=dict)

    def add(self, code: str, message: str) -> None:
        self.items.setdefault(code, message)

    def to_list(self) -> list[dict[str, str]]:
        return [{"code": code, "message": message} for code, message in self.items.items()]


class CandidateFailed(HarnessError):
    """The candidate could not load, raised in a call, returned a bad output or died."""


class Link:
    """The judge's end of one worker's channel."""

    def __init__(self, name: str, worker: int, channel: Channel, timeout_s: float) -> None:
        self.name = name
        self.worker = worker
        self.channel = channel
        channel.sock.settimeout(timeout_s)

    def request(self, op: int, document: Mapping[str, Any], fds: Sequence[int] = ()) -> None:
        self.send(op, document, fds)
        self.answered()

    def send(self, op: int, document: Mapping[str, Any], fds: Sequence[int] = ()) -> None:
        """Send a request without waiting (`answered` waits), so workers work in parallel."""
        self.channel.send_json(op, document, fds)

    def answered(self) -> None:
        self._answered()

    def ask(self, op: int, document: Mapping[str, Any]) -> dict[str, Any]:
        """Send a request and return the document its OK carries."""
        self.send(op, document)
        return decode_json(self._answered())

    def _answered(self) -> bytes:
        answer, payload = self._answer()
        if answer != Op.OK:
            raise CandidateFailed(f"the {self.name} worker refused: {_message(payload)}")
        return payload

    def call(self, slot: int) -> tuple[int, int | None]:
        """Run one call in `slot`: the judge's wall time of it in ns, and the device time the
        worker reports on a GPU (None on a CPU)."""
        begin = time.perf_counter_ns()
        self.channel.send_call(slot)
        answer, payload = self._answer()
        elapsed = time.perf_counter_ns() - begin
        if answer != Op.DONE:
            raise CandidateFailed(f"a call of the {self.name} failed: {_message(payload)}")
        if len(payload) == DEVICE_TIME.size:
            return elapsed, int(DEVICE_TIME.unpack(payload)[0])
        return elapsed, None

    def _answer(self) -> tuple[int, bytes]:
        try:
            return self.channel.receive_op()
        except TimeoutError:
            raise CandidateFailed(f"the {self.name} did not answer in time") from None
        except ChannelClosed as exc:
            raise CandidateFailed(f"the {self.name} worker died ({exc})") from None


def _message(payload: bytes) -> str:
    try:
        return str(decode_json(payload).get("message", "no reason given"))
    except HarnessError:
        return "an unreadable answer"


class Control:
    """The judge's line to the runner: start, stop, inspect and kill workers."""

    def __init__(self, channel: Channel, timeout_s: float = 30.0) -> None:
        self.channel = channel
        self.timeout_s = timeout_s

    def _ask(self, op: int, document: Mapping[str, Any]) -> tuple[dict[str, Any], list[int]]:
        self.channel.send_json(op, document)
        answer, payload, fds = self.channel.receive()
        reply = decode_json(payload)
        if answer != Op.OK:
            for fd in fds:
                os.close(fd)
            raise HarnessError(f"the runner refused: {reply.get('message', '?')}")
        return reply, fds

    def spawn(self, implementation: str) -> Link:
        """A new worker for `implementation` (candidate, or `calibrate` for the no-op)."""
        reply, fds = self._ask(Op.SPAWN, {"implementation": implementation})
        if len(fds) != 1:
            raise HarnessError(f"the runner sent {len(fds)} descriptors for a worker, not 1")
        channel = Channel.from_fd(fds[0])
        return Link(implementation, int(reply["worker"]), channel, self.timeout_s)

    def inspect(self, link: Link) -> dict[str, Any]:
        """{processes, threads, cpu_ns} of the worker's sandbox, as the runner sees them."""
        return self._ask(Op.INSPECT, {"worker": link.worker})[0]

    def stop(self, link: Link) -> None:
        self._ask(Op.STOP, {"worker": link.worker})

    def cont(self, link: Link) -> None:
        self._ask(Op.CONT, {"worker": link.worker})

    def kill(self, link: Link) -> None:
        self._ask(Op.KILL, {"worker": link.worker})


def call_once(entry: str, inputs: Sequence[Any], output: Output) -> Any:
    """Start a candidate worker, call `entry` once on `inputs` and return a copy of its output.

    For judges that must ask the candidate something outside a timed run (a probe, a test
    board); a `Benchmark` never needs it. Raises `CandidateFailed` when the call fails.
    """
    np = _numpy()
    try:
        control = Control(Channel.from_fd(int(os.environ[CONTROL_FD_ENV])))
    except (KeyError, ValueError) as exc:
        raise HarnessError(f"no control channel: run under a runner ({CONTROL_FD_ENV})") from exc
    arrays = [np.ascontiguousarray(a) for a in inputs]
    dtype = np.dtype(output.dtype)
    layout = make_slot(
        [(str(a.dtype), a.shape, a.itemsize) for a in arrays],
        (dtype.name, tuple(output.shape), dtype.itemsize),
    )
    slots = _SlotSet(np, layout, 1)
    try:
        link = control.spawn("candidate")
        link.request(Op.LOAD, {"entry": entry, "path": "src"})
        link.request(Op.SLOTS, {"slots": [layout.to_dict()]}, slots.fds)
        for view, array in zip(slots.inputs[0], arrays, strict=True):
            view[...] = array
        _poison(np, slots.outputs[0])
        link.call(0)
        return slots.outputs[0].copy()
    finally:
        slots.close()


class _SlotSet:
    """The judge's mappings of one workload's slots, with numpy views over them."""

    def __init__(self, np: Any, layout: SlotLayout, count: int) -> None:
        self.layout = layout
        self.fds: list[int] = []
        self.inputs: list[list[Any]] = []
        self.outputs: list[Any] = []
        for _ in range(count):
            fd, memory = new_shared_memory(layout.size)
            self.fds.append(fd)
            self.inputs.append([_view(np, memory, spec) for spec in layout.inputs])
            self.outputs.append(_view(np, memory, layout.output))

    def close(self) -> None:
        for fd in self.fds:
            os.close(fd)
        self.fds = []


def _view(np: Any, memory: Any, spec: Any) -> Any:
    return np.ndarray(spec.shape, dtype=np.dtype(spec.dtype), buffer=memory, offset=spec.offset)


def _poison(np: Any, out: Any) -> None:
    """Fill an output region with what no honest kernel returns before the call."""
    if out.dtype.kind in "fc":
        out.fill(np.nan)
    else:
        out.view(np.uint8).fill(0xA5)


@dataclass(slots=True)
class _Kept:
    inputs: tuple[Any, ...]
    output: Any


@dataclass(frozen=True, slots=True)
class _Beside:
    """A rival measured beside the candidate: its figures, and one log-ratio (candidate over
    rival) per block pair."""

    stats: Stats
    log_ratios: list[float]


@dataclass(slots=True)
class _Measured:
    stats: Stats
    overhead_ns: float
    checks: list[Check]
    cpu: dict[str, int]
    beside: dict[str, _Beside] = field(default_factory=dict)


class Benchmark:
    """A board's judge. See the module docstring; `main()` is what benchmark.py calls."""

    def __init__(
        self,
        *,
        entry: str,
        workloads: Sequence[Workload],
        make_inputs: Callable[[Workload, Any], tuple[Any, ...]],
        reference: Callable[..., Any],
        dtype: str,
        output: Callable[[Workload, tuple[Any, ...]], Output] | None = None,
        atol: float | None = None,
        rtol: float | None = None,
        metric: Mapping[str, str] | None = None,
        margin: float = 0.05,
        timing: Timing | None = None,
        device: str = "cpu",
        device_dtype: str | None = None,
        framework: str | None = None,
        convention: str = "function",
        init: Mapping[str, Any] | None = None,
    ) -> None:
        module, _, function = entry.partition(":")
        if not module or not function:
            raise HarnessError(f"entry must be 'module:function' in src/, got {entry!r}")
        if not workloads:
            raise HarnessError("a benchmark needs at least one workload")
        self.entry = entry
        self.workloads = tuple(workloads)
        self.make_inputs = make_inputs
        self.reference = reference
        self.dtype = dtype
        self.output = output
        self.atol = atol
        self.rtol = rtol
        self.metric = dict(metric or {"name": "latency", "unit": "us", "better": "lower"})
        self.margin = margin
        self.timing = timing or Timing()
        if device not in ("cpu", "cuda"):
            raise HarnessError(f"device must be cpu or cuda, got {device!r}")
        if device_dtype not in (None, "bfloat16"):
            raise HarnessError(f"device_dtype must be bfloat16 or None, got {device_dtype!r}")
        self.device = device
        self.device_dtype = device_dtype
        self.time_unit = self.metric["unit"] if self.metric["unit"] in UNITS else "us"
        # A problem set's board (kz_harness.frameworks): what every worker is told at LOAD, the
        # trusted no-op's included, so each loads the same framework the same way.
        self.load_fields: dict[str, Any] = {}
        if framework is not None:
            if framework != "torch":
                raise HarnessError(f"framework must be torch or None, got {framework!r}")
            self.load_fields = {
                "framework": framework,
                "convention": convention,
                "init": dict(init or {}),
            }

    # --- the run ------------------------------------------------------------------------

    def main(self) -> int:
        """Measure the candidate and send the result to the runner; the process's exit code."""
        try:
            control_fd = int(os.environ[CONTROL_FD_ENV])
            result_fd = int(os.environ[RESULT_FD_ENV])
            seed = int(os.environ[SEED_ENV], 16)
        except (KeyError, ValueError):
            print(
                "benchmark.py is run by the judge, not by hand: use `kz bench DIR` to run it "
                "with the same isolation as a runner",
                file=sys.stderr,
            )
            return 2
        control = Control(Channel.from_fd(control_fd), self.timing.call_timeout_s)
        document = self.run(control, seed)
        with os.fdopen(result_fd, "w") as out:
            out.write(json.dumps(document, allow_nan=False))
        print(document["reason"])
        return 0

    def run(self, control: Control, seed: int) -> dict[str, Any]:
        """Measure every workload and return the result document."""
        np = _numpy()
        cpu = _cpu()
        os.sched_setaffinity(0, {cpu})
        streams = np.random.SeedSequence(seed).spawn(2)
        inputs_rng, pick_rng = np.random.default_rng(streams[0]), np.random.default_rng(streams[1])
        flags = _Flags()
        calibration = control.spawn("calibrate")
        where = {
            "cpu": cpu,
            "device": self.device,
            "device_dtype": self.device_dtype,
            **self.load_fields,
        }
        candidate = control.spawn("candidate")
        available = os.environ.get(IMPLEMENTATIONS_ENV, "candidate").split(",")
        rivals = {name: control.spawn(name) for name in RIVALS if name in available}
        calibration.send(Op.LOAD, {"entry": CALIBRATE, **where})
        candidate.send(Op.LOAD, {"entry": self.entry, "path": "src", **where})
        for rival in rivals.values():
            rival.send(Op.LOAD, {"entry": self.entry, "path": "src", **where})
        try:
            calibration.answered()
        except CandidateFailed as exc:  # the trusted no-op: this runner cannot run the board
            raise HarnessUnavailable(f"this runner cannot run the board's calls: {exc}") from exc
        notes: dict[str, str] = {}
        for name, rival in list(rivals.items()):
            try:
                rival.answered()
            except CandidateFailed as exc:  # main's source no longer runs under this judge
                notes[name] = f"the {name} could not be measured: {exc}"
                del rivals[name]
        measured: list[tuple[Workload, _Measured]] = []
        failure = ""
        ceilings: Ceilings | None = None
        try:
            candidate.answered()
            baseline = control.inspect(calibration)  # what the runtime itself starts (CUDA's)
            _check_alone(control, candidate, flags, "after loading", baseline)
            ceilings = self._ceilings(control, calibration, [candidate, *rivals.values()])
            for workload in self.workloads:
                run = _WorkloadRun(self, np, workload, inputs_rng, pick_rng, flags, baseline)
                measured.append((workload, run.measure(control, candidate, calibration, rivals)))
        except CandidateFailed as exc:
            failure = str(exc)
        return self._document(np, cpu, measured, failure, flags, notes, ceilings)

    def _ceilings(self, control: Control, calibration: Link, others: list[Link]) -> Ceilings | None:
        """The device's ceilings, measured by the trusted calibration worker with everyone
        else stopped; only when a workload declares the work a call must do."""
        if not any(w.bytes_moved or w.flops for w in self.workloads):
            return None
        for link in others:
            control.stop(link)
        try:
            return Ceilings.from_dict(calibration.ask(Op.CEILINGS, {"dtype": self.dtype}))
        except CandidateFailed as exc:  # the trusted worker: this runner cannot measure them
            raise HarnessUnavailable(f"this runner cannot measure its ceilings: {exc}") from exc
        finally:
            for link in others:
                control.cont(link)

    def _floor(
        self, workload: Workload, measured: _Measured, ceilings: Ceilings | None, flags: _Flags
    ) -> dict[str, Any]:
        """The workload's physical floor against the measured ceilings, and how near the
        median came to it; a median under `SUSPECT_SHARE` of it is flagged."""
        if ceilings is None or not (workload.bytes_moved or workload.flops):
            return {}
        seconds, bound = floor_s(ceilings, bytes_moved=workload.bytes_moved, flops=workload.flops)
        value = seconds / UNITS[self.time_unit]
        median = measured.stats.median
        if below_physical_floor(measured.stats, SUSPECT_SHARE * seconds):
            flags.add(
                "below_physical_floor",
                f"{workload.name}: a median of {median:.4g} {self.time_unit} is under the "
                f"physical floor of {value:.4g} {self.time_unit} ({bound}-bound at the "
                "measured ceilings): the work was not all measured, or is less than declared",
            )
        return {
            "floor": {
                "value": value,
                "bound": bound,
                "bytes_moved": workload.bytes_moved,
                "flops": workload.flops,
                "attained": value / median if median > 0 else None,
            }
        }

    def _comparison(self, measured: list[tuple[Workload, _Measured]]) -> Comparison | None:
        """The side-by-side verdict when the incumbent was measured beside the candidate."""
        ratios = _ratios(measured, "incumbent")
        return None if ratios is None else compare_side_by_side(ratios, self.margin)

    def _document(
        self,
        np: Any,
        cpu: int,
        measured: list[tuple[Workload, _Measured]],
        failure: str,
        flags: _Flags,
        notes: Mapping[str, str],
        ceilings: Ceilings | None = None,
    ) -> dict[str, Any]:
        unit = self.metric["unit"]
        checks = [check for _, m in measured for check in m.checks]
        if failure:
            checks.append(Check("candidate", math.inf, math.inf, 0.0, 0.0, False, failure))
        workloads = [
            {
                "name": w.name,
                "value": m.stats.median,
                "stats": m.stats,
                "channel_overhead": m.overhead_ns * UNITS["ns"] / UNITS[self.time_unit],
                **_beside(m),
                **self._floor(w, m, ceilings, flags),
            }
            for w, m in measured
        ]
        passed = (
            bool(checks) and all(c.passed for c in checks) and len(measured) == len(self.workloads)
        )
        value = geomean(max(m.stats.median, 1e-9) for _, m in measured) if measured else None
        comparison = self._comparison(measured) if passed else None
        best = baseline_best()
        if comparison is not None and best is not None:
            accepted, reason = comparison.faster, comparison.reason
        elif passed and value is not None:  # no incumbent, or none measured yet: a first result
            accepted, reason = verdict(
                True, value, best, better=self.metric["better"], margin=self.margin,
                unit=unit,
            )  # fmt: skip
        else:
            accepted = False
            bad = next((c for c in checks if not c.passed), None)
            reason = f"{bad.name}: {bad.reason}" if bad else "nothing could be measured"
        document = build_result(
            accepted=accepted,
            reason=reason,
            metric={**self.metric, "value": value if value is not None else 0.0},
            workloads=workloads,
            checks=checks,
            environment=_environment(np, self.device),
        )
        if value is None:
            document["metric"]["value"] = None
        document["flags"] = flags.to_list()
        if ceilings is not None:
            document["ceilings"] = ceilings.to_dict()
        if comparison is not None:
            document["comparison"] = comparison.to_dict()
        elif "incumbent" in notes:
            document["comparison"] = {"against": None, "reason": notes["incumbent"]}
        score = _ratios(measured, "reference") if passed else None
        if score is not None:
            document["score"] = reference_score(score)
        elif "reference" in notes:
            document["score"] = {"against": None, "reason": notes["reference"]}
        document["timing"] = {
            "method": "judge_clock" if self.device == "cpu" else "cuda_events_bounded",
            "clock": (
                "time.perf_counter_ns around each call, channel overhead subtracted"
                if self.device == "cpu"
                else "CUDA events around each call, bounded by the judge's perf_counter_ns"
            ),
            "cpu": cpu,
            "channel_overhead": {w.name: m.overhead_ns for w, m in measured},
            "channel_overhead_unit": "ns",
            "worker_cpu": {w.name: m.cpu for w, m in measured},
        }
        return document


def _check_alone(
    control: Control, link: Link, flags: _Flags, when: str, baseline: Mapping[str, int]
) -> None:
    """Flag what the runner sees of the worker beyond what the trusted calibration worker,
    loaded the same way, has: one process, its serving thread and the threads the device's
    runtime starts (CUDA's, on a GPU)."""
    seen = control.inspect(link)
    if seen["processes"] > 1:
        flags.add("extra_processes", f"the worker had {seen['processes']} processes {when}")
    allowed = max(int(baseline["threads"]), 1) + seen["processes"] - 1
    if seen["threads"] > allowed:
        flags.add(
            "extra_threads",
            f"the worker had {seen['threads']} threads {when}, the trusted one {allowed}",
        )


def _ratios(measured: list[tuple[Workload, _Measured]], rival: str) -> list[list[float]] | None:
    """Every workload's block log-ratios against `rival`; None unless each has an interval."""
    ratios = [m.beside[rival].log_ratios for _, m in measured if rival in m.beside]
    if not measured or len(ratios) != len(measured) or any(len(r) < 2 for r in ratios):
        return None
    return ratios


def _beside(measured: _Measured) -> dict[str, Any]:
    """A workload's side-by-side figures: each rival's stats, and the speed-up over it with
    the block log-ratios it comes from (`speedup` is over the incumbent, `reference_speedup`
    over the reference)."""
    out: dict[str, Any] = {}
    for name, rival in measured.beside.items():
        if len(rival.log_ratios) < 2:
            continue
        speedup, low, high = speedup_interval([rival.log_ratios])
        out[name] = rival.stats.to_dict()
        out["speedup" if name == "incumbent" else f"{name}_speedup"] = {
            "value": speedup,
            "interval": [low, high],
            "blocks": len(rival.log_ratios),
            "log_ratios": list(rival.log_ratios),
        }
    return out


def _round_to_bf16(np: Any, array: Any) -> Any:
    """float32 values rounded to the nearest bfloat16 (ties to even), kept as float32."""
    if array.dtype != np.float32:
        return array
    bits = array.view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return rounded.astype(np.uint32).view(np.float32)


def _cpu() -> int:
    """The CPU the judge and its workers share: the runner's choice (`KZ_CPU`, so that
    runners sharing a host do not pile onto one), else the last one this process may use."""
    allowed = os.sched_getaffinity(0)
    wanted = os.environ.get(CPU_ENV, "")
    if wanted.isdigit() and int(wanted) in allowed:
        return int(wanted)
    return max(allowed)


def _numpy() -> Any:
    try:
        import numpy
    except ImportError as exc:
        raise HarnessUnavailable("the judge needs numpy for its arrays") from exc
    return numpy


def _environment(np: Any, device: str = "cpu") -> dict[str, str]:
    found = {
        "device": device,
        "machine": platform.machine(),
        "python": platform.python_version(),
        "numpy": np.__version__,
    }
    torch = sys.modules.get("torch")  # a torch board's judge loaded it
    if torch is not None:
        found["torch"] = str(getattr(torch, "__version__", "?"))
    return found


class _Only:
    """Keeps exactly one implementation running: calling it with a link stops the one that
    ran (a stopped process cannot load the machine) and continues the link."""

    def __init__(self, control: Control, running: Link) -> None:
        self.control = control
        self.running = running

    def __call__(self, link: Link) -> None:
        if self.running is not link:
            self.control.stop(self.running)
            self.control.cont(link)
            self.running = link


class _WorkloadRun:
    """One workload: slots, calibration, sampling, the checked reservoir and the flags."""

    def __init__(
        self,
        bench: Benchmark,
        np: Any,
        workload: Workload,
        inputs_rng: Any,
        pick_rng: Any,
        flags: _Flags,
        baseline: Mapping[str, int],
    ) -> None:
        self.bench = bench
        self.baseline = baseline
        self.np = np
        self.workload = workload
        self.rng = inputs_rng
        self.pick = pick_rng
        self.flags = flags
        self.calls = 0
        self.last_device: int | None = None
        self.overhead_ns = 0.0
        self.log_ratios: dict[str, list[float]] = {}
        self.windows = 0  # the candidate's timed windows in ns, for the CPU account
        self.device_pairs: list[tuple[int, int]] = []  # (wall, device) ns of its timed calls
        self.overhead_spread_ns = 0.0
        self.checked_seen = 0
        self._stop = "given"
        self.cpu: dict[str, int] = {}
        self.kept: list[_Kept] = []
        first = self._fresh_inputs()
        out = (
            bench.output(workload, first)
            if bench.output
            else Output(first[0].shape, str(first[0].dtype))
        )
        self.out_dtype = np.dtype(out.dtype)
        layout = make_slot(
            [(str(a.dtype), a.shape, a.itemsize) for a in first],
            (self.out_dtype.name, tuple(out.shape), self.out_dtype.itemsize),
        )
        self.slots = _SlotSet(np, layout, _SLOTS_PER_WORKLOAD)
        self.last_out: list[Any] = [None] * _SLOTS_PER_WORKLOAD

    def _fresh_inputs(self) -> tuple[Any, ...]:
        made = self.bench.make_inputs(self.workload, self.rng)
        made = made if isinstance(made, tuple) else (made,)
        arrays = tuple(self.np.ascontiguousarray(a) for a in made)
        if any(type(a) is not self.np.ndarray or a.dtype.hasobject for a in arrays):
            raise HarnessError("make_inputs must return numpy arrays of numbers")
        if self.bench.device_dtype == "bfloat16":  # what the kernel gets, so the reference too
            arrays = tuple(_round_to_bf16(self.np, a) for a in arrays)
        return arrays

    def measure(
        self,
        control: Control,
        candidate: Link,
        calibration: Link,
        rivals: Mapping[str, Link] | None = None,
    ) -> _Measured:
        layout = self.slots.layout.to_dict()
        others = list((rivals or {}).values())
        measured = [candidate, *others]
        try:
            for link in (calibration, *measured):
                link.request(Op.SLOTS, {"slots": [layout] * _SLOTS_PER_WORKLOAD}, self.slots.fds)
            for link in measured:  # nothing of theirs runs while the channel is timed
                control.stop(link)
            overhead = self._calibrate(calibration)
            self.overhead_ns = overhead
            control.stop(calibration)
            control.cont(candidate)
            self._one_call(candidate, keep=True)  # the untimed first call, checked always
            _check_alone(control, candidate, self.flags, "after its first call", self.baseline)
            if others:
                samples, theirs = self._side_by_side(control, candidate, others)
            else:
                samples, theirs = self._sample(control, candidate), {}
            _check_alone(control, candidate, self.flags, "after the timed calls", self.baseline)
            for link in (calibration, *measured):
                control.cont(link)
        finally:
            self.slots.close()
        stats = self._stats(samples)
        if self.last_device is None and statistics.median(samples) < _FLOOR_SHARE * overhead:
            self.flags.add(
                "below_channel_floor",
                f"{self.workload.name}: calls took hardly longer than the trusted no-op's "
                f"{overhead / 1e3:.1f} us: no work was measured, the work is smaller than the "
                "channel can time, or the channel was tampered with",
            )
        beside = {
            name: _Beside(self._stats(values), self.log_ratios[name])
            for name, values in theirs.items()
        }
        return _Measured(stats, overhead, self._checks(), self.cpu, beside)

    def _value(self, wall: int) -> float:
        """A call's figure: the device time on a GPU, else the wall time less the channel's
        (at least 1 ns; a median near that floor is flagged `below_channel_floor`)."""
        if self.last_device is not None:
            return float(self.last_device)
        return max(wall - self.overhead_ns, 1.0)

    def _stats(self, values: list[float]) -> Stats:
        return Stats.from_samples(values, unit="ns", stop=self._stop).to_unit(self.bench.time_unit)

    def _side_by_side(
        self, control: Control, candidate: Link, others: list[Link]
    ) -> tuple[list[float], dict[str, list[float]]]:
        """The candidate and its rivals in interleaved blocks on the same inputs, in a random
        order each round, every one but the timed one stopped; until the interval against
        the first rival settles (`_settled`) or the budget is spent. Returns the candidate's
        figures and each rival's; each round's log-ratios are kept in `log_ratios`."""
        timing = self.bench.timing
        everyone = [candidate, *others]
        only = _Only(control, candidate)  # measure() left the candidate running, the rest stopped
        block = self._block_size(everyone, only)
        values: dict[str, list[float]] = {link.name: [] for link in everyone}
        self.log_ratios = {link.name: [] for link in others}
        only(candidate)
        before = control.inspect(candidate)
        self.windows = 0
        self.device_pairs = []
        started = time.perf_counter()
        self._stop = "max_samples"
        while len(values[candidate.name]) < timing.max_samples:
            medians = self._round(everyone, only, block, values)
            for link in others:
                ratio = math.log(medians[candidate.name] / medians[link.name])
                self.log_ratios[link.name].append(ratio)
            if len(self.log_ratios[others[0].name]) < timing.min_block_pairs:
                continue
            if self._settled():
                self._stop = "decided"
                break
            if time.perf_counter() - started >= 2 * timing.budget_s:
                self._stop = "budget"
                break
        only(candidate)
        self._account(before, control.inspect(candidate), self.windows)
        if self.device_pairs:
            self._bound(self.device_pairs)
        return values.pop(candidate.name), values

    def _block_size(self, everyone: list[Link], only: _Only) -> int:
        """Calls per block, about `block_s` of the slowest-typical call; after each rival's
        untimed first call and everyone's warm-up, which look like the timed calls."""
        timing = self.bench.timing
        candidate = everyone[0]
        for link in everyone[1:]:
            only(link)
            self._one_call(link, keep=False)
        walls: list[int] = []
        for link in everyone:
            only(link)
            started, count = time.perf_counter(), 0
            while time.perf_counter() - started < timing.warmup_s or not count:
                walls.append(self._one_call(link, keep=link is candidate))
                count += 1
        # The judge's whole cost of a call, not the kernel's: on a GPU drawing and copying
        # the inputs can take far longer than the kernel, and a block is about wall time.
        typical = max(statistics.median(walls), 1.0)
        fewest = _MIN_BLOCK_CALLS_GPU if self.last_device is not None else _MIN_BLOCK_CALLS
        return int(min(max(timing.block_s * 1e9 / typical, fewest), _MAX_BLOCK_CALLS))

    def _round(
        self, everyone: list[Link], only: _Only, block: int, values: dict[str, list[float]]
    ) -> dict[str, float]:
        """One block of every implementation on the same fresh inputs, in a random order;
        each one's block median."""
        candidate = everyone[0]
        inputs = [self._fresh_inputs() for _ in range(block)]
        medians: dict[str, float] = {}
        for index in self.pick.permutation(len(everyone)):
            link = everyone[int(index)]
            only(link)
            timed = []
            for drawn in inputs:
                wall = self._one_call(link, keep=link is candidate, inputs=drawn)
                timed.append(self._value(wall))
                if link is candidate:
                    self.windows += wall
                    if self.last_device is not None:
                        self.device_pairs.append((wall, self.last_device))
            values[link.name].extend(timed)
            medians[link.name] = statistics.median(timed)
        return medians

    def _settled(self) -> bool:
        """Whether sampling can stop: at once when the interval against the incumbent falls
        short of the margin (a result not faster goes on no board); when it clears the
        margin, once it is also narrower than the margin, since a faster result's speed-up is
        a figure the board and the commit show and must come out the same in another task;
        and once the interval against the reference, whose speed-up is the board's score, is
        narrower than the margin. A confirmation run (`KZ_CONFIRMATION`) measures as the run
        it confirms did, its incumbent being main's copy of the same source, and so waits for
        the score alone."""
        margin = self.bench.margin
        intervals = {
            name: speedup_interval([r], resamples=_LOOK_RESAMPLES)[1:]
            for name, r in self.log_ratios.items()
        }
        if os.environ.get(CONFIRMATION_ENV) == "1":  # only the score counts
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
        return True

    def _calibrate(self, calibration: Link) -> float:
        """The channel's cost of a call: on a CPU the no-op's wall time, on a GPU the part of
        the wall time the device events do not cover (copies, flush, channel)."""
        timing = self.bench.timing
        costs = []
        # On a CPU every call draws new inputs, as a timed call does: drawing them leaves the
        # caches as a timed call meets them, and a no-op timed after less of the judge's work
        # would cost less than the channel does. On a GPU the gap is copies and a flush, not
        # cache, and drawing a GPU board's large inputs anew costs far more: once will do.
        once = self._fresh_inputs() if self.bench.device != "cpu" else None
        for _ in range(timing.calibration_calls):
            wall = self._one_call(calibration, keep=False, inputs=once)
            costs.append(wall - (self.last_device or 0))
        costs.sort()
        median = float(costs[len(costs) // 2])
        deviations = sorted(abs(cost - median) for cost in costs)
        self.overhead_spread_ns = float(deviations[len(deviations) // 2])
        return median

    def _sample(self, control: Control, candidate: Link) -> list[float]:
        timing = self.bench.timing
        before = control.inspect(candidate)
        windows = 0
        started = time.perf_counter()
        while time.perf_counter() - started < timing.warmup_s:
            windows += self._one_call(candidate, keep=True)
        samples: list[float] = []
        started = time.perf_counter()
        self._stop = "max_samples"
        pairs: list[tuple[int, int]] = []
        while len(samples) < timing.max_samples:
            wall = self._one_call(candidate, keep=True)
            windows += wall
            samples.append(self._value(wall))
            if self.last_device is not None:
                pairs.append((wall, self.last_device))
            if (
                len(samples) >= timing.min_samples
                and time.perf_counter() - started >= timing.budget_s
            ):
                self._stop = "budget"
                break
        after = control.inspect(candidate)
        self._account(before, after, windows)
        if pairs:
            self._bound(pairs)
        return samples

    def _bound(self, pairs: list[tuple[int, int]]) -> None:
        """The judge's clock bounds the device times the worker reports: none may exceed the
        call's wall time, and the wall time left over may exceed the calibrated gap (copies,
        flush, channel) only by a little, or work ran outside the events."""
        for code, message in device_time_problems(pairs, self.overhead_ns, self.overhead_spread_ns):
            self.flags.add(code, f"{self.workload.name}: {message}")

    def _account(self, before: dict[str, int], after: dict[str, int], windows: int) -> None:
        """Flag CPU time the worker spent outside the calls' windows, or in anything but its
        serving thread (another thread or process doing the work)."""
        main = max(after["main_cpu_ns"] - before["main_cpu_ns"], 0)
        other = max(after["cpu_ns"] - before["cpu_ns"] - main, 0)  # ticks can disagree by one
        self.cpu = {"main_cpu_ns": main, "other_cpu_ns": other, "windows_ns": windows}
        name = self.workload.name
        if main > windows * _CPU_RATIO + _CPU_SLACK_NS:
            self.flags.add(
                "work_outside_window",
                f"{name}: the worker's serving thread used {main / 1e6:.1f} ms of CPU in calls "
                f"that took {windows / 1e6:.1f} ms",
            )
        if other > _CPU_SLACK_NS:
            self.flags.add(
                "background_work",
                f"{name}: other threads or processes of the worker used {other / 1e6:.1f} ms "
                "of CPU while it was timed",
            )

    def _one_call(self, link: Link, *, keep: bool, inputs: tuple[Any, ...] | None = None) -> int:
        index = self.calls % _SLOTS_PER_WORKLOAD
        self.calls += 1
        pristine = self._fresh_inputs() if inputs is None else inputs
        out = self.slots.outputs[index]
        previous = self.last_out[index]
        if previous is not None and not self.np.array_equal(out, previous, equal_nan=True):
            self.flags.add("late_output", f"{self.workload.name}: an output changed after its call")
        for view, array in zip(self.slots.inputs[index], pristine, strict=True):
            view[...] = array
        _poison(self.np, out)
        wall, self.last_device = link.call(index)
        got = out.copy()
        self.last_out[index] = got
        # The same work after every call, whoever made it, so that no implementation meets
        # caches the judge left otherwise (reading the inputs back costs the next call).
        views = self.slots.inputs[index]
        unchanged = all(
            self.np.array_equal(v, p, equal_nan=True) for v, p in zip(views, pristine, strict=True)
        )
        if keep:
            self._after_call(pristine, got, unchanged)
        return wall

    def _after_call(self, pristine: tuple[Any, ...], got: Any, unchanged: bool) -> None:
        if not unchanged:
            self.flags.add("inputs_changed", f"{self.workload.name}: a call changed its inputs")
            self.kept.append(_Kept(pristine, None))  # fails its check for certain
            return
        # Reservoir sampling: every call is equally likely to be checked, decided after it.
        self.checked_seen += 1
        seen = self.checked_seen
        room = self.bench.timing.checked_calls
        if len(self.kept) < room:
            self.kept.append(_Kept(pristine, got))
        else:
            slot = int(self.pick.integers(0, seen))
            if slot < room:
                self.kept[slot] = _Kept(pristine, got)

    def _checks(self) -> list[Check]:
        bench = self.bench
        checks = []
        for number, kept in enumerate(self.kept):
            name = f"{self.workload.name}#{number}"
            if kept.output is None:
                checks.append(
                    Check(name, math.inf, math.inf, 0.0, 0.0, False, "the call changed its inputs")
                )
                continue
            reference = bench.reference(*kept.inputs)
            checks.append(
                compare(kept.output, reference, dtype=bench.dtype, atol=bench.atol,
                        rtol=bench.rtol, name=name)
            )  # fmt: skip
        return _summarised(self.workload.name, checks)


_GAP_SPREADS = 4
_GAP_SHARE = 0.1
_GAP_SLACK_NS = 20_000


def device_time_problems(
    pairs: Sequence[tuple[int, int]], gap_ns: float, spread_ns: float = 0.0
) -> list[tuple[str, str]]:
    """(code, message) for each way reported device times break the judge's bound.

    `pairs` are (judge's wall ns, reported device ns) per timed call; `gap_ns` is the
    calibrated wall time a no-op's events leave uncovered (its median over the calibration
    calls) and `spread_ns` that time's median absolute deviation. The calls' median gap may
    exceed the no-op's by four deviations or a tenth of it, whichever is more, and 20 us: a
    worker that under-reports its device time by more shows it in the gap.
    """
    problems = []
    over = sum(1 for wall, device in pairs if device > wall)
    if over or sum(d for _, d in pairs) > sum(w for w, _ in pairs):
        problems.append(("timing_bound_broken", f"{over} calls reported more device time than "
                         "the judge's clock saw"))  # fmt: skip
    gaps = sorted(wall - device for wall, device in pairs)
    median_gap = gaps[len(gaps) // 2] if gaps else 0
    if median_gap > gap_ns + max(_GAP_SPREADS * spread_ns, _GAP_SHARE * gap_ns) + _GAP_SLACK_NS:
        problems.append(("work_outside_events", f"calls took {median_gap / 1e3:.1f} us more than "
                         f"their device events (a no-op: {gap_ns / 1e3:.1f} us): work ran on "
                         "another stream or after the end event"))  # fmt: skip
    return problems


def _summarised(name: str, checks: list[Check]) -> list[Check]:
    """One check per workload: the worst of its checked calls (all of them must pass)."""
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
