"""The GPU check on a machine without a GPU: the script's one-line exit 77, and its dry run
(the stack with sm90 runners on the stub backend, the sm90 examples imported, their
references and variants submitted and answered, the table printed last)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]


def _has_gpu() -> bool:
    if shutil.which("nvidia-smi") is None:
        return False
    listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=False)
    return "GPU " in listed.stdout


@pytest.mark.skipif(_has_gpu(), reason="this machine has a GPU")
def test_without_a_gpu_the_script_says_so_in_one_line_and_exits_77(tmp_path: Path) -> None:
    done = subprocess.run(
        ["bash", str(REPO / "scripts" / "gpu_check.sh"), str(tmp_path / "out")],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 77, done.stdout + done.stderr
    assert done.stdout.splitlines() == [done.stdout.strip()]
    assert done.stdout.startswith("gpu-check: no CUDA GPU")
    assert not (tmp_path / "out").exists()


def test_the_dry_run_starts_the_stack_and_answers_every_submission(tmp_path: Path) -> None:
    out = tmp_path / "out"
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("KZ_")},
        "KZ_GPU_CHECK_WORK": str(tmp_path / "work"),
        "KZ_GPU_CHECK_RUNNERS": "1",
        "KZ_GPU_CHECK_BUDGET_S": "120",
    }
    done = subprocess.run(
        [sys.executable, "-m", "kz_testing.gpucheck", str(out), "--dry-run"],
        capture_output=True, text=True, timeout=180, check=False, cwd=REPO, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    table = (out / "table.txt").read_text()
    assert done.stdout.endswith(table)  # the table comes last
    rows = {r["check"]: r for r in json.loads((out / "figures.json").read_text())["rows"]}
    assert rows["stack"]["status"] == "PASS"
    references = [r for name, r in rows.items() if name.endswith(" reference")]
    assert references and all(r["status"] == "PASS" for r in references)
    assert len([p for p in out.iterdir()]) <= 8
