"""Write the fixtures of the `node --test` suite (tests/webui/js/fixtures/) from the real parts:
index.json, the event feed and a submission detail of a seeded `kz up --backend stub`; a board
with ties, a reference and a disqualified kernel, and one whose records were run again
(confirmed, awaiting, disputed), rendered by the real projection.

Run: .venv/bin/python -m tests.webui.build_js_fixtures [BASE_URL]  (no URL: starts a stack;
--rendered: only the rendered boards, no stack)
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx

from .indexes import Accepted, render_accepted
from .stack import start_stack

OUT = Path(__file__).resolve().parent / "js" / "fixtures"
MHA = "sm90/Attention/MHA/fp16"
GEMM = "sm90/GEMM/dense/fp8"

# The reference first (pinned: exactly 1), three kernels scored side by side with settled
# intervals (two of them tied: their intervals overlap), one from before scoring (an estimate
# from absolute values: listed, unranked) and a disqualified one.
BOARD = [
    Accepted(f"{MHA}/torch_sdpa_ref", 900.0, submitter="examples"),
    Accepted(f"{MHA}/flash_v3", 412.0, submitter="ada", score=(2.18, 2.1, 2.27)),
    Accepted(f"{MHA}/tilelang_fa", 530.0, spread=0.03, submitter="grace", score=(1.7, 1.66, 1.74)),
    Accepted(
        f"{MHA}/triton_fa_v2", 545.0, spread=0.03, submitter="linus", score=(1.68, 1.64, 1.72)
    ),
    Accepted(f"{MHA}/naive_fa", 1800.0, submitter="grace"),
    Accepted(f"{MHA}/cutlass_fmha", 380.0, submitter="mallory", disqualified="timing hack"),
    Accepted(f"{GEMM}/cublaslt_ref", 1200.0, better="higher", unit="TFLOP/s"),
    Accepted(f"{GEMM}/tile_256x128", 1450.0, better="higher", unit="TFLOP/s"),
]

NORM = "sm90/Norm/RMSNorm/fp16"
# Records run a second time (docs/judging.md, "Confirmation runs"): `fast` took rank 1 and was
# confirmed, then beat itself and awaits its second run; `lucky` took rank 1 and was disputed,
# so it takes no rank (listed unranked, last).
CONFIRMED_BOARD = [
    Accepted(f"{NORM}/rmsnorm_ref", 900.0, submitter="examples"),
    Accepted(f"{NORM}/fast", 600.0, score=(1.5, 1.45, 1.55), confirmation="confirmed"),
    Accepted(f"{NORM}/fast", 450.0, score=(2.0, 1.96, 2.04), confirmation="unconfirmed"),
    Accepted(
        f"{NORM}/lucky",
        300.0,
        submitter="mallory",
        score=(3.0, 2.95, 3.05),
        confirmation="disputed",
    ),
]


def _events(client: httpx.Client, limit: int) -> list[dict[str, Any]]:
    """The first `limit` events of /api/events as the page's feed holds them: {seq, event}."""
    messages: list[dict[str, Any]] = []
    with client.stream("GET", "/api/events", params={"after": 0, "limit": limit}) as response:
        seq = None
        for line in response.iter_lines():
            if line.startswith("id: "):
                seq = int(line[4:])
            elif line.startswith("data: "):
                messages.append({"seq": seq, "event": json.loads(line[6:])})
    return messages


def capture(base_url: str) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    with httpx.Client(base_url=base_url, timeout=30) as client:
        index = client.get("/api/index.json").json()
        (OUT / "index.json").write_text(json.dumps(index, indent=1) + "\n")
        (OUT / "events.json").write_text(json.dumps(_events(client, index["log_seq"]), indent=1))
        items = client.get("/api/submissions", params={"limit": 1}).json()["items"]
        detail = client.get(f"/api/submissions/{items[0]['submission_id']}").json()
        (OUT / "submission.json").write_text(json.dumps(detail, indent=1) + "\n")
    rendered()


def rendered() -> None:
    """The boards the real projection renders from events alone (no stack needed)."""
    OUT.mkdir(parents=True, exist_ok=True)
    for name, records in (("board.json", BOARD), ("confirmations.json", CONFIRMED_BOARD)):
        document = json.loads(render_accepted(records))
        (OUT / name).write_text(json.dumps(document, indent=1) + "\n")


def main() -> None:
    if sys.argv[1:] == ["--rendered"]:
        rendered()
        return
    if len(sys.argv) > 1:
        capture(sys.argv[1])
        return
    with tempfile.TemporaryDirectory(prefix="kz-fixtures-") as tmp:
        stack = start_stack(Path(tmp))
        try:
            capture(stack.base_url)
        finally:
            stack.stop()


if __name__ == "__main__":
    main()
