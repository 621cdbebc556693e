"""The judge: a board's `benchmark.py` declares a `Benchmark`; this module measures it.

The benchmark names the candidate's entry point (`module:function` in `src/`), the workloads,
the input generator, the reference and the tolerances; `Benchmark.main()` does the rest, as
JUDGING.md's shape asks:

- the candidate runs in its own worker, which the runner starts in a separate sandbox on
  request (`Control.spawn`); this process never imports a line of `src/`; so do the rivals it
  is measured beside (the kernel's incumbent, the board's reference), spawned in an order
  drawn from the task's secret seed and sent exactly the same messages;
- calls are timed in windows of N back to back (`kz_harness.measure`), each call on its own
  freshly drawn inputs in its own slot of the worker's own sealed shared memory, written while
  the worker is stopped, with the output regions poisoned first; this process's clock times
  the whole window and the per-call figure is the window over N: the channel's round trip is
  amortised, never subtracted;
- the trusted no-op worker (`@calibrate`) is timed the same way: its per-call figure is the
  workload's resolution, recorded beside every figure;
- after every window every call's inputs are compared with the pristine copies and every
  output checked cheaply; a reservoir of calls picked after their windows is checked against
  the reference computed on those copies; an output slot that changes after its window is
  flagged, as are threads or processes alive in the worker and CPU time spent outside the
  windows;
- a rival's fault voids the rival (`kz_harness.rivals`), never the candidate; the candidate's
  own failure ends the run with its error (`failure`);
- the result document (`kz_harness.report`) goes to the runner over `KZ_RESULT_FD`, which no
  worker holds.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kz_harness.batch import device_time_problems
from kz_harness.ceilings import Ceilings
from kz_harness.channel import Channel, Op, make_slots
from kz_harness.errors import HarnessError, HarnessUnavailable
from kz_harness.link import CandidateFailed, Control, Link
from kz_harness.measure import WorkloadRun
from kz_harness.report import judge_document
from kz_harness.result import RESULT_FD_ENV
from kz_harness.rivals import RivalBook
from kz_harness.slots import Draw, SlotSet
from kz_harness.stats import UNITS
from kz_harness.task import Flags, Measured, Task, check_alone
from kz_harness.worker import CALIBRATE, keep_freed_memory

__all__ = [
    "CONTROL_FD_ENV",
    "RESULT_FD_ENV",
    "SEED_ENV",
    "Benchmark",
    "CandidateFailed",
    "Control",
    "Link",
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
    """How long and how often each workload is sampled, and how many calls are checked.

    A timed window is about `block_s` of calls (the same number for every implementation);
    `slot_bytes` is the memory one worker's slots may take per workload, which caps the calls
    per window. `min_samples` is the least number of timed windows without rivals,
    `min_block_pairs` the least number of rounds beside them; `budget_s` the time per
    workload (twice that side by side), extended while the figures are not settled.
    `calibration_calls` empty windows give the channel's round trip (information only).
    """

    warmup_s: float = 0.05
    budget_s: float = 0.4
    min_samples: int = 20
    max_samples: int = 5000
    checked_calls: int = 8
    calibration_calls: int = 200
    call_timeout_s: float = 30.0
    min_block_pairs: int = 6
    block_s: float = 0.02
    slot_bytes: int = 64 << 20


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
    arrays = tuple(np.ascontiguousarray(a) for a in inputs)
    dtype = np.dtype(output.dtype)
    layout = make_slots(
        [(str(a.dtype), a.shape, a.itemsize) for a in arrays],
        (dtype.name, tuple(output.shape), dtype.itemsize),
    )
    slots = SlotSet(np, layout)
    try:
        link = control.spawn("candidate")
        link.request(Op.LOAD, {"entry": entry, "path": "src"})
        link.request(Op.SLOTS, layout.to_dict(), [slots.fd])
        slots.prepare(Draw(np, [arrays]))
        link.window([0])
        return slots.collect(1)[0].copy()
    finally:
        slots.release_fd()


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
        self._np: Any = None

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
        keep_freed_memory()  # this process draws and compares arrays of MiBs every window
        np = self._np = _numpy()
        cpu = _cpu()
        os.sched_setaffinity(0, {cpu})
        inputs, pick, order = (
            np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(3)
        )
        offered = os.environ.get(IMPLEMENTATIONS_ENV, "candidate").split(",")
        book = RivalBook(offered)
        where = {
            "cpu": cpu,
            "device": self.device,
            "device_dtype": self.device_dtype,
            **self.load_fields,
        }
        calibration = control.spawn("calibrate")
        calibration.send(Op.LOAD, {"entry": CALIBRATE, **where})
        links = _spawned(control, ["candidate", *book.offered], order)
        for link in links.values():  # the same message whatever the role
            link.send(Op.LOAD, {"entry": self.entry, "path": "src", **where})
        try:
            calibration.answered()
        except CandidateFailed as exc:  # the trusted no-op: this runner cannot run the board
            raise HarnessUnavailable(f"this runner cannot run the board's calls: {exc}") from exc
        task = Task(
            np, control, calibration, links["candidate"],
            {name: links[name] for name in book.offered}, book, Flags(), inputs, pick, {},
            confirming=os.environ.get(CONFIRMATION_ENV) == "1",
        )  # fmt: skip
        measured: list[tuple[Workload, Measured]] = []
        failure: dict[str, str] | None = None
        ceilings: Ceilings | None = None
        try:
            self._loaded(task, links)
            ceilings = self._ceilings(calibration)
            for workload in self.workloads:
                measured.append((workload, WorkloadRun(self, task, workload).measure()))
        except CandidateFailed as exc:
            failure = {"who": "candidate", "stage": exc.stage, "error": exc.error}
        return judge_document(self, np, cpu, measured, failure, task, ceilings)

    def _loaded(self, task: Task, links: Mapping[str, Link]) -> None:
        """Every worker's LOAD answered (a rival that fails is voided, the candidate's failure
        raised), then every one stopped until its windows, and checked for company."""
        control = task.control
        for name, link in links.items():
            try:
                link.answered()
            except CandidateFailed as exc:
                if name == "candidate":
                    raise
                task.void(name, "load_failed", f"the {name} could not be loaded: {exc.error}")
        for link in [task.candidate, *task.rivals.values()]:
            control.stop(link)
        task.baseline = control.inspect(task.calibration)  # what the runtime starts (CUDA's)
        for code, message in check_alone(control, task.candidate, task.baseline, "after loading"):
            task.flags.add(code, message)
        for name, link in list(task.rivals.items()):
            for _code, message in check_alone(control, link, task.baseline, "after loading"):
                task.void(name, "work_left_running", message)

    def _ceilings(self, calibration: Link) -> Ceilings | None:
        """The device's ceilings, measured by the trusted calibration worker with everyone
        else stopped; only when a workload declares the work a call must do."""
        if not any(w.bytes_moved or w.flops for w in self.workloads):
            return None
        try:
            return Ceilings.from_dict(calibration.ask(Op.CEILINGS, {"dtype": self.dtype}))
        except CandidateFailed as exc:  # the trusted worker: this runner cannot measure them
            raise HarnessUnavailable(f"this runner cannot measure its ceilings: {exc}") from exc

    # --- what a workload's measurement asks of the board ---------------------------------

    def fresh_inputs(self, workload: Workload, rng: Any) -> tuple[Any, ...]:
        """One call's inputs, newly drawn from the task's secret stream."""
        np = self._np if self._np is not None else _numpy()
        made = self.make_inputs(workload, rng)
        made = made if isinstance(made, tuple) else (made,)
        arrays = tuple(np.ascontiguousarray(a) for a in made)
        if any(type(a) is not np.ndarray or a.dtype.hasobject for a in arrays):
            raise HarnessError("make_inputs must return numpy arrays of numbers")
        if self.device_dtype == "bfloat16":  # what the kernel gets, so the reference too
            arrays = tuple(_round_to_bf16(np, a) for a in arrays)
        return arrays

    def output_of(self, workload: Workload, inputs: tuple[Any, ...]) -> Output:
        """The declared output of a call on `inputs` (default: the first input's)."""
        if self.output is not None:
            return self.output(workload, inputs)
        return Output(inputs[0].shape, str(inputs[0].dtype))


def _spawned(control: Control, roles: Sequence[str], order: Any) -> dict[str, Link]:
    """A worker for each role, started in an order drawn from the task's secret seed (so a
    worker's place among them says nothing of its role); keyed by role, in that order."""
    links = {}
    for index in order.permutation(len(roles)):
        role = roles[int(index)]
        links[role] = control.spawn(role)
    return links


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
