"""Attempts to leave a worker's containment, for the sandbox and container suites.

`attempt(family, counter)` is a whole Python program a step runs: it really tries one way out
(a nested user and PID namespace, `setns`, `clone3`, `clone` with a namespace flag, a
double-forked `setsid` daemon), prints `TRIED <family> <return> <errno>`, and leaves a helper
process (where the family makes one) that appends a byte to `counter` every few milliseconds
for a minute, so a test can see whether it is stopped, counted and killed with its worker.
`survivors` finds any process of the given uids still on the host.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path

__all__ = ["FAMILIES", "attempt", "counter_moves", "survivors"]

_PRELUDE = """
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
COUNTER = {counter!r}

def helper():
    # Append to the counter for a minute; never returns.
    end = time.monotonic() + 60
    with open(COUNTER, "ab", buffering=0) as out:
        while time.monotonic() < end:
            out.write(b"x")
            time.sleep(0.005)
    os._exit(0)

def tried(family, ret):
    print("TRIED", family, ret, ctypes.get_errno() if ret == -1 else 0, flush=True)
"""

_FAMILIES = {
    # unshare(CLONE_NEWUSER | CLONE_NEWPID), then fork: the child is the new namespace's init.
    "unshare_fork": """
ret = libc.unshare(0x10000000 | 0x20000000)
tried("unshare_fork", ret)
if os.fork() == 0:
    print("HELPER pid namespace", os.readlink("/proc/self/ns/pid"), flush=True)
    helper()
""",
    # Join the user namespace it is in: EINVAL from the kernel, EPERM from the filter.
    "setns": """
fd = os.open("/proc/self/ns/user", os.O_RDONLY)
tried("setns", libc.setns(fd, 0x10000000))
""",
    # clone3(NULL, 0): EINVAL from the kernel (no arguments), ENOSYS from the filter.
    "clone3": """
tried("clone3", libc.syscall(435, None, 0))
""",
    # The raw clone system call with CLONE_NEWUSER (and SIGCHLD), no new stack: a fork.
    "clone_newuser": """
ret = libc.syscall(56, 0x10000000 | 17, None, None, None, None)
if ret == 0:
    helper()
tried("clone_newuser", ret)
""",
    # Double fork and setsid: a daemon whose parent has gone.
    "daemon": """
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        helper()
    os._exit(0)
os.wait()
tried("daemon", 0)
""",
}
FAMILIES = tuple(_FAMILIES)

_EPILOGUE = """
print("SECCOMP", open("/proc/self/status").read().split("Seccomp:")[1].split()[0], flush=True)
print("READY", flush=True)
time.sleep(60)
"""


def attempt(family: str, counter: str) -> str:
    """The program that attempts `family`, its helper (if any) appending to `counter`."""
    return _PRELUDE.format(counter=counter) + _FAMILIES[family] + _EPILOGUE


def counter_moves(counter: Path, wait_s: float = 0.3) -> bool:
    """Whether the file `counter` grows within `wait_s`."""
    before = counter.stat().st_size if counter.exists() else 0
    time.sleep(wait_s)
    return (counter.stat().st_size if counter.exists() else 0) != before


def survivors(uids: Iterable[int]) -> list[str]:
    """`pid: command` of every live process on the host whose real uid is one of `uids`."""
    wanted = {str(uid) for uid in uids}
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        alive = not fields.get("State", "").strip().startswith(("Z", "X"))
        if alive and fields.get("Uid", "").split()[:1] and fields["Uid"].split()[0] in wanted:
            found.append(f"{entry.name}: {command}")
    return found
