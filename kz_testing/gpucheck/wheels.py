"""The wheel set a GPU host needs: kernel zoo's runtime dependencies (pyproject.toml's
`dependencies`, resolved through the installed packages' metadata) minus what the host's
image already holds (`image_packages.txt`), each pinned to the version installed here.

`python -m kz_testing.gpucheck.wheels` prints one `NAME==VERSION` a line, for
`scripts/gpu_wheels.sh` to download as cp312 manylinux x86-64 wheels.
"""

from __future__ import annotations

import importlib.metadata
import re
import sys
import tomllib
from collections.abc import Callable, Iterable
from pathlib import Path

from packaging.requirements import Requirement

__all__ = [
    "HOST_MARKERS",
    "IMAGE_PACKAGES",
    "PYPROJECT",
    "image_packages",
    "normalise",
    "resolve",
    "runtime_requirements",
    "wheel_set",
]

REPO = Path(__file__).resolve().parents[2]
PYPROJECT = REPO / "pyproject.toml"
IMAGE_PACKAGES = Path(__file__).with_name("image_packages.txt")
# The GPU host's interpreter, for the requirements' environment markers.
HOST_MARKERS = {
    "python_version": "3.12",
    "python_full_version": "3.12.3",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "platform_machine": "x86_64",
    "os_name": "posix",
    "extra": "",
}

# name -> (installed version, its requirement strings), or None when not installed
Lookup = Callable[[str], tuple[str, list[str]] | None]


def normalise(name: str) -> str:
    """A distribution name as pip compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def runtime_requirements(pyproject: Path = PYPROJECT) -> list[str]:
    """pyproject.toml's `[project] dependencies`, as written."""
    data = tomllib.loads(pyproject.read_text())
    return [str(item) for item in data["project"]["dependencies"]]


def image_packages(path: Path = IMAGE_PACKAGES) -> set[str]:
    """The image's package names, normalised (comments and blank lines skipped)."""
    lines = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
    return {normalise(line) for line in lines if line}


def installed(name: str) -> tuple[str, list[str]] | None:
    """The installed distribution's version and requirements (this interpreter's)."""
    try:
        dist = importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        return None
    return dist.version, list(dist.requires or [])


def resolve(requirements: Iterable[str], lookup: Lookup = installed) -> dict[str, str]:
    """Every distribution the requirements need on the GPU host, transitively (markers
    evaluated for it, extras not taken), with the version `lookup` finds; a requirement not
    installed raises `LookupError` naming it."""
    found: dict[str, str] = {}
    todo = [Requirement(text) for text in requirements]
    while todo:
        requirement = todo.pop()
        if requirement.marker is not None and not requirement.marker.evaluate(HOST_MARKERS):
            continue
        name = normalise(requirement.name)
        if name in found:
            continue
        entry = lookup(name)
        if entry is None:
            raise LookupError(f"{name} is needed but not installed here: run make setup first")
        found[name] = entry[0]
        todo.extend(Requirement(text) for text in entry[1])
    return dict(sorted(found.items()))


def wheel_set(
    pyproject: Path = PYPROJECT, image: set[str] | None = None, lookup: Lookup = installed
) -> dict[str, str]:
    """The pinned distributions to carry: the resolved runtime set minus the image's."""
    have = image_packages() if image is None else image
    every = resolve(runtime_requirements(pyproject), lookup)
    return {name: version for name, version in every.items() if name not in have}


def main() -> int:
    for name, version in wheel_set().items():
        print(f"{name}=={version}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
