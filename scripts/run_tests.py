"""Run every layer of the suite, report each, and fail if any failed.

Layers, in order: lint (ruff), types (mypy), unit and integration tests (in parallel), the
browser tests and the system tests (side by side: both wait on processes and browsers more
than they compute, so together they take about as long as the system tests alone), the two
coverage gates (the whole project >= 80 %, each pure core >= 90 %) and the web UI's JavaScript
tests (node). Every layer runs whatever happened to the ones before it, so one red layer does
not hide the state of the others; the report at the end gives each layer's result, its counts
and its time, and the exit code is 1 when any layer failed. pytest's "no tests collected"
(exit 5) counts as a failure. Layers that run side by side write their output to a file each,
printed whole when they end, and their coverage to a data file each, combined before the
gates.

    python scripts/run_tests.py              # every layer
    python scripts/run_tests.py lint types   # some of them (names as in the report)

`KZ_TEST_WORKERS` (default 2) sets the workers of the parallel layer.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

TOTAL_GATE = 80
PURE_GATE = 90
PURE_CORES = [
    "kz_events/*",
    "kz_projector/index.py",
    "kz_projector/scoreboard.py",
    "kz_package/yaml_safe.py",
    "kz_harness/stats.py",
]
TAIL_BYTES = 64 * 1024


@dataclass
class Outcome:
    """One layer's result: passed, failed or skipped, what it counted, how long it took."""

    layer: str
    result: str
    counts: str
    seconds: float


def junit_counts(xml_text: str) -> str:
    """`N passed, F failed, E errors, S skipped` from a pytest JUnit XML report."""
    root = ET.fromstring(xml_text)  # noqa: S314 - written by pytest a moment ago
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    total = {key: 0 for key in ("tests", "failures", "errors", "skipped")}
    for suite in suites:
        for key in total:
            total[key] += int(suite.get(key, "0"))
    passed = total["tests"] - total["failures"] - total["errors"] - total["skipped"]
    return (
        f"{passed} passed, {total['failures']} failed, {total['errors']} errors, "
        f"{total['skipped']} skipped"
    )


def tap_counts(output: str) -> str:
    """`N passed, F failed, S skipped` from the TAP summary of `node --test`."""
    found = dict(re.findall(r"^# (pass|fail|skipped) (\d+)", output, re.M))
    passed, failed, skipped = (found.get(key, "0") for key in ("pass", "fail", "skipped"))
    return f"{passed} passed, {failed} failed, {skipped} skipped"


def last_line(output: str) -> str:
    """The last line a tool printed: its own summary (ruff, mypy, coverage)."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    return lines[-1][:100] if lines else ""


def report(outcomes: Sequence[Outcome]) -> str:
    """The table printed at the end: one row per layer, then the verdict."""
    width = max([len(o.layer) for o in outcomes] + [5])
    rows = [f"{'layer':<{width}}  {'result':<7}  {'time':>8}  counts"]
    for o in outcomes:
        rows.append(f"{o.layer:<{width}}  {o.result:<7}  {o.seconds:>7.1f}s  {o.counts}")
    failed = [o.layer for o in outcomes if o.result == "failed"]
    rows.append(f"FAILED: {', '.join(failed)}" if failed else "every layer passed")
    return "\n".join(rows)


def run(
    argv: Sequence[str], *, log: Path | None = None, env: dict[str, str] | None = None
) -> tuple[int, str]:
    """Run `argv` with its output shown as it comes (or written to `log`); its exit code and
    the end of its output."""
    out = log.open("wb") if log is not None else sys.stdout.buffer
    try:
        out.write(("+ " + " ".join(argv) + "\n").encode())
        out.flush()
        process = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env or None
        )
        assert process.stdout is not None
        tail = b""
        while chunk := os.read(process.stdout.fileno(), 65536):
            out.write(chunk)
            out.flush()
            tail = (tail + chunk)[-TAIL_BYTES:]
        return process.wait(), tail.decode(errors="replace")
    finally:
        if log is not None:
            out.close()


def _slug(marker: str) -> str:
    return re.sub(r"[^a-z]+", "-", marker)


# Layers that run at the same time as each other, when both are asked for.
SIDE_BY_SIDE = ("webui", "system")


class Suite:
    """The layers, sharing one coverage data file and a folder for the JUnit reports."""

    def __init__(self, scratch: Path) -> None:
        self.py = sys.executable
        self.scratch = scratch
        self.workers = os.environ.get("KZ_TEST_WORKERS", "2")
        self.covered = False  # a pytest layer has written coverage data in this run
        self.apart: set[str] = set()  # layers now running side by side with another

    def layers(self) -> dict[str, Callable[[], tuple[str, str]]]:
        return {
            "lint": self.lint,
            "types": lambda: self.tool([self.py, "-m", "mypy"]),
            "unit+integration": lambda: self.pytest(
                "unit or integration", "-n", self.workers, "--dist", "loadfile"
            ),
            "webui": lambda: self.pytest("webui"),
            "system": lambda: self.pytest("system"),
            "coverage": lambda: self.gate(f"--fail-under={TOTAL_GATE}", "--skip-covered"),
            "coverage-pure": lambda: self.gate(
                f"--fail-under={PURE_GATE}",
                "--include=" + ",".join(p for p in PURE_CORES if any(Path().glob(p))),
            ),
            "js": self.js,
        }

    def tool(self, argv: list[str]) -> tuple[str, str]:
        code, out = run(argv)
        return ("passed" if code == 0 else "failed"), last_line(out)

    def lint(self) -> tuple[str, str]:
        check, out = run([self.py, "-m", "ruff", "check", "."])
        form, out2 = run([self.py, "-m", "ruff", "format", "--check", "."])
        result = "passed" if check == 0 and form == 0 else "failed"
        return result, f"check: {last_line(out)}; format: {last_line(out2)}"

    def pytest(self, marker: str, *extra: str) -> tuple[str, str]:
        name = _slug(marker)
        xml = self.scratch / f"{name}.xml"
        log = env = None
        append = ["--cov-append"] if self.covered else []
        if marker in self.apart:  # its own output file and coverage data, combined later
            log = self._log(marker)
            env = {**os.environ, "COVERAGE_FILE": str(self.scratch / f"coverage.{name}")}
            append = []
        argv = [self.py, "-m", "pytest", "-m", marker, *extra, "--cov", "--cov-report=", *append]
        code, _ = run(
            [*argv, "-q", "-p", "no:cacheprovider", f"--junitxml={xml}"], log=log, env=env
        )
        self.covered = True
        counts = junit_counts(xml.read_text()) if xml.is_file() else "no report"
        if code == 5:
            counts = "no tests collected"
        return ("passed" if code == 0 else "failed"), counts

    def gate(self, *options: str) -> tuple[str, str]:
        if not self.covered:
            return "skipped", "no test layer ran in this run"
        code, out = run([self.py, "-m", "coverage", "report", *options])
        total = re.findall(r"^TOTAL.*?(\d+(?:\.\d+)?)%\s*$", out, re.M)
        return ("passed" if code == 0 else "failed"), (
            f"{total[-1]} %" if total else last_line(out)
        )

    def _log(self, layer: str) -> Path:
        """Where a layer running side by side writes its output."""
        return self.scratch / f"{_slug(layer)}.log"

    def side_by_side(
        self, names: Sequence[str], layers: dict[str, Callable[[], tuple[str, str]]]
    ) -> list[Outcome]:
        """Run the `names` layers at the same time; print each one's output whole as it ends,
        and fold their coverage data into the run's."""
        self.apart = set(names)
        started = time.monotonic()

        def timed(name: str) -> Outcome:
            result, counts = layers[name]()
            return Outcome(name, result, counts, time.monotonic() - started)

        outcomes = []
        with ThreadPoolExecutor(max_workers=len(names)) as pool:
            futures = {pool.submit(timed, name): name for name in names}
            for future in as_completed(futures):
                outcome = future.result()
                log = self._log(outcome.layer)
                if log.is_file():
                    sys.stdout.buffer.write(log.read_bytes())
                print(f"=== {outcome.layer}: {outcome.result} ({outcome.counts})", flush=True)
                outcomes.append(outcome)
        data = [str(p) for p in sorted(self.scratch.glob("coverage.*")) if p.is_file()]
        if data:
            run([self.py, "-m", "coverage", "combine", "--append", "--quiet", *data])
        self.apart = set()
        return sorted(outcomes, key=lambda o: list(names).index(o.layer))

    def js(self) -> tuple[str, str]:
        node, folder = shutil.which("node"), Path("tests/webui/js")
        if node is None or not folder.is_dir():
            return "skipped", "node or tests/webui/js missing"
        code, out = run([node, "--test", "--test-reporter=tap", f"{folder}/"])
        return ("passed" if code == 0 else "failed"), tap_counts(out)


def main(argv: Sequence[str]) -> int:
    with tempfile.TemporaryDirectory(prefix="kz-tests-") as scratch:
        suite = Suite(Path(scratch))
        layers = suite.layers()
        wanted = list(argv) or list(layers)
        unknown = [name for name in wanted if name not in layers]
        if unknown:
            print(f"unknown layers {unknown}; the layers are {list(layers)}", file=sys.stderr)
            return 2
        if any(name in wanted for name in ("unit+integration", "webui", "system")):
            run([sys.executable, "-m", "coverage", "erase"])
        outcomes: list[Outcome] = []
        together = [name for name in SIDE_BY_SIDE if name in wanted]
        for name in wanted:
            if name in together and len(together) > 1:
                if name == together[0]:
                    outcomes += suite.side_by_side(together, layers)
                continue
            started = time.monotonic()
            result, counts = layers[name]()
            outcomes.append(Outcome(name, result, counts, time.monotonic() - started))
            print(f"=== {name}: {result} ({counts})", flush=True)
    print("\n" + report(outcomes), flush=True)
    return 1 if any(o.result == "failed" for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
