"""The local backend: bubblewrap namespaces, a read-only system, limits set inside the sandbox.

The step sees read-only /usr, a few /etc files, the Python prefixes and the given read-only
paths, a private /tmp and /proc, no network (its own network namespace has loopback only)
and one writable directory, the work dir. Limits are applied by `prlimit` inside the
sandbox; when the runner is root the step also drops to an unprivileged uid with `setpriv`,
because RLIMIT_NPROC does not bind root.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

from kz_runner.backends.base import BackendUnavailable, Cancelled, StepResult, StepSpec
from kz_runner.backends.process import run_capped
from kz_runner.limits import StepLimits

__all__ = ["SandboxBackend"]

_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_ETC_FILES = (
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/alternatives",
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
    "/etc/localtime",
    "/etc/ssl",
)
_ROOT_NAMESPACES = (
    "--unshare-ipc",
    "--unshare-pid",
    "--unshare-net",
    "--unshare-uts",
    "--unshare-cgroup-try",
)
_CPU_GRACE_S = 5
_REAP_WAIT_S = 5.0
_TOOLS = {"bwrap": "bubblewrap", "prlimit": "util-linux", "setpriv": "util-linux"}


def _system_mounts() -> list[str]:
    args: list[str] = []
    for name in _SYSTEM_DIRS:
        path = Path(name)
        if path.is_symlink():
            args += ["--symlink", str(path.readlink()), name]
        elif path.is_dir():
            args += ["--ro-bind", name, name]
    args += ["--perms", "0755", "--dir", "/etc"]
    for name in _ETC_FILES:
        args += ["--ro-bind-try", name, name]
    return [*args, "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]  # noqa: S108


def _covered(path: Path, mounted: Iterable[Path]) -> bool:
    return any(path == m or m in path.parents for m in mounted)


def _parent_dirs(paths: Sequence[Path]) -> list[str]:
    """World-traversable directories leading to each bind (bwrap would copy 0700 modes)."""
    system = [Path(d) for d in _SYSTEM_DIRS]
    parents = {p for path in paths for p in path.parents if p != Path("/")}
    wanted = sorted(
        (p for p in parents if not _covered(p, system) and not _covered(p, _bound_above(p, paths))),
        key=lambda p: len(p.parts),
    )
    args: list[str] = []
    for directory in wanted:
        args += ["--perms", "0755", "--dir", str(directory)]
    return args


def _bound_above(directory: Path, paths: Sequence[Path]) -> list[Path]:
    return [p for p in paths if p in directory.parents or p == directory]


def _limit_args(limits: StepLimits, timeout_s: float) -> list[str]:
    args = [
        "prlimit",
        f"--nproc={limits.max_pids}",
        f"--fsize={limits.max_file_bytes}",
        f"--cpu={int(timeout_s) + _CPU_GRACE_S}",
        "--core=0",
    ]
    if limits.memory_bytes is not None:
        args.append(f"--as={limits.memory_bytes}")
    return [*args, "--"]


class SandboxBackend:
    """bubblewrap isolation for one step at a time; see the module docstring."""

    name = "sandbox"

    def __init__(
        self,
        *,
        bwrap: str = "bwrap",
        sandbox_uid: int = 65534,
        sandbox_gid: int = 65534,
        python: str = sys.executable,
        readonly_paths: Sequence[Path] = (),
    ) -> None:
        self.bwrap = bwrap
        self.uid = sandbox_uid
        self.gid = sandbox_gid
        self.python = python
        self.as_root = os.geteuid() == 0
        prefixes = {Path(sys.prefix), Path(sys.base_prefix), Path(python).resolve().parent.parent}
        self.readonly_paths = tuple(sorted(prefixes | {Path(p) for p in readonly_paths}))

    def check_available(self) -> None:
        """Fail with one line if bwrap or util-linux is missing or namespaces are refused."""
        for tool, package in _TOOLS.items():
            if shutil.which(self.bwrap if tool == "bwrap" else tool) is None:
                raise BackendUnavailable(
                    f"{'bubblewrap (bwrap)' if tool == 'bwrap' else tool} not found: "
                    f"install it with apt-get install {package}"
                )
        probe = subprocess.run(
            [self.bwrap, *self._namespaces(), *_system_mounts(), "true"],
            capture_output=True,
            timeout=30,
            check=False,
        )
        if probe.returncode != 0:
            detail = probe.stderr.decode(errors="replace").strip().splitlines()
            raise BackendUnavailable(
                "bubblewrap cannot create namespaces here: "
                f"{detail[-1] if detail else 'exit ' + str(probe.returncode)}"
            )

    def _namespaces(self) -> list[str]:
        namespaces = list(_ROOT_NAMESPACES) if self.as_root else ["--unshare-all"]
        return ["--die-with-parent", "--new-session", "--hostname", "kz-sandbox", *namespaces]

    def _identity(self) -> tuple[list[str], list[str]]:
        """bwrap capability flags and the in-sandbox uid drop (only when running as root)."""
        if not self.as_root:
            return ["--cap-drop", "ALL"], []
        caps = ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
        drop = [
            "setpriv",
            f"--reuid={self.uid}",
            f"--regid={self.gid}",
            "--clear-groups",
            "--no-new-privs",
            "--",
        ]
        return caps, drop

    def command(self, step: StepSpec, *, info_fd: int | None = None) -> list[str]:
        """The full bwrap command line for a step (pure: no process is started)."""
        workdir = step.workdir.resolve()
        readonly = sorted({*self.readonly_paths, *(p.resolve() for p in step.readonly_paths)})
        caps, drop = self._identity()
        binds: list[str] = []
        for path in readonly:
            binds += ["--ro-bind", str(path), str(path)]
        info = ["--info-fd", str(info_fd)] if info_fd is not None else []
        return [
            self.bwrap,
            *info,
            *self._namespaces(),
            *caps,
            *_system_mounts(),
            *_parent_dirs([*readonly, workdir]),
            *binds,
            "--bind",
            str(workdir),
            str(workdir),
            "--chdir",
            str(workdir),
            "--",
            *_limit_args(step.limits, step.timeout_s),
            *drop,
            *step.argv,
        ]

    def _hand_over(self, workdir: Path) -> None:
        """As root, give the work dir to the sandbox uid so the step can write only there."""
        if not self.as_root:
            return
        for directory, _dirs, files in os.walk(workdir):
            os.chown(directory, self.uid, self.gid, follow_symlinks=False)
            for name in files:
                os.chown(Path(directory) / name, self.uid, self.gid, follow_symlinks=False)

    def run(self, step: StepSpec, *, cancelled: Cancelled | None = None) -> StepResult:
        """Run the step inside a fresh sandbox; return only once its namespace is empty."""
        self._hand_over(step.workdir)
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", **step.env}
        info_read, info_write = os.pipe()
        try:
            return run_capped(
                self.command(step, info_fd=info_write),
                env=env,
                cwd=step.workdir,
                timeout_s=step.timeout_s,
                max_output_bytes=step.limits.max_output_bytes,
                cancelled=cancelled,
                pass_fds=(info_write,),
                after_kill=lambda: _end_namespace(info_read),
            )
        finally:
            os.close(info_read)


def _sandbox_init_pid(info_read: int) -> int | None:
    """The host pid of the sandbox's init, from the JSON bwrap wrote to its info fd."""
    os.set_blocking(info_read, False)
    try:
        data = os.read(info_read, 4096)
    except BlockingIOError:
        return None
    try:
        pid = json.loads(data or b"{}").get("child-pid")
    except ValueError:
        return None
    return pid if isinstance(pid, int) and pid > 1 else None


def _gone(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[0] in ("Z", "X")


def _end_namespace(info_read: int) -> None:
    """Kill the sandbox's init (the kernel then kills its whole PID namespace) and wait."""
    pid = _sandbox_init_pid(info_read)
    if pid is None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + _REAP_WAIT_S
    while not _gone(pid) and time.monotonic() < deadline:
        time.sleep(0.01)
