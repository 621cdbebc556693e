"""A private Docker engine, and a runner image built on it with no registry: the host's
Python, numpy and PyYAML in a root filesystem assembled here, `docker import`ed, then built
upon like any base image.

The root holds the interpreter at /usr/local (its library beside libc, in a directory the
loader searches by default), the standard library without its tests and GUI parts, numpy
and PyYAML from the test environment, every shared library those need (found with `ldd`),
and a passwd naming the uids steps run as. Everything is world-readable: steps run as
65534 and 65000 + n.
"""

from __future__ import annotations

import contextlib
import io
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import tarfile
import time
from pathlib import Path
from typing import Any

__all__ = ["Engine", "build_runner_image", "root_filesystem"]

_SKIPPED_STDLIB = frozenset({
    "site-packages", "test", "idlelib", "tkinter", "turtledemo", "ensurepip", "lib2to3",
    "pydoc_data", "unittest", "distutils",
})  # fmt: skip
_SKIPPED_DYNLOAD = re.compile(r"^(_tkinter|_test|_ctypes_test|xxlimited|_xxtestfuzz)")
_PACKAGES = ("numpy", "numpy.libs", "yaml", "_yaml")
_PASSWD = "root:x:0:0::/root:/sbin/nologin\nnobody:x:65534:65534::/nonexistent:/sbin/nologin\n"
_GROUP = "root:x:0:\nnogroup:x:65534:\n"
_START_S = 30.0

RUNNER_DOCKERFILE = """\
FROM {base}
ENV PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8 PYTHONDONTWRITEBYTECODE=1
LABEL kz.role=runner-image
USER 65534:65534
WORKDIR /
CMD ["python3", "-c", "import numpy, yaml; print('ready', numpy.__version__)"]
"""


def _arcname(path: str) -> str:
    """Where a host path lands in the image: /lib and /lib64 are links into /usr there."""
    relative = os.path.normpath(path).lstrip("/")
    for link in ("lib/", "lib64/"):
        if relative.startswith(link):
            return "usr/" + relative
    return relative


def _shared_libraries(elf_files: list[Path]) -> set[str]:
    """Host paths of every library the given ELF files load (ldd resolves the closure)."""
    found: set[str] = set()
    for chunk in range(0, len(elf_files), 64):
        listing = subprocess.run(
            ["ldd", *map(str, elf_files[chunk : chunk + 64])],
            capture_output=True, text=True, check=False,
        ).stdout  # fmt: skip
        for line in listing.splitlines():
            match = re.search(r"(?:=>\s*)?(/\S+)\s+\(0x", line)
            if match and "not found" not in line:
                found.add(match.group(1))
    return found


class _Root:
    """A tar stream of the root filesystem being assembled."""

    def __init__(self, out: tarfile.TarFile) -> None:
        self.out = out
        self.seen: set[str] = set()

    def directory(self, name: str, mode: int = 0o755) -> None:
        parts = Path(name).parts
        for depth in range(1, len(parts) + 1):
            partial = "/".join(parts[:depth])
            if partial in self.seen:
                continue
            self.seen.add(partial)
            info = tarfile.TarInfo(partial)
            info.type, info.mode = tarfile.DIRTYPE, mode if depth == len(parts) else 0o755
            self.out.addfile(info)

    def file(self, name: str, source: Path | None = None, data: bytes = b"", mode: int = 0) -> None:
        if name in self.seen:
            return
        self.directory(str(Path(name).parent))
        self.seen.add(name)
        payload = source.read_bytes() if source is not None else data
        info = tarfile.TarInfo(name)
        info.size = len(payload)
        executable = source is not None and os.access(source, os.X_OK)
        info.mode = mode or (0o755 if executable else 0o644)
        self.out.addfile(info, io.BytesIO(payload))

    def link(self, name: str, target: str) -> None:
        self.directory(str(Path(name).parent))
        self.seen.add(name)
        info = tarfile.TarInfo(name)
        info.type, info.linkname, info.mode = tarfile.SYMTYPE, target, 0o777
        self.out.addfile(info)

    def tree(self, source: Path, name: str, skip: frozenset[str] = frozenset()) -> list[Path]:
        """Copy a folder (not its top-level folders in `skip`, optimised bytecode, links or
        the test and GUI extension modules); return the shared objects it copied."""
        shared = []
        for directory, dirs, files in os.walk(source):
            here = Path(directory)
            if here == source:
                dirs[:] = [d for d in dirs if d not in skip]
            relative = here.relative_to(source)
            self.directory(name if relative == Path() else f"{name}/{relative}")
            for file_name in files:
                path = here / file_name
                if path.is_symlink() or ".opt-" in file_name or _SKIPPED_DYNLOAD.match(file_name):
                    continue
                self.file(f"{name}/{path.relative_to(source)}", path)
                if ".so" in file_name:
                    shared.append(path)
        return shared


def root_filesystem(target: Path) -> Path:
    """Write the root filesystem as a tar at `target`; see the module docstring."""
    base = Path(sys.base_prefix)
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    stdlib = base / "lib" / version
    site = Path(sysconfig.get_paths()["purelib"])
    with tarfile.open(target, "w") as out:
        root = _Root(out)
        for folder in ("tmp", "home", "kz"):
            root.directory(folder, 0o1777 if folder == "tmp" else 0o755)
        root.link("lib", "usr/lib")
        root.link("lib64", "usr/lib64")
        root.link("bin", "usr/bin")
        root.directory("usr/bin")
        root.file("etc/passwd", data=_PASSWD.encode())
        root.file("etc/group", data=_GROUP.encode())
        interpreter = Path(os.path.realpath(base / "bin" / version))
        root.file(f"usr/local/bin/{version}", interpreter)
        root.link("usr/local/bin/python3", version)
        root.link("usr/local/bin/python", version)
        library = base / "lib" / f"lib{version}.so.1.0"
        elves = [interpreter]
        if library.is_file():  # a shared build: where the loader looks without a cache
            multiarch = sysconfig.get_config_var("MULTIARCH") or f"{platform.machine()}-linux-gnu"
            root.file(f"usr/lib/{multiarch}/{library.name}", library)
            elves.append(library)
        elves += root.tree(stdlib, f"usr/local/lib/{version}", _SKIPPED_STDLIB)
        for package in _PACKAGES:
            if (site / package).is_dir():
                inside = f"usr/local/lib/{version}/site-packages/{package}"
                elves += root.tree(site / package, inside)
        for host_path in sorted(_shared_libraries(elves)):
            if host_path.startswith((f"{stdlib}/", f"{site}/")) or host_path == str(library):
                continue  # copied already
            root.file(_arcname(host_path), Path(os.path.realpath(host_path)))
    return target


def build_runner_image(client: Any, workdir: Path, tag: str) -> str:
    """Import the root filesystem as a base image and build the runner image on it."""
    tarball = root_filesystem(workdir / "rootfs.tar")
    base = f"{tag}-base:latest"
    client.api.import_image_from_file(str(tarball), repository=f"{tag}-base", tag="latest")
    tarball.unlink()
    dockerfile = io.BytesIO(RUNNER_DOCKERFILE.format(base=base).encode())
    image, _logs = client.images.build(fileobj=dockerfile, tag=tag, rm=True, network_mode="none")
    return str(image.id)


class Engine:
    """A `dockerd` of this session: its socket URL, its client, its pid."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.socket = root / "docker.sock"
        self.url = f"unix://{self.socket}"
        self.log = root / "dockerd.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.client: Any = None

    def start(self) -> None:
        argv = [
            "dockerd", "--bridge=none", "--iptables=false", "--ip6tables=false",
            "--data-root", str(self.root / "data"), "--exec-root", str(self.root / "exec"),
            "-H", self.url, "--pidfile", str(self.root / "dockerd.pid"),
        ]  # fmt: skip
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        import docker

        deadline = time.monotonic() + _START_S
        while time.monotonic() < deadline and self.process.poll() is None:
            if self.socket.exists():
                with contextlib.suppress(docker.errors.DockerException):
                    client = docker.DockerClient(base_url=self.url, timeout=60)
                    client.ping()
                    self.client = client
                    return
            time.sleep(0.1)
        tail = self.log.read_text(errors="replace")[-600:]
        self.stop()
        raise RuntimeError(f"dockerd did not start within {_START_S:.0f} s: {tail}")

    def containers(self) -> list[Any]:
        """Every container the engine knows, running or not (`docker ps -a`)."""
        return list(self.client.containers.list(all=True))

    def stop(self) -> None:
        if self.client is not None:
            self.client.close()
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                os.kill(self.process.pid, signal.SIGKILL)
                self.process.wait(5)
        _unmount_below(self.root)
        shutil.rmtree(self.root, ignore_errors=True)


def _unmount_below(root: Path) -> None:
    """Mounts the engine left under its roots (none after a clean stop), deepest first."""
    mounts = Path("/proc/self/mounts").read_text().splitlines()
    points = [line.split()[1] for line in mounts if line.split()[1].startswith(str(root))]
    for point in sorted(points, key=len, reverse=True):
        subprocess.run(["umount", "-l", point], check=False)
