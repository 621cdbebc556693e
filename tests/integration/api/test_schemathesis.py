"""A bounded schemathesis run against a live server: no 5xx, and every response (status,
content type, body) matches the OpenAPI document the app publishes."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import schemathesis
import uvicorn
from api_helpers import SECRET, make_settings
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from kz_api import create_app
from kz_events.server import EmbeddedServer, free_port

pytestmark = pytest.mark.integration

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]
HEADERS = {"X-Submitter-Id": "fuzzer", "X-Runner-Key": "fuzz-key"}
SKIP = {"/api/events"}  # an endless stream by design; its own tests bound it with ?limit=
FIXED_QUERY = {"/api/submissions/{submission_id}/status": {"timeout": 0}}


@pytest.fixture
def live_url(nats_server: EmbeddedServer, tmp_path: Path) -> Iterator[str]:
    """The app served by uvicorn on a free port in a thread, with its own event loop."""
    port = free_port()
    app = create_app(make_settings(nats_server, tmp_path), lease_secret=SECRET)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started and thread.is_alive():
        thread.join(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)


def test_api_conforms_to_its_document(live_url: str) -> None:
    """Generated requests for every operation never get a 5xx or an undocumented answer."""
    schema = schemathesis.openapi.from_url(f"{live_url}/schema/openapi.json")
    calls: list[int] = []
    for result in schema.get_all_operations():
        operation = result.ok()
        if operation.path in SKIP:
            continue
        strategy = operation.as_strategy(query=FIXED_QUERY.get(operation.path))

        @given(case=strategy)
        @settings(
            max_examples=6, deadline=None, database=None, suppress_health_check=list(HealthCheck)
        )
        def run(case: schemathesis.Case) -> None:
            response = case.call_and_validate(base_url=live_url, headers=HEADERS, checks=CHECKS)
            calls.append(response.status_code)

        run()
    assert len(calls) > 60 and any(code < 300 for code in calls)
