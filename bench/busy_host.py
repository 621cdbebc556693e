"""Numbers on a busy host: the figures of issue 25's show list, measured through the real
sandbox and the real judge with busy processes beside them, and the platform's own rule
(`kz_events.ruling.rule`, with its one automatic retry) deciding each verdict.

(a) each demo kernel's committed per-workload median beside a direct `timeit` of the same
    function on the same shapes (ratio, median and worst): `kz up` runs the demo with the
    sandbox runner, and the medians are read from the committed `bench_result.yaml` files;
(b) identical resubmissions accepted (target 0): the RMSNorm board's reference source
    submitted against itself;
(c) an honest kernel 2x faster by construction accepted (target all but one): the incumbent
    does the vectorised RMSNorm twice, the challenger once;
(d) power: a kernel 3 % faster by construction (`bench/verdicts.py`'s scan pair, margin 1 %)
    judged faster, with the busy processes and without them, in one run;
(e) one pair's score over the board's reference measured in separate tasks: spread;
(f) runner seconds per verdict (every judge step a verdict took, retries included).

    .venv/bin/python bench/busy_host.py [--busy 2] [--same 50] [--double 20] [--power 20]
                                        [--repeat 5] [--no-demo] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import ctypes.util
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import timeit
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import httpx  # noqa: E402
import numpy as np  # noqa: E402
import yaml  # noqa: E402

from kz_cli.demo import DEMO_SUBMISSIONS  # noqa: E402
from kz_events.ids import KernelId  # noqa: E402
from kz_events.ruling import Facts, MetricSpec, Ruling, Verdict, rule  # noqa: E402
from kz_runner.backends import SandboxBackend  # noqa: E402
from kz_runner.execute import TaskOutcome  # noqa: E402
from kz_testing.judging import judge_task  # noqa: E402

RMSNORM = REPO / "examples" / "kernels" / "cpu" / "Norm" / "RMSNorm" / "fp32" / "numpy_ref"
RMSNORM_ID = KernelId.parse("cpu/Norm/RMSNorm/fp32/numpy_ref")
LATENCY = MetricSpec("latency", "us", "lower")
BUSY = "while True: pass"

# The vectorised RMSNorm done `times` times: the same code, work proportional to `times`.
RMSNORM_TIMES = """
import numpy as np

EPS = np.float32(1e-6)


def rmsnorm(x, w):
    out = None
    for _ in range({times}):
        inv = 1.0 / np.sqrt(np.einsum("ij,ij->i", x, x)[:, None] / x.shape[1] + EPS)
        out = (x * inv.astype(np.float32)) * w
    return out
"""

SCAN_JUDGE = """
import numpy as np
from kz_harness import Benchmark, Timing, Workload

def make_inputs(workload, rng):
    return (rng.standard_normal((workload["rows"], 256), dtype=np.float32),)

def reference(x):
    return np.cumsum(x.astype(np.float64), axis=1)

BENCHMARK = Benchmark(
    entry="kernel:scan",
    workloads=[Workload("r64", {"rows": 64}), Workload("r128", {"rows": 128})],
    make_inputs=make_inputs, reference=reference, dtype="fp32",
    timing=Timing(warmup_s=0.05, budget_s=1.5), margin=0.01,
)
raise SystemExit(BENCHMARK.main())
"""
SCAN = """
import numpy as np

def scan(x):
    out = None
    for _ in range({times}):
        out = np.cumsum(x, axis=1, dtype=np.float32)
    return out
"""
SCAN_ID = KernelId.parse("cpu/Scan/row/fp32/bench")
BASELINE = "schema_version: 1\nkernel_id: {id}\nbest:\n  value: 1.0\n"


# --- the busy host ---------------------------------------------------------------------


@contextlib.contextmanager
def busy(count: int) -> Iterator[None]:
    """`count` processes spinning on the CPU for as long as the block runs."""
    spinners = [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(count)]
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()


# --- judging as the platform does ----------------------------------------------------


class Judge:
    """Judge tasks through the sandbox and rule on them as the referee would: a result the
    gate or a voided rival sends back is measured once more, as the platform retries it."""

    def __init__(self, root: Path) -> None:
        self.backend = SandboxBackend()
        self.backend.check_available()
        self.root = root
        self.seconds: list[float] = []

    def verdict(self, task: Callable[[], TaskOutcome]) -> tuple[Ruling, TaskOutcome]:
        retried: frozenset[str] = frozenset()
        spent = 0.0
        while True:
            outcome = task()
            spent += outcome.timings.get("benchmark_s", 0.0) + outcome.timings.get("build_s", 0.0)
            ruling = rule(outcome.reason, outcome.result, Facts(metric=LATENCY, retried=retried))
            if ruling.verdict is not Verdict.RETRY:
                self.seconds.append(spent)
                return ruling, outcome
            retried = retried | {ruling.code}

    def rmsnorm(self, src: str, incumbent: str) -> Callable[[], TaskOutcome]:
        benchmark = (RMSNORM / ".kernel_package" / "benchmark.py").read_text()
        reference = (RMSNORM / "src" / "rmsnorm.py").read_text()
        return lambda: judge_task(
            self.backend, self.root, benchmark, {"rmsnorm.py": src}, kernel_id=RMSNORM_ID,
            baseline=BASELINE.format(id=RMSNORM_ID), incumbent={"rmsnorm.py": incumbent},
            reference={"rmsnorm.py": reference}, step_timeout_s=300,
        )  # fmt: skip

    def scan(self, times: int, incumbent: int) -> Callable[[], TaskOutcome]:
        return lambda: judge_task(
            self.backend, self.root, SCAN_JUDGE, {"kernel.py": SCAN.format(times=times)},
            kernel_id=SCAN_ID, baseline=BASELINE.format(id=SCAN_ID),
            incumbent={"kernel.py": SCAN.format(times=incumbent)},
            reference={"kernel.py": SCAN.format(times=incumbent)}, step_timeout_s=300,
        )  # fmt: skip


def _score(outcome: TaskOutcome) -> float | None:
    score = (outcome.result or {}).get("score") or {}
    value = score.get("speedup")
    return float(value) if isinstance(value, int | float) else None


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def _tally(rulings: list[Ruling]) -> str:
    counts: dict[str, int] = {}
    for ruling in rulings:
        key = f"{ruling.verdict}:{ruling.code}" if ruling.verdict != "accepted" else "accepted"
        counts[key] = counts.get(key, 0) + 1
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))


# --- (a) the demo, committed, beside timeit ---------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_demo(root: Path, wait_s: float) -> Path:
    """`kz up` with the sandbox runner until every demo submission has ended; the kernel repo."""
    port = _free_port()
    root.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "KZ_DATA_DIR": str(root / "kz"),
        "KZ_KERNEL_REPO_PATH": str(root / "kernel_data"),
        "KZ_INDEX_PATH": str(root / "index.json"),
    }
    process = subprocess.Popen(
        [str(REPO / ".venv" / "bin" / "kz"), "up", "--port", str(port)],
        env=env, cwd=root, stdout=subprocess.DEVNULL, stderr=(root / "up.log").open("wb"),
        start_new_session=True,
    )  # fmt: skip
    try:
        _wait_for_demo(f"http://127.0.0.1:{port}", wait_s)
    finally:
        os.killpg(process.pid, signal.SIGINT)
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    checkout = root / "checkout"  # the kernel repo is bare: read main's files from a clone
    subprocess.run(["git", "clone", "-q", str(root / "kernel_data"), str(checkout)], check=True)
    return checkout


def _wait_for_demo(base: str, wait_s: float) -> None:
    deadline = time.monotonic() + wait_s
    wanted = len(DEMO_SUBMISSIONS)
    while time.monotonic() < deadline:
        time.sleep(5)
        with contextlib.suppress(httpx.HTTPError):
            listed = httpx.get(f"{base}/api/submissions", params={"limit": 500}, timeout=10)
            items = listed.json().get("items", [])
            open_ = [s for s in items if s["status"] in ("queued", "running", "accepted")]
            if len(items) >= wanted and not open_:
                return
    raise SystemExit(f"the demo did not end within {wait_s:.0f} s")


def _load_benchmark(kernel: Path) -> Any:
    namespace: dict[str, Any] = {"__name__": "kz_bench_judge"}
    source = (kernel / ".kernel_package" / "benchmark.py").read_text()
    exec(compile(source, "benchmark.py", "exec"), namespace)
    return namespace["BENCHMARK"]


def _steady_heap() -> None:
    """Keep freed memory in this process, as a long-running worker's heap does: by default
    glibc returns a freed temporary of 1 MiB or more to the system and faults it back in on
    the next call, which made a plain `timeit` of the vectorised RMSNorm 810 us where the
    same loop with the memory kept takes 112 us (the judge measured 185 us on cold inputs)."""
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    m_trim_threshold, m_mmap_threshold = -1, -3
    libc.mallopt(m_trim_threshold, 1 << 30)
    libc.mallopt(m_mmap_threshold, 1 << 30)


def _timeit(kernel: Path, benchmark: Any, workload: Any) -> float:
    """The kernel's function on the workload's shapes, timed directly: the fastest of seven
    repeats of timeit's own loop (autoranged to 0.2 s; the others met other processes), in the
    benchmark's unit."""
    module, _, function = benchmark.entry.partition(":")
    namespace: dict[str, Any] = {}
    path = kernel / "src" / f"{module}.py"
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    fn = namespace[function]
    inputs = benchmark.make_inputs(workload, np.random.default_rng(1))
    _steady_heap()
    timer = timeit.Timer(lambda: fn(*inputs))
    number, _ = timer.autorange()
    runs = timer.repeat(repeat=7, number=number)
    unit = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[benchmark.time_unit]
    return min(runs) / number / unit


PROBLEM_SETS = {"KernelBench", "GPUMODE", "FlashInfer"}


def demo_figures(repo: Path) -> list[dict[str, Any]]:
    """Per committed demo kernel and workload: the committed median and timeit's."""
    rows = []
    for scoreboard in sorted(repo.glob("cpu/*/*/*/*/.kernel_package/bench_result.yaml")):
        kernel = scoreboard.parents[1]
        if kernel.relative_to(repo).parts[1] in PROBLEM_SETS:
            continue  # a set's convention (a module, a data tuple), not one function to time
        board = yaml.safe_load(scoreboard.read_text()) or {}
        current = board.get("current") or {}
        try:
            benchmark = _load_benchmark(kernel)
        except Exception as exc:
            print(f"  {kernel.relative_to(repo)}: not timed directly ({exc})")
            continue
        by_name = {w.name: w for w in benchmark.workloads}
        for item in current.get("workloads") or []:
            workload = by_name.get(item.get("name"))
            value = (item.get("stats") or {}).get("median", item.get("value"))
            if workload is None or not isinstance(value, int | float):
                continue
            direct = _timeit(kernel, benchmark, workload)
            rows.append({
                "kernel": str(kernel.relative_to(repo)), "workload": workload.name,
                "committed": float(value), "timeit": direct, "ratio": float(value) / direct,
            })  # fmt: skip
    return rows


# --- the run -----------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--busy", type=int, default=2, help="busy processes beside the run")
    parser.add_argument("--same", type=int, default=50)
    parser.add_argument("--double", type=int, default=20)
    parser.add_argument("--power", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-demo", action="store_true")
    parser.add_argument("--demo-wait", type=float, default=1800.0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    figures: dict[str, Any] = {"busy": args.busy}
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kz-busy-") as tmp:
        root = Path(tmp)
        root.chmod(0o755)
        judge = Judge(root / "tasks")
        with busy(args.busy):
            print(f"{args.busy} busy processes; load average {os.getloadavg()[0]:.2f}")
            if not args.no_demo:
                figures["a"] = _demo(root, args.demo_wait)
            figures.update(_verdicts(judge, args))
            figures["d_busy"] = _power(judge, args.power, "busy")
        figures["d_quiet"] = _power(judge, args.power, "quiet")
        seconds = judge.seconds
        figures["f"] = {"median_s": statistics.median(seconds), "p90_s": _p(seconds, 0.9),
                        "verdicts": len(seconds)}  # fmt: skip
        print(f"(f) runner seconds per verdict: median {figures['f']['median_s']:.2f} s, "
              f"p90 {figures['f']['p90_s']:.2f} s over {len(seconds)} verdicts")  # fmt: skip
    print(f"total {time.monotonic() - started:.0f} s")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    return 0


def _demo(root: Path, wait_s: float) -> dict[str, Any]:
    demo_started = time.monotonic()
    rows = demo_figures(run_demo(root / "demo", wait_s))
    ratios = [row["ratio"] for row in rows]
    for row in rows:
        print(f"  {row['kernel']} {row['workload']}: committed {row['committed']:.4g}, "
              f"timeit {row['timeit']:.4g} ({row['ratio']:.2f}x)")  # fmt: skip
    worst = max(ratios, key=lambda r: max(r, 1 / r)) if ratios else float("nan")
    middle = statistics.median(ratios) if ratios else float("nan")
    print(f"(a) demo kernels, committed median over timeit: median {middle:.2f}x,"
          f" worst {worst:.2f}x over {len(rows)} kernel workloads "
          f"({time.monotonic() - demo_started:.0f} s)")  # fmt: skip
    return {"rows": rows, "median": middle, "worst": worst}


def _verdicts(judge: Judge, args: argparse.Namespace) -> dict[str, Any]:
    reference = (RMSNORM / "src" / "rmsnorm.py").read_text()
    same = [judge.verdict(judge.rmsnorm(reference, reference))[0] for _ in range(args.same)]
    accepted = sum(r.verdict is Verdict.ACCEPTED for r in same)
    print(f"(b) identical resubmissions: {accepted} accepted of {args.same} ({_tally(same)}); "
          f"target 0: {'PASS' if accepted == 0 else 'MISS'}")  # fmt: skip
    once, twice = RMSNORM_TIMES.format(times=1), RMSNORM_TIMES.format(times=2)
    double = [judge.verdict(judge.rmsnorm(once, twice)) for _ in range(args.double)]
    won = sum(r.verdict is Verdict.ACCEPTED for r, _ in double)
    print(f"(c) 2x faster by construction: {won} accepted of {args.double} "
          f"({_tally([r for r, _ in double])}); target >= {args.double - 1}: "
          f"{'PASS' if won >= args.double - 1 else 'MISS'}")  # fmt: skip
    scores = [s for _, o in double[: args.repeat] if (s := _score(o)) is not None]
    spread = (max(scores) - min(scores)) / min(scores) if len(scores) > 1 else float("nan")
    print(f"(e) one pair's score in {len(scores)} tasks: {min(scores, default=0):.3f}-"
          f"{max(scores, default=0):.3f}x, spread {spread:.1%}; target <= 3 %: "
          f"{'PASS' if spread <= 0.03 else 'MISS'}")  # fmt: skip
    return {
        "b": {"accepted": accepted, "of": args.same, "tally": _tally(same)},
        "c": {"accepted": won, "of": args.double, "tally": _tally([r for r, _ in double])},
        "e": {"scores": scores, "spread": spread},
    }


def _power(judge: Judge, runs: int, label: str) -> dict[str, Any]:
    faster = [judge.verdict(judge.scan(32, 33))[0] for _ in range(runs)]
    won = sum(r.verdict is Verdict.ACCEPTED for r in faster)
    print(f"(d) 3 % faster by construction, {label}: judged faster {won} of {runs} "
          f"({_tally(faster)})")  # fmt: skip
    return {"faster": won, "of": runs, "tally": _tally(faster)}


if __name__ == "__main__":
    sys.exit(main())
