"""`kz submit`, `kz status` and `kz logs` against a fake API (an httpx.MockTransport): what
a submitter reads on each end, and which checks run before anything is sent."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from kz_cli.http import ApiClient
from kz_cli.main import build_parser, main
from kz_package import pack_directory

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[3]
RMSNORM = REPO / "examples/kernels/cpu/Norm/RMSNorm/fp32/numpy_ref"
KID = "cpu/Norm/RMSNorm/fp32/numpy_ref"
SID = "0b5e8a52-4a4f-4d6b-9d0e-1f1f1f1f1f1f"
SERVER = "http://kz.test"

Handler = Callable[[httpx.Request], httpx.Response]


class FakeApi:
    """Answers uploads with `upload` and every status poll with `final`; records requests."""

    def __init__(self) -> None:
        self.requests: list[httpx.Request] = []
        self.upload = httpx.Response(202, json={"submission_id": SID, "status_url": "/s"})
        self.final: dict[str, object] = {"status": "committed"}
        self.log = httpx.Response(200, text="step build_test_env.py: ok\nTraceback: boom\n")

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if request.method == "POST":
            return self.upload
        if request.url.path.endswith("/logs"):
            return self.log
        doc = {
            "submission_id": SID,
            "kernel_id": KID,
            "version": 9,
            "attempt": 1,
            "runner_id": "r1",
            **self.final,
        }
        return httpx.Response(200, json=doc)


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeApi]:
    fake = FakeApi()
    monkeypatch.setattr(ApiClient, "transport", httpx.MockTransport(fake))
    yield fake


def kz(*args: str) -> int:
    return main([*args, "--server", SERVER]) if args[0] != "--help" else main(list(args))


def broken_copy(tmp_path: Path) -> Path:
    broken = tmp_path / "broken"
    shutil.copytree(RMSNORM, broken)
    desc = broken / ".kernel_package" / "desc.yaml"
    desc.write_text(desc.read_text().replace("better: lower", "better: faster"))
    return broken


def test_a_failed_run_ends_with_where_its_log_is(
    api: FakeApi, capsys: pytest.CaptureFixture[str]
) -> None:
    """A failed submission's last lines name the log's URL and the `kz logs ID` command."""
    api.final = {
        "status": "failed",
        "error": {"code": "benchmark_error", "message": "benchmark.py wrote no valid result"},
    }
    assert kz("submit", str(RMSNORM)) == 1  # its own run failed: read the log, change it
    out = capsys.readouterr().out
    assert f"{SERVER}/api/submissions/{SID}/logs" in out
    assert f"kz logs {SID}" in out


def test_a_rejected_run_says_its_reason_once_and_where_its_log_is(
    api: FakeApi, capsys: pytest.CaptureFixture[str]
) -> None:
    """A rejection prints its reason once (the error repeats it) and the log pointer."""
    reason = "output does not match the reference"
    api.final = {
        "status": "rejected",
        "result": {"reason": reason},
        "error": {"code": "rejected", "message": reason},
    }
    assert kz("submit", str(RMSNORM)) == 1
    out = capsys.readouterr().out
    assert out.count(reason) == 1
    assert f"kz logs {SID}" in out


def test_json_output_carries_the_log_url(api: FakeApi, capsys: pytest.CaptureFixture[str]) -> None:
    api.final = {"status": "failed", "error": {"code": "build_failed", "message": "exit 1"}}
    assert kz("submit", str(RMSNORM), "--json") == 1
    (line,) = capsys.readouterr().out.strip().splitlines()  # one document, no lines for people
    doc = json.loads(line)
    assert doc["status"] == "failed" and doc["command"] == "submit"
    assert doc["log_url"] == f"{SERVER}/api/submissions/{SID}/logs"
    assert doc["error"]["code"] == "build_failed" and f"kz logs {SID}" in doc["error"]["fix"]


def test_a_run_the_platform_lost_is_transient(
    api: FakeApi, capsys: pytest.CaptureFixture[str]
) -> None:
    """A submission failed by the platform (its runner lost) exits 3: submit again later."""
    api.final = {"status": "failed", "error": {"code": "runner_lost", "message": "no heartbeat"}}
    assert kz("submit", str(RMSNORM), "--json") == 3


def test_an_accepted_run_prints_no_log_pointer(
    api: FakeApi, capsys: pytest.CaptureFixture[str]
) -> None:
    assert kz("submit", str(RMSNORM)) == 0
    assert "kz logs" not in capsys.readouterr().out


def test_the_kernel_id_comes_from_desc_yaml_when_not_given(api: FakeApi) -> None:
    """Without --kernel-id the form carries desc.yaml's kernel_id."""
    assert kz("submit", str(RMSNORM), "--no-wait") == 0
    (upload,) = [r for r in api.requests if r.method == "POST"]
    assert f'name="kernel_id"\r\n\r\n{KID}\r\n'.encode() in upload.content


def test_a_kernel_id_that_differs_from_desc_yaml_is_refused_locally(
    api: FakeApi, capsys: pytest.CaptureFixture[str]
) -> None:
    assert kz("submit", str(RMSNORM), "--kernel-id", "cpu/Norm/RMSNorm/fp32/other") == 2
    assert "kernel_id" in capsys.readouterr().err
    assert api.requests == []


def test_a_tarball_is_checked_locally_like_a_folder(
    api: FakeApi, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A broken .tar.gz gets the local problems and is never sent."""
    tarball = tmp_path / "broken.tar.gz"
    pack_directory(broken_copy(tmp_path), tarball)
    assert kz("submit", str(tarball), "--kernel-id", KID) == 2
    assert "metric.better" in capsys.readouterr().err
    assert api.requests == []


def test_every_refusal_line_is_printed_once(
    api: FakeApi, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A package's problem appears once, under one header, not again as the summary."""
    assert kz("submit", str(broken_copy(tmp_path))) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and err[0].startswith("kz: package invalid locally")
    assert "metric.better" in err[1] and "metric.better" not in err[0]


def test_a_server_refusal_without_problems_is_one_line(
    api: FakeApi, capsys: pytest.CaptureFixture[str]
) -> None:
    api.upload = httpx.Response(
        429,
        json={
            "error": {
                "code": "quota_exceeded",
                "message": "at most 4 open submissions",
                "details": {},
            }
        },
    )
    assert kz("submit", str(RMSNORM)) == 3  # a full queue drains by itself: retry later
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "kz: package refused by the server (HTTP 429): quota_exceeded: at most 4 open submissions"
    ]


def test_a_lease_held_by_someone_else_is_worded_as_such(
    api: FakeApi, capsys: pytest.CaptureFixture[str]
) -> None:
    """A 409 claim_held names the holder and the expiry; it is not a refused package."""
    api.upload = httpx.Response(
        409,
        json={
            "error": {
                "code": "claim_held",
                "message": f"carol holds the optimisation lease on {KID} until T",
                "details": {"holder": "carol", "expires_at": "2026-12-01T22:00:00+00:00"},
            }
        },
    )
    assert kz("submit", str(RMSNORM)) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "carol holds the optimisation lease" in line and "2026-12-01T22:00" in line
    assert "package" not in line


def test_kz_logs_prints_the_runner_log(api: FakeApi, capsys: pytest.CaptureFixture[str]) -> None:
    assert kz("logs", SID) == 0
    assert capsys.readouterr().out == "step build_test_env.py: ok\nTraceback: boom\n"
    assert api.requests[0].url.path == f"/api/submissions/{SID}/logs"


def test_kz_logs_without_a_log_says_so_in_one_line(
    api: FakeApi, capsys: pytest.CaptureFixture[str]
) -> None:
    api.log = httpx.Response(
        404,
        json={
            "error": {"code": "log_not_found", "message": f"submission {SID} has no runner log yet"}
        },
    )
    assert kz("logs", SID) == 3  # it may come: retry
    (line,) = capsys.readouterr().err.splitlines()
    assert "has no runner log yet" in line and f"/api/submissions/{SID}/logs" in line


def test_kz_status_shows_where_the_log_is(api: FakeApi, capsys: pytest.CaptureFixture[str]) -> None:
    api.final = {"status": "running"}
    assert kz("status", SID) == 0
    assert f"kz logs {SID}" in capsys.readouterr().out
    assert kz("status", SID, "--json") == 0
    assert json.loads(capsys.readouterr().out)["log_url"].endswith(f"/{SID}/logs")


def _options(parser_name: str) -> list[tuple[str, str | None]]:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    command = sub.choices[parser_name]  # type: ignore[index]
    return [(a.dest, a.help) for a in command._actions if a.dest != "help"]


@pytest.mark.parametrize("command", ["submit", "status", "logs", "claim", "kernels"])
def test_every_option_has_help_text(command: str) -> None:
    missing = [dest for dest, text in _options(command) if not text]
    assert missing == []


def test_the_submit_help_lists_the_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["submit", "--help"])
    out = capsys.readouterr().out
    assert "exit codes (the same for every kz command):" in out
    for line in ("0  done", "1  rejected", "2  usage or refused", "3  transient"):
        assert line in out
    assert all(f"  {code}  " in out for code in ("0", "1", "2"))


def test_an_inconclusive_run_says_so_with_the_gates_reading(
    api: FakeApi, capsys: pytest.CaptureFixture[str]
) -> None:
    """Rejected as inconclusive after its retry: the API's words, the retry and the reading."""
    reason = (
        "inconclusive: the host was too noisy to tell: spread 34%, where a settled result is "
        "within 10% (measured twice)"
    )
    api.final = {
        "status": "rejected",
        "result": {"reason": reason},
        "error": {"code": "inconclusive", "message": reason},
        "retry": {"count": 1, "codes": ["unsettled"], "reason": "spread 40%", "in_progress": False},
        "validity": {"reading": "unsettled", "measured": True, "settled": False,
                     "spread": 0.34, "reason": "the host was too noisy to tell: spread 34%"},
    }  # fmt: skip
    assert kz("submit", str(RMSNORM)) == 1
    out = capsys.readouterr().out
    assert f"  rejected: {reason}\n" in out
    assert "  validity: unsettled (spread 34.0%): the host was too noisy to tell" in out
    assert "retrying" not in out  # the retry is over


def test_a_crashed_candidate_is_rejected_in_its_own_words(
    api: FakeApi, capsys: pytest.CaptureFixture[str]
) -> None:
    """The API's word (rejected) and the candidate's own error, once, not `invalid_result`."""
    reason = "the candidate failed in a call: ZeroDivisionError: division by zero"
    api.final = {
        "status": "rejected",
        "result": {"reason": reason},
        "error": {"code": "candidate_error", "message": reason},
    }
    assert kz("submit", str(RMSNORM)) == 1
    out = capsys.readouterr().out
    assert f"  rejected: {reason}\n" in out and out.count(reason) == 1
    assert "invalid_result" not in out and "failed" not in out.split(reason)[0]


def test_kz_status_shows_a_retry_a_voided_rival_and_a_suspect_mark(
    api: FakeApi, capsys: pytest.CaptureFixture[str]
) -> None:
    api.final = {
        "status": "queued",
        "queue_position": 1,
        "retry": {"count": 1, "codes": ["rival_voided"], "in_progress": True,
                  "reason": "the incumbent was voided (it raised KeyError); measured again"},
    }  # fmt: skip
    assert kz("status", SID) == 0
    out = capsys.readouterr().out
    assert out.startswith("queued (position 1)\n  retrying (1 of 2 at most): the incumbent")
    api.final = {
        "status": "committed",
        "result": {"reason": "faster than the incumbent's standing: 2x the reference"},
        "voided_rivals": [{"role": "incumbent", "status": "voided", "reason": "it raised"}],
        "suspect": {"reasons": [{"code": "extra_threads"}], "cleared": False},
    }
    assert kz("status", SID) == 0
    out = capsys.readouterr().out
    assert "  rival voided: the incumbent (it raised): its fault, not this submission's" in out
    assert "  suspect (extra_threads): held back from the board until a maintainer clears it" in out


def test_a_pending_confirmation_says_its_run_is_under_way(
    api: FakeApi, capsys: pytest.CaptureFixture[str]
) -> None:
    """No dangling colon: a confirmation without a reason yet says what its run is doing."""
    api.final = {
        "status": "committed",
        "result": {"reason": "first result for this kernel: 165.3 us"},
        "confirmation": {"submission_id": SID, "status": "queued", "mark": "unconfirmed"},
    }
    assert kz("status", SID) == 0
    out = capsys.readouterr().out
    assert "  confirmation: unconfirmed: the confirmation run is queued\n" in out
    api.final["confirmation"] = {"mark": "confirmed", "reason": "agrees: 3.27x"}
    assert kz("status", SID) == 0
    assert "  confirmation: confirmed: agrees: 3.27x\n" in capsys.readouterr().out
