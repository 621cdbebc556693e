"""kz_testing: support code for kernel zoo's tests and benchmarks, not used by the platform itself.

`KzProcess` runs a `kz` command as its own process group with a health wait and a stop that
leaves nothing behind; `package_files` and friends build small valid kernel packages;
`kz_testing.load` drives a local stack with prepared requests and reads its processes' CPU.
"""

from __future__ import annotations

from kz_testing.load import (
    RawClient,
    filesystem_of,
    process_cpu_s,
    scratch_base,
    stack_env,
    submission_request,
)
from kz_testing.packages import (
    TRIVIAL_BENCHMARK,
    TRIVIAL_BUILD,
    package_files,
    package_tarball,
    write_package,
)
from kz_testing.process import (
    HEALTH_PATH,
    KZ,
    KzProcess,
    ProcessError,
    kz_argv,
    stop_all,
    wait_healthy,
)

__all__ = [
    "HEALTH_PATH",
    "KZ",
    "TRIVIAL_BENCHMARK",
    "TRIVIAL_BUILD",
    "KzProcess",
    "ProcessError",
    "RawClient",
    "filesystem_of",
    "kz_argv",
    "package_files",
    "package_tarball",
    "process_cpu_s",
    "scratch_base",
    "stack_env",
    "stop_all",
    "submission_request",
    "wait_healthy",
    "write_package",
]
