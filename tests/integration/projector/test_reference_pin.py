"""Each board pins its first kernel's src/ as its reference, and every bundle carries it."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from projector_helpers import Clock, result_doc, store_package, submit_and_run, write_package

from kz_events.bundles import runner_bundle
from kz_events.config import Settings
from kz_events.eventlog import EventLog
from kz_events.events import ReferencePinned
from kz_events.subjects import JUDGES_BUCKET, judge_key, reference_key
from kz_package.memread import read_package_files
from kz_projector.importer import import_path
from kz_projector.repo_read import KernelRepo
from kz_projector.service import Projectors

pytestmark = pytest.mark.integration

BOARD = "cpu/Norm/RMSNorm/fp32"
FIRST, SECOND, NEW = f"{BOARD}/first", f"{BOARD}/second", f"{BOARD}/not_on_main"


async def _bundle(elog: EventLog, key: str) -> dict[str, bytes]:
    data = await elog.get_object_bytes(JUDGES_BUCKET, key)
    return {path: body for path, (_mode, body) in read_package_files(data).items()}


async def test_the_first_commit_of_a_board_pins_its_reference_for_every_kernel(
    event_log: EventLog, settings: Settings, clock: Clock, tmp_path: Path
) -> None:
    slow = await store_package(event_log, write_package(tmp_path / "a", FIRST, variant="slow"))
    await submit_and_run(event_log, clock, FIRST, slow, 4.0)
    projectors = Projectors(event_log, settings, clock=clock)
    await projectors.catch_up()
    pinned_at = KernelRepo(settings.kernel_repo_path).history(FIRST, limit=10)[-1].commit

    # Later commits, of the first kernel and of another, leave the pin where it was.
    fast = await store_package(event_log, write_package(tmp_path / "b", FIRST, variant="fast"))
    other = await store_package(event_log, write_package(tmp_path / "c", SECOND, variant="other"))
    await submit_and_run(event_log, clock, FIRST, fast, 2.0)
    await submit_and_run(event_log, clock, SECOND, other, 3.0)
    await projectors.catch_up()

    reference = await _bundle(event_log, reference_key(BOARD))
    assert reference["reference/src/kernel.py"] == b"VARIANT = 'slow'\n"
    assert json.loads(reference["reference/PINNED.json"]) == {
        "kernel_id": FIRST,
        "commit": pinned_at,
    }
    for kernel_id, incumbent in ((FIRST, b"VARIANT = 'fast'\n"), (SECOND, b"VARIANT = 'other'\n")):
        bundle = await _bundle(event_log, judge_key(kernel_id))
        assert bundle["src/kernel.py"] == incumbent  # main's src: the incumbent
        assert bundle["reference/src/kernel.py"] == b"VARIANT = 'slow'\n"

    # A kernel main does not hold yet is given the board's reference alone.
    given = await runner_bundle(event_log, NEW)
    assert given is not None
    assert sorted(read_package_files(given)) == ["reference/PINNED.json", "reference/src/kernel.py"]
    assert await runner_bundle(event_log, "cpu/GEMM/dense/fp32/elsewhere") is None


async def test_an_imported_board_pins_its_first_kernel_as_imported(
    event_log: EventLog, settings: Settings, clock: Clock, tmp_path: Path
) -> None:
    folder = tmp_path / "kernels"
    write_package(folder / "a", FIRST, variant="imported")
    write_package(folder / "b", SECOND, variant="second")
    await import_path(event_log, folder, submitter="zoo", clock=clock)
    await Projectors(event_log, settings, clock=clock).catch_up()
    reference = await _bundle(event_log, reference_key(BOARD))
    assert reference["reference/src/kernel.py"] == b"VARIANT = 'imported'\n"
    pinned = json.loads(reference["reference/PINNED.json"])
    assert pinned["kernel_id"] == FIRST
    assert pinned["commit"] == KernelRepo(settings.kernel_repo_path).history(FIRST)[-1].commit
    second = await _bundle(event_log, judge_key(SECOND))
    assert second["reference/src/kernel.py"] == b"VARIANT = 'imported'\n"


async def test_a_maintainer_pins_another_reference_and_older_scores_become_estimates(
    event_log: EventLog, settings: Settings, clock: Clock, tmp_path: Path
) -> None:
    """`reference_pinned` replaces the board's reference object and the reference folder of
    every bundle of the board; index.json names it, and a score measured against the one
    before is shown as an estimate."""
    slow = await store_package(event_log, write_package(tmp_path / "a", FIRST, variant="slow"))
    await submit_and_run(event_log, clock, FIRST, slow, 4.0)
    other = await store_package(event_log, write_package(tmp_path / "b", SECOND, variant="two"))
    scored = {**result_doc(2.0), "score": {"against": "reference", "speedup": 2.0,
                                           "interval": [1.95, 2.05]}}  # fmt: skip
    await submit_and_run(event_log, clock, SECOND, other, 2.0, document=scored)
    projectors = Projectors(event_log, settings, clock=clock)
    await projectors.catch_up()
    commit = KernelRepo(settings.kernel_repo_path).history(SECOND, limit=10)[0].commit

    await event_log.append(
        ReferencePinned(
            event_id=str(uuid.uuid4()),
            occurred_at=clock(),
            actor="maintainer",
            kernel_id=SECOND,
            commit=commit,
            message="the vectorised one is the fairer baseline",
        )
    )
    await projectors.catch_up()

    reference = await _bundle(event_log, reference_key(BOARD))
    assert reference["reference/src/kernel.py"] == b"VARIANT = 'two'\n"
    assert json.loads(reference["reference/PINNED.json"]) == {"kernel_id": SECOND, "commit": commit}
    for kernel_id in (FIRST, SECOND):
        bundle = await _bundle(event_log, judge_key(kernel_id))
        assert bundle["reference/src/kernel.py"] == b"VARIANT = 'two'\n"
    index = json.loads(settings.effective_index_path.read_bytes())
    assert index["boards"][BOARD]["reference"] == {"kernel_id": SECOND, "commit": commit}
    scores = {k["id"]: k["score"] for k in index["kernels"]}
    assert scores[SECOND] == {"speedup": 1.0, "interval": [1.0, 1.0], "basis": "reference"}
    assert scores[FIRST] == {"speedup": 0.5, "interval": None, "basis": "absolute"}
