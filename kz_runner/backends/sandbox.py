"""The local backend: bubblewrap namespaces, a read-only system, limits set inside the sandbox.

The step sees read-only /usr, a few /etc files, the Python prefixes and the given read-only
paths, a private /tmp and /proc, no network (its own network namespace has loopback only)
and one writable directory, the work dir. Limits are applied by `prlimit` inside the
sandbox; when the runner is root the step also drops to an unprivileged uid with `setpriv`,
because RLIMIT_NPROC does not bind root.

Every step runs in its own cgroup (`kz_runner.backends.cgroups`; where the runner has none it
can write, in its PID namespace only) under a seccomp filter that refuses nested namespaces
(`kz_runner.backends.seccomp`), so nothing it starts can leave what the runner stops, counts
and kills.

With `gpus` set ("all" or device indices), the steps marked `devices` (a GPU board's build and
its candidate's workers, never the judge) also see the NVIDIA device nodes and the driver's
folder, and run without the address-space limit, which CUDA's mappings exceed.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from kz_runner.backends.base import BackendUnavailable, Cancelled, StepResult, StepSpec
from kz_runner.backends.cgroups import ContainmentError, Hierarchy, StepGroup, find_hierarchy
from kz_runner.backends.process import run_capped
from kz_runner.backends.sandbox_process import SandboxProcess, end_namespace, spawn_child
from kz_runner.backends.seccomp import filter_fd, namespace_filter
from kz_runner.gpuguard import GpuGuard, nvidia_smi_apps
from kz_runner.limits import StepLimits

__all__ = ["DRIVER_DIR", "SandboxBackend", "SandboxProcess", "gpu_nodes", "parse_gpus"]

log = logging.getLogger("kz.runner")

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
_HELPERS = 2  # bubblewrap's own processes in a step's cgroup: its monitor and the init
_TOOLS = {"bwrap": "bubblewrap", "prlimit": "util-linux", "setpriv": "util-linux"}
# The NVIDIA nodes every GPU process needs (when the host has them), beside /dev/nvidia<N>.
_NVIDIA_SHARED = ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset", "nvidia-caps")
DRIVER_DIR = Path("/usr/local/nvidia")  # where GPU hosts commonly mount the driver's libraries


def parse_gpus(value: str | None) -> tuple[int, ...] | None:
    """`KZ_RUNNER_GPUS` as the sandbox reads it: None for no GPU ("none", empty), () for
    every GPU ("all"), else the device indices ("0,2")."""
    text = (value or "none").strip().lower()
    if text == "none":
        return None
    if text == "all":
        return ()
    try:
        indices = tuple(int(item) for item in text.split(","))
    except ValueError:
        indices = (-1,)
    if any(index < 0 for index in indices):
        raise BackendUnavailable(f"gpus: expected none, all or device indices, got {value!r}")
    return indices


def gpu_nodes(gpus: tuple[int, ...], dev: Path = Path("/dev")) -> list[Path]:
    """The device nodes a GPU step is shown: the shared ones the host has, then each chosen
    /dev/nvidia<N> (every one for `()`) that exists."""
    shared = [dev / name for name in _NVIDIA_SHARED if (dev / name).exists()]
    if gpus:
        numbered = [dev / f"nvidia{index}" for index in gpus]
    else:
        numbered = sorted(
            (p for p in dev.glob("nvidia[0-9]*") if p.name.removeprefix("nvidia").isdigit()),
            key=lambda p: int(p.name.removeprefix("nvidia")),
        )
    return shared + [p for p in numbered if p.exists()]


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
    return [*args, "--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--tmpfs", "/tmp"]  # noqa: S108


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


def _inside_parents(paths: Sequence[str]) -> list[str]:
    """World-traversable folders above each inside path (bwrap would make them 0700)."""
    parents = sorted(
        {str(p) for path in paths for p in Path(path).parents if p != Path("/")},
        key=lambda p: len(Path(p).parts),
    )
    args: list[str] = []
    for directory in parents:
        args += ["--perms", "0755", "--dir", directory]
    return args


def _bound_above(directory: Path, paths: Sequence[Path]) -> list[Path]:
    return [p for p in paths if p in directory.parents or p == directory]


def _limit_args(limits: StepLimits, timeout_s: float, *, address_space: bool = True) -> list[str]:
    args = [
        "prlimit",
        f"--nproc={limits.max_pids}",
        f"--fsize={limits.max_file_bytes}",
        f"--cpu={int(timeout_s) + _CPU_GRACE_S}",
        "--core=0",
    ]
    if limits.memory_bytes is not None and address_space:
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
        worker_uid_base: int = 65000,
        python: str = sys.executable,
        readonly_paths: Sequence[Path] = (),
        gpus: str | None = None,
        dev_root: Path = Path("/dev"),
        driver_dir: Path = DRIVER_DIR,
        worker_uids: int = 32,
        cgroups: str = "auto",
        refuse_namespaces: bool = True,
    ) -> None:
        self.bwrap = bwrap
        self.uid = sandbox_uid
        self.gid = sandbox_gid
        # A judge's workers run as uids drawn from worker_uid_base + [0, worker_uids). Process
        # limits count per uid, so runners sharing a host each need their own uids
        # (sandbox_uid and this range).
        self.worker_uid_base = worker_uid_base
        self.worker_uids = worker_uids
        try:
            self.hierarchy: Hierarchy | None = find_hierarchy(cgroups)
        except ContainmentError as exc:
            raise BackendUnavailable(exc.message) from exc
        except (OSError, ValueError) as exc:
            raise BackendUnavailable(f"cgroups: cannot read this host's hierarchy: {exc}") from exc
        self.disable_userns = False  # bubblewrap 0.8's --disable-userns, for a non-root runner
        # False only for the tests that show a cgroup holds a step that made namespaces.
        self.refuse_namespaces = refuse_namespaces
        self.python = python
        self.as_root = os.geteuid() == 0
        prefixes = {Path(sys.prefix), Path(sys.base_prefix), Path(python).resolve().parent.parent}
        self.readonly_paths = tuple(sorted(prefixes | {Path(p) for p in readonly_paths}))
        # GPUs shown to the steps marked `devices`: None (none), () (all) or indices.
        self.gpus = parse_gpus(gpus)
        self.dev_root = dev_root
        self.driver_dir = driver_dir

    def check_available(self) -> None:
        """Fail with one line if bwrap or util-linux is missing or namespaces are refused."""
        for tool, package in _TOOLS.items():
            if shutil.which(self.bwrap if tool == "bwrap" else tool) is None:
                raise BackendUnavailable(
                    f"{'bubblewrap (bwrap)' if tool == 'bwrap' else tool} not found: "
                    f"install it with apt-get install {package}"
                )
        self._check_gpus()
        if not self.as_root and self.refuse_namespaces:
            usage = subprocess.run([self.bwrap, "--help"], capture_output=True, check=False)
            self.disable_userns = b"--disable-userns" in usage.stdout
        if self.refuse_namespaces:
            namespace_filter()
        seccomp = filter_fd() if self.refuse_namespaces else None
        group = self._group(None)
        try:
            probe = subprocess.run(
                [
                    *(group.join_argv() if group else []), self.bwrap, *self._namespaces(),
                    *self._seccomp_args(seccomp), *_system_mounts(), "true",
                ],
                capture_output=True, timeout=30, check=False,
                pass_fds=() if seccomp is None else (seccomp,),
            )  # fmt: skip
        finally:
            self._end(group)
            if seccomp is not None:
                os.close(seccomp)
        if probe.returncode != 0:
            detail = probe.stderr.decode(errors="replace").strip().splitlines()
            raise BackendUnavailable(
                "bubblewrap cannot create namespaces here: "
                f"{detail[-1] if detail else 'exit ' + str(probe.returncode)}"
            )
        log.info("sandbox: every step is contained by %s", self.containment)
        if self.hierarchy is not None:
            for folder in self.hierarchy.sweep():
                log.info("sandbox: removed %s, left empty by a runner that was killed", folder)
        if self.hierarchy is None:
            log.warning(
                "sandbox: no writable cgroup hierarchy here, so containment is by PID namespace "
                "only (steps cannot make nested namespaces); delegate a cgroup v2 subtree to "
                "the runner, or run it as root, for containment by cgroup"
            )

    @property
    def containment(self) -> str:
        """How steps are held as a whole: a cgroup hierarchy, or their PID namespace."""
        return self.hierarchy.describe() if self.hierarchy else "PID namespace only"

    def _group(self, limits: StepLimits | None) -> StepGroup | None:
        """A fresh cgroup for one step (None: containment by namespace only)."""
        if self.hierarchy is None:
            return None
        tasks = None if limits is None else limits.max_pids + _HELPERS
        try:
            return self.hierarchy.group(max_tasks=tasks)
        except ContainmentError as exc:
            raise BackendUnavailable(exc.message) from exc

    @staticmethod
    def _end(group: StepGroup | None) -> None:
        if group is not None:
            group.kill()
            group.remove()

    @staticmethod
    def _seccomp_args(fd: int | None) -> list[str]:
        return [] if fd is None else ["--seccomp", str(fd)]

    def _check_gpus(self) -> None:
        """GPUs asked for but no NVIDIA device node to show: one line saying so."""
        if self.gpus is None:
            return
        nodes = {p.name for p in gpu_nodes(self.gpus, self.dev_root)}
        wanted = [f"nvidia{i}" for i in self.gpus] if self.gpus else []
        missing = [name for name in wanted if name not in nodes]
        asked = ",".join(map(str, self.gpus)) or "all"
        if "nvidiactl" not in nodes or missing or not any(n[6:].isdigit() for n in nodes):
            detail = (
                f"no {self.dev_root}/{missing[0]}"
                if missing
                else (f"no {self.dev_root}/nvidia* device nodes")
            )
            raise BackendUnavailable(
                f"gpus={asked}: {detail} on this host (install the NVIDIA driver, or set "
                "KZ_RUNNER_GPUS=none)"
            )

    def _device_binds(self, step: StepSpec) -> list[str]:
        """The NVIDIA nodes and the driver's folder, for a step marked `devices`."""
        if self.gpus is None or not step.devices:
            return []
        binds: list[str] = []
        for node in gpu_nodes(self.gpus, self.dev_root):
            binds += ["--dev-bind", str(node), f"/dev/{node.name}"]
        system = [Path(d) for d in _SYSTEM_DIRS]
        if self.driver_dir.is_dir() and not _covered(self.driver_dir, system):
            binds += [*_inside_parents([str(self.driver_dir)])]
            binds += ["--ro-bind", str(self.driver_dir), str(self.driver_dir)]
        return binds

    def gpu_guard(self) -> GpuGuard | None:
        """The check that no other compute context shares the task's GPUs (None: no GPU)."""
        return None if self.gpus is None else GpuGuard(nvidia_smi_apps(self.gpus))

    def device_environment(self, step: StepSpec) -> dict[str, str]:
        """What a GPU step's loader needs to find the driver's libraries."""
        if self.gpus is None or not step.devices:
            return {}
        libs = [
            str(self.driver_dir / d) for d in ("lib64", "lib") if (self.driver_dir / d).is_dir()
        ]
        return {"LD_LIBRARY_PATH": ":".join(libs)} if libs else {}

    def _namespaces(self) -> list[str]:
        namespaces = list(_ROOT_NAMESPACES) if self.as_root else ["--unshare-all"]
        if self.disable_userns:  # beside the seccomp filter: no user namespace in the sandbox
            namespaces += ["--unshare-user", "--disable-userns"]
        return ["--die-with-parent", "--new-session", "--hostname", "kz-sandbox", *namespaces]

    def _identity(self, uid: int | None = None) -> tuple[list[str], list[str]]:
        """bwrap capability flags and the in-sandbox uid drop (only when running as root)."""
        if not self.as_root:
            return ["--cap-drop", "ALL"], []
        caps = ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
        drop = [
            "setpriv",
            f"--reuid={self.uid if uid is None else uid}",
            f"--regid={self.gid if uid is None else uid}",
            "--clear-groups",
            "--no-new-privs",
            "--",
        ]
        return caps, drop

    def command(
        self, step: StepSpec, *, info_fd: int | None = None, seccomp_fd: int | None = None
    ) -> list[str]:
        """The full bwrap command line for a step (pure: no process is started)."""
        workdir = step.workdir.resolve()
        readonly = sorted({*self.readonly_paths, *(p.resolve() for p in step.readonly_paths)})
        caps, drop = self._identity(step.uid)
        binds: list[str] = []
        for path in readonly:
            binds += ["--ro-bind", str(path), str(path)]
        moved = any(bind.host.resolve() == workdir for bind in step.binds)
        shown = [] if moved else [workdir]
        if not moved:
            binds += ["--bind", str(workdir), str(workdir)]
        binds += _inside_parents([b.inside for b in step.binds] + list(step.tmpfs))
        for bind in step.binds:
            flag = "--bind" if bind.writable else "--ro-bind"
            binds += [flag, str(bind.host.resolve()), bind.inside]
        for folder in step.tmpfs:
            binds += ["--perms", "1777", "--tmpfs", folder]
        binds += self._device_binds(step)
        gpu = self.gpus is not None and step.devices
        info = ["--info-fd", str(info_fd)] if info_fd is not None else []
        return [
            self.bwrap,
            *info,
            *self._namespaces(),
            *self._seccomp_args(seccomp_fd),
            *caps,
            *_system_mounts(),
            *_parent_dirs([*readonly, *shown]),
            *binds,
            "--chdir",
            step.cwd or str(workdir),
            "--",
            *_limit_args(step.limits, step.timeout_s, address_space=not gpu),
            *drop,
            *step.argv,
        ]

    def _hand_over(self, workdir: Path, uid: int | None = None) -> None:
        """As root, give the work dir to the sandbox uid so the step can write only there."""
        if not self.as_root:
            return
        owner = (self.uid, self.gid) if uid is None else (uid, uid)
        for directory, _dirs, files in os.walk(workdir):
            os.chown(directory, *owner, follow_symlinks=False)
            for name in files:
                os.chown(Path(directory) / name, *owner, follow_symlinks=False)

    def run(self, step: StepSpec, *, cancelled: Cancelled | None = None) -> StepResult:
        """Run the step inside a fresh sandbox; return only once its cgroup (or namespace)
        is empty."""
        self._hand_over(step.workdir, step.uid)
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", **self.device_environment(step), **step.env}
        group = self._group(step.limits)
        info_read, info_write = os.pipe()
        seccomp = filter_fd() if self.refuse_namespaces else None
        extra = () if seccomp is None else (seccomp,)
        try:
            argv = self.command(step, info_fd=info_write, seccomp_fd=seccomp)
            return run_capped(
                [*(group.join_argv() if group else []), *argv],
                env=env,
                cwd=step.workdir,
                timeout_s=step.timeout_s,
                max_output_bytes=step.limits.max_output_bytes,
                cancelled=cancelled,
                pass_fds=(info_write, *extra, *step.pass_fds),
                close_after_start=(info_write, *extra),
                after_kill=group.kill if group else lambda: end_namespace(info_read),
            )
        finally:
            os.close(info_read)
            self._end(group)

    def spawn(self, step: StepSpec) -> SandboxProcess:
        """Start the step in a fresh sandbox and return at once; see `SandboxProcess`. The step
        sees `pass_fds` at 3, 4, … (the same numbers for every worker)."""
        self._hand_over(step.workdir, step.uid)
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", **self.device_environment(step), **step.env}
        group = self._group(step.limits)
        info_read, info_write = os.pipe()
        seccomp = filter_fd() if self.refuse_namespaces else None
        fds = [*step.pass_fds, info_write, *([] if seccomp is None else [seccomp])]
        numbers = {fd: 3 + i for i, fd in enumerate(fds)}
        argv = self.command(
            step,
            info_fd=numbers[info_write],
            seccomp_fd=None if seccomp is None else numbers[seccomp],
        )
        try:
            child = spawn_child([*(group.join_argv() if group else []), *argv], env, fds)
        except BaseException:
            os.close(info_read)
            self._end(group)
            raise
        finally:
            os.close(info_write)
            if seccomp is not None:
                os.close(seccomp)
        return SandboxProcess(child, info_read, step.limits.max_output_bytes, group)
