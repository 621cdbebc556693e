"""Secure defaults (issue 21, item 4): an API that strangers can reach refuses to start without
runner keys, submitter tokens (or open submissions chosen explicitly) and a shared lease secret;
runner ids are bound to the key that registered them, lease tokens to the runner and its key;
kernel leases are capped and maintainers can release or take them over."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from api_helpers import KERNEL, RESULT_DOC, Api, import_kernel, stream_events, tarball

from kz_api.auth import RUNNER_KEY_ACTOR, runner_key_id
from kz_cli.cmd_up import run_stack
from kz_cli.main import main as kz_main
from kz_events.config import Settings, check_exposure, exposure_problems, load_settings
from kz_events.errors import ConfigError
from kz_events.events import KernelClaimed, KernelReleased, RunnerRegistered

pytestmark = pytest.mark.integration

KEYS = {"key-a": ["cpu"], "key-b": ["cpu"]}
A = {"X-Runner-Key": "key-a"}
B = {"X-Runner-Key": "key-b"}
keyed = pytest.mark.parametrize("api_overrides", [{"runner_keys": KEYS}])
SECURE = {
    "KZ_RUNNER_KEYS_JSON": '{"k-0123456789abcdef": ["sm90"]}',
    "KZ_SUBMITTER_TOKENS_JSON": '{"t-0123456789abcdef": "alice"}',
    "KZ_LEASE_SECRET": "s" * 32,
}


def _code(resp: Any) -> str:
    return str(resp.json()["error"]["code"])


# --- refusal at start-up -------------------------------------------------------------------


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.1.2.3", "kz.example.org"])
def test_an_exposed_api_names_each_missing_setting(host: str) -> None:
    """Off loopback with nothing set: one line each for runner keys, submitter tokens and the
    lease secret, each naming its variable."""
    problems = exposure_problems(load_settings({"KZ_HOST": host}))
    assert [p.split(":")[0] for p in problems] == [
        "KZ_RUNNER_KEYS_JSON",
        "KZ_SUBMITTER_TOKENS_JSON",
        "KZ_LEASE_SECRET",
    ]
    assert all("\n" not in p and host in p for p in problems)


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "localhost"])
def test_a_local_api_needs_nothing(host: str) -> None:
    """On loopback the open defaults stand (one machine, one user)."""
    assert exposure_problems(load_settings({"KZ_HOST": host})) == []


def test_an_exposed_api_with_keys_tokens_and_secret_starts() -> None:
    """Keys, tokens and a secret, or keys, open submissions chosen explicitly and a secret."""
    assert exposure_problems(load_settings({**SECURE, "KZ_HOST": "0.0.0.0"})) == []
    open_mode = {**SECURE, "KZ_HOST": "0.0.0.0", "KZ_OPEN_SUBMISSIONS": "true"}
    del open_mode["KZ_SUBMITTER_TOKENS_JSON"]
    assert exposure_problems(load_settings(open_mode)) == []
    for missing in SECURE:
        partial = {k: v for k, v in SECURE.items() if k != missing}
        [problem] = exposure_problems(load_settings({**partial, "KZ_HOST": "0.0.0.0"}))
        assert problem.startswith(missing + ": ")


def test_a_short_lease_secret_is_refused() -> None:
    """A lease secret under 16 characters stops start-up with one line naming it."""
    with pytest.raises(ConfigError, match=r"^KZ_LEASE_SECRET: expected at least 16"):
        load_settings({"KZ_LEASE_SECRET": "short"})


def test_kz_api_refuses_to_listen_on_every_address(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`kz api --host 0.0.0.0` without the settings exits 2 before serving, naming them."""
    for name in (*SECURE, "KZ_HOST", "KZ_OPEN_SUBMISSIONS"):
        monkeypatch.delenv(name, raising=False)
    assert kz_main(["api", "--host", "0.0.0.0"]) == 2
    err = capsys.readouterr().err
    assert "KZ_RUNNER_KEYS_JSON: the API listens on 0.0.0.0" in err
    assert "KZ_SUBMITTER_TOKENS_JSON:" in err and "KZ_LEASE_SECRET:" in err


async def test_kz_up_refuses_to_start_off_loopback(tmp_path: Path) -> None:
    """`kz up` with KZ_HOST=0.0.0.0 refuses before it starts a server or writes its store."""
    settings = Settings(host="0.0.0.0", data_dir=tmp_path / "kz")
    with pytest.raises(ConfigError) as refused:
        await asyncio.wait_for(run_stack(settings, demo=False, backend="stub"), 10)
    assert str(refused.value).splitlines()[0].startswith("KZ_RUNNER_KEYS_JSON: ")
    assert not (tmp_path / "kz").exists()
    check_exposure(Settings(host="127.0.0.1"))  # the local default stands


# --- runner ids bound to their key ---------------------------------------------------------


async def _register(api: Api, runner_id: str, headers: dict[str, str]) -> Any:
    body = {"runner_id": runner_id, "arches": ["cpu"], "device": "x86", "backend": "stub"}
    return await api.client.post("/api/runner/register", json=body, headers=headers)


@keyed
async def test_a_key_cannot_take_over_another_keys_runner_id(api: Api) -> None:
    """The first registration binds the id to its key: the same key registers again, another
    key is refused (403 runner_id_taken) and cannot claim as that runner; nothing appended."""
    assert (await _register(api, "r1", A)).status_code == 200
    assert (await _register(api, "r1", A)).status_code == 200
    events = await stream_events(api.log)
    assert all(isinstance(e, RunnerRegistered) for e in events)
    assert {e.actor for e in events} == {RUNNER_KEY_ACTOR + runner_key_id("key-a")}
    taken = await _register(api, "r1", B)
    assert taken.status_code == 403 and _code(taken) == "runner_id_taken"
    claim = await api.client.post("/api/runner/claim", json={"runner_id": "r1"}, headers=B)
    assert claim.status_code == 403 and _code(claim) == "runner_id_taken"
    assert len(await stream_events(api.log)) == len(events)
    assert (await _register(api, "r2", B)).status_code == 200


# --- lease tokens bound to the runner and its key ------------------------------------------


@keyed
async def test_the_token_of_another_runner_is_refused(api: Api) -> None:
    """Key B, for the same architecture, cannot heartbeat, download or report with the lease
    handed to key A's runner (403 lease_not_yours); A still can."""
    assert (await _register(api, "ra", A)).status_code == 200
    assert (await _register(api, "rb", B)).status_code == 200
    assert (await api.submit(tarball())).status_code == 202
    offer = await api.client.post(
        "/api/runner/claim", json={"runner_id": "ra", "wait_s": 2}, headers=A
    )
    assert offer.status_code == 200, offer.text
    token, sid = offer.json()["lease_token"], offer.json()["submission_id"]
    before = len(await stream_events(api.log))
    beat = await api.client.post("/api/runner/heartbeat", json={"lease_token": token}, headers=B)
    assert beat.status_code == 403 and _code(beat) == "lease_not_yours"
    package = await api.client.get(
        f"/api/runner/tasks/{sid}/package", headers={**B, "X-Lease-Token": token}
    )
    assert package.status_code == 403
    body = {"lease_token": token, "outcome": "accepted", "result": RESULT_DOC}
    result = await api.client.post(f"/api/submissions/{sid}/result", json=body, headers=B)
    assert result.status_code == 403 and _code(result) == "lease_not_yours"
    assert len(await stream_events(api.log)) == before
    mine = await api.client.post("/api/runner/heartbeat", json={"lease_token": token}, headers=A)
    assert mine.status_code == 200, mine.text


# --- kernel leases: capped, and maintainers release or take over ---------------------------


def _claim_url(override: bool = False) -> str:
    return f"/api/kernels/{KERNEL}/claim" + ("?override=true" if override else "")


@pytest.mark.parametrize("api_overrides", [{"max_kernel_lease_s": 3600.0}])
async def test_a_lease_longer_than_the_cap_is_refused(api: Api) -> None:
    """ttl_s above KZ_MAX_KERNEL_LEASE_S is 400 ttl_too_long naming the cap; nothing appended;
    the cap itself is granted."""
    await import_kernel(api)
    before = len(await stream_events(api.log))
    bob = {"X-Submitter-Id": "bob"}
    week = await api.client.post(_claim_url(), json={"ttl_s": 604800}, headers=bob)
    assert week.status_code == 400 and _code(week) == "ttl_too_long"
    assert "KZ_MAX_KERNEL_LEASE_S" in week.json()["error"]["message"]
    assert len(await stream_events(api.log)) == before
    hour = await api.client.post(_claim_url(), json={"ttl_s": 3600}, headers=bob)
    assert hour.status_code == 200 and hour.json()["holder"] == "bob"


async def test_a_maintainer_releases_anothers_lease(api: Api) -> None:
    """DELETE by a maintainer ends bob's lease (the event names bob, its actor the
    maintainer); another submitter's DELETE is 409 and leaves it."""
    await import_kernel(api)
    bob, carol = {"X-Submitter-Id": "bob"}, {"X-Submitter-Id": "carol"}
    maintainer = {"X-Submitter-Id": "maintainer"}
    assert (await api.client.post(_claim_url(), json={"ttl_s": 3600}, headers=bob)).is_success
    refused = await api.client.delete(_claim_url(), headers=carol)
    assert refused.status_code == 409
    released = await api.client.delete(_claim_url(), headers=maintainer)
    assert released.status_code == 200 and released.json()["holder"] is None
    last = (await stream_events(api.log))[-1]
    assert isinstance(last, KernelReleased) and last.holder == "bob"
    assert last.actor == "maintainer"
    assert (await api.client.post(_claim_url(), headers=carol)).json()["holder"] == "carol"


async def test_a_maintainer_overrides_a_lease(api: Api) -> None:
    """POST ?override=true by a maintainer releases bob's lease and takes it in one step;
    override by anyone else is 403 and a plain claim is 409 claim_held."""
    await import_kernel(api)
    bob, carol = {"X-Submitter-Id": "bob"}, {"X-Submitter-Id": "carol"}
    maintainer = {"X-Submitter-Id": "maintainer"}
    assert (await api.client.post(_claim_url(), json={"ttl_s": 3600}, headers=bob)).is_success
    held = await api.client.post(_claim_url(), headers=carol)
    assert held.status_code == 409 and _code(held) == "claim_held"
    not_allowed = await api.client.post(_claim_url(override=True), headers=carol)
    assert not_allowed.status_code == 403 and _code(not_allowed) == "maintainers_only"
    taken = await api.client.post(_claim_url(override=True), headers=maintainer)
    assert taken.status_code == 200, taken.text
    assert taken.json()["holder"] == "maintainer"
    released, claimed = (await stream_events(api.log))[-2:]
    assert isinstance(released, KernelReleased) and released.holder == "bob"
    assert isinstance(claimed, KernelClaimed) and claimed.holder == "maintainer"
