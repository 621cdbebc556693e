"""Run every benchmark of the project, print each one's figures beside its baseline, and write
`bench/RESULTS.md` with the figures, targets, pass/fail, commands and the machine.

    .venv/bin/python bench/run_all.py [--quick] [--only NAME ...] [--out bench/RESULTS.md]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

__all__ = ["BENCHES", "Bench", "Row", "main"]

REPO = Path(__file__).resolve().parents[1]
PY = sys.executable


@dataclass
class Row:
    """One figure: what, ours, the baseline beside it, their ratio, the target and verdict."""

    figure: str
    value: str
    baseline: str = ""
    ratio: str = ""
    target: str = ""
    ok: bool | None = None


@dataclass
class Bench:
    """A benchmark script, its arguments (full and quick), and how to read its output."""

    name: str
    script: str
    full: list[str]
    quick: list[str]
    parse: Callable[[str, Path], list[Row]]
    json_out: bool = False
    timeout_s: float | None = None  # this bench's own limit, over --timeout's
    rows: list[Row] = field(default_factory=list)
    seconds: float = 0.0
    error: str = ""
    output: str = ""

    def argv(self, quick: bool, json_path: Path) -> list[str]:
        extra = ["--json", str(json_path)] if self.json_out else []
        return [PY, f"bench/{self.script}", *(self.quick if quick else self.full), *extra]


def _num(pattern: str, text: str) -> float:
    found = re.search(pattern, text)
    if found is None:
        raise ValueError(f"expected output matching {pattern!r}")
    return float(found.group(1).replace(",", ""))


def _verdict(ok: bool | None) -> str:
    return {True: "PASS", False: "MISS", None: ""}[ok]


def parse_event_log(_out: str, json_path: Path) -> list[Row]:
    fig = json.loads(json_path.read_text())
    ratio = fig["append_cost_ratio"]
    replay = fig["eventlog_replay_per_s"]
    raw_replay = fig["raw_fetch_replay_per_s"]
    return [
        Row(
            "EventLog.append (events/s)",
            f"{fig['eventlog_appends_per_s']:,}",
            f"raw js.publish {fig['raw_publish_per_s']:,}",
            f"{ratio:.2f}x cost",
            "cost <= 1.5x raw",
            ratio <= 1.5,
        ),
        Row(
            "EventLog.replay (events/s)",
            f"{replay:,}",
            f"raw pull fetch {raw_replay:,}",
            f"{replay / raw_replay:.2f}x",
            ">= 20,000/s",
            replay >= 20_000,
        ),
    ]


def parse_api(out: str, _json: Path) -> list[Row]:
    lines = {}
    for line in out.splitlines():
        found = re.match(r"(\S.*?)\s{2,}([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)$", line)
        if found:
            lines[found.group(1).strip()] = [float(found.group(i)) for i in range(2, 6)]
    bare = lines["GET /bench/const (bare)"]
    rows = [Row("GET /bench/const, bare (req/s)", f"{bare[0]:,.0f}", "", "", "baseline")]
    for name in ("GET /api/kernels", "GET /api/index.json"):
        rps, p50, p99, ratio = lines[name]
        rows.append(
            Row(
                f"{name} (req/s; p50/p99 ms)",
                f"{rps:,.0f}; {p50:.1f}/{p99:.1f}",
                f"bare {bare[0]:,.0f}",
                f"{ratio:.2f}x slower",
                "within 2x of bare",
                ratio <= 2.0,
            )
        )
    for name in (
        "GET /api/kernels?arch=sm90",
        "GET /api/index.json gzip",
        "GET /api/index.json 304",
    ):
        if name in lines:
            rps, p50, p99, ratio = lines[name]
            rows.append(
                Row(
                    f"{name} (req/s; p50/p99 ms)",
                    f"{rps:,.0f}; {p50:.1f}/{p99:.1f}",
                    f"bare {bare[0]:,.0f}",
                    f"{ratio:.2f}x slower",
                )
            )
    rps, p50, p99, _ = lines["POST /api/submissions"]
    rows.append(
        Row(
            "POST /api/submissions (req/s; p50/p99 ms)",
            f"{rps:,.0f}; {p50:.1f}/{p99:.1f}",
            f"bare p50 {lines['GET /bench/const (bare)'][1]:.1f} ms",
            f"{p50 / bare[1]:.0f}x",
            "accept p99 < 50 ms",
            p99 < 50.0,
        )
    )
    return rows


def parse_runner(out: str, _json: Path) -> list[Row]:
    p50 = _num(r"platform overhead per task.*?p50 ([\d.]+) ms", out)
    p99 = _num(r"platform overhead per task.*?p99 ([\d.]+) ms", out)
    total = _num(r"claim->result \(platform \+ scripts\):\s+p50\s+([\d.]+) ms", out)
    direct = _num(r"scripts run directly with python:\s+p50\s+([\d.]+) ms", out)
    ratio = _num(r"ratio claim->result / direct \(p50\): ([\d.]+)x", out)
    added = _num(r"separation added per task \(a - b, per pair\):\s+p50\s+(-?[\d.]+) ms", out)
    added90 = _num(r"separation added per task \(a - b, per pair\):.*?p90\s+(-?[\d.]+) ms", out)
    separated = _num(
        r"separated judge \(candidate in its worker\), task wall:\s+p50\s+([\d.]+)", out
    )
    inprocess = _num(
        r"in-process judge \(same work, one process\), task wall:\s+p50\s+([\d.]+)", out
    )
    sep_ratio = _num(r"ratio separated / in-process \(p50\): ([\d.]+)x", out)
    return [
        Row("runner overhead per task, p50 (ms)", f"{p50:.1f}", "", "", "< 100 ms", p50 < 100),
        Row("runner overhead per task, p99 (ms)", f"{p99:.1f}"),
        Row(
            "claim -> result incl. scripts, p50 (ms)",
            f"{total:.1f}",
            f"python directly {direct:.1f}",
            f"{ratio:.2f}x",
        ),
        Row(
            "separation added per task (judge + worker vs in-process judge), p50 (ms)",
            f"{added:.1f}",
            f"in-process judge task {inprocess:.1f}",
            f"{sep_ratio:.2f}x (separated task {separated:.1f})",
            "< 150 ms",
            added < 150,
        ),
        Row("separation added per task, p90 (ms)", f"{added90:.1f}"),
    ]


def parse_judge_channel(out: str, _json: Path) -> list[Row]:
    median = _num(r"1 MiB input, 64 B output: judge round trip median ([\d.]+) us", out)
    p90 = _num(r"1 MiB input, 64 B output: judge round trip median [\d.]+ us p90 ([\d.]+)", out)
    ping = _num(r"raw SEQPACKET ping-pong, 1 byte: median ([\d.]+) us", out)
    copy = _num(r"1 MiB input, 64 B output:.*?pipe copy of the input median ([\d.]+) us", out)
    full = _num(r"1 MiB input, output = input: judge round trip median ([\d.]+) us", out)
    return [
        Row(
            "channel round trip for 1 MiB, judge <-> worker no-op call (median us; p90)",
            f"{median:.1f}; {p90:.1f}",
            f"raw SEQPACKET ping-pong {ping:.1f}",
            f"{median / ping:.2f}x",
            "< 20 us",
            median < 20,
        ),
        Row(
            "channel round trip for 1 MiB vs copying it through a pipe (median us)",
            f"{median:.1f}",
            f"pipe copy {copy:.1f}",
            f"{copy / median:.1f}x faster",
        ),
        Row(
            "channel round trip, 1 MiB input and 1 MiB output copied into the slot (median us)",
            f"{full:.1f}",
            f"pipe copy of the input {copy:.1f}",
            f"{copy / full:.1f}x faster",
        ),
    ]


def parse_projector(out: str, _json: Path) -> list[Row]:
    batched = _num(r"batch of 64\):\s+([\d.]+) results/s", out)
    single = _num(r"CAS per result\):\s+([\d.]+) results/s", out)
    cli = _num(r"git CLI in a working tree:\s+([\d.]+) results/s", out)
    replay = _num(r"\+ index: ([\d.]+) s", out)
    events = _num(r"replay of (\d+) events", out)
    return [
        Row(
            "git projector, batched (results/s)",
            f"{batched:.1f}",
            f"git CLI {cli:.1f}",
            f"{batched / cli:.1f}x faster",
            ">= 10x the CLI",
            batched / cli >= 10,
        ),
        Row(
            "git projector, CAS per result (results/s)",
            f"{single:.1f}",
            f"git CLI {cli:.1f}",
            f"{single / cli:.1f}x faster",
        ),
        Row(
            f"replay {events:,.0f} events into git + index (s)",
            f"{replay:.1f}",
            "",
            "",
            "< 60 s" if events >= 100_000 else "< 60 s at 100,000 (full run)",
            replay < 60 if events >= 100_000 else None,
        ),
    ]


def parse_harness(out: str, _json: Path) -> list[Row]:
    python = _num(r"python loop spread: ([\d.]+)%", out)
    blas = _num(r"numpy matmul spread: ([\d.]+)%", out)
    bare = _num(r"bare loop spread: wall ([\d.]+)%", out)
    return [
        Row(
            "harness CPU timing, pure-Python loop, median-to-median spread (%)",
            f"{python:.2f}",
            f"bare timing loop {bare:.2f}",
            f"{python / bare:.2f}x" if bare else "",
            "< 2 %",
            python < 2.0,
        ),
        Row(
            "harness CPU timing, 128x128 numpy matmul, median-to-median spread (%)",
            f"{blas:.2f}",
            "",
            "",
            "< 2 %",
            blas < 2.0,
        ),
    ]


def parse_e2e(_out: str, json_path: Path) -> list[Row]:
    fig = json.loads(json_path.read_text())
    bare = fig["bare_p50_ms"]
    return [
        Row(
            "submit -> committed, p50 (ms)",
            f"{fig['p50_ms']:.1f}",
            f"bare GET /api/health {bare:.1f}",
            f"{fig['p50_ms'] / bare:.0f}x",
            "< 250 ms",
            fig["p50_ms"] < 250,
        ),
        Row(
            "submit -> committed, p99 (ms)",
            f"{fig['p99_ms']:.1f}",
            "",
            "",
            "< 1,000 ms",
            fig["p99_ms"] < 1000,
        ),
        Row(
            f"sustained committed submissions/s ({fig['runners']} stub runners)",
            f"{fig['committed_per_s']:.1f}",
            f"202 answers {fig['http_accepted_per_s']:.1f}/s",
            "",
            ">= 50/s",
            fig["committed_per_s"] >= 50,
        ),
    ]


def parse_e2e_paced(_out: str, json_path: Path) -> list[Row]:
    fig = json.loads(json_path.read_text())
    offered = fig["offered_per_s"]
    return [
        Row(
            f"offered {offered:g}/s for {fig['duration_s']:.0f} s: committed/s in steady state; "
            "all done after the window (s)",
            f"{fig['steady_committed_per_s']:.1f}; {fig['drain_s']:.1f}",
            f"202 answers {fig['http_accepted_per_s']:.1f}/s",
            "",
            f"keeps pace: done <= {fig['pace_drain_s']:g} s after",
            fig["drain_s"] <= fig["pace_drain_s"],
        ),
    ]


def parse_webui(_out: str, json_path: Path) -> list[Row]:
    fig = json.loads(json_path.read_text())
    return [
        Row(
            f"web UI first board, {fig['kernels']:,} kernels, median of {fig['runs']} (ms)",
            f"{fig['median_ms']:.0f} (min {fig['min_ms']:.0f}, max {fig['max_ms']:.0f})",
            f"bare fetch + JSON.parse {fig['bare_median_ms']:.0f}",
            f"{fig['ratio']:.2f}x",
            "< 1,000 ms",
            fig["passed"],
        )
    ]


def parse_busy_host(_out: str, json_path: Path) -> list[Row]:
    """bench/busy_host.py's figures (a)-(f), measured with busy processes beside the judge."""
    f = json.loads(json_path.read_text())
    busy = f"{f['busy']} busy"
    rows = []
    if "a" in f:
        a = f["a"]
        rows.append(Row(f"(a) demo medians over timeit, {busy} (median; worst)",
                        f"{a['median']:.2f}x; {a['worst']:.2f}x", "direct timeit", "",
                        "within 1.5x", max(a["worst"], 1 / a["worst"]) <= 1.5))  # fmt: skip
    b, c, e, g = f["b"], f["c"], f["e"], f["f"]
    rows += [
        Row(f"(b) identical resubmissions accepted, {busy}", f"{b['accepted']} of {b['of']}",
            "", "", "0", b["accepted"] == 0),
        Row(f"(c) a kernel 2x faster accepted, {busy}", f"{c['accepted']} of {c['of']}",
            "", "", f">= {c['of'] - 1}", c["accepted"] >= c["of"] - 1),
        Row("(d) a kernel 3 % faster judged faster", f"{f['d_busy']['faster']} of "
            f"{f['d_busy']['of']} ({busy})", f"{f['d_quiet']['faster']} of {f['d_quiet']['of']} "
            "(quiet)"),
        Row(f"(e) one pair's score in {len(e['scores'])} tasks, spread, {busy}",
            f"{e['spread']:.1%}", "", "", "<= 3 %", e["spread"] <= 0.03),
        Row(f"(f) runner seconds per verdict, {busy} (median; p90)",
            f"{g['median_s']:.1f}; {g['p90_s']:.1f}", f"{g['verdicts']} verdicts"),
    ]  # fmt: skip
    return rows


def parse_problem_import(_out: str, json_path: Path) -> list[Row]:
    f = json.loads(json_path.read_text())
    n, total = f["problems"], f["imported_and_committed_s"]
    b, i = f["boards_list"], f["index"]
    return [
        Row(f"import {n} problems, committed and indexed (s)", f"{total:.1f}",
            f"--out, no log {f['out_s']:.1f}; git CLI commit {f['git_cli_s']:.1f}",
            f"{total / f['out_s']:.2f}x", "<= 60 s", total <= 60),
        Row("re-import: problems appended again", str(f["reimport_appended"]),
            f"{f['reimport_s']:.1f} s", "", "0", f["reimport_appended"] == 0),
        Row("GET /api/boards bytes a board; read ms before/after",
            f"{(b['after_bytes'] - b['before_bytes']) / n:.0f}; "
            f"{b['before_ms']:.1f}/{b['after_ms']:.1f}"),
        Row("index.json bytes a board; read ms before/after",
            f"{(i['after_bytes'] - i['before_bytes']) / n:.0f}; "
            f"{i['before_ms']:.1f}/{i['after_ms']:.1f}"),
    ]  # fmt: skip


BENCHES = [
    Bench(
        "event log",
        "event_log.py",
        [],
        ["--appends", "500", "--replay-events", "10000", "--rounds", "2"],
        parse_event_log,
        json_out=True,
    ),
    Bench(
        "API",
        "api.py",
        ["--duration", "5"],
        ["--kernels", "2000", "--duration", "2", "--submissions", "60"],
        parse_api,
    ),
    Bench(
        "runner",
        "runner.py",
        ["--tasks", "200", "--separation-tasks", "30"],
        ["--tasks", "40", "--separation-tasks", "8"],
        parse_runner,
    ),
    Bench(
        "judge channel",
        "judge_channel.py",
        [],
        ["--calls", "1000", "--warmup", "100", "--budget", "0.5"],
        parse_judge_channel,
    ),
    Bench(
        "projector",
        "projector.py",
        [],
        ["--results", "100", "--cli-results", "20", "--events", "20000"],
        parse_projector,
    ),
    Bench("harness", "harness_repeatability.py", [], [], parse_harness),
    Bench(
        "end to end",
        "e2e.py",
        ["--latency", "100", "--duration", "20"],
        ["--latency", "30", "--duration", "8", "--max-rate", "100"],
        parse_e2e,
        json_out=True,
    ),
    Bench(
        "end to end, paced",
        "e2e.py",
        ["--latency", "3", "--duration", "30", "--rate", "50"],
        ["--latency", "3", "--duration", "8", "--rate", "50", "--max-rate", "60"],
        parse_e2e_paced,
        json_out=True,
    ),
    Bench("web UI", "webui.py", [], ["--runs", "3"], parse_webui, json_out=True),
    Bench(
        "problem import",
        "problem_import.py",
        [],
        ["--problems", "30"],
        parse_problem_import,
        json_out=True,
    ),
    Bench(
        "busy host",
        "busy_host.py",
        ["--same", "20", "--double", "10", "--power", "10"],
        ["--no-demo", "--same", "5", "--double", "5", "--power", "3", "--repeat", "5"],
        parse_busy_host,
        json_out=True,
        timeout_s=3600.0,  # about 50 verdicts and the demo's, beside busy processes
    ),
]


def run_one(bench: Bench, quick: bool, tmp: Path, timeout_s: float) -> None:
    json_path = tmp / f"{bench.script}.json"
    argv = bench.argv(quick, json_path)
    print(f"\n=== {bench.name}: {' '.join(argv[1:])}", flush=True)
    if not (REPO / "bench" / bench.script).is_file():
        bench.error = f"bench/{bench.script} is missing"
        print(f"skipped: {bench.error}")
        return
    began = time.perf_counter()
    stdout = ""
    try:
        proc = subprocess.run(
            argv, cwd=REPO, capture_output=True, text=True, timeout=timeout_s, check=False
        )
        stdout, bench.output = proc.stdout, proc.stdout + proc.stderr
        if proc.returncode != 0:
            bench.error = f"exited {proc.returncode}: {bench.output.strip().splitlines()[-1:]}"
    except subprocess.TimeoutExpired as exc:
        bench.error = f"timed out after {timeout_s:.0f} s"
        bench.output = exc.stdout.decode() if isinstance(exc.stdout, bytes) else ""
    bench.seconds = time.perf_counter() - began
    if not bench.error:
        try:
            bench.rows = bench.parse(stdout, json_path)
        except (ValueError, KeyError, OSError) as exc:
            bench.error = f"could not read its figures: {exc}"
    print(stdout if not bench.error else bench.output[-3000:], end="")
    for row in bench.rows:
        print(f"  -> {row.figure}: {row.value}  [{row.baseline}; {row.ratio}] {_verdict(row.ok)}")
    if bench.error:
        print(f"  -> {bench.name}: {bench.error}")


def _first(path: str, key: str) -> str:
    try:
        for line in Path(path).read_text().splitlines():
            if line.startswith(key):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def machine() -> dict[str, str]:
    from kz_events.errors import KzError
    from kz_events.server import find_server_binary

    try:
        nats = (
            subprocess.run(
                [str(find_server_binary()), "--version"],
                capture_output=True,
                text=True,
                check=False,
            )
            .stdout.strip()
            .removeprefix("nats-server: ")
        )
    except (KzError, OSError) as exc:
        nats = f"unknown ({exc})"
    mem_kb = _first("/proc/meminfo", "MemTotal").split()[0]
    return {
        "cores": str(os.cpu_count()),
        "memory": f"{int(mem_kb) / 1024 / 1024:.1f} GiB" if mem_kb.isdigit() else mem_kb,
        "cpu": _first("/proc/cpuinfo", "model name"),
        "python": platform.python_version(),
        "nats-server": nats,
        "os": platform.platform(),
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "load average at the end": " ".join(Path("/proc/loadavg").read_text().split()[:3]),
    }


def render(benches: list[Bench], info: dict[str, str], quick: bool, total_s: float) -> str:
    lines = [
        "# Benchmark results",
        "",
        f"Written by `make bench` (`bench/run_all.py{' --quick' if quick else ''}`) in "
        f"{total_s / 60:.1f} min. Every figure sits beside its baseline measured in the same run; "
        "MISS marks a target not met. See `docs/performance.md` for what each figure means.",
        "",
        "## Machine",
        "",
        *[f"- {key}: {value}" for key, value in info.items()],
        "",
        "## Figures",
        "",
        "| benchmark | figure | ours | baseline | ratio | target | verdict |",
        "|---|---|---|---|---|---|---|",
    ]
    for bench in benches:
        for row in bench.rows:
            lines.append(
                f"| {bench.name} | {row.figure} | {row.value} | {row.baseline} | {row.ratio} "
                f"| {row.target} | {_verdict(row.ok)} |"
            )
        if bench.error:
            lines.append(f"| {bench.name} | not measured: {bench.error} | | | | | ERROR |")
    lines += ["", "## Commands", ""]
    for bench in benches:
        argv = bench.argv(quick, Path("OUT.json"))
        command = " ".join([".venv/bin/python", *argv[1:]])
        lines.append(f"- {bench.name} ({bench.seconds:.0f} s): `{command}`")
    lines += ["", "## Raw output", ""]
    for bench in benches:
        tail = "\n".join(bench.output.strip().splitlines()[-25:])
        lines += [f"### {bench.name}", "", "```", tail, "```", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller runs, about 4 minutes")
    parser.add_argument("--only", nargs="*", help="benchmark names (e.g. 'end to end', runner)")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "RESULTS.md")
    parser.add_argument("--timeout", type=float, default=420.0, help="per benchmark, seconds")
    args = parser.parse_args(argv)
    benches = [b for b in BENCHES if not args.only or b.name in args.only or b.script in args.only]
    began = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="kz-bench-all-") as tmp:
        for bench in benches:
            run_one(bench, args.quick, Path(tmp), bench.timeout_s or args.timeout)
    total = time.perf_counter() - began
    args.out.write_text(render(benches, machine(), args.quick, total) + "\n")
    print(f"\nwrote {args.out} ({total / 60:.1f} min)")
    return 1 if any(b.error for b in benches) else 0


if __name__ == "__main__":
    sys.exit(main())
