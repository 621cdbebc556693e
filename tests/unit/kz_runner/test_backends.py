"""The backend interface pieces that need no sandbox: command lines, output caps, stub, lookup."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest

from kz_events.errors import ConfigError
from kz_runner.backends import get_backend
from kz_runner.backends.base import BackendUnavailable, StepSpec
from kz_runner.backends.process import OutputBuffer
from kz_runner.backends.sandbox import SandboxBackend
from kz_runner.backends.stub import StubBackend, package_value
from kz_runner.limits import MIB, StepLimits

pytestmark = pytest.mark.unit


def _step(
    workdir: Path, script: str = ".kernel_package/benchmark.py", result_fd: int = -1
) -> StepSpec:
    return StepSpec(
        argv=("python", script),
        workdir=workdir,
        env={"KZ_RESULT_FD": str(result_fd), "KZ_KERNEL_ID": "a/b/c/d/e"},
        timeout_s=30,
        limits=StepLimits(memory_bytes=512 * MIB, max_pids=40, max_file_bytes=MIB),
        readonly_paths=(Path("/opt/kz/harness"),),
    )


def test_the_sandbox_command_isolates_and_limits(tmp_path: Path) -> None:
    """The bwrap line unshares the network, binds only the work dir writable and sets limits."""
    backend = SandboxBackend(python="/usr/bin/python3")
    command = backend.command(_step(tmp_path))
    text = " ".join(command)
    assert command[0] == "bwrap" and "--die-with-parent" in command
    assert "--unshare-net" in command or "--unshare-all" in command
    assert f"--bind {tmp_path} {tmp_path}" in text
    assert text.count("--bind ") == 1  # the work dir is the only writable bind
    assert "--ro-bind /opt/kz/harness /opt/kz/harness" in text
    assert "--tmpfs /tmp" in text
    assert "--nproc=40" in text and f"--as={512 * MIB}" in text and f"--fsize={MIB}" in text
    assert command[-2:] == ["python", ".kernel_package/benchmark.py"]


def test_as_root_the_step_drops_to_the_sandbox_uid(tmp_path: Path) -> None:
    """When the runner is root, the step runs as the unprivileged sandbox uid."""
    backend = SandboxBackend(sandbox_uid=4242, sandbox_gid=4243)
    backend.as_root = True
    text = " ".join(backend.command(_step(tmp_path)))
    assert "setpriv --reuid=4242 --regid=4243" in text
    assert "--unshare-user" not in text  # a user namespace would map the uid back to root


def test_a_missing_bwrap_is_one_clear_line() -> None:
    """check_available names bubblewrap and how to install it."""
    with pytest.raises(
        BackendUnavailable,
        match=r"bubblewrap \(bwrap\) not found: install it with apt-get install bubblewrap",
    ):
        SandboxBackend(bwrap="/nonexistent/bwrap").check_available()


def test_the_output_buffer_keeps_the_head_and_marks_the_cut() -> None:
    """Bytes past the limit are dropped and a marker says so."""
    buffer = OutputBuffer(10)
    assert buffer.add(b"12345")
    assert not buffer.add(b"6789012345")
    assert (
        buffer.finish("output_limit")
        == b"1234567890\n[kz: output truncated at 10 bytes; step killed]\n"
    )
    assert OutputBuffer(10).finish(None) == b""


def test_get_backend_builds_known_backends_and_refuses_others() -> None:
    """Known names build their backend; an unknown name or setting is a config error."""
    assert get_backend("stub").name == "stub"
    assert get_backend("docker", image="x").name == "docker"
    with pytest.raises(ConfigError, match="KZ_RUNNER_BACKEND"):
        get_backend("podman")
    with pytest.raises(ConfigError):
        get_backend("stub", colour="blue")


@pytest.mark.parametrize(
    ("verdict", "exit_code", "timed_out", "document"),
    [("accept", 0, False, True), ("reject", 0, False, True), ("error", 1, False, False),
     ("hang", None, True, False), ("invalid", 0, False, True)],
)  # fmt: skip
def test_the_stub_follows_its_script(
    tmp_path: Path, verdict: str, exit_code: int | None, timed_out: bool, document: bool
) -> None:
    """src/stub.json scripts the benchmark step's ending."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "stub.json").write_text(json.dumps({"verdict": verdict, "value": 7.5}))
    read, write = os.pipe()
    result = StubBackend().run(_step(tmp_path, result_fd=write))
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        sent = pipe.read()
    assert (result.exit_code, result.timed_out) == (exit_code, timed_out)
    assert bool(sent) is document
    if verdict in ("accept", "reject"):
        written = json.loads(sent)
        assert written["accepted"] is (verdict == "accept") and written["metric"]["value"] == 7.5


def test_the_stub_fails_the_build_only_when_told(tmp_path: Path) -> None:
    """build_fail makes the build step exit 1; otherwise the build succeeds."""
    assert StubBackend().run(_step(tmp_path, ".kernel_package/build_test_env.py")).exit_code == 0
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "stub.json").write_text('{"verdict": "build_fail"}')
    assert StubBackend().run(_step(tmp_path, ".kernel_package/build_test_env.py")).exit_code == 1


def test_the_stub_value_is_a_function_of_the_files(tmp_path: Path) -> None:
    """Without a script the value comes from the files' hash: same files, same value."""
    (tmp_path / "kernel.cu").write_text("a")
    first = package_value(tmp_path)
    assert package_value(tmp_path) == first and 1.0 <= first < 1000.0
    (tmp_path / "kernel.cu").write_text("b")
    assert package_value(tmp_path) != first


def test_the_stub_value_of_a_tree_is_pinned(tmp_path: Path) -> None:
    """The value hashes files in path-part order ("a/b" before "a-c"), counts links to files,
    enters no linked folder and skips the result file; pinned, so runs stay comparable."""
    for rel in ("a/b", "a-c", "A/z", ".hidden/q", "a/b2/c/d", "r.json"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(rel.encode() * 3)
    (tmp_path / "empty").mkdir()
    (tmp_path / "to_file").symlink_to("a-c")
    (tmp_path / "to_dir").symlink_to("a")
    (tmp_path / "broken").symlink_to("nowhere")
    assert package_value(tmp_path, skip=tmp_path / "r.json") == 318.434
    assert package_value(tmp_path) == 448.657


def _scored(tmp_path: Path, env: dict[str, str]) -> float:
    read, write = os.pipe()
    step = _step(tmp_path, result_fd=write)
    StubBackend().run(dataclasses.replace(step, env={**step.env, **env}))
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        return float(json.loads(pipe.read())["score"]["speedup"])


def test_the_stub_can_script_a_confirmation_run_that_disputes(tmp_path: Path) -> None:
    """A confirmation run measures the reference at `confirmation_reference`: another score."""
    (tmp_path / "src").mkdir()
    script = {"value": 10.0, "reference": 100.0, "confirmation_reference": 50.0}
    (tmp_path / "src" / "stub.json").write_text(json.dumps(script))
    assert _scored(tmp_path, {}) == pytest.approx(10.0)
    assert _scored(tmp_path, {"KZ_CONFIRMATION": "1"}) == pytest.approx(5.0)
