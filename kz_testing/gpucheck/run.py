"""The GPU check's steps, each under a time limit inside one overall budget; a step that fails
marks its rows FAIL with the reason and the check goes on to the table (printed last).

`python -m kz_testing.gpucheck OUT [--dry-run]`; scripts/gpu_check.sh sets it up. Settings
from the environment: KZ_GPU_CHECK_BWRAP (bubblewrap), KZ_GPU_CHECK_READONLY (the image's
Python environment, comma-separated), KZ_GPU_CHECK_RUNNERS (sm90 runners, default 2),
KZ_GPU_CHECK_BUDGET_S (default 420), KZ_GPU_CHECK_WORK (default a fresh temporary folder).
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kz_runner.backends.sandbox import SandboxBackend
from kz_testing.gpucheck import figures as fig
from kz_testing.gpucheck.boards import EXAMPLES, Board, find_boards
from kz_testing.gpucheck.report import FAIL, PASS, SKIP, Row, pack_logs, write_outputs
from kz_testing.gpucheck.stack import GpuRunnerSettings, LocalStack, variant_package
from kz_testing.gpucheck.tasks import judge_task, probe

__all__ = ["GpuCheck", "main"]

REPEAT_TASKS = 5
CLOCKS = ("timestamp", "clocks.sm", "clocks.mem", "temperature.gpu", "power.draw")


def _env(name: str, default: str) -> str:
    return os.environ.get(name) or default


class GpuCheck:
    """One run of the check; `run()` returns the exit status (0: no row failed)."""

    def __init__(self, out: Path, *, dry_run: bool) -> None:
        self.out = out
        self.dry_run = dry_run
        self.work = Path(_env("KZ_GPU_CHECK_WORK", tempfile.mkdtemp(prefix="kz-gpu-check-")))
        self.work.mkdir(parents=True, exist_ok=True)
        self.work.chmod(0o755)
        self.deadline = time.monotonic() + float(_env("KZ_GPU_CHECK_BUDGET_S", "420"))
        self.started = time.monotonic()
        self.rows: list[Row] = []
        self.figures: dict[str, Any] = {"dry_run": dry_run}
        self.logs: dict[str, list[tuple[str, str]]] = {
            "stack": [], "probe": [], "submissions": [], "tasks": [], "clocks": [],
        }  # fmt: skip
        readonly = [p for p in _env("KZ_GPU_CHECK_READONLY", "").split(",") if p]
        self.readonly = tuple(readonly)
        self.bwrap = _env("KZ_GPU_CHECK_BWRAP", "bwrap")
        self.runners = int(_env("KZ_GPU_CHECK_RUNNERS", "2"))
        self.cpu = max((os.cpu_count() or 1) - 1, 0)
        self.stack: LocalStack | None = None
        self.honest: list[dict[str, Any]] = []
        self._backend: SandboxBackend | None = None

    # --- the frame -----------------------------------------------------------------------

    def step(self, name: str, limit_s: float, body: Callable[[float], list[Row]]) -> None:
        """Run `body(until)`: its rows, or one FAIL row with the reason, or SKIP out of time."""
        now = time.monotonic()
        if now >= self.deadline - 3:
            self.rows.append(Row(name, SKIP, "out of time (the check's budget is spent)"))
            return
        until = min(now + limit_s, self.deadline)
        try:
            rows = body(until)
        except Exception as exc:  # a failing step is a row, never the end of the check
            rows = [Row(name, FAIL, f"{type(exc).__name__}: {exc}")]
            self.logs["stack"].append((f"{name} failed", traceback.format_exc()))
        self.rows.extend(rows)
        spent = time.monotonic() - now
        print(f"gpu-check: {name}: {spent:.1f} s, {self._elapsed():.0f} s in", flush=True)

    def _elapsed(self) -> float:
        return time.monotonic() - self.started

    def backend(self) -> SandboxBackend:
        """The sandbox for the check's own tasks, on uids and a CPU of their own."""
        if self._backend is None:
            self._backend = SandboxBackend(
                bwrap=self.bwrap, gpus="all", readonly_paths=[Path(p) for p in self.readonly],
                sandbox_uid=64000, sandbox_gid=64000, worker_uid_base=63000,
            )  # fmt: skip
            self._backend.check_available()
        return self._backend

    def run(self) -> int:
        clocks = None if self.dry_run else self._start_clocks()
        try:
            self._steps()
        finally:
            if self.stack is not None:
                self.stack.close()
                self._stack_logs()
            if clocks is not None:
                clocks.terminate()
                clocks.wait(5)
                self._clock_row()
        self.figures["elapsed_s"] = round(self._elapsed(), 1)
        pack_logs({k: v for k, v in self.logs.items() if v}, self.out)
        table = write_outputs(self.out, self.rows, self.figures)
        print(table, end="", flush=True)
        return 1 if any(r.status == FAIL for r in self.rows) else 0

    def _steps(self) -> None:
        boards = find_boards()
        self.figures["boards"] = {
            b.kernel_id: {"faster": [p.name for p in b.faster], "wrong": [p.name for p in b.wrong]}
            for b in boards
        }
        if self.dry_run:
            self.rows.append(Row("gpu", SKIP, "dry run: no GPU step"))
        else:
            self.step("gpu", 30, self._gpu)
            self.step("probe", 90, self._probe)
        self.step("stack", 90, lambda until: self._stack(until, boards))
        if self.stack is not None and self.stack.runners:
            self._submissions(boards)
            self.stack.stop_runners()
        if self.dry_run:
            for name in ("batch-bound", "repeatability"):
                self.rows.append(Row(name, SKIP, "dry run: needs a GPU"))
        else:
            self.rows.append(fig.bound_row(self.honest))
            self.step("repeatability", 120, self._repeatability)
        self.step("cheats", 600, self._cheats)

    # --- the steps -----------------------------------------------------------------------

    def _gpu(self, until: float) -> list[Row]:
        listed = subprocess.run(
            ["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20, check=False
        )
        self.logs["probe"].append(("nvidia-smi -L", listed.stdout + listed.stderr))
        gpus = [line for line in listed.stdout.splitlines() if line.startswith("GPU ")]
        self.figures["gpus"] = gpus
        if not gpus:
            return [Row("gpu", FAIL, "nvidia-smi -L lists no GPU")]
        return [Row("gpu", PASS, f"{len(gpus)}: {gpus[0]}")]

    def _probe(self, until: float) -> list[Row]:
        backend = self.backend()
        result, output = probe(backend, self.work / "probe", until - time.monotonic())
        self.logs["probe"].append(("probe in the sandbox", output))
        if "device" not in result and Path("/sys").is_dir():  # CUDA may want /sys
            self.readonly = (*self.readonly, "/sys")
            self._backend = None
            retry, output = probe(self.backend(), self.work / "probe", until - time.monotonic())
            self.logs["probe"].append(("probe in the sandbox, /sys shown", output))
            if "device" in retry:
                result = {**retry, "needed_sys": True}
        self.figures["probe"] = result
        return fig.probe_rows(result)

    def _stack(self, until: float, boards: list[Board]) -> list[Row]:
        self.stack = LocalStack(self.work / "stack", self.work / "logs")
        self.stack.logs.mkdir(parents=True, exist_ok=True)
        self.stack.root.mkdir(parents=True, exist_ok=True)
        self.stack.start(timeout_s=until - time.monotonic())
        self.stack.import_examples(
            EXAMPLES, [b.kernel_id for b in boards], timeout_s=until - time.monotonic()
        )
        settings = GpuRunnerSettings(
            backend="stub" if self.dry_run else "sandbox",
            readonly=self.readonly,
            bwrap=self.bwrap,
        )
        self.stack.add_runners(self.runners, settings)
        what = "stub backend (dry run)" if self.dry_run else "sandbox, GPUs shown to workers"
        figure = (
            f"NATS, API, projectors, {len(boards)} sm90 boards imported, {self.runners} sm90 "
            f"runners ({what}) in {self._elapsed():.0f} s"
        )
        return [Row("stack", PASS, figure)]

    def _submissions(self, boards: list[Board]) -> None:
        """References and wrong variants first; the faster ones once the references are in."""
        assert self.stack is not None
        into = self.work / "packages"
        into.mkdir(exist_ok=True)
        first: list[tuple[str, Board, str, str]] = []  # (check, board, role, id)
        for board in boards:
            name = "/".join(board.kernel_id.split("/")[2:4])
            sid = self.stack.submit(variant_package(board.package, None, into), board.kernel_id,
                                    "reference run")  # fmt: skip
            first.append((f"{name} reference", board, "reference", sid))
            for wrong in board.wrong:
                package = variant_package(board.package, wrong / "src", into)
                sid = self.stack.submit(package, board.kernel_id, f"wrong: {wrong.name}")
                first.append((f"{name} wrong:{wrong.name}", board, "wrong", sid))
            if not board.wrong:
                self.rows.append(Row(f"{name} wrong", SKIP, "no wrong GPU variant found"))
        self.step("references", 180, lambda until: self._verdicts(first, until))
        second = []
        for board in boards:
            name = "/".join(board.kernel_id.split("/")[2:4])
            for faster in board.faster:
                package = variant_package(board.package, faster / "src", into)
                sid = self.stack.submit(package, board.kernel_id, f"faster: {faster.name}")
                second.append((f"{name} faster:{faster.name}", board, "faster", sid))
            if not board.faster:
                self.rows.append(Row(f"{name} faster", SKIP, "no faster GPU variant found"))
        if second:
            self.step("faster", 150, lambda until: self._verdicts(second, until))

    def _verdicts(self, submitted: list[tuple[str, Board, str, str]], until: float) -> list[Row]:
        assert self.stack is not None
        states = self.stack.wait([sid for *_, sid in submitted], until)
        rows = []
        for check, _board, role, sid in submitted:
            state = states.get(sid, {})
            detail = self.stack.detail(sid)
            document = detail.get("result_document")
            self.logs["submissions"].append((f"{check} ({sid})", self.stack.log(sid)))
            self.figures.setdefault("submissions", {})[check] = {
                "id": sid, "status": state.get("status"), "result": document,
            }  # fmt: skip
            rows.append(self._verdict_row(check, role, state, document))
            if role != "wrong" and isinstance(document, dict):
                self.honest.append(document)
        return rows

    def _verdict_row(self, check: str, role: str, state: dict[str, Any], document: Any) -> Row:
        status = str(state.get("status"))
        reason = str((state.get("result") or {}).get("reason") or (state.get("error") or {}))
        if status not in ("committed", "rejected", "failed", "cancelled"):
            return Row(check, FAIL, f"no verdict in time (last seen {status})")
        if self.dry_run:
            return Row(check, PASS, f"{status} (stub backend: nothing judged)")
        if role == "wrong":
            return Row(check, PASS if status == "rejected" else FAIL, f"{status}: {reason}")
        measured = document if isinstance(document, dict) else None
        if status == "rejected" and role == "faster" and fig.judged_side_by_side(measured):
            # Correct and measured beside the reference: a verdict, whichever way it went (a
            # Triton kernel need not beat the vendor's library to show the path works).
            return Row(check, PASS, f"measured side by side, {reason}")
        if status != "committed":
            return Row(check, FAIL, f"{status}: {reason}")
        floors = fig.floors_of(measured)
        floors = f"; {floors}" if floors else ""
        if role == "faster":
            speedup = fig.speedup_of(measured)
            shown = f"{speedup:.2f}x, " if speedup is not None else ""
            return Row(check, PASS, f"{shown}{reason}{floors}")
        value = (measured or {}).get("metric", {}).get("value")
        return Row(check, PASS, f"{value} us: {reason}{floors}" if value is not None else reason)

    def _repeatability(self, until: float) -> list[Row]:
        speedups: list[float | None] = []
        for number in range(REPEAT_TASKS):
            left = until - time.monotonic()
            if left < 10:
                break
            outcome = judge_task(
                self.backend(), self.work / "repeat", fig.REPEAT_JUDGE,
                {"kernel.py": fig.REPEAT_FAST}, incumbent={"kernel.py": fig.REPEAT_SLOW},
                baseline=fig.REPEAT_BASELINE, cpu=self.cpu, timeout_s=min(60.0, left),
            )  # fmt: skip
            self.logs["tasks"].append((f"repeatability task {number + 1}: {outcome.reason}",
                                       outcome.log.decode(errors="replace")))  # fmt: skip
            speedups.append(fig.speedup_of(outcome.result))
        row, summary = fig.repeat_row(speedups, REPEAT_TASKS)
        self.figures["repeatability"] = summary
        return [row]

    def _cheats(self, until: float) -> list[Row]:
        try:
            module = importlib.import_module("kz_testing.gpu_cheats")
        except ModuleNotFoundError as exc:
            if exc.name != "kz_testing.gpu_cheats":
                raise
            return [Row("cheats", SKIP, "kz_testing.gpu_cheats is not there yet")]
        cases = list(module.GPU_CASES)
        if self.dry_run:
            return [Row("cheats", SKIP, f"dry run: {len(cases)} GPU cases found, none run")]
        rows = []
        for case in cases:
            left = until - time.monotonic()
            if left < 15:
                rows.append(Row(f"cheat:{case.family}", SKIP, "out of time"))
                continue
            outcome = judge_task(
                self.backend(), self.work / "cheats", case.judge, dict(case.files),
                cpu=self.cpu, timeout_s=min(90.0, left),
            )  # fmt: skip
            log = outcome.log.decode(errors="replace")
            self.logs["tasks"].append((f"cheat {case.family}: {outcome.reason}", log))
            ok, why = module.defended(case, outcome.reason, outcome.result, log)
            self.figures.setdefault("cheats", {})[case.family] = {
                "reason": outcome.reason, "defended": ok, "why": why,
                "defended_by": getattr(case, "defended_by", None),
            }  # fmt: skip
            rows.append(Row(f"cheat:{case.family}", PASS if ok else FAIL, why))
        return rows or [Row("cheats", SKIP, "GPU_CASES is empty")]

    # --- clocks and logs -----------------------------------------------------------------

    def _start_clocks(self) -> subprocess.Popen[bytes] | None:
        """nvidia-smi reading (never setting) the clocks, temperature and power every 200 ms."""
        self.clock_file = self.work / "clocks.csv"
        try:
            return subprocess.Popen(
                ["nvidia-smi", f"--query-gpu={','.join(CLOCKS)}",
                 "--format=csv,noheader,nounits", "-lms", "200"],
                stdout=self.clock_file.open("wb"), stderr=subprocess.STDOUT,
            )  # fmt: skip
        except OSError:
            self.rows.append(Row("clocks", FAIL, "nvidia-smi could not be started"))
            return None

    def _clock_row(self) -> None:
        text = self.clock_file.read_text(errors="replace")
        row, summary = fig.clock_row(text)
        self.rows.append(row)
        self.figures["clocks"] = summary
        self.logs["clocks"].append(("nvidia-smi " + ",".join(CLOCKS), text))

    def _stack_logs(self) -> None:
        assert self.stack is not None
        for path in sorted(self.stack.logs.glob("*.log")):
            self.logs["stack"].append((path.name, path.read_text(errors="replace")))


def main(argv: list[str]) -> int:
    dry_run = "--dry-run" in argv
    rest = [a for a in argv if a != "--dry-run"]
    if len(rest) != 1:
        print("usage: python -m kz_testing.gpucheck OUT [--dry-run]", file=sys.stderr)
        return 2
    return GpuCheck(Path(rest[0]), dry_run=dry_run).run()
