"""The whole pipeline on a 3-node JetStream cluster with R3 streams and two API processes: the
server leading `KZ_EVENTS` is killed in the middle of 200 submissions and restarted, and still
every submission ends, visibly, and every accepted one is committed exactly once."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from system_checks import check_run, stream_replicas, summary_table
from system_driver import FaultInjector, Progress, run_submitters
from system_packages import Planned
from system_stack import RunnerSpec, Stack, stream_leader

pytestmark = [pytest.mark.system, pytest.mark.timeout(600)]

STUB_RUNNERS = (
    RunnerSpec("runner-sm90-0", "sm90", "stub"),
    RunnerSpec("runner-sm90-1", "sm90", "stub"),
    RunnerSpec("runner-sm80-0", "sm80", "stub"),
    RunnerSpec("runner-sm80-1", "sm80", "stub"),
)
KERNELS = (
    "sm90/Attention/MHA/fp16/cluster_a",
    "sm90/Attention/MHA/fp16/cluster_b",
    "sm80/GEMM/dense/fp16/cluster_c",
)


def cluster_plans(count: int, seed: int = 8) -> list[Planned]:
    rng = random.Random(seed)
    return [
        Planned(
            kernel_id=rng.choice(KERNELS),
            verdict="accept" if rng.random() < 0.7 else "reject",
            value=round(rng.uniform(1, 500), 3),
            submitter=f"team-{i % 10}",
        )
        for i in range(count)
    ]


def test_pipeline_survives_losing_the_stream_leader(
    make_stack: Callable[..., Stack], tmp_path: Path
) -> None:
    """200 submissions through two APIs on R3 streams, the KZ_EVENTS leader killed and
    restarted mid-way: all end, each accepted one is on main exactly once, the audit is clean."""
    started = time.monotonic()
    stack = make_stack(cluster=True, runners=STUB_RUNNERS)
    assert stream_replicas(stack) == {
        "KZ_EVENTS": 3,
        "KZ_LIVE": 3,
        "OBJ_KZ_PACKAGES": 3,
        "OBJ_KZ_LOGS": 3,
        "OBJ_KZ_JUDGES": 3,
    }
    assert stream_leader(stack) is not None
    plans = cluster_plans(200)
    progress = Progress(len(plans))
    injector = FaultInjector(
        stack, progress, runner_every_s=None, projector_at=(), api_at=None, nats_at=0.3
    ).start()
    t0 = time.monotonic()
    records = run_submitters(stack, plans, workers=20, progress=progress, follow_timeout_s=150)
    submitting = time.monotonic() - t0
    injector.stop()
    assert not injector.errors, injector.errors
    assert injector.faults == {"nats stream leader killed": 1}, injector.log
    assert any(line.endswith("the KZ_EVENTS leader") for line in injector.log), injector.log
    figures = check_run(stack, records, tmp_path)
    durations = {
        "stack start": t0 - started,
        "submitting and following": submitting,
        "whole test": time.monotonic() - started,
    }
    print(
        "\n"
        + summary_table(
            "cluster pipeline, KZ_EVENTS leader killed",
            records,
            injector.faults,
            durations,
            figures["deviations"],
        )
    )
    print("\n".join(injector.log))
    assert sum(r.status == "committed" for r in records) > 100
