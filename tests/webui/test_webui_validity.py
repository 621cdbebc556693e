"""Browser tests of what the referee's rules say on the submission page, against the real stack:
the header's words are the API's (a rejection reads its reason once, never "rejected
rejected:"), the validity gate's reading of the result, the retry it took, and a rival the
judge voided beside it."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import httpx
import pytest

from kz_cli.demo import EXAMPLES

from .stack import pack_variant, submit_package, wait_terminal

pytestmark = pytest.mark.webui

GEMM = "cpu/GEMM/dense/fp32"


def _submit(base_url: str, folder: Path, name: str, stub: dict[str, Any]) -> str:
    """A new kernel `name` on the GEMM board whose stub judge answers as `stub` says."""
    kernel_id = f"{GEMM}/{name}"
    pkg = folder / name
    shutil.copytree(EXAMPLES / GEMM / "numpy_ref", pkg)
    for file in ("desc.yaml", "bench_result.yaml"):
        path = pkg / ".kernel_package" / file
        path.write_text(path.read_text().replace(f"{GEMM}/numpy_ref", kernel_id))
    tarball = pack_variant(pkg, folder / f"{name}.tar.gz", stub)
    with httpx.Client(base_url=base_url, timeout=30) as client:
        sid = submit_package(client, tarball, kernel_id, "ada", name)
        wait_terminal(client, [sid], timeout_s=120)
    return sid


def test_a_crashed_candidate_reads_rejected_with_its_own_error_once(
    page: Any, webui_base_url: str, tmp_path: Path
) -> None:
    sid = _submit(webui_base_url, tmp_path, "crashes", {"value": 90.0, "crash": "call"})
    page.goto(f"{webui_base_url}/webui/#/submission/{sid}")
    head = page.locator(".page-head .meta")
    head.locator("#sub-status").wait_for()
    words = "the candidate failed in a call: ZeroDivisionError: division by zero"
    assert head.inner_text().split("\n")[0].strip().startswith("rejected")
    assert words in head.inner_text() and "rejected rejected" not in head.inner_text()
    assert "candidate_error" not in head.inner_text()


def test_an_inconclusive_result_shows_the_gates_reading_and_its_retry(
    page: Any, webui_base_url: str, tmp_path: Path
) -> None:
    """Unsettled twice: rejected as inconclusive, the validity row says unsettled with the
    spread, and the timeline shows the retry (requeued) between the two attempts."""
    stub = {"value": 90.0, "reference": 1840.0, "unsettled": True}
    sid = _submit(webui_base_url, tmp_path, "noisy", stub)
    page.goto(f"{webui_base_url}/webui/#/submission/{sid}")
    validity = page.locator(".validity")
    validity.wait_for()
    assert validity.get_attribute("data-reading") == "unsettled"
    assert "the host was too noisy to tell" in validity.inner_text()
    assert "inconclusive: the host was too noisy to tell" in page.locator(".page-head").inner_text()
    assert "requeued" in page.locator("ol.timeline").inner_text()


def test_a_voided_rival_is_named_as_its_fault(
    page: Any, webui_base_url: str, tmp_path: Path
) -> None:
    """A reference voided beside a new kernel (twice): the kernel is judged without it and its
    page names the rival and whose fault it was."""
    stub = {"value": 90.0, "reference": 1840.0, "void": "reference"}
    sid = _submit(webui_base_url, tmp_path, "lonely", stub)
    page.goto(f"{webui_base_url}/webui/#/submission/{sid}")
    rivals = page.locator("ul.rivals li.voided")
    rivals.first.wait_for()
    assert rivals.first.inner_text().startswith("the reference was voided (the reference raised")
    assert "its fault, not this submission's" in rivals.first.inner_text()
    assert page.locator(".validity").get_attribute("data-reading") == "measured"
