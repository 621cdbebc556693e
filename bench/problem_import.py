"""Importing a problem set: how long 100 problems take, and how the board list and
`index.json` grow with them.

Writes N KernelBench-format problems (small elementwise and reduction modules, each its own
`Model`, `get_inputs`, `get_init_inputs`) into a checkout-shaped folder, starts an embedded
`nats-server`, `kz api` and `kz projector`, then times, through the real CLI:

- `kz problems import --out DIR` (read, check and write the packages, nothing appended) — the
  baseline of the work that is not the log's;
- `kz problems import` of the whole set (every package stored and announced), then the time
  until the index lists every board's reference and main holds its package;
- the same import again (every problem `unchanged`: nothing appended);
- beside them, the plain `git` CLI adding and committing the `--out` packages in one commit.

and reads `GET /api/boards` and `GET /api/index.json` (bytes and the median of 20 reads)
before and after. Targets: 100 problems imported and committed within 60 s; a re-import
appends nothing.

    .venv/bin/python bench/problem_import.py [--problems 100] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import httpx  # noqa: E402
from e2e import Stack  # noqa: E402

from kz_testing import kz_argv  # noqa: E402

TARGET_S = 60.0
OPS = [
    ("Scale", "x * 1.5"),
    ("Shift", "x + 0.25"),
    ("Relu", "torch.relu(x)"),
    ("Tanh", "torch.tanh(x)"),
    ("Square", "x * x"),
    ("RowSum", "x.sum(dim=-1)"),
    ("RowMax", "x.amax(dim=-1)"),
    ("Softmax", "torch.softmax(x, dim=-1)"),
]
LICENCE = "MIT License\n\nCopyright (c) 2026 kernel zoo bench\n\nPermission is hereby granted.\n"


def write_set(root: Path, count: int) -> Path:
    """A KernelBench-shaped checkout of `count` problems; returns the set's folder."""
    top = root / "KernelBenchLike"
    level = top / "KernelBench" / "level1"
    level.mkdir(parents=True)
    (top / "LICENSE").write_text(LICENCE)
    for n in range(1, count + 1):
        name, expr = OPS[n % len(OPS)]
        rows, cols = 8 + n % 5 * 8, 256 + n % 3 * 128
        (level / f"{n}_{name}_{rows}x{cols}.py").write_text(
            f'''import torch
import torch.nn as nn


class Model(nn.Module):
    """{name} of a {rows} by {cols} batch (problem {n} of the bench set)."""

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return {expr}


batch_size = {rows}
dim = {cols}


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
'''
        )
    return top


def kz(stack: Stack, *args: str) -> tuple[float, dict[str, Any]]:
    """Seconds a `kz` command took, and its --json document."""
    began = time.perf_counter()
    done = subprocess.run(
        kz_argv(*args, "--json"), env=stack.env(), capture_output=True, text=True, check=False
    )
    seconds = time.perf_counter() - began
    if done.returncode != 0:
        raise SystemExit(f"kz {' '.join(args)} exited {done.returncode}:\n{done.stderr}")
    document: dict[str, Any] = json.loads(done.stdout)
    return seconds, document


def reads(client: httpx.Client, path: str, times: int = 20) -> tuple[int, float, Any]:
    """Bytes of one answer, the median milliseconds of `times` reads, and the decoded body."""
    spent = []
    for _ in range(times):
        began = time.perf_counter()
        answer = client.get(path)
        spent.append((time.perf_counter() - began) * 1000)
        answer.raise_for_status()
    return len(answer.content), statistics.median(spent), answer.json()


def kernels_of(index: dict[str, Any]) -> set[str]:
    return {entry["id"] for entry in index.get("kernels", [])}


def wait_committed(
    client: httpx.Client, repo: Path, kernels: set[str], timeout_s: float
) -> tuple[float, float]:
    """Seconds until the index lists every one of `kernels`, and until the kernel repo's main
    holds each one's package (the git projector's commit)."""
    began = time.perf_counter()
    indexed = None
    while time.perf_counter() - began < timeout_s:
        if indexed is None and kernels <= kernels_of(client.get("/api/index.json").json()):
            indexed = time.perf_counter() - began
        if indexed is not None and kernels <= committed(repo):
            return indexed, time.perf_counter() - began
        time.sleep(0.1)
    raise SystemExit(f"the {len(kernels)} kernels were not committed within {timeout_s} s")


def committed(repo: Path) -> set[str]:
    """The kernel ids whose desc.yaml main holds."""
    listed = subprocess.run(
        ["git", "-C", str(repo), "ls-tree", "-r", "--name-only", "HEAD"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    suffix = "/.kernel_package/desc.yaml"
    return {
        line.removesuffix(suffix) for line in listed.stdout.splitlines() if line.endswith(suffix)
    }


def git_baseline(out: Path, scratch: Path) -> float:
    """The plain git CLI committing the same packages in one commit."""
    repo = scratch / "git-baseline"
    shutil.copytree(out, repo)
    began = time.perf_counter()
    for argv in (
        ["git", "init", "-q"],
        ["git", "add", "-A"],
        ["git", "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "import"],
    ):
        subprocess.run(argv, cwd=repo, check=True)
    return time.perf_counter() - began


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", type=int, default=100)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kz-bench-import-") as tmp_name:
        tmp = Path(tmp_name)
        problems = write_set(tmp / "set", args.problems)
        stack = Stack(tmp / "stack", 0, tmp / "work")
        try:
            stack.start()
            figures = measure(stack, problems, tmp, args.problems)
        except BaseException:
            stack.print_errors()
            raise
        finally:
            stack.stop()
    report(figures)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    ok = figures["imported_and_committed_s"] <= TARGET_S and figures["reimport_appended"] == 0
    return 0 if ok else 1


def measure(stack: Stack, problems: Path, tmp: Path, count: int) -> dict[str, Any]:
    with httpx.Client(base_url=stack.base, timeout=30) as client:
        list_before = reads(client, "/api/boards")
        index_before = reads(client, "/api/index.json")
        out_s, written = kz(
            stack, "problems", "import", "--format", "kernelbench", "--out",
            str(tmp / "out"), str(problems),
        )  # fmt: skip
        git_s = git_baseline(tmp / "out", tmp)
        import_s, imported = kz(
            stack, "problems", "import", "--format", "kernelbench", str(problems)
        )
        boards = {row["board"] for row in imported["boards"]}
        kernels = {row["kernel_id"] for row in imported["boards"]}
        index_s, commit_s = wait_committed(client, stack.tmp / "repo", kernels, 300.0)
        again_s, again = kz(stack, "problems", "import", "--format", "kernelbench", str(problems))
        list_after = reads(client, "/api/boards")
        index_after = reads(client, "/api/index.json")
    states = [row["state"] for row in again["boards"]]
    return {
        "problems": count,
        "boards": len(boards),
        "skipped": len(imported["skipped"]),
        "out_s": out_s,
        "git_cli_s": git_s,
        "import_s": import_s,
        "indexed_after_import_s": index_s,
        "committed_after_import_s": commit_s,
        "imported_and_committed_s": import_s + commit_s,
        "reimport_s": again_s,
        "reimport_appended": sum(1 for state in states if state != "unchanged"),
        "written": len(written["boards"]),
        "boards_list": {
            "before_bytes": list_before[0],
            "after_bytes": list_after[0],
            "before_ms": list_before[1],
            "after_ms": list_after[1],
        },
        "index": {
            "before_bytes": index_before[0],
            "after_bytes": index_after[0],
            "before_ms": index_before[1],
            "after_ms": index_after[1],
        },
    }


def report(f: dict[str, Any]) -> None:
    n = f["problems"]
    print(f"problems: {n}, boards made: {f['boards']}, skipped: {f['skipped']}")
    print(
        f"kz problems import --out (no log): {f['out_s']:.2f} s; "
        f"plain git add+commit of the same packages: {f['git_cli_s']:.2f} s"
    )
    print(
        f"kz problems import: {f['import_s']:.2f} s ({f['import_s'] / f['out_s']:.2f}x the --out "
        f"run); in the index {f['indexed_after_import_s']:.2f} s later, on main "
        f"{f['committed_after_import_s']:.2f} s later: "
        f"{f['imported_and_committed_s']:.2f} s in all, "
        f"{f['imported_and_committed_s'] / n * 1000:.0f} ms a problem (target <= {TARGET_S:.0f} s)"
    )
    print(
        f"re-import: {f['reimport_s']:.2f} s, problems appended again: {f['reimport_appended']} "
        "(target 0)"
    )
    for name in ("boards_list", "index"):
        g = f[name]
        grown = (g["after_bytes"] - g["before_bytes"]) / n
        print(
            f"{'GET /api/boards' if name == 'boards_list' else 'GET /api/index.json'}: "
            f"{g['before_bytes']} -> {g['after_bytes']} bytes ({grown:.0f} bytes a board), "
            f"median read {g['before_ms']:.2f} -> {g['after_ms']:.2f} ms"
        )


if __name__ == "__main__":
    raise SystemExit(main())
