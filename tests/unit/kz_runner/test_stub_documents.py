"""The stub backend's result documents: version 3, through the validity gate by default, and
each scripted fault read by the referee's rules as what it stands for."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import pytest

from kz_events.ruling import Facts, Verdict, rule
from kz_harness.validity import validity
from kz_package.schemas import validate
from kz_runner.backends.base import StepSpec
from kz_runner.backends.stub import StubBackend
from kz_runner.limits import MIB, StepLimits

pytestmark = pytest.mark.unit


def _step(workdir: Path, result_fd: int) -> StepSpec:
    return StepSpec(
        argv=("python", ".kernel_package/benchmark.py"),
        workdir=workdir,
        env={"KZ_RESULT_FD": str(result_fd), "KZ_KERNEL_ID": "a/b/c/d/e"},
        timeout_s=30,
        limits=StepLimits(memory_bytes=512 * MIB, max_pids=40, max_file_bytes=MIB),
    )


def _sent(tmp_path: Path, script: dict[str, Any], attempt: int = 1) -> dict[str, Any]:
    (tmp_path / "src").mkdir(exist_ok=True)
    (tmp_path / "src" / "stub.json").write_text(json.dumps(script))
    read, write = os.pipe()
    step = _step(tmp_path, result_fd=write)
    StubBackend().run(dataclasses.replace(step, env={**step.env, "KZ_ATTEMPT": str(attempt)}))
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        document: dict[str, Any] = json.loads(pipe.read())
    assert validate("result", document) == []
    return document


BESIDE = {"value": 10.0, "incumbent": 20.0, "reference": 15.0}


@pytest.mark.parametrize(
    ("faults", "verdict", "code"),
    [
        ({}, Verdict.ACCEPTED, "accepted"),  # 2x the incumbent, settled: a clean result
        ({"unsettled": True}, Verdict.RETRY, "unsettled"),
        ({"unmeasured": True}, Verdict.RETRY, "unmeasured"),
        ({"void": "incumbent"}, Verdict.RETRY, "rival_voided"),
        ({"crash": "call"}, Verdict.REJECTED, "candidate_error"),
        ({"crash": "load"}, Verdict.REJECTED, "candidate_error"),
    ],
)
def test_the_stub_writes_version_3_documents_with_scripted_faults(
    tmp_path: Path, faults: dict[str, Any], verdict: Verdict, code: str
) -> None:
    """Each document fits the result schema (version 3); by default it passes the validity
    gate, and each scripted fault is what the referee's rules read it as."""
    document = _sent(tmp_path, {**BESIDE, **faults})
    assert document["schema_version"] == 3 and document["timing"]["method"] == "batched_window"
    ruling = rule("accepted", document, Facts())
    assert (ruling.verdict, ruling.code) == (verdict, code)


def test_a_fault_can_spare_the_retry(tmp_path: Path) -> None:
    """`faulty_attempts` limits a fault to the first attempts (KZ_ATTEMPT): the retry is clean."""
    script = {**BESIDE, "unsettled": True, "faulty_attempts": 1}
    assert not validity(_sent(tmp_path, script, attempt=1)).settled
    assert validity(_sent(tmp_path, script, attempt=2)).valid
