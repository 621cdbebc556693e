"""The contract of every `kz` command: `--json` everywhere, one document on stdout that its
schema (schemas/cli.schema.json, generated from kz_cli.documents) accepts, errors with code,
message and fix, and exit codes that say whether to retry."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest

from kz_cli import documents
from kz_cli.contract import Exit, exit_for_status, from_response
from kz_cli.http import ApiClient
from kz_cli.main import build_parser, leaf_parsers, main

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[3]
RMSNORM = REPO / "examples/kernels/cpu/Norm/RMSNorm/fp32/numpy_ref"
SID = "0b5e8a52-4a4f-4d6b-9d0e-1f1f1f1f1f1f"
SERVER = "http://kz.test"


def schema_for(command: str) -> dict[str, Any]:
    schema = documents.cli_schema()
    return {"$defs": schema["$defs"], **schema["x-commands"][command]}


def error_schema() -> dict[str, Any]:
    schema = documents.cli_schema()
    return {"$defs": schema["$defs"], "$ref": "#/$defs/ErrorDoc", "required": ["command"]}


def test_the_committed_schema_is_the_generated_one() -> None:
    """schemas/cli.schema.json equals what the document Structs generate: no drift."""
    assert documents.SCHEMA_PATH.read_text() == documents.render()


def test_every_command_takes_json_and_lists_the_exit_codes() -> None:
    """Each command a person can run has --json and an epilog naming the four exit codes."""
    leaves = leaf_parsers(build_parser())
    assert len(leaves) >= 20
    for leaf in leaves:
        assert "--json" in leaf._option_string_actions, leaf.prog
        assert "3  transient" in (leaf.epilog or ""), leaf.prog


@pytest.mark.parametrize(
    ("status", "code", "exit_code"),
    [
        ("committed", None, Exit.DONE),
        ("accepted", None, Exit.DONE),
        ("rejected", "rejected", Exit.REJECTED),
        ("disputed", None, Exit.REJECTED),
        ("failed", "build_failed", Exit.REJECTED),
        ("failed", "timed_out", Exit.REJECTED),
        ("failed", "runner_lost", Exit.TRANSIENT),
        ("cancelled", None, Exit.REFUSED),
        ("queued", None, Exit.TRANSIENT),
    ],
)
def test_a_submission_state_maps_to_one_exit_code(
    status: str, code: str | None, exit_code: Exit
) -> None:
    """A failure of the package's own run is a rejection; one of the platform's is transient."""
    assert exit_for_status(status, code) == exit_code


@pytest.mark.parametrize(
    ("status", "code", "exit_code"),
    [
        (400, "invalid_package", Exit.REFUSED),
        (403, "harness_change_forbidden", Exit.REFUSED),
        (409, "claim_held", Exit.REFUSED),
        (409, "board_judge_pending", Exit.TRANSIENT),
        (429, "quota_exceeded", Exit.TRANSIENT),
        (503, "log_unavailable", Exit.TRANSIENT),
        (500, "internal_error", Exit.TRANSIENT),
    ],
)
def test_an_api_error_maps_to_refused_or_transient(status: int, code: str, exit_code: Exit) -> None:
    """4xx is refused (do not retry) except a full queue or a pending judge; 5xx is transient."""
    error = from_response(httpx.Response(status, json={"error": {"code": code, "message": "m"}}))
    assert error.exit == exit_code and error.code == code and error.fix


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    code = main(list(args))
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1, out  # one document, nothing else on stdout
    return code, json.loads(out[0])


def test_a_usage_error_is_a_json_document_with_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    """A bad argument under --json is the error document, not argparse's text."""
    with pytest.raises(SystemExit) as ended:
        main(["submit", "--timeout", "soon", "--json", str(RMSNORM)])
    assert ended.value.code == 2
    doc = json.loads(capsys.readouterr().out)
    jsonschema.validate(doc, error_schema())
    assert doc["error"]["code"] == "usage" and "--timeout" in doc["error"]["message"]


def test_an_unreachable_server_is_transient(capsys: pytest.CaptureFixture[str]) -> None:
    """Nothing listening: exit 3 with `unreachable` and how to fix it."""
    code, doc = run(capsys, "boards", "--server", "http://127.0.0.1:9", "--json")
    assert code == 3
    jsonschema.validate(doc, error_schema())
    assert doc["error"]["code"] == "unreachable" and "kz up" in doc["error"]["fix"]


def test_an_invalid_package_is_refused_with_its_problems(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """kz validate --json of a broken package: exit 2, `valid: false`, the problems listed."""
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / ".kernel_package").mkdir()
    (broken / ".kernel_package" / "desc.yaml").write_text("schema_version: 1\n")
    code, doc = run(capsys, "validate", str(broken), "--against", "http://127.0.0.1:9", "--json")
    assert code == 2
    jsonschema.validate(doc, schema_for("validate"))
    assert doc["valid"] is False and doc["error"]["code"] == "invalid_package"
    assert doc["error"]["details"]["problems"]


class Api:
    """A fake API answering each path from a table (httpx.MockTransport)."""

    def __init__(self, answers: dict[str, httpx.Response]) -> None:
        self.answers = answers

    def __call__(self, request: httpx.Request) -> httpx.Response:
        for prefix, answer in self.answers.items():
            if request.url.path.startswith(prefix):
                return answer
        return httpx.Response(404, json={"error": {"code": "not_found", "message": "no"}})


STATUS = {
    "submission_id": SID,
    "kernel_id": "cpu/Norm/RMSNorm/fp32/numpy_ref",
    "status": "running",
    "version": 4,
    "attempt": 1,
    "runner_id": "r1",
    "queue_position": None,
}
BOARD_DOC = {"board": "cpu/Norm/RMSNorm/fp32", "reviewed": True, "kernels": ["k"],
             "judge_kernel": "k", "reference": {"kernel_id": "k", "commit": None}}  # fmt: skip
BOARDS = {"items": [BOARD_DOC]}
LEASE = {"kernel_id": "cpu/Norm/RMSNorm/fp32/numpy_ref", "holder": "me", "lease_id": "L",
         "expires_at": "2026-01-01T00:00:00Z"}  # fmt: skip


@pytest.mark.parametrize(
    ("command", "args", "path", "body"),
    [
        ("status", ["status", SID], f"/api/submissions/{SID}/status", STATUS),
        ("boards", ["boards"], "/api/boards", BOARDS),
        ("claim", ["claim", "cpu/Norm/RMSNorm/fp32/numpy_ref"], "/api/kernels/", LEASE),
        ("kernels", ["kernels"], "/api/kernels", {"items": [], "total": 0}),
    ],
)
def test_each_document_matches_its_schema(
    command: str,
    args: list[str],
    path: str,
    body: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The documents of the API-backed commands carry command, schema_version and their body."""
    transport = httpx.MockTransport(Api({path: httpx.Response(200, json=body)}))
    monkeypatch.setattr(ApiClient, "transport", transport)
    code, doc = run(capsys, *args, "--server", SERVER, "--json")
    assert code == 0
    assert doc["command"] == command and doc["schema_version"] == 1
    jsonschema.validate(doc, schema_for(command))


def test_logs_json_carries_the_log_and_its_url(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    transport = httpx.MockTransport(Api({"/api/": httpx.Response(200, text="== build ==\nok\n")}))
    monkeypatch.setattr(ApiClient, "transport", transport)
    code, doc = run(capsys, "logs", SID, "--server", SERVER, "--json")
    assert code == 0
    jsonschema.validate(doc, schema_for("logs"))
    assert doc["log"] == "== build ==\nok\n" and doc["log_url"].endswith(f"/{SID}/logs")


def test_a_lease_held_by_another_is_refused_with_the_holder(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    held = {"error": {"code": "claim_held", "message": "carol holds it",
                      "details": {"holder": "carol", "expires_at": "T"}}}  # fmt: skip
    monkeypatch.setattr(
        ApiClient, "transport", httpx.MockTransport(Api({"/": httpx.Response(409, json=held)}))
    )
    code, doc = run(
        capsys, "claim", "cpu/Norm/RMSNorm/fp32/numpy_ref", "--server", SERVER, "--json"
    )
    assert code == 2
    jsonschema.validate(doc, error_schema())
    assert doc["error"]["details"]["holder"] == "carol" and "release" in doc["error"]["fix"]
