"""The committed OpenAPI document is the one the app generates."""

from __future__ import annotations

from pathlib import Path

import pytest

from kz_api import create_app
from kz_api.openapi import openapi_yaml
from kz_events.config import Settings

pytestmark = pytest.mark.unit

DOCUMENT = Path(__file__).resolve().parents[3] / "schemas" / "openapi.yaml"


def test_openapi_yaml_has_not_drifted() -> None:
    """schemas/openapi.yaml equals the generated document (regenerate: python -m kz_api.openapi)."""
    generated = openapi_yaml(create_app(Settings(), lease_secret=b"x" * 32))
    assert DOCUMENT.read_text() == generated, "run `python -m kz_api.openapi` and commit the result"


def test_every_contract_path_is_documented() -> None:
    """Every path of CONTRACTS.md's table and additions is in the document."""
    paths = set(create_app(Settings(), lease_secret=b"x" * 32).openapi_schema.paths or {})
    kernel = "/api/kernels/{arch}/{op_class}/{sub_class}/{quant}/{name}"
    wanted = {
        "/api/kernels",
        kernel,
        kernel + "/bench-history",
        kernel + "/claim",
        "/api/submissions",
        "/api/submissions/{submission_id}/status",
        "/api/submissions/{submission_id}/result",
        "/api/edits/rebase",
        "/api/runner/register",
        "/api/runner/claim",
        "/api/runner/heartbeat",
        "/api/health",
        "/api/index.json",
        "/api/submissions/{submission_id}",
        "/api/submissions/{submission_id}/logs",
        "/api/submissions/{submission_id}/cancel",
        "/api/submissions/{submission_id}/disqualify",
        "/api/runner/tasks/{submission_id}/package",
        "/api/runners",
        "/api/events",
        "/api/audit",
        "/metrics",
    }
    assert wanted <= paths
