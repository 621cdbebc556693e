"""The entry point of the judge and worker processes, run as `python -I launch.py ROLE ...`.

`-I` keeps the environment, the user's site-packages and the script's folder off `sys.path`;
this file puts back only the folder holding `kz_harness`, so neither role can import anything
of a package's files by accident. Roles: `judge BENCHMARK.py` runs a board's benchmark as
`__main__`; `worker` serves a judge over the inherited channel (see kz_harness.worker).
"""

from __future__ import annotations

import os
import runpy
import socket
import sys
from pathlib import Path


def _connect_descriptors() -> None:
    """Where descriptors cannot be inherited (a container), the runner listens on a socket per
    descriptor in /kz/fds (`KZ_FD_SOCKETS=5:seqpacket,7:stream`): connect to each and put the
    connection at that descriptor number, so the rest sees what a sandbox would inherit."""
    wanted = os.environ.pop("KZ_FD_SOCKETS", "")
    for item in filter(None, wanted.split(",")):
        number, _, kind = item.partition(":")
        kind_type = socket.SOCK_SEQPACKET if kind == "seqpacket" else socket.SOCK_STREAM
        conn = socket.socket(socket.AF_UNIX, kind_type)
        conn.connect(f"/kz/fds/{number}.sock")
        if conn.fileno() == int(number):  # opened at that very number: keep it there
            conn.detach()
            continue
        os.dup2(conn.fileno(), int(number))
        conn.close()


def main() -> int:
    _connect_descriptors()
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    sys.dont_write_bytecode = True  # -I ignores PYTHONDONTWRITEBYTECODE and PYTHONUNBUFFERED
    for stream in (sys.stdout, sys.stderr):
        stream.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    role = sys.argv[1] if len(sys.argv) > 1 else ""
    if role == "worker":
        from kz_harness.worker import main as serve

        return serve()
    if role == "judge" and len(sys.argv) == 3:
        script = sys.argv[2]
        sys.argv = [script]
        runpy.run_path(script, run_name="__main__")
        return 0
    print("usage: launch.py judge BENCHMARK.py | launch.py worker", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
