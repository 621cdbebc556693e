"""The runner's cost of containing every worker: seconds per judged task, before and after.

Runs N tasks of the RMSNorm example kernel (its board's real judge; the example's own source
as candidate, incumbent and reference, so each task starts four workers) through
`kz_testing.judging.judge_task` on the sandbox backend, once with this tree and once with the
tree at `--base` (the branch point, unpacked with `git archive`), interleaved in a random
order, each task in a fresh process. Prints, per tree, the median and p90 of the task's wall
time (build step, judge step, every worker's start and end) and the containment it used.

Then (`--control-ops N`, this tree only) the judge's control operations on one idle worker
under each containment this host offers: the median time of a STOP+CONT pair and of an
INSPECT, over N of each.

    .venv/bin/python bench/containment_cost.py [--tasks 10] [--base 85b4b54] [--control-ops 200]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples/kernels/cpu/Norm/RMSNorm/fp32/numpy_ref"

ONE_TASK = """
import json, sys, tempfile, time
from pathlib import Path
from kz_events.ids import KernelId
from kz_runner.backends import SandboxBackend
from kz_testing.judging import judge_task

example = Path(sys.argv[1])
src = {p.name: p.read_text() for p in sorted((example / "src").iterdir()) if p.is_file()}
benchmark = (example / ".kernel_package" / "benchmark.py").read_text()
backend = SandboxBackend(sandbox_uid=62990, sandbox_gid=62990, worker_uid_base=62900)
backend.check_available()
with tempfile.TemporaryDirectory() as root:
    started = time.monotonic()
    outcome = judge_task(backend, Path(root), benchmark, src,
                         kernel_id=KernelId.parse("cpu/Norm/RMSNorm/fp32/numpy_ref"),
                         incumbent=src, reference=src)
    wall = time.monotonic() - started
print(json.dumps({"wall_s": wall, "reason": outcome.reason, "timings": outcome.timings,
                  "containment": getattr(backend, "containment", "PID namespace only")}))
"""


def unpack(rev: str, into: Path) -> Path:
    """The repository's tree at `rev`, as files under `into`."""
    archive = into / "tree.tar"
    with archive.open("wb") as out:
        subprocess.run(["git", "-C", str(REPO), "archive", rev], stdout=out, check=True)
    tree = into / "tree"
    with tarfile.open(archive) as tar:
        tar.extractall(tree, filter="data")
    return tree


def one_task(tree: Path) -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run(
        [sys.executable, "-c", ONE_TASK, str(EXAMPLE)],
        cwd=tree, env=env, capture_output=True, text=True, check=True, timeout=600,
    )  # fmt: skip
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def summary(name: str, walls: list[float], containment: str) -> str:
    ordered = sorted(walls)
    p90 = ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]
    return (
        f"{name:>6}: median {statistics.median(walls):.3f} s, p90 {p90:.3f} s "
        f"over {len(walls)} tasks ({containment})"
    )


def control_ops(count: int) -> None:
    """Median STOP+CONT and INSPECT times on an idle worker, per containment mode."""
    from kz_runner.backends import SandboxBackend
    from kz_runner.backends.base import StepSpec
    from kz_runner.backends.cgroups import find_hierarchy

    for mode in [m for m in ("v1", "v2") if find_hierarchy(m)] + ["none"]:
        backend = SandboxBackend(
            sandbox_uid=62990, sandbox_gid=62990, worker_uid_base=62900, cgroups=mode
        )
        with tempfile.TemporaryDirectory(prefix="kz-ops-") as scratch:
            Path(scratch).chmod(0o755)
            step = StepSpec(
                argv=(backend.python, "-c", "import time; time.sleep(120)"),
                workdir=Path(scratch), env={}, timeout_s=120, uid=62901,
            )  # fmt: skip
            worker = backend.spawn(step)
            try:
                pairs, inspects = [], []
                for _ in range(count):
                    started = time.perf_counter()
                    worker.signal(signal.SIGSTOP)
                    worker.signal(signal.SIGCONT)
                    pairs.append(time.perf_counter() - started)
                    started = time.perf_counter()
                    worker.inspect()
                    inspects.append(time.perf_counter() - started)
            finally:
                worker.output()
        print(
            f"{mode:>6}: STOP+CONT median {statistics.median(pairs) * 1e6:.0f} us, "
            f"INSPECT median {statistics.median(inspects) * 1e6:.0f} us ({backend.containment})"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=10)
    parser.add_argument("--base", default="85b4b54")
    parser.add_argument("--control-ops", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kz-cost-") as scratch:
        trees = {"before": unpack(args.base, Path(scratch)), "after": REPO}
        walls: dict[str, list[float]] = {name: [] for name in trees}
        how: dict[str, str] = {}
        for _ in range(args.tasks):
            order = list(trees)
            random.shuffle(order)
            for name in order:
                result = one_task(trees[name])
                if result["reason"] not in ("accepted", "rejected"):
                    raise SystemExit(f"{name}: a task ended {result['reason']}")
                walls[name].append(float(str(result["wall_s"])))
                how[name] = str(result["containment"])
        for name in trees if args.tasks else ():
            print(summary(name, walls[name], how[name]))
    if args.control_ops:
        control_ops(args.control_ops)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
