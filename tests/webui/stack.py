"""The real stack for browser tests: `kz up --backend stub` in its own process group on a free
port and a fresh data dir, seeded with the example kernels and the demo variants."""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from kz_cli.demo import DEMO_SUBMISSIONS, EXAMPLES, prepare
from kz_events.server import free_port
from kz_package import pack_directory
from kz_testing import KzProcess, kz_argv

__all__ = ["MAINTAINER", "Stack", "pack_variant", "start_stack", "submit_package"]

BANNER = re.compile(r"NATS at (nats://[^,\s]+)")  # kz up's banner, printed once it serves
TERMINAL = {"committed", "rejected", "failed", "cancelled", "confirmed", "disputed"}
MAINTAINER = "maintainer"
# What the stub backend answers per demo submission (kernel id, submitter): plausible numbers.
DEMO_VALUES = {
    ("cpu/Norm/RMSNorm/fp32/numpy_ref", "examples"): 412.5,
    ("cpu/Softmax/row/fp32/numpy_ref", "examples"): 388.1,
    ("cpu/GEMM/dense/fp32/numpy_ref", "examples"): 1840.0,
    ("cpu/Norm/RMSNorm/fp32/numpy_vectorized", "ada"): 96.3,
    ("cpu/Norm/RMSNorm/fp32/python_loops", "grace"): 5210.0,
    ("cpu/Softmax/row/fp32/numpy_inplace", "ada"): 121.7,
    ("cpu/GEMM/dense/fp32/blas_matmul", "linus"): 64.2,
    ("cpu/Softmax/row/fp32/numpy_ref", "grace"): 131.7,
}


@dataclass
class Stack:
    """A running `kz up`: its base URL, embedded NATS URL, data dir and seeded submissions."""

    process: KzProcess
    base_url: str
    nats_url: str
    data_dir: Path
    seeded: list[str] = field(default_factory=list)

    def log_tail(self) -> str:
        return self.process.tail(60)

    def stop(self) -> None:
        """SIGTERM the process group, SIGKILL it if it lingers."""
        self.process.stop(timeout_s=20)


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KZ_")}
    env["KZ_LONGPOLL_TIMEOUT_S"] = "30"
    env["KZ_MAINTAINERS"] = MAINTAINER  # reviews the boards a test's submissions open
    return env


def _wait_banner(stack: Stack, deadline: float) -> str:
    while time.monotonic() < deadline:
        if not stack.process.alive:
            raise RuntimeError(f"kz up exited with {stack.process.returncode}:\n{stack.log_tail()}")
        found = BANNER.search((stack.data_dir / "up.log").read_text(errors="replace"))
        if found:
            return found.group(1)
        time.sleep(0.2)
    raise RuntimeError(f"kz up did not come up in time:\n{stack.log_tail()}")


def pack_variant(pkg: Path, out: Path, stub: dict[str, Any] | None = None) -> Path:
    """Pack a package folder into `out`, scripting the stub backend's answer when given."""
    if stub is not None:
        (pkg / "src" / "stub.json").write_text(json.dumps(stub))
    pack_directory(pkg, out)
    return out


def submit_package(
    client: httpx.Client, tarball: Path, kernel_id: str, submitter: str, message: str
) -> str:
    """POST a package as multipart; returns the submission id (asserts 202)."""
    with tarball.open("rb") as handle:
        response = client.post(
            "/api/submissions",
            headers={"X-Submitter-Id": submitter},
            data={"kernel_id": kernel_id, "message": message},
            files={"package": (tarball.name, handle, "application/gzip")},
        )
    assert response.status_code == 202, response.text
    return str(response.json()["submission_id"])


def wait_terminal(client: httpx.Client, ids: list[str], timeout_s: float = 60.0) -> None:
    """Wait until every submission has reached a terminal status."""
    deadline = time.monotonic() + timeout_s
    pending = set(ids)
    while pending and time.monotonic() < deadline:
        for sid in list(pending):
            if client.get(f"/api/submissions/{sid}").json()["submission"]["status"] in TERMINAL:
                pending.discard(sid)
        time.sleep(0.2)
    if pending:
        raise RuntimeError(f"submissions not finished in {timeout_s} s: {sorted(pending)}")


def _seed(stack: Stack) -> None:
    subprocess.run(
        kz_argv("import", str(EXAMPLES), "--nats-url", stack.nats_url, "--submitter", "examples"),
        check=True,
        env=_env(),
        capture_output=True,
        timeout=60,
    )
    with (
        tempfile.TemporaryDirectory(prefix="kz-webui-") as tmp,
        httpx.Client(base_url=stack.base_url, timeout=30) as client,
    ):
        for n, sub in enumerate(DEMO_SUBMISSIONS):
            folder = Path(tmp) / str(n)
            folder.mkdir()
            value = DEMO_VALUES.get((sub.kernel_id, sub.submitter))
            stub = None if value is None else {"verdict": "accept", "value": value}
            tarball = pack_variant(prepare(sub, folder), folder / "package.tar.gz", stub)
            stack.seeded.append(
                submit_package(client, tarball, sub.kernel_id, sub.submitter, sub.message)
            )
        wait_terminal(client, stack.seeded)


def start_stack(root: Path) -> Stack:
    """Start `kz up --backend stub` under `root` and seed it; the caller stops it."""
    port = free_port()
    argv = kz_argv(
        "up", "--backend", "stub", "--no-demo", "--port", str(port), "--data-dir", str(root)
    )
    process = KzProcess("kz up", argv, _env(), root / "up.log").start()
    stack = Stack(process, f"http://127.0.0.1:{port}", "", root)
    try:
        stack.nats_url = _wait_banner(stack, time.monotonic() + 60)
        _seed(stack)
    except BaseException:
        stack.stop()
        raise
    return stack
