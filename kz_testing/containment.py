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

__all__ = ["COVERT", "ESCAPE", "FAMILIES", "OBSERVER", "attempt", "counter_moves", "survivors"]

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


# --- kernels for the judge-level suites (each beside an honest RMSNorm, kz_testing.cheats) ---

# At import, as a candidate would: unshare(CLONE_NEWUSER | CLONE_NEWPID) and fork a helper that
# spins while the rivals are timed.
ESCAPE = """
import ctypes as _ct, os as _os
_ret = _ct.CDLL(None, use_errno=True).unshare(0x10000000 | 0x20000000)
print("TRIED escape_unshare", _ret, _ct.get_errno() if _ret else 0, flush=True)
if _os.fork() == 0:
    while True:
        sum(range(1000))
"""

# Prints everything the worker can observe of itself, once, at import: `OBSERVED <json>`.
OBSERVER = """
import json as _json, os as _os, resource as _res, socket as _socket

def _stat(path):
    st = _os.lstat(path)
    return [oct(st.st_mode), st.st_uid, st.st_gid, st.st_size, st.st_mtime_ns, st.st_atime_ns,
            st.st_nlink]

def _read(path):
    try:
        with open(path, "rb") as handle:
            return handle.read().decode(errors="replace")
    except OSError as exc:
        return f"error {exc.errno}"

def _tree(root):
    found = {".": _stat(root)}
    for folder, dirs, files in _os.walk(root):
        for name in sorted(dirs + files):
            path = _os.path.join(folder, name)
            found[_os.path.relpath(path, root)] = _stat(path)
    return found

_seen = {
    "uid": [_os.getuid(), _os.geteuid()], "gid": [_os.getgid(), _os.getegid()],
    "groups": _os.getgroups(), "cwd": _os.getcwd(), "pid": [_os.getpid(), _os.getppid()],
    "src": _tree("/kz/work/src"), "scratch": _os.listdir("/kz/work/scratch"),
    "scratch_mode": oct(_os.stat("/kz/work/scratch").st_mode),
    "home": _os.listdir(_os.path.expanduser("~")), "tmp": _os.listdir("/tmp"),
    "environ": sorted(_read("/proc/self/environ").split("\\0")),
    "cmdline": _read("/proc/self/cmdline"), "hostname": _socket.gethostname(),
    "status": _read("/proc/self/status"), "cgroup": _read("/proc/self/cgroup"),
    "mountinfo": _read("/proc/self/mountinfo"), "limits": _read("/proc/self/limits"),
    "rlimits": {n: _res.getrlimit(getattr(_res, n)) for n in dir(_res) if n.startswith("RLIMIT_")},
    "fds": sorted(_os.listdir("/proc/self/fd")),
}
print("OBSERVED", _json.dumps(_seen, sort_keys=True), flush=True)
"""

# Tries to pass a bit to another worker through every shared place a sandbox might leave:
# files in /tmp, /dev/shm and HOME, an abstract Unix socket, SysV shared memory and message
# queues, a POSIX message queue. `ROLE` "send" makes each (and checks it can read it back:
# `SELF <channel>`), "receive" looks for each (`RECEIVED <channel>` if found). Acts at import
# and in every call.
COVERT = """
import ctypes as _ct, os as _os, socket as _socket
_libc = _ct.CDLL(None, use_errno=True)
_KEY, _NAME = 0x4B5A0031, b"/kz-covert"
_FILES = {"tmp": "/tmp/kz-covert", "dev_shm": "/dev/shm/kz-covert",
          "home": _os.path.expanduser("~/kz-covert")}
_said = set()
_keep = []

def _say(line):
    if line not in _said:
        _said.add(line)
        print(line, flush=True)

def _connects():
    probe = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        probe.connect("\\0kz-covert")
        return True
    except OSError:
        return False
    finally:
        probe.close()

_LOOK = {
    **{name: (lambda p=path: _os.path.exists(p)) for name, path in _FILES.items()},
    "abstract_socket": _connects,
    "sysv_shm": lambda: _libc.shmget(_KEY, 0, 0) >= 0,
    "sysv_msg": lambda: _libc.msgget(_KEY, 0) >= 0,
    "posix_mq": lambda: _libc.mq_open(_NAME, _os.O_RDONLY) >= 0,
}

def _send():
    for name, path in _FILES.items():
        try:
            with open(path, "wb") as out:
                out.write(b"1")
        except OSError as exc:
            _say(f"TRIED covert_{name} send errno {exc.errno}")
    if not _keep:
        server = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        server.bind("\\0kz-covert")
        server.listen(8)
        _keep.append(server)
    _libc.shmget(_KEY, 4096, 0o1666)
    _libc.msgget(_KEY, 0o1666)
    _libc.mq_open(_NAME, _os.O_CREAT | _os.O_RDONLY, 0o666, None)
    for name, look in _LOOK.items():
        _say(f"TRIED covert_{name} send")
        if look():
            _say(f"SELF covert_{name}")

def _receive():
    for name, look in _LOOK.items():
        _say(f"TRIED covert_{name} receive")
        if look():
            _say(f"RECEIVED covert_{name}")

def _act():
    _send() if ROLE == "send" else _receive()

_act()

def rmsnorm(x, w, _honest=rmsnorm):
    _act()
    return _honest(x, w)
"""
