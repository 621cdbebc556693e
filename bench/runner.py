"""Runner overhead per task: claim to result, minus the scripts' own run time.

Submits N tasks whose benchmark is trivial, runs one sandbox runner over them, and for each
task takes (result event time - claim event time) - (the two steps' wall time). Side by side:
the same trivial `build_test_env.py` + `benchmark.py` run directly with `python`, as a ratio.

    .venv/bin/python bench/runner.py [--tasks 200] [--backend sandbox]
"""

from __future__ import annotations

import argparse
import asyncio
import resource
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
from kz_events.lifecycle import SubmissionState, Submit, decide
from kz_events.server import EmbeddedServer
from kz_events.subjects import PACKAGES_BUCKET
from kz_package import pack_directory
from kz_runner.backends import get_backend
from kz_runner.core import Runner, RunnerOptions
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
  "environment": {"device": "cpu"}}, open(os.environ["KZ_RESULT_PATH"], "w"))
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
    """Wall time of running the two scripts with plain python, n times."""
    times = []
    for _ in range(n):
        start = time.perf_counter()
        for script in ("build_test_env.py", "benchmark.py"):
            subprocess.run(
                [sys.executable, f".kernel_package/{script}"],
                cwd=pkg,
                check=True,
                env={"KZ_RESULT_PATH": str(pkg / "r.json"), "PATH": "/usr/bin:/bin"},
                stdout=subprocess.DEVNULL,
            )
        times.append(time.perf_counter() - start)
    return times


def _cpu_s() -> float:
    """CPU time of this process so far, user and system, every thread (not the sandboxes)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def main(tasks: int, backend: str) -> None:
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
            await log.close()
        direct = direct_run_s(pkg, min(tasks, 50))
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


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--backend", default="sandbox")
    args = parser.parse_args()
    asyncio.run(main(args.tasks, args.backend))
