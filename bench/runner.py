"""Runner overhead per task, and the cost of running the candidate apart from its judge.

1. Platform overhead: submits N tasks whose benchmark is trivial (it sends a fixed result
   document over `KZ_RESULT_FD`), runs one runner over them, and for each task takes (result
   event time - claim event time) - (the two steps' wall time). Side by side: the same
   trivial `build_test_env.py` + `benchmark.py` run directly with `python` (given a pipe as
   its `KZ_RESULT_FD`, as the runner gives one), as a ratio.
2. Separation: M tasks of the RMSNorm example kernel through `execute_task` in the same
   backend, twice and interleaved: (a) its board's real judge (`kz_harness.Benchmark`: the
   candidate in its own sandboxed worker, calibration, checked calls), with a short timing
   (`SEPARATED_TIMING`); (b) an in-process judge doing the same work in one process: the
   kernel's source and the board's benchmark.py embedded in its benchmark.py (the judge's
   sandbox does not see the work dir), the same workloads, inputs and reference, timed by
   `kz_harness.bench_cpu` with the same warm-up, budget and sample bounds (no cache flush and
   no early stop, as the judge does neither), the same number of calls checked with
   `kz_harness.compare`, the document sent with `kz_harness.write_result`. Both judges are
   pinned to one CPU. Per task: the wall time of `execute_task` (build step + judge step);
   printed for (a), (b) and their difference per pair, p50 and p90, and the ratio.

    .venv/bin/python bench/runner.py [--tasks 200] [--separation-tasks 30] [--backend sandbox]

`--tasks 0` or `--separation-tasks 0` skips that part.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

from kz_events.eventlog import EventLog, LogOptions
from kz_events.events import EventMeta, SubmissionClaimed, SubmissionResult
from kz_events.ids import KernelId
from kz_events.lifecycle import SubmissionState, Submit, decide
from kz_events.server import EmbeddedServer
from kz_events.subjects import PACKAGES_BUCKET
from kz_package import pack_directory, validate_result_document
from kz_runner.backends import get_backend
from kz_runner.backends.base import Backend
from kz_runner.core import HARNESS_DIR, Runner, RunnerOptions
from kz_runner.execute import TaskOutcome, TaskSpec, execute_task
from kz_runner.native import NativeTransport
from kz_runner.transport import RunnerInfo
from kz_testing import package_files, write_package

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples/kernels/cpu/Norm/RMSNorm/fp32/numpy_ref"
KERNEL_ID = "cpu/Norm/RMSNorm/fp32/numpy_ref"

TRIVIAL_BENCH = """
import json, os
json.dump({"schema_version": 1, "accepted": True, "reason": "trivial",
  "metric": {"name": "latency", "unit": "us", "better": "lower", "value": 1.0},
  "workloads": [{"name": "w", "value": 1.0, "stats": {"median": 1.0, "mean": 1.0,
    "stdev": 0.0, "min": 1.0, "max": 1.0, "p10": 1.0, "p90": 1.0, "samples": [1.0]}}],
  "correctness": {"passed": True, "checks": [{"name": "w", "max_abs_err": 0.0,
    "max_rel_err": 0.0, "atol": 0.0, "rtol": 0.0, "passed": True}]},
  "environment": {"device": "cpu"}}, os.fdopen(int(os.environ["KZ_RESULT_FD"]), "w"))
"""


def trivial_package(root: Path) -> Path:
    """The example kernel's source with the trivial scripts, as a folder (it is also run
    directly)."""
    src = {path.name: path.read_text() for path in sorted((EXAMPLE / "src").iterdir())}
    files = package_files(
        KERNEL_ID, benchmark=TRIVIAL_BENCH, build_test_env="print('ready')\n", src=src
    )
    return write_package(root / "trivial", files)


def direct_run_s(pkg: Path, n: int) -> list[float]:
    """Wall time of running the two scripts with plain python, n times; the benchmark gets
    the write end of a pipe as `KZ_RESULT_FD` and its document is read to the end."""
    times = []
    for _ in range(n):
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, ".kernel_package/build_test_env.py"],
            cwd=pkg,
            check=True,
            env={"PATH": "/usr/bin:/bin"},
            stdout=subprocess.DEVNULL,
        )
        read_end, write_end = os.pipe()
        try:
            subprocess.run(
                [sys.executable, ".kernel_package/benchmark.py"],
                cwd=pkg,
                check=True,
                env={"KZ_RESULT_FD": str(write_end), "PATH": "/usr/bin:/bin"},
                stdout=subprocess.DEVNULL,
                pass_fds=(write_end,),
            )
            os.close(write_end)
            write_end = -1
            document = b""
            while chunk := os.read(read_end, 1 << 16):
                document += chunk
        finally:
            os.close(read_end)
            if write_end >= 0:
                os.close(write_end)
        times.append(time.perf_counter() - start)
        if not document.startswith(b"{"):
            raise RuntimeError("the trivial benchmark sent no result document")
    return times


def _cpu_s() -> float:
    """CPU time of this process so far, user and system, every thread (not the sandboxes)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def platform_overhead(tasks: int, backend: str) -> None:
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        pkg = trivial_package(tmp)
        with EmbeddedServer(tmp / "nats") as server:
            log = await EventLog.connect(server.url, LogOptions())
            await log.ensure()
            digest = pack_directory(pkg, tmp / "p.tgz")
            await log.put_object(PACKAGES_BUCKET, digest, tmp / "p.tgz")
            size = (tmp / "p.tgz").stat().st_size  # small: the runner reads it in memory
            for _ in range(tasks):
                meta = EventMeta(
                    event_id=str(uuid.uuid4()), occurred_at=datetime.now(UTC), actor="b"
                )
                (event,) = decide(
                    SubmissionState(),
                    Submit(
                        meta=meta,
                        submission_id=str(uuid.uuid4()),
                        kernel_id=KERNEL_ID,
                        submitter_id="bench",
                        package_digest=digest,
                        package_size=size,
                    ),
                )
                await log.append(event, expect=0)
            info = RunnerInfo(runner_id="bench", arches=("cpu",), device="cpu", backend=backend)
            runner = Runner(
                info,
                NativeTransport(log),
                get_backend(backend),
                RunnerOptions(workdir=tmp / "work", heartbeat_s=5, poll_s=1),
            )
            started, cpu_before = time.perf_counter(), _cpu_s()
            await runner.run(asyncio.Event(), max_tasks=tasks)
            elapsed, runner_cpu = time.perf_counter() - started, _cpu_s() - cpu_before
            claims: dict[str, datetime] = {}
            overheads: list[float] = []
            script_times: list[float] = []
            bad: list[str] = []
            async for _, event in log.replay(1):
                if isinstance(event, SubmissionClaimed):
                    claims[event.submission_id] = event.occurred_at
                elif isinstance(event, SubmissionResult):
                    total = (event.occurred_at - claims[event.submission_id]).total_seconds()
                    steps = event.timings.get("build_test_env_s", 0.0) + event.timings.get(
                        "benchmark_s", 0.0
                    )
                    overheads.append(total)
                    script_times.append(steps)
                    if event.result is None:
                        bad.append(str(event.outcome))
            await log.close()
        if bad:
            raise RuntimeError(f"{len(bad)} trivial tasks sent no result document: {bad[0]}")
        direct = direct_run_s(pkg, min(tasks, 50))
    report_platform(tasks, backend, elapsed, runner_cpu, overheads, script_times, direct)


def report_platform(
    tasks: int,
    backend: str,
    elapsed: float,
    runner_cpu: float,
    overheads: list[float],
    script_times: list[float],
    direct: list[float],
) -> None:
    pure = [o - s for o, s in zip(overheads, script_times, strict=True)]
    d50 = statistics.median(direct)
    print(
        f"platform overhead per task (claim->result minus the sandboxed steps' wall time): "
        f"p50 {pct(pure, 0.5) * 1e3:.1f} ms   p99 {pct(pure, 0.99) * 1e3:.1f} ms"
    )
    print(
        f"tasks: {tasks}, backend: {backend}, wall {elapsed:.1f}s ({tasks / elapsed:.1f} tasks/s)"
    )
    print(f"runner process CPU per task (all its threads): {runner_cpu / tasks * 1e3:.1f} ms")
    print(
        f"claim->result (platform + scripts):  p50 {pct(overheads, 0.5) * 1e3:7.1f} ms   "
        f"p99 {pct(overheads, 0.99) * 1e3:7.1f} ms"
    )
    print(
        f"scripts run directly with python:    p50 {d50 * 1e3:7.1f} ms   "
        f"p99 {pct(direct, 0.99) * 1e3:7.1f} ms"
    )
    over50 = (pct(overheads, 0.5) - d50) * 1e3
    over99 = (pct(overheads, 0.99) - d50) * 1e3
    print(f"overhead (claim->result - direct p50): p50 {over50:7.1f} ms   p99 {over99:7.1f} ms")
    print(f"ratio claim->result / direct (p50): {pct(overheads, 0.5) / d50:.2f}x")


# --- the cost of the separation ----------------------------------------------------------

SEPARATED_TIMING = "Timing(warmup_s=0.02, budget_s=0.1, calibration_calls=50)"
_MAIN_GUARD = 'if __name__ == "__main__":'

# The in-process judge's body; KERNEL_SOURCE, KERNEL_FILE, FUNCTION and BOARD_SOURCE are
# defined above it. The board's own benchmark.py (run as a module, not as __main__) gives the
# workloads, inputs, reference, tolerances and timing, so both judges do the same work.
INPROCESS_BODY = """
import os
import platform

import numpy as np

from kz_harness import baseline_best, bench_cpu, compare, geomean, verdict, write_result

board = {"__name__": "board"}
exec(compile(BOARD_SOURCE, "board/benchmark.py", "exec"), board)
BENCH = board["BENCHMARK"]
kernel = {"__name__": KERNEL_FILE.removesuffix(".py")}
exec(compile(KERNEL_SOURCE, "src/" + KERNEL_FILE, "exec"), kernel)
candidate = kernel[FUNCTION]


def main():
    cpu = max(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpu})
    rng = np.random.default_rng(int(os.environ["KZ_SEED"], 16))
    timing = BENCH.timing
    checks, workloads = [], []
    for workload in BENCH.workloads:
        def fresh(workload=workload):
            return BENCH.make_inputs(workload, rng)

        for number in range(timing.checked_calls):
            inputs = fresh()
            pristine = [a.copy() for a in inputs]
            out = candidate(*inputs)
            checks.append(compare(out, BENCH.reference(*pristine), dtype=BENCH.dtype,
                                  atol=BENCH.atol, rtol=BENCH.rtol,
                                  name=f"{workload.name}#{number}", inputs_before=pristine,
                                  inputs_after=list(inputs)))
        stats = bench_cpu(candidate, fresh, warmup_s=timing.warmup_s, budget_s=timing.budget_s,
                          min_samples=timing.min_samples, max_samples=timing.max_samples,
                          target_rel_sem=1e-12, flush_cache=False, unit="us")
        workloads.append({"name": workload.name, "value": stats.median, "stats": stats})
    value = geomean(w["value"] for w in workloads)
    accepted, reason = verdict(all(c.passed for c in checks), value, baseline_best(),
                               better="lower", margin=BENCH.margin, unit="us")
    write_result(accepted=accepted, reason=reason,
                 metric={**BENCH.metric, "value": value}, workloads=workloads, checks=checks,
                 environment={"device": "cpu", "machine": platform.machine(),
                              "python": platform.python_version(), "numpy": np.__version__})
    print(reason)


main()
"""


def separated_benchmark() -> str:
    """The example board's benchmark.py with the short timing set on its Benchmark."""
    text = (EXAMPLE / ".kernel_package/benchmark.py").read_text()
    if _MAIN_GUARD not in text or "BENCHMARK = Benchmark(" not in text:
        raise RuntimeError("the example's benchmark.py no longer defines BENCHMARK before main")
    before, after = text.split(_MAIN_GUARD, 1)
    shorter = f"from kz_harness import Timing\n\nBENCHMARK.timing = {SEPARATED_TIMING}\n\n\n"
    return before + shorter + _MAIN_GUARD + after


def inprocess_benchmark(board: str) -> str:
    """An in-process judge of the same board: the kernel's source embedded, run in-process."""
    (kernel_file,) = [path for path in (EXAMPLE / "src").iterdir() if path.suffix == ".py"]
    module = kernel_file.stem
    function = board.split('entry="', 1)[1].split('"', 1)[0].split(":", 1)
    if function[0] != module:
        raise RuntimeError(f"the board's entry {function} is not in src/{kernel_file.name}")
    return (
        f"KERNEL_SOURCE = {kernel_file.read_text()!r}\n"
        f"KERNEL_FILE = {kernel_file.name!r}\n"
        f"FUNCTION = {function[1]!r}\n"
        f"BOARD_SOURCE = {board!r}\n" + INPROCESS_BODY
    )


def example_package(root: Path, benchmark: str) -> Path:
    """The example kernel's folder with `benchmark` as its judge."""
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns("__pycache__"))
    (root / ".kernel_package/benchmark.py").write_text(benchmark)
    return root


def timed_task(package: Path, workdir: Path, backend: Backend) -> tuple[float, TaskOutcome]:
    """One task of `package` through `execute_task`: its wall time and outcome."""
    shutil.copytree(package, workdir)
    spec = TaskSpec(
        kernel_id=KernelId.parse(KERNEL_ID),
        arch="cpu",
        workdir=workdir,
        harness_path=HARNESS_DIR,
        baseline_path=EXAMPLE / ".kernel_package/bench_result.yaml",
        step_timeout_s=60.0,
        task_timeout_s=120.0,
    )
    started = time.perf_counter()
    outcome = execute_task(spec, backend, validate_result=validate_result_document)
    wall = time.perf_counter() - started
    shutil.rmtree(workdir, ignore_errors=True)
    if outcome.reason not in ("accepted", "rejected") or not outcome.result:
        raise RuntimeError(f"{package.name}: {outcome.reason}: {outcome.message}\n"
                           + outcome.log.decode(errors="replace")[-3000:])  # fmt: skip
    if outcome.result["correctness"]["passed"] is not True:
        raise RuntimeError(f"{package.name}: the example kernel failed its checks")
    return wall, outcome


def separation(tasks: int, backend_name: str) -> None:
    backend = get_backend(backend_name)
    backend.check_available()
    walls: dict[str, list[float]] = {"separated": [], "inprocess": []}
    steps: dict[str, list[float]] = {"separated": [], "inprocess": []}
    overhead_us: list[float] = []
    with tempfile.TemporaryDirectory(prefix="kz-bench-separation-") as tmp_s:
        tmp = Path(tmp_s)
        tmp.chmod(0o711)
        separated = separated_benchmark()
        packages = {
            "separated": example_package(tmp / "separated", separated),
            "inprocess": example_package(tmp / "inprocess", inprocess_benchmark(separated)),
        }
        timed_task(packages["separated"], tmp / "warm-a", backend)  # harness copy, caches
        timed_task(packages["inprocess"], tmp / "warm-b", backend)
        for number in range(tasks):
            order = ("separated", "inprocess") if number % 2 == 0 else ("inprocess", "separated")
            for kind in order:
                wall, outcome = timed_task(packages[kind], tmp / f"{kind}-{number}", backend)
                walls[kind].append(wall)
                steps[kind].append(outcome.timings.get("benchmark_s", 0.0))
                if kind == "separated" and outcome.result:
                    overhead_us += [
                        float(w.get("channel_overhead", 0.0)) for w in outcome.result["workloads"]
                    ]
    a, b = walls["separated"], walls["inprocess"]
    added = [x - y for x, y in zip(a, b, strict=True)]
    step_added = [x - y for x, y in zip(steps["separated"], steps["inprocess"], strict=True)]
    a50, b50, d50 = statistics.median(a), statistics.median(b), statistics.median(added)
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    print(
        f"separation: {tasks} task pairs of {KERNEL_ID}, backend {backend_name}, "
        f"interleaved; judge timing {SEPARATED_TIMING} per workload; load average {load}"
    )
    print(
        f"separated judge (candidate in its worker), task wall:  p50 {a50 * 1e3:7.1f} ms   "
        f"p90 {pct(a, 0.9) * 1e3:7.1f} ms"
    )
    print(
        f"in-process judge (same work, one process), task wall: p50 {b50 * 1e3:7.1f} ms   "
        f"p90 {pct(b, 0.9) * 1e3:7.1f} ms"
    )
    print(
        f"separation added per task (a - b, per pair):          p50 {d50 * 1e3:7.1f} ms   "
        f"p90 {pct(added, 0.9) * 1e3:7.1f} ms"
    )
    print(
        f"of which in the judge step (benchmark_s, a - b):       "
        f"p50 {statistics.median(step_added) * 1e3:7.1f} ms   "
        f"p90 {pct(step_added, 0.9) * 1e3:7.1f} ms"
    )
    if overhead_us:
        print(
            f"channel overhead the separated judge subtracted per call: median "
            f"{statistics.median(overhead_us):.1f} us"
        )
    print(f"ratio separated / in-process (p50): {a50 / b50:.2f}x")
    verdict = "PASS" if d50 * 1e3 < 150 else "MISS"
    print(f"separation added per task p50 {d50 * 1e3:.1f} ms (target < 150 ms: {verdict})")


def main(tasks: int, separation_tasks: int, backend: str) -> None:
    if tasks > 0:
        asyncio.run(platform_overhead(tasks, backend))
    if separation_tasks > 0:
        separation(separation_tasks, backend)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--separation-tasks", type=int, default=30)
    parser.add_argument("--backend", default="sandbox")
    args = parser.parse_args()
    main(args.tasks, args.separation_tasks, args.backend)
