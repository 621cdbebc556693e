"""The soak: concurrent submitters over several kernels mix accepted, rejected, failing, hanging
and invalid packages while a fault injector kills runners, restarts the projector and an API
process (and on a cluster kills a NATS node); nothing is lost, nothing applied twice.

`make test` runs a bounded size; `KZ_SOAK_SUBMISSIONS=1000` runs the full soak and
`KZ_SOAK_CLUSTER=1` runs it on a 3-node cluster with R3 streams; `KZ_SOAK_RUNNER_EVERY_S` sets
how often a runner is killed (5 s) and `KZ_SOAK_PROJECTOR_RESTARTS` how many times the
projector is restarted, SIGTERM and SIGKILL in turn, spread over the run (2).
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from system_checks import check_run, summary_table
from system_driver import FaultInjector, Progress, run_submitters
from system_packages import INVALID_KINDS, Planned
from system_stack import Stack

SIZE = int(os.environ.get("KZ_SOAK_SUBMISSIONS", "150"))
CLUSTER = os.environ.get("KZ_SOAK_CLUSTER", "") == "1"
RUNNER_EVERY_S = float(os.environ.get("KZ_SOAK_RUNNER_EVERY_S", "5"))  # a runner killed this often
PROJECTOR_RESTARTS = int(os.environ.get("KZ_SOAK_PROJECTOR_RESTARTS", "2"))

pytestmark = [pytest.mark.system, pytest.mark.timeout(300 + 2 * SIZE)]

STUB_KERNELS = (
    "sm90/Attention/MHA/fp16/soak_a",
    "sm90/GEMM/dense/fp8/soak_b",
    "sm90/Norm/RMSNorm/bf16/soak_c",
)
SANDBOX_KERNEL = "cpu/Norm/RMSNorm/fp32/soak_cpu"
# (weight, where, what): the stub runners obey src/stub.json; the sandboxed cpu runners run
# the package's real benchmark, which obeys src/verdict.json.
MIX = (
    (40, "stub", "accept"),
    (14, "stub", "reject"),
    (6, "stub", "build_fail"),
    (6, "stub", "error"),
    (6, "stub", "hang"),
    (9, "cpu", "accept"),
    (4, "cpu", "reject"),
    (1, "cpu", "build_fail"),
    (14, "invalid", "invalid"),
)


def soak_plans(count: int, submitters: int = 20, seed: int = 9) -> list[Planned]:
    rng = random.Random(seed)
    weights = [w for w, _, _ in MIX]
    plans = []
    for i in range(count):
        _, where, what = rng.choices(MIX, weights)[0]
        kernel = SANDBOX_KERNEL if where == "cpu" else rng.choice(STUB_KERNELS)
        if where == "invalid":
            what = f"invalid:{rng.choice(INVALID_KINDS)}"
        value = round(rng.uniform(1, 1000), 3)
        plans.append(Planned(kernel, what, value, f"agent-{i % submitters:02d}"))
    return plans


def projector_restarts(count: int) -> tuple[float, ...]:
    """When (as fractions of the submissions done) the projector is restarted: the usual two,
    or `count` spread evenly."""
    if count == 2:
        return (0.15, 0.6)
    return tuple(round((k + 1) / (count + 1), 3) for k in range(count))


def test_soak_under_faults(make_stack: Callable[..., Stack], tmp_path: Path) -> None:
    """Every valid submission ends visibly, each accepted one is committed once in log order,
    invalid ones leave no trace, the audit is clean and index.json equals a fresh fold."""
    started = time.monotonic()
    stack = make_stack(cluster=CLUSTER)
    plans = soak_plans(SIZE)
    progress = Progress(len(plans))
    injector = FaultInjector(
        stack,
        progress,
        runner_every_s=RUNNER_EVERY_S,
        projector_at=projector_restarts(PROJECTOR_RESTARTS),
        nats_at=0.5 if CLUSTER else None,
    ).start()
    t0 = time.monotonic()
    try:
        records = run_submitters(stack, plans, workers=20, progress=progress)
    finally:
        injector.stop()
    submitting = time.monotonic() - t0
    assert not injector.errors, injector.errors
    signals = ("SIGTERM", "SIGKILL")[:PROJECTOR_RESTARTS]
    expected = {"api-1 restart (SIGTERM)", *(f"projector restart ({sig})" for sig in signals)}
    if CLUSTER:
        expected.add("nats stream leader killed")
    assert expected <= set(injector.faults), injector.log
    t1 = time.monotonic()
    figures = check_run(stack, records, tmp_path)
    durations = {
        "stack start": t0 - started,
        "submitting and following": submitting,
        "end checks (quiet, log, git, audit, index)": time.monotonic() - t1,
        "whole test": time.monotonic() - started,
    }
    where = "3-node cluster, R3" if CLUSTER else "single node"
    print(
        "\n"
        + summary_table(
            f"soak: {SIZE} submissions, 20 submitters, {where}",
            records,
            injector.faults,
            durations,
            figures["deviations"],
        )
    )
    print("\n".join(injector.log))
