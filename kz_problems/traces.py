"""Accepted results as FlashInfer Trace: one Trace per accepted result and workload, with the
Solutions (their sources) and, for boards imported from FlashInfer Trace, the Definitions.

Pure: `export_traces` takes the accepted results and their packages' files and returns the
three lists, with the format's published field names only (a Trace's `definition`, `workload`,
`solution` and `evaluation`, its `evaluation`'s `status`, `log`, `correctness`, `performance`,
`environment` and `timestamp`). A FlashInfer board's trace names its Definition and the very
Workload it was imported with (uuid, axes, inputs); any other board's names a Definition after
the board and a Workload whose uuid is fixed by the board and the workload's name and whose
axes are the workload's integer parameters. docs/problem_sets.md maps every field.
"""

from __future__ import annotations

import ast
import json
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kz_events.ids import KernelId
from kz_package import PACKAGE_DIR, load_yaml

__all__ = [
    "TRACE_NS",
    "Accepted",
    "TraceExport",
    "definition_name",
    "export_traces",
    "write_export",
]

TRACE_NS = uuid.UUID("6f1d2c4e-8a3b-4e5f-9c7d-2b1a0e9f8d31")
_UNITS = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}  # to milliseconds
_DESC = f"{PACKAGE_DIR}/desc.yaml"
_BENCHMARK = f"{PACKAGE_DIR}/benchmark.py"
_ENTRIES = {"kernelbench": ("model_new.py::ModelNew", False),
            "gpumode": ("submission.py::custom_kernel", False),
            "flashinfer": ("main.py::run", False)}  # fmt: skip
_MAX_SOURCE = 1 << 20


@dataclass(frozen=True, slots=True)
class Accepted:
    """One accepted result, as the log has it."""

    submission_id: str
    kernel_id: str
    submitter_id: str
    result: Mapping[str, Any]
    package_digest: str
    at: datetime
    environment: Mapping[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class TraceExport:
    """The export: Trace lines, and the Solutions and Definitions they name."""

    traces: list[dict[str, Any]] = field(default_factory=list)
    solutions: list[dict[str, Any]] = field(default_factory=list)
    definitions: list[dict[str, Any]] = field(default_factory=list)

    def jsonl(self) -> bytes:
        return b"".join(json.dumps(t, sort_keys=False).encode() + b"\n" for t in self.traces)


def _problem(files: Mapping[str, bytes]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(desc.yaml, its x-problem or {})."""
    if _DESC not in files:
        return {}, {}
    desc = load_yaml(files[_DESC], path=_DESC)
    desc = desc if isinstance(desc, dict) else {}
    problem = desc.get("x-problem")
    return desc, problem if isinstance(problem, dict) else {}


def definition_name(kernel_id: str, problem: Mapping[str, Any]) -> str:
    """The Definition a board's traces name: an imported FlashInfer definition's own name,
    else `<op_class>.<sub_class>.<quant>` of the board."""
    if problem.get("format") == "flashinfer" and isinstance(problem.get("id"), str):
        return str(problem["id"])
    kid = KernelId.parse(kernel_id)
    return f"{kid.op_class}.{kid.sub_class}.{kid.quant}"


def _workload(board: str, name: str, desc: Mapping[str, Any], flashinfer: bool) -> dict[str, Any]:
    declared = next((w for w in desc.get("workloads") or []
                     if isinstance(w, dict) and w.get("name") == name), {})  # fmt: skip
    given = declared.get("params")
    params: dict[str, Any] = given if isinstance(given, dict) else {}
    if flashinfer and {"uuid", "axes"} <= set(params):
        return {"uuid": params["uuid"], "axes": params["axes"], "inputs": params.get("inputs", {})}
    axes = {k: v for k, v in params.items() if k != "seed"  # a seed is no axis of the shape
            and isinstance(v, int) and not isinstance(v, bool) and v >= 0}  # fmt: skip
    return {"uuid": str(uuid.uuid5(TRACE_NS, f"{board}/{name}")), "axes": axes, "inputs": {}}


def _ms(value: Any, unit: str) -> float:
    return float(value) * _UNITS.get(unit, 1e-3) if isinstance(value, int | float) else 0.0


def _figure(stats: Any, unit: str) -> float:
    """A measurement's mean (the format's figure), its median where it has no mean, in ms."""
    if not isinstance(stats, Mapping):
        return 0.0
    value = stats.get("mean", stats.get("median"))
    return _ms(value, str(stats.get("unit", unit)))


def _worst(checks: list[dict[str, Any]], key: str) -> float:
    return max((float(c.get(key) or 0.0) for c in checks), default=0.0)


def _evaluation(accepted: Accepted, workload: Mapping[str, Any], hardware: str) -> dict[str, Any]:
    result = accepted.result
    unit = str((result.get("metric") or {}).get("unit", "us"))
    name = workload.get("name")
    checks = [c for c in (result.get("correctness") or {}).get("checks", [])
              if isinstance(c, dict) and str(c.get("name", "")).split("#")[0] == name]  # fmt: skip
    latency = _figure(workload.get("stats"), unit) or _ms(workload.get("value"), unit)
    reference = _figure(workload.get("reference"), unit)
    env = {**(result.get("environment") or {}), **accepted.environment}
    libs = {k: str(env[k]) for k in ("python", "numpy", "torch", "triton", "cuda") if k in env}
    return {
        "status": "PASSED",
        "log": str(result.get("reason", "")),
        "correctness": {
            "max_relative_error": _worst(checks, "max_rel_err"),
            "max_absolute_error": _worst(checks, "max_abs_err"),
        },
        "performance": {
            "latency_ms": latency,
            "reference_latency_ms": reference,
            "speedup_factor": reference / latency if latency > 0 and reference > 0 else 0.0,
        },
        "environment": {"hardware": hardware, "libs": libs},
        "timestamp": accepted.at.astimezone(UTC).isoformat().replace("+00:00", "Z"),
    }


def _entry(files: Mapping[str, bytes], problem: Mapping[str, Any]) -> tuple[str, bool]:
    """The Solution's entry point and destination-passing style."""
    fmt = problem.get("format")
    if isinstance(fmt, str) and fmt in _ENTRIES:
        return _ENTRIES[fmt]
    try:
        tree = ast.parse(files.get(_BENCHMARK, b"").decode())
    except (SyntaxError, UnicodeDecodeError):
        return "", False
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "entry":
            value = node.value
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                module, _, function = value.value.partition(":")
                return f"{module}.py::{function}", False
    return "", False


def _sources(files: Mapping[str, bytes]) -> list[dict[str, str]]:
    sources = []
    for path, data in sorted(files.items()):
        if not path.startswith("src/") or len(data) > _MAX_SOURCE:
            continue
        try:
            sources.append({"path": path.removeprefix("src/"), "content": data.decode()})
        except UnicodeDecodeError:
            continue  # a binary file has no place in a Solution's sources
    return sources


def _given(files: Mapping[str, bytes]) -> dict[str, Any]:
    """The FlashInfer Solution submitted as it was (`src/solution.json`), or {}."""
    try:
        given = json.loads(files.get("src/solution.json", b"{}"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        return {}
    return given if isinstance(given, dict) else {}


def _solution(accepted: Accepted, files: Mapping[str, bytes], definition: str, desc: Any,
              problem: Mapping[str, Any], hardware: str) -> dict[str, Any]:  # fmt: skip
    entry, dps = _entry(files, problem)
    spec: dict[str, Any] = {"language": str(desc.get("language", "python")),
                            "target_hardware": [hardware], "entry_point": entry,
                            "dependencies": ["torch"] if problem else [],
                            "destination_passing_style": dps}  # fmt: skip
    given = _given(files)
    sources = {s["path"]: s for s in given.get("sources") or [] if isinstance(s, dict)}
    if isinstance(given.get("spec"), dict):  # its own spec stands: it says how it is called
        spec = {**spec, **given["spec"]}
    sources.update({s["path"]: s for s in _sources(files) if s["path"] != "solution.json"})
    kid = KernelId.parse(accepted.kernel_id)
    return {
        "name": f"{kid.name}-{accepted.submission_id[:8]}",
        "definition": definition,
        "author": accepted.submitter_id,
        "description": f"{desc.get('title', kid.name)} ({accepted.kernel_id}, submission "
        f"{accepted.submission_id})",
        "spec": spec,
        "sources": [sources[path] for path in sorted(sources)],
    }


def export_traces(
    results: Iterable[Accepted],
    packages: Mapping[str, Mapping[str, bytes]],
    *,
    board: str | None = None,
) -> TraceExport:
    """The traces of `results` (of `board` alone, when given), with `packages` the files of each
    result's package by digest; results whose package is missing are left out."""
    out = TraceExport()
    definitions: dict[str, dict[str, Any]] = {}
    for accepted in results:
        kid = KernelId.parse(accepted.kernel_id)
        if board is not None and kid.group != board:
            continue
        files = packages.get(accepted.package_digest)
        if files is None:
            continue
        desc, problem = _problem(files)
        name = definition_name(accepted.kernel_id, problem)
        flashinfer = problem.get("format") == "flashinfer"
        if flashinfer and isinstance(problem.get("definition"), dict):
            definitions.setdefault(name, problem["definition"])
        hardware = str(accepted.environment.get("device") or kid.arch)
        solution = _solution(accepted, files, name, desc, problem, hardware)
        out.solutions.append(solution)
        for workload in accepted.result.get("workloads") or []:
            if not isinstance(workload, dict):
                continue
            out.traces.append({
                "definition": name,
                "workload": _workload(kid.group, str(workload.get("name")), desc, flashinfer),
                "solution": solution["name"],
                "evaluation": _evaluation(accepted, workload, hardware),
            })  # fmt: skip
    out.definitions = list(definitions.values())
    return out


def write_export(export: TraceExport, out: Path) -> Path:
    """Write the Trace lines to `out` (JSONL) and, in the folder beside it named after it, the
    whole set in FlashInfer Trace's layout (`definitions/`, `solutions/`, `traces/`), which
    its tools load as a data set; returns that folder."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(export.jsonl())
    folder = out.with_suffix("") if out.suffix else out.with_name(out.name + ".set")
    ops = {d["name"]: str(d.get("op_type", "other")) for d in export.definitions}
    for definition in export.definitions:
        _write_json(folder / "definitions" / ops[definition["name"]] /
                    f"{definition['name']}.json", definition)  # fmt: skip
    for solution in export.solutions:
        op = ops.get(solution["definition"], "kernel_zoo")
        _write_json(folder / "solutions" / op / solution["definition"] /
                    f"{solution['name']}.json", solution)  # fmt: skip
    by_definition: dict[str, list[dict[str, Any]]] = {}
    for trace in export.traces:
        by_definition.setdefault(trace["definition"], []).append(trace)
    for name, traces in by_definition.items():
        target = folder / "traces" / ops.get(name, "kernel_zoo") / f"{name}.jsonl"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(TraceExport(traces=traces).jsonl())
    return folder


def _write_json(path: Path, data: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n")
