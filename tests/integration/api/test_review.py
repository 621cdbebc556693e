"""One judge per board and suspect results, through the API: a new kernel on an existing board
must carry the board's judge, boards a submission opens are unreviewed until a maintainer
reviews them, and suspect results are shown, filtered and cleared."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Any

import pytest
from api_helpers import (
    KERNEL,
    RESULT_DOC,
    Api,
    accept,
    import_kernel,
    meta,
    put_judge,
    seed,
    stream_events,
    tarball,
)

from kz_events.events import (
    BoardReviewed,
    ReferencePinned,
    SubmissionClaimed,
    SubmissionResult,
    SubmissionSubmitted,
    SubmissionSuspectCleared,
    SubmissionSuspected,
    SuspectReason,
)
from kz_events.subjects import PACKAGES_BUCKET
from kz_projector.packages import ObjectStorePackages
from kz_projector.referee import Referee
from kz_projector.repo_read import KernelRepo
from kz_projector.service import Projectors

pytestmark = pytest.mark.integration

BOARD = "cpu/Norm/RMSNorm/fp32"
OTHER = f"{BOARD}/challenger"
FRESH_BOARD = "cpu/Norm/LayerNorm/fp32"
FRESH = f"{FRESH_BOARD}/first"
OWN_JUDGE = "import kz_harness\nprint('my own rules')\n"
MAINTAINER = {"X-Submitter-Id": "maintainer"}
ALICE = {"X-Submitter-Id": "alice"}


def _code(resp: Any) -> str:
    return str(resp.json()["error"]["code"])


async def _count(api: Api) -> int:
    return len(await stream_events(api.log))


@pytest.mark.parametrize("bundle", [True, False], ids=["judge-bundle", "package-only"])
async def test_a_new_kernel_must_carry_the_boards_judge(api: Api, bundle: bool) -> None:
    """A new kernel on an existing board with another benchmark.py is refused 403
    harness_change_forbidden naming the files and the board, storing nothing; with the board's
    judge it is accepted. The board's judge is read from its judge bundle, or from its package
    before the git projector stored one."""
    await import_kernel(api)
    if bundle:
        await put_judge(api)
    before = await _count(api)
    data = tarball(kernel_id=OTHER, benchmark=OWN_JUDGE)
    refused = await api.submit(data, kernel_id=OTHER)
    assert refused.status_code == 403 and _code(refused) == "harness_change_forbidden"
    details = refused.json()["error"]["details"]
    assert details == {"changed": ["benchmark.py"], "board": BOARD, "board_judge": KERNEL}
    assert await _count(api) == before
    assert not await api.log.has_object(PACKAGES_BUCKET, hashlib.sha256(data).hexdigest())
    same = await api.submit(tarball(kernel_id=OTHER, src="y = 2\n"), kernel_id=OTHER)
    assert same.status_code == 202, same.text
    assert same.json()["new_kernel"] is True


async def test_maintainers_may_bring_another_judge(api: Api) -> None:
    """The board-judge rule has the maintainer exception of the kernel-judge rule."""
    await import_kernel(api)
    await put_judge(api)
    data = tarball(kernel_id=OTHER, benchmark=OWN_JUDGE)
    resp = await api.submit(data, kernel_id=OTHER, who="maintainer")
    assert resp.status_code == 202, resp.text


async def test_the_board_detail_names_kernels_with_another_judge(api: Api) -> None:
    """A board whose kernels disagree (a maintainer brought another judge) lists the kernels
    whose judge differs from the board's; the listing does not compare."""
    await import_kernel(api)
    await put_judge(api)
    resp = await api.submit(
        tarball(kernel_id=OTHER, benchmark=OWN_JUDGE), kernel_id=OTHER, who="maintainer"
    )
    await accept(api, resp.json()["submission_id"])
    await put_judge(api, OTHER, benchmark=OWN_JUDGE)
    board = (await api.client.get(f"/api/boards/{BOARD}")).json()
    assert board["judge_kernel"] == KERNEL and board["kernels"] == [KERNEL, OTHER]
    assert board["other_judges"] == [OTHER]
    listed = (await api.client.get("/api/boards")).json()["items"]
    assert [b["other_judges"] for b in listed] == [None]


async def test_an_existing_kernels_judge_still_cannot_change(api: Api) -> None:
    """Today's rule stands: an existing kernel's judge changes only by a maintainer."""
    await import_kernel(api)
    await put_judge(api)
    resp = await api.submit(tarball(benchmark=OWN_JUDGE))
    assert resp.status_code == 403 and _code(resp) == "harness_change_forbidden"
    assert resp.json()["error"]["details"] == {"changed": ["benchmark.py"]}


async def test_a_new_board_is_unreviewed_until_a_maintainer_reviews_it(api: Api) -> None:
    """The first kernel of a new board is admitted with its own judge and makes the board
    unreviewed in the boards listing, the kernel list and detail and index.json; only a
    maintainer's review (one board_reviewed event) changes that."""
    await import_kernel(api)
    resp = await api.submit(tarball(kernel_id=FRESH, benchmark=OWN_JUDGE), kernel_id=FRESH)
    assert resp.status_code == 202, resp.text
    await accept(api, resp.json()["submission_id"])

    boards = (await api.client.get("/api/boards")).json()
    by_key = {b["board"]: b for b in boards["items"]}
    assert by_key[BOARD]["reviewed"] is True
    assert by_key[FRESH_BOARD]["reviewed"] is False and by_key[FRESH_BOARD]["kernels"] == [FRESH]
    unreviewed = (await api.client.get("/api/boards", params={"reviewed": "false"})).json()
    assert [b["board"] for b in unreviewed["items"]] == [FRESH_BOARD]
    detail = (await api.client.get(f"/api/kernels/{FRESH}")).json()
    assert detail["board"]["reviewed"] is False and detail["board"]["judge_kernel"] == FRESH
    listed = (await api.client.get("/api/kernels", params={"quant": "fp32"})).json()["items"]
    assert {k["id"]: k["board_reviewed"] for k in listed} == {KERNEL: True, FRESH: False}
    index = (await api.client.get("/api/index.json")).json()
    assert FRESH_BOARD in index["unreviewed_leaderboards"]
    assert FRESH_BOARD not in index["leaderboards"]

    url = f"/api/boards/{FRESH_BOARD}/review"
    refused = await api.client.post(url, headers={"X-Submitter-Id": "alice"})
    assert refused.status_code == 403 and _code(refused) == "forbidden"
    missing = await api.client.post("/api/boards/cpu/X/Y/fp32/review", headers=MAINTAINER)
    assert missing.status_code == 404 and _code(missing) == "unknown_board"
    stranger = await api.client.post(url, json={"judge_kernel": KERNEL}, headers=MAINTAINER)
    assert stranger.status_code == 409 and _code(stranger) == "unknown_kernel"
    ok = await api.client.post(url, json={"message": "read the judge"}, headers=MAINTAINER)
    assert ok.status_code == 200, ok.text
    assert ok.json()["reviewed"] is True and ok.json()["reviewed_by"] == "maintainer"
    last = (await stream_events(api.log))[-1]
    assert isinstance(last, BoardReviewed) and last.kernel_id == FRESH
    index = (await api.client.get("/api/index.json")).json()
    assert FRESH_BOARD in index["leaderboards"] and index["unreviewed_leaderboards"] == {}
    detail = (await api.client.get(f"/api/kernels/{FRESH}")).json()
    assert detail["board"]["reviewed"] is True


async def test_the_tripwire_runs_at_admission_and_never_refuses(api: Api) -> None:
    """A package whose src/ trips the tripwire is admitted; its hits ride on `submitted`."""
    resp = await api.submit(tarball(src="import gc\nimport os\nos._exit(0)\n"))
    assert resp.status_code == 202, resp.text
    submitted = next(e for e in await stream_events(api.log) if isinstance(e, SubmissionSubmitted))
    assert {(h.code, h.path) for h in submitted.tripwire} == {
        ("gc", "src/kernel.py"),
        ("early_exit", "src/kernel.py"),
    }
    clean = await api.submit(tarball(src="import numpy as np\n"), who="bob")
    assert clean.status_code == 202
    events = [e for e in await stream_events(api.log) if isinstance(e, SubmissionSubmitted)]
    assert events[-1].tripwire == []


async def _suspect(api: Api, sid: str) -> None:
    view = api.ctx.models.submissions[sid]
    reason = SuspectReason(source="runtime", code="extra_threads", message="a thread outlived")
    await seed(
        api,
        SubmissionSuspected(
            **meta("referee"),
            submission_id=sid,
            kernel_id=view.state.kernel_id,
            result_seq=1,
            reasons=[reason],
        ),
    )


async def test_suspect_status_filter_history_and_clear(api: Api) -> None:
    """A suspect result shows `suspect` in its status and history, is found by
    ?suspect=true, and only a maintainer clears it (once); a clean one cannot be cleared."""
    sid = (await api.submit(tarball())).json()["submission_id"]
    other = (await api.submit(tarball(src="z = 3\n"), who="bob")).json()["submission_id"]
    await _suspect(api, sid)
    await accept(api, sid)
    status = (
        await api.client.get(f"/api/submissions/{sid}/status", headers={"X-Submitter-Id": "alice"})
    ).json()
    assert status["status"] == "committed"
    assert status["suspect"]["cleared"] is False
    assert status["suspect"]["reasons"][0]["code"] == "extra_threads"
    found = (await api.client.get("/api/submissions", params={"suspect": "true"})).json()
    assert [s["submission_id"] for s in found["items"]] == [sid]
    rest = (await api.client.get("/api/submissions", params={"suspect": "false"})).json()
    assert [s["submission_id"] for s in rest["items"]] == [other]
    history = (await api.client.get(f"/api/kernels/{KERNEL}/bench-history")).json()
    assert history["history"][0]["suspect"] is True

    url = f"/api/submissions/{sid}/clear-suspect"
    body = {"reason": "the thread is numpy's pool"}
    refused = await api.client.post(url, json=body, headers={"X-Submitter-Id": "alice"})
    assert refused.status_code == 403 and _code(refused) == "forbidden"
    empty = await api.client.post(url, json={}, headers=MAINTAINER)
    assert empty.status_code == 400
    clean = await api.client.post(
        f"/api/submissions/{other}/clear-suspect", json=body, headers=MAINTAINER
    )
    assert clean.status_code == 409 and _code(clean) == "not_suspect"
    ok = await api.client.post(url, json=body, headers=MAINTAINER)
    assert ok.status_code == 200, ok.text
    assert ok.json()["suspect"] == {
        "reasons": status["suspect"]["reasons"],
        "cleared": True,
        "cleared_reason": body["reason"],
    }
    assert isinstance((await stream_events(api.log))[-1], SubmissionSuspectCleared)
    again = await api.client.post(url, json=body, headers=MAINTAINER)
    assert again.status_code == 409 and _code(again) == "already_cleared"
    found = (await api.client.get("/api/submissions", params={"suspect": "true"})).json()
    assert found["items"] == []
    history = (await api.client.get(f"/api/kernels/{KERNEL}/bench-history")).json()
    assert history["history"][0]["suspect"] is False


async def test_an_uploaded_tripwire_hit_ends_as_a_suspect_accepted_result(api: Api) -> None:
    """End to end through the real parts: the API scans the upload, the referee marks the
    accepted result suspect from the hits and the judge's flags, the status shows both."""
    sid = (await api.submit(tarball(src="import ctypes\n"))).json()["submission_id"]
    ids = {"submission_id": sid, "kernel_id": KERNEL}
    flags = [{"code": "below_physical_floor", "message": "faster than memory allows"}]
    await seed(
        api, SubmissionClaimed(**meta("r1"), **ids, runner_id="r1", attempt=1, lease_id="L1")
    )
    await seed(
        api,
        SubmissionResult(
            **meta("r1"),
            **ids,
            runner_id="r1",
            attempt=1,
            lease_id="L1",
            outcome="accepted",
            result={**RESULT_DOC, "schema_version": 2, "flags": flags},
        ),
    )
    referee = Referee(
        api.log,
        ObjectStorePackages(api.log),
        clock=lambda: meta("x")["occurred_at"],
        new_id=lambda: meta("x")["event_id"],
    )
    api.seen(await referee.catch_up())
    status = (
        await api.client.get(f"/api/submissions/{sid}/status", headers={"X-Submitter-Id": "alice"})
    ).json()
    assert status["status"] == "accepted"
    reasons = [(r["source"], r["code"]) for r in status["suspect"]["reasons"]]
    assert reasons == [("tripwire", "ctypes"), ("runtime", "below_physical_floor")]
    types = [e["type"] for e in (await api.client.get(f"/api/submissions/{sid}")).json()["events"]]
    assert types[-2:] == ["suspect", "accepted"]


async def test_a_maintainer_pins_the_boards_reference_at_a_commit_of_one_of_its_kernels(
    api: Api,
) -> None:
    """POST /api/boards/<board>/reference: maintainers only; a kernel of the board at one of its
    commits on main (the newest by default); anything else is refused and appends nothing."""
    await import_kernel(api)
    await Projectors(api.log, api.settings, clock=lambda: datetime.now(UTC)).catch_up()
    api.seen(await api.log.last_seq())
    [commit] = [c.commit for c in KernelRepo(api.settings.kernel_repo_path).history(KERNEL)]
    url = f"/api/boards/{BOARD}/reference"
    before = await _count(api)
    refusals = [
        (await api.client.post(url, json={"kernel_id": KERNEL}, headers=ALICE), 403, "forbidden"),
        (await api.client.post(url, json={"kernel_id": OTHER}, headers=MAINTAINER), 409,
         "unknown_kernel"),
        (await api.client.post(url, json={"kernel_id": KERNEL, "commit": "a" * 40},
                               headers=MAINTAINER), 409, "unknown_commit"),
        (await api.client.post(url, json={"kernel_id": KERNEL, "commit": "HEAD"},
                               headers=MAINTAINER), 400, "invalid_input"),
    ]  # fmt: skip
    for resp, status, code in refusals:
        assert (resp.status_code, _code(resp)) == (status, code), resp.text
    assert await _count(api) == before

    ok = await api.client.post(url, json={"kernel_id": KERNEL, "message": "m"}, headers=MAINTAINER)
    assert ok.status_code == 200, ok.text
    [event] = (await stream_events(api.log))[before:]
    assert isinstance(event, ReferencePinned) and event.commit == commit
    assert event.kernel_id == KERNEL and event.actor == "maintainer"
