"""`kz bench DIR`: judge a package on this machine exactly as a runner would.

The package is packed and unpacked as the server does, its judge files are copied out of the
work dir, and the task runs in the runner's sandbox: the build step, then the judge with the
candidate in its own worker. So an author sees the real verdict, with the real isolation,
before submitting. `--baseline FILE` names a `bench_result.yaml` whose best is the value to
beat (main's, for an existing kernel); `--judge DIR` takes the judge files from another package
folder (a board's kernel on main), as the runner takes them from main.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from kz_cli.contract import EXIT_CODES_HELP, CliError, Exit, emit, fix_for
from kz_events.errors import InvalidInput
from kz_events.result import ResultDocument, Stats
from kz_package import (
    JUDGE_FILES,
    PACKAGE_DIR,
    pack_directory,
    validate_result_document,
    validate_tarball,
)
from kz_runner.backends import get_backend
from kz_runner.backends.base import BackendUnavailable
from kz_runner.core import HARNESS_DIR
from kz_runner.execute import TaskOutcome, TaskSpec, execute_task
from kz_runner.workdir import lay_out

__all__ = ["bench", "bench_doc", "register", "run_bench"]

# accepted 0; rejected, and a run its own package ended (build_failed, benchmark_error,
# invalid_result, timed_out), 1 (kz_cli.contract)
EXIT_CODES = {"accepted": 0, "rejected": 1}
MAX_JSON_LOG_CHARS = 100_000  # `--json` carries the task log's last this many characters


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "bench",
        help="judge a package locally with the same isolation as a runner",
        description=__doc__,
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("path", type=Path, help="package directory")
    parser.add_argument("--baseline", type=Path, help="a bench_result.yaml whose best to beat")
    parser.add_argument("--judge", type=Path, help="take the judge files from this package folder")
    parser.add_argument(
        "--backend", default="sandbox", choices=("sandbox", "docker"), help="isolation backend"
    )
    parser.add_argument("--timeout", type=float, default=300.0, help="step time limit, seconds")
    parser.add_argument(
        "--json", action="store_true", help="print one JSON document with the result document"
    )
    parser.set_defaults(handler=run_bench)


def _judge_files(folder: Path | None) -> dict[str, bytes]:
    if folder is None:
        return {}
    files = {}
    for name in JUDGE_FILES:
        path = folder / PACKAGE_DIR / name
        if path.is_file() and name != "bench_result.yaml":
            files[f"{PACKAGE_DIR}/{name}"] = path.read_bytes()
    if not files:
        raise InvalidInput(f"--judge must be a package folder with {PACKAGE_DIR}/, got {folder}")
    return files


def bench(path: Path, args: argparse.Namespace) -> TaskOutcome:
    """Run the package at `path` through a real backend; the task's outcome."""
    if not (path / PACKAGE_DIR / "desc.yaml").is_file():
        raise CliError(
            "not_a_package", f"PATH must be a package directory with {PACKAGE_DIR}/desc.yaml"
        )
    if args.baseline is not None and not args.baseline.is_file():
        raise InvalidInput(f"--baseline must be a bench_result.yaml file, got {args.baseline}")
    backend = get_backend(args.backend)
    try:
        backend.check_available()
    except BackendUnavailable as exc:
        raise CliError("sandbox_unavailable", exc.message) from exc
    with tempfile.TemporaryDirectory(prefix="kz-bench-") as tmp:
        root = Path(tmp)
        root.chmod(0o711)
        tarball = root / "package.tar.gz"
        pack_directory(path, tarball)
        kernel_id = validate_tarball(tarball).kernel_id  # refused as the server would
        workdir = lay_out(root / "task", tarball.read_bytes(), _judge_files(args.judge))
        spec = TaskSpec(
            kernel_id=kernel_id,
            arch=kernel_id.arch,
            workdir=workdir,
            harness_path=HARNESS_DIR,
            baseline_path=args.baseline.resolve() if args.baseline else None,
            step_timeout_s=args.timeout,
            task_timeout_s=2 * args.timeout,
        )
        try:
            return execute_task(spec, backend, validate_result=validate_result_document)
        finally:
            shutil.rmtree(root / "task", ignore_errors=True)


def _print(outcome: TaskOutcome) -> None:
    document = ResultDocument.of(outcome.result or {})
    print(f"{outcome.reason}: {outcome.message}")
    for workload in document.workloads:
        stats = workload.stats or Stats()
        median = stats.median if stats.median is not None else workload.value
        count = stats.n if stats.n is not None else "?"
        unit = f" {stats.unit}" if stats.unit else ""
        if workload.batch is not None:  # version 3: per call, one figure per timed window
            print(
                f"  {workload.name}: median {_figure(median)}{unit} per call over {count} "
                f"windows of {workload.batch} calls "
                f"(resolution {_figure(workload.resolution)}{unit})"
            )
        else:
            print(
                f"  {workload.name}: median {_figure(median)} {stats.unit or ''} over {count} "
                f"calls (channel overhead {workload.channel_overhead or 0:.3g} subtracted)"
            )
    if document.failure is not None:
        print(f"  the candidate failed ({document.failure.stage}): {document.failure.error}")
    for flag in document.flags:
        print(f"  flagged {flag.code}: {flag.message}")
    if outcome.reason not in EXIT_CODES:
        print("--- task log ---")
        sys.stdout.write(outcome.log.decode(errors="replace"))


def _figure(value: float | None) -> str:
    return f"{value:.4g}" if value is not None else "-"


def bench_doc(outcome: TaskOutcome) -> dict[str, Any]:
    """The `--json` document (and the MCP bench tool's answer): the verdict, its sentence, the
    result document, and for any ending but accepted the task's log with what to do."""
    body: dict[str, Any] = {
        "outcome": outcome.reason,
        "message": outcome.message,
        "result": outcome.result,
    }
    if outcome.reason != "accepted":
        log = outcome.log.decode(errors="replace")
        body["log"] = log[-MAX_JSON_LOG_CHARS:]
        body["error"] = {
            "code": outcome.reason,
            "message": outcome.message,
            "fix": fix_for("rejected") if outcome.reason == "rejected" else
            "read the log: fix what it shows in src/ (the judge files stay as the board has them)",
        }  # fmt: skip
    return body


def run_bench(args: argparse.Namespace) -> int:
    outcome = bench(args.path, args)
    if args.json:
        emit(args, bench_doc(outcome))
    else:
        _print(outcome)
    return EXIT_CODES.get(outcome.reason, int(Exit.REJECTED))
