"""The system-call filter every sandboxed step runs under: no namespace can be made or joined.

A step that made its own user and PID namespaces could hide processes from anything that
looks for them by namespace, and would hold capabilities inside them. The filter refuses
`unshare` and `setns` (EPERM), `clone` with any `CLONE_NEW*` flag (EPERM), and `clone3`
(ENOSYS, so the C library falls back to `clone`, whose flags a filter can read; those of
`clone3` sit in memory it cannot). Anything else is allowed. Built with libseccomp (through
`pyseccomp`), which also kills any call made through another ABI than the host's (x32, i386).
bubblewrap loads it (`--seccomp FD`) just before the step's command runs.
"""

from __future__ import annotations

import errno
import functools
import os
import tempfile

from kz_runner.backends.base import BackendUnavailable

__all__ = ["NAMESPACE_FLAGS", "filter_fd", "namespace_filter"]

# CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID,
# CLONE_NEWNET (CLONE_NEWTIME shares its bit with clone's exit signal: unshare and clone3 only).
NAMESPACE_FLAGS = (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000,
                   0x40000000)  # fmt: skip


@functools.cache
def namespace_filter() -> bytes:
    """The filter as a classic BPF program (what bubblewrap's --seccomp reads); raises
    BackendUnavailable with one line when it cannot be built here."""
    try:
        import pyseccomp as sc
    except (ImportError, RuntimeError) as exc:  # RuntimeError: no libseccomp.so.2
        raise BackendUnavailable(
            f"cannot build the sandbox's seccomp filter ({exc}): install libseccomp2 "
            "(apt-get install libseccomp2) and the pyseccomp package"
        ) from exc
    try:
        rules = sc.SyscallFilter(sc.ALLOW)
        rules.add_rule(sc.ERRNO(errno.EPERM), "unshare")
        rules.add_rule(sc.ERRNO(errno.EPERM), "setns")
        for flag in NAMESPACE_FLAGS:
            rules.add_rule(sc.ERRNO(errno.EPERM), "clone", sc.Arg(0, sc.MASKED_EQ, flag, flag))
        rules.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
        with tempfile.TemporaryFile() as out:
            rules.export_bpf(out)
            out.seek(0)
            program = out.read()
    except (OSError, ValueError, RuntimeError) as exc:
        raise BackendUnavailable(f"cannot build the sandbox's seccomp filter: {exc}") from exc
    if not program or len(program) % 8:
        raise BackendUnavailable("cannot build the sandbox's seccomp filter: libseccomp wrote none")
    return program


def filter_fd() -> int:
    """A fresh descriptor to read the filter from (bubblewrap reads it to its end); the
    caller closes it."""
    program = namespace_filter()
    fd = os.memfd_create("kz-seccomp", os.MFD_CLOEXEC)
    os.write(fd, program)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd
