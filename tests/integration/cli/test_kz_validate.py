"""`kz validate` compares a package's judge with the server's, as the upload does: real `kz up`,
real HTTP, the server's own refusal for the same package."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from kz_events.server import free_port
from kz_package import pack_directory
from kz_testing import KzProcess, kz_argv

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]
RMSNORM = REPO / "examples/kernels/cpu/Norm/RMSNorm/fp32/numpy_ref"
KID = "cpu/Norm/RMSNorm/fp32/numpy_ref"


def kz(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kz_cli.main", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """`kz up --no-demo --backend stub` with the RMSNorm reference committed on main; yields
    its base URL and data dir."""
    root = tmp_path_factory.mktemp("kz-validate")
    port = free_port()
    argv = kz_argv("up", "--no-demo", "--backend", "stub", "--port", str(port),
                   "--data-dir", str(root / "kz"))  # fmt: skip
    up = KzProcess("kz up", argv, _env(root / "kz"), root / "up.log", cwd=root).start()
    url = f"http://127.0.0.1:{port}"
    try:
        up.wait_healthy(url, timeout_s=60)
        sent = kz("submit", str(RMSNORM), "--server", url, "--submitter", "ada",
                  env=_env(root / "kz"))  # fmt: skip
        assert sent.returncode == 0, sent.stdout + sent.stderr
        _wait_judge(url)
        yield url, root / "kz"
    finally:
        up.signal(signal.SIGINT)
        up.wait_or_kill(30)


def _env(data_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KZ_")}
    return {**env, "KZ_DATA_DIR": str(data_dir)}


def _wait_judge(url: str) -> None:
    """Until the git projector stored main's judge bundle of the committed kernel."""
    deadline = time.monotonic() + 30
    while httpx.get(f"{url}/api/kernels/{KID}/judge").status_code != 200:
        assert time.monotonic() < deadline, "main's judge bundle was never stored"
        time.sleep(0.2)


def _changed_benchmark(tmp_path: Path, kernel_id: str = KID) -> Path:
    pkg = tmp_path / "pkg"
    shutil.copytree(RMSNORM, pkg)
    bench = pkg / ".kernel_package" / "benchmark.py"
    bench.write_text(bench.read_text() + "\n# a looser judge\n")
    if kernel_id != KID:
        for name in ("desc.yaml", "bench_result.yaml"):
            path = pkg / ".kernel_package" / name
            path.write_text(path.read_text().replace(KID, kernel_id))
    return pkg


def test_an_unchanged_judge_passes_against_the_kz_up_of_the_data_dir(
    stack: tuple[str, Path],
) -> None:
    """Next to a kz up (its data dir) validate finds the server by itself and says the judge
    is main's."""
    url, data_dir = stack
    done = kz("validate", str(RMSNORM), env=_env(data_dir))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[1] == f"judge: the same as main's on {url}"


def test_a_changed_benchmark_is_refused_as_the_server_refuses_it(
    stack: tuple[str, Path], tmp_path: Path
) -> None:
    """A package whose benchmark.py differs from main's fails validation with the refusal the
    server gives the same package on upload: harness_change_forbidden, naming benchmark.py."""
    url, data_dir = stack
    pkg = _changed_benchmark(tmp_path)
    done = kz("validate", str(pkg), "--against", url, "--json", env=_env(tmp_path / "elsewhere"))
    assert done.returncode == 2, done.stdout + done.stderr  # refused: do not retry as it is
    local = json.loads(done.stdout)["error"]
    tarball = tmp_path / "package.tar.gz"
    pack_directory(pkg, tarball)
    answer = httpx.post(
        f"{url}/api/submissions",
        headers={"X-Submitter-Id": "mallory"},
        data={"kernel_id": KID},
        files={"package": ("package.tar.gz", tarball.read_bytes(), "application/gzip")},
    )
    server = answer.json()["error"]
    assert answer.status_code == 403 and server["code"] == local["code"]
    assert local["code"] == "harness_change_forbidden"
    assert local["message"] == server["message"]
    assert local["details"]["changed"] == server["details"]["changed"] == ["benchmark.py"]
    assert local["details"]["server"] == url
    lines = kz("validate", str(pkg), env=_env(data_dir))
    assert lines.returncode == 2
    assert lines.stdout.startswith("harness_change_forbidden: only maintainers may change")


def test_a_new_kernel_must_carry_its_boards_judge(stack: tuple[str, Path], tmp_path: Path) -> None:
    """A new kernel on the board with its own benchmark.py is refused against the board's
    judge, as the upload refuses it."""
    url, _ = stack
    pkg = _changed_benchmark(tmp_path, "cpu/Norm/RMSNorm/fp32/my_own_judge")
    done = kz("validate", str(pkg), "--against", url, env=_env(tmp_path / "elsewhere"))
    assert done.returncode == 2
    assert done.stdout.strip() == (
        "harness_change_forbidden: a new kernel on board cpu/Norm/RMSNorm/fp32 must carry the "
        f"board's judge (that of {KID}); these differ: benchmark.py (as {url} would refuse it)"
    )


def test_without_a_server_it_says_it_checked_the_package_alone(tmp_path: Path) -> None:
    """With no API known the package is checked alone, and validate says so."""
    done = kz("validate", str(_changed_benchmark(tmp_path)), env=_env(tmp_path / "nowhere"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[1].startswith("checked the package alone: no server known")
