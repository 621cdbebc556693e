"""Tasks the GPU check runs through the runner's own execute path (as the sandbox suite's
`judge_package` does), outside the stack: the probe of the harness's figures, the
repeatability pair and the GPU cheating cases."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from kz_events.ids import KernelId
from kz_runner.backends.base import Backend, Bind, StepSpec
from kz_runner.execute import TaskOutcome, harness_root
from kz_runner.limits import StepLimits
from kz_runner.supervisor import HARNESS_INSIDE, HOME_INSIDE
from kz_testing import judging

__all__ = ["KERNEL_ID", "REPO", "judge_task", "probe"]

REPO = judging.REPO
KERNEL_ID = KernelId.parse("sm90/Check/GPU/fp32/gpu_check")
PROBE = Path(__file__).with_name("probe_gpu.py")
LIMITS = StepLimits(memory_bytes=None, max_output_bytes=1024 * 1024)


def judge_task(
    backend: Backend,
    root: Path,
    benchmark: str,
    src: dict[str, str],
    *,
    incumbent: dict[str, str] | None = None,
    baseline: str | None = None,
    cpu: int | None = None,
    timeout_s: float = 60.0,
) -> TaskOutcome:
    """A judge (benchmark.py source) on a candidate (src files), in `backend`, as a runner."""
    return judging.judge_task(
        backend, root, benchmark, src, kernel_id=KERNEL_ID, incumbent=incumbent,
        baseline=baseline, cpu=cpu, step_timeout_s=timeout_s, task_timeout_s=timeout_s,
        limits=LIMITS,
    )  # fmt: skip


def probe(backend: Backend, root: Path, timeout_s: float) -> tuple[dict[str, Any], str]:
    """Run probe_gpu.py as a worker runs (a `devices` step, the harness at /kz/harness);
    its figures and its output."""
    root.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="probe-", dir=root))
    work.chmod(0o755)
    folder = work / "probe"
    folder.mkdir()
    (folder / PROBE.name).write_text(PROBE.read_text())
    step = StepSpec(
        argv=(backend.python, "-I", f"/kz/probe/{PROBE.name}"),
        workdir=work,
        env={"HOME": HOME_INSIDE, "TMPDIR": "/tmp", "LANG": "C.UTF-8"},  # noqa: S108
        timeout_s=timeout_s,
        limits=LIMITS,
        binds=(Bind(harness_root(REPO), HARNESS_INSIDE), Bind(folder, "/kz/probe")),
        tmpfs=(HOME_INSIDE,),
        cwd="/kz/probe",
        devices=True,
    )
    result = backend.run(step)
    output = result.output.decode(errors="replace")
    last = output.strip().splitlines()[-1] if output.strip() else ""
    try:
        figures: dict[str, Any] = json.loads(last)
    except ValueError:
        figures = {"error": f"the probe printed no figures (exit {result.exit_code})"}
    return figures, output
