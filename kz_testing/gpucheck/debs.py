"""Unpack a .deb's files into a private prefix (what `dpkg -x` does), without dpkg or root:
the GPU host gets bubblewrap this way, never installed over its own `/`.

`python -m kz_testing.gpucheck.debs DEB PREFIX` unpacks and prints the prefix.
"""

from __future__ import annotations

import io
import sys
import tarfile
from pathlib import Path

__all__ = ["deb_members", "extract_deb"]

_AR_MAGIC = b"!<arch>\n"
_HEADER = 60


def deb_members(data: bytes) -> dict[str, bytes]:
    """The members of a .deb (an `ar` archive): debian-binary, control.tar.*, data.tar.*."""
    if not data.startswith(_AR_MAGIC):
        raise ValueError("not a .deb (no ar header)")
    members: dict[str, bytes] = {}
    at = len(_AR_MAGIC)
    while at + _HEADER <= len(data):
        header = data[at : at + _HEADER]
        name = header[:16].decode().strip().rstrip("/")
        size = int(header[48:58].decode().strip())
        at += _HEADER
        members[name] = data[at : at + size]
        at += size + (size % 2)
    return members


def extract_deb(deb: Path, prefix: Path) -> list[Path]:
    """Write the package's files under `prefix` (links kept as links); the files written."""
    members = deb_members(deb.read_bytes())
    name = next((n for n in members if n.startswith("data.tar")), None)
    if name is None:
        raise ValueError(f"{deb}: no data.tar member")
    prefix.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    with tarfile.open(fileobj=io.BytesIO(members[name])) as archive:
        for member in archive.getmembers():
            if member.isdev() or (member.issym() and Path(member.linkname).is_absolute()):
                continue  # nothing of a package should point outside the prefix
            archive.extract(member, prefix, filter="tar")
            written.append(prefix / member.name)
    return written


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m kz_testing.gpucheck.debs DEB PREFIX", file=sys.stderr)
        return 2
    extract_deb(Path(argv[0]), Path(argv[1]))
    print(argv[1])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
