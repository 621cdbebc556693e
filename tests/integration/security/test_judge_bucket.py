"""Judge bundles live apart from uploads, in `KZ_JUDGES`, which only the projector writes; a
store whose judges are missing there (one from before the bucket existed) gets each kernel's
bundle from main when the projector starts."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from kz_events.eventlog import EventLog
from kz_events.subjects import JUDGES_BUCKET, PACKAGES_BUCKET, judge_key
from kz_projector.importer import import_path
from kz_projector.packages import files_from_tarball, judge_files
from kz_projector.service import Projectors

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "projector"))
from projector_helpers import Clock, settings_for, write_package

pytestmark = pytest.mark.integration

KERNELS = ["cpu/GEMM/dense/fp32/j1", "cpu/GEMM/dense/fp32/j2"]


async def test_the_projector_restores_missing_judge_bundles_at_start(
    event_log: EventLog, tmp_path: Path
) -> None:
    """With both kernels' bundles gone from KZ_JUDGES (and one left under the uploads, as an
    old store had it), a projector that starts again stores main's judge files for each."""
    settings, clock = settings_for(tmp_path), Clock()
    for name in KERNELS:
        write_package(tmp_path / "kernels" / name.rsplit("/", 1)[1], name)
    await import_path(event_log, tmp_path / "kernels", submitter="zoo", clock=clock)
    first = Projectors(event_log, settings, clock=clock)
    await first.catch_up()
    first.close()
    stored = {k: await event_log.get_object_bytes(JUDGES_BUCKET, judge_key(k)) for k in KERNELS}
    store = await event_log.bucket(JUDGES_BUCKET)
    for kernel_id in KERNELS:
        await store.delete(judge_key(kernel_id))
    await event_log.put_object(PACKAGES_BUCKET, judge_key(KERNELS[0]), b"an old judge")
    assert not await event_log.has_object(JUDGES_BUCKET, judge_key(KERNELS[0]))

    again = Projectors(event_log, settings, clock=clock)
    await again.catch_up()
    again.close()
    for kernel_id in KERNELS:
        bundle = await event_log.get_object_bytes(JUDGES_BUCKET, judge_key(kernel_id))
        assert bundle == stored[kernel_id]
        assert judge_files(files_from_tarball(bundle))  # main's judge files, not the old one
