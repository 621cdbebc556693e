"""FlashInfer Trace: a problem is a Definition (JSON: `name`, `op_type`, `axes` const or var,
`inputs`/`outputs` with shape and dtype, a PyTorch `reference` defining `run`), benchmarked on
its Workloads (JSONL: `uuid`, the var axes' values, each input `random`, `scalar` or
`safetensors`), laid out as a dataset: `definitions/**/<name>.json`, `workloads/**/<name>.jsonl`.

A solution provides `run(...)`: `src/main.py` with `run`, or the Solution JSON itself as
`src/solution.json` (its `spec.entry_point` and `destination_passing_style` decide the call).
Inputs are drawn as FlashInfer-Bench draws random ones, from the task's secret seed; outputs are
compared with FlashInfer-Bench's default tolerances. Workloads whose inputs come from
safetensors files are left out (a runner has no dataset blobs); see docs/problem_sets.md.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

from kz_problems.errors import ProblemError, Skipped
from kz_problems.model import Problem, Provenance, segment
from kz_problems.provenance import provenance

__all__ = ["DTYPES", "ENTRY", "MAX_WORKLOADS", "SOLUTION_FILES", "TOLERANCE", "read"]

ENTRY = "main:run"
SOLUTION_FILES = ("main.py", "solution.json")
TOLERANCE = 1e-2  # FlashInfer-Bench's default atol and rtol
MAX_WORKLOADS = 16
DTYPES = ("float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "float4_e2m1",
          "int64", "int32", "int16", "int8", "bool")  # fmt: skip
_UNSUPPORTED_DTYPES = {"float4_e2m1": "packed float4 has no slot type yet"}
_QUANT = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "float8_e4m3fn": "fp8",
          "float8_e5m2": "fp8", "int8": "int8"}  # fmt: skip


def _definition_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    root = path / "definitions" if (path / "definitions").is_dir() else path
    found = sorted(p for p in root.rglob("*.json") if ".git" not in p.parts)
    if not found:
        raise ProblemError(
            str(path),
            "expected a FlashInfer Trace dataset (definitions/**/*.json), a definitions folder "
            "or a definition file, found none",
        )
    return found


def _dataset_root(path: Path) -> Path:
    start = (path if path.is_dir() else path.parent).resolve()
    for folder in (start, *start.parents):
        if (folder / "workloads").is_dir() or (folder / "definitions").is_dir():
            return folder
    return start


def _field(where: str, data: dict[str, Any], name: str, kind: type) -> Any:
    value = data.get(name)
    if not isinstance(value, kind) or (isinstance(value, str | dict) and not value):
        expected = "a non-empty string" if kind is str else "a non-empty object"
        raise ProblemError(where, f"{name}: expected {expected}, got {value!r:.60}")
    return value


def _check_axes(where: str, axes: dict[str, Any]) -> None:
    for name, axis in axes.items():
        kind = axis.get("type") if isinstance(axis, dict) else None
        if kind == "var":
            continue
        value = axis.get("value") if isinstance(axis, dict) else None
        if kind != "const" or not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ProblemError(where, f"axes.{name}: expected {{type: var}} or {{type: const, "
                               f"value: integer >= 0}}, got {axis!r:.80}")  # fmt: skip


def _check_tensors(where: str, kind: str, tensors: dict[str, Any], axes: dict[str, Any]) -> None:
    for name, spec in tensors.items():
        if not isinstance(spec, dict):
            raise ProblemError(where, f"{kind}.{name}: expected {{shape, dtype}}")
        dtype = spec.get("dtype")
        if dtype not in DTYPES:
            raise ProblemError(where, f"{kind}.{name}.dtype: expected one of {', '.join(DTYPES)}"
                               f", got {dtype!r}")  # fmt: skip
        if dtype in _UNSUPPORTED_DTYPES:
            raise ProblemError(where, f"{kind}.{name}.dtype: {dtype}: "
                               f"{_UNSUPPORTED_DTYPES[dtype]}, not supported yet")  # fmt: skip
        shape = spec.get("shape", "missing")
        if shape is None:
            continue
        if not isinstance(shape, list) or not all(isinstance(a, str) for a in shape):
            raise ProblemError(where, f"{kind}.{name}.shape: expected a list of axis names or "
                               "null (a scalar)")  # fmt: skip
        for axis in shape:
            if axis not in axes:
                raise ProblemError(where, f"{kind}.{name}.shape: axis {axis!r} is not in axes")


def _check_reference(where: str, reference: str) -> None:
    try:
        tree = ast.parse(reference)
    except SyntaxError as exc:
        raise ProblemError(where, f"reference: does not parse (line {exc.lineno}): "
                           f"{exc.msg}") from None  # fmt: skip
    if not any(isinstance(n, ast.FunctionDef) and n.name == "run" for n in tree.body):
        raise ProblemError(where, "reference: expected a top-level function run")


def load_definition(file: Path) -> dict[str, Any]:
    """A Definition, checked as the format's own model checks it."""
    where = str(file)
    try:
        data = json.loads(file.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ProblemError(where, f"is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ProblemError(where, "expected a Definition object")
    _field(where, data, "name", str)
    _field(where, data, "op_type", str)
    axes = _field(where, data, "axes", dict)
    _check_axes(where, axes)
    for kind in ("inputs", "outputs"):
        _check_tensors(where, kind, _field(where, data, kind, dict), axes)
    if set(data["inputs"]) & set(data["outputs"]):
        raise ProblemError(where, "outputs: names must differ from the inputs'")
    _check_reference(where, _field(where, data, "reference", str))
    if data["op_type"] == "sampling":
        raise ProblemError(where, "op_type: sampling is checked by distribution, not by "
                           "value: not supported yet")  # fmt: skip
    return data


def _workload_lines(root: Path, file: Path, name: str) -> list[tuple[str, dict[str, Any]]]:
    """(where, workload) of every line naming definition `name`: in `workloads/` of the data
    set, or in `<name>.jsonl` beside the definition; where neither has one, the workloads of
    the set's `traces/` (an exported set), each uuid once."""
    found = _lines_in(_jsonl(root / "workloads") + _beside(file), name)
    if not found:
        found = _lines_in(_jsonl(root / "traces"), name)
    seen: set[str] = set()
    unique = []
    for where, workload in found:
        key = workload.get("uuid") if isinstance(workload, dict) else None
        if isinstance(key, str) and key in seen:
            continue
        if isinstance(key, str):
            seen.add(key)
        unique.append((where, workload))
    return unique


def _jsonl(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*.jsonl")) if folder.is_dir() else []


def _beside(file: Path) -> list[Path]:
    beside = file.with_suffix(".jsonl")
    return [beside] if beside.is_file() and "workloads" not in beside.parts else []


def _lines_in(files: list[Path], name: str) -> list[tuple[str, dict[str, Any]]]:
    found = []
    for jsonl in files:
        for number, line in enumerate(jsonl.read_text().splitlines(), start=1):
            if not line.strip():
                continue
            where = f"{jsonl}:{number}"
            try:
                item = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ProblemError(where, f"is not JSON: {exc}") from None
            if isinstance(item, dict) and "workload" in item:
                if item.get("definition") == name:
                    found.append((where, item["workload"]))
            elif jsonl.stem == name:
                found.append((where, item))
    return found


def _check_workload(where: str, workload: Any, definition: dict[str, Any]) -> dict[str, Any]:
    if not isinstance(workload, dict):
        raise ProblemError(where, "expected a Workload {uuid, axes, inputs}")
    _field(where, workload, "uuid", str)
    axes = workload.get("axes")
    inputs = workload.get("inputs", {})
    if not isinstance(axes, dict) or not isinstance(inputs, dict):
        raise ProblemError(where, "axes and inputs: expected objects")
    for axis, spec in definition["axes"].items():
        if spec["type"] == "var":
            value = axes.get(axis)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ProblemError(where, f"axes.{axis}: expected an integer >= 0 for the var "
                                   f"axis, got {value!r}")  # fmt: skip
    for name, source in inputs.items():
        if name not in definition["inputs"]:
            raise ProblemError(where, f"inputs.{name}: not an input of {definition['name']}")
        kind = source.get("type") if isinstance(source, dict) else None
        if kind not in ("random", "scalar", "safetensors"):
            raise ProblemError(where, f"inputs.{name}.type: expected random, scalar or "
                               f"safetensors, got {kind!r}")  # fmt: skip
        if kind == "scalar" and not isinstance(source.get("value"), int | float | bool):
            raise ProblemError(where, f"inputs.{name}.value: expected a number")
    return {"uuid": workload["uuid"], "axes": dict(axes), "inputs": dict(inputs)}


def _workloads(
    root: Path, file: Path, definition: dict[str, Any], limit: int
) -> tuple[list[dict[str, Any]], int]:
    """The board's workloads (random and scalar inputs only, at most `limit`), and how many
    were left out for their safetensors inputs."""
    checked = [_check_workload(where, w, definition)
               for where, w in _workload_lines(root, file, definition["name"])]  # fmt: skip
    usable = [w for w in checked
              if all(s["type"] != "safetensors" for s in w["inputs"].values())]  # fmt: skip
    if not checked and not any(a["type"] == "var" for a in definition["axes"].values()):
        usable = [{"uuid": f"{definition['name']}-const", "axes": {}, "inputs": {}}]
    if not usable:
        why = "their inputs are safetensors files" if checked else "none was found"
        raise ProblemError(str(file), f"workloads: no workload to run ({why}); expected "
                           f"workloads/**/{definition['name']}.jsonl with random or scalar "
                           "inputs")  # fmt: skip
    workloads, names = [], set()
    for workload in usable[:limit]:
        base = "_".join(f"{k}{v}" for k, v in workload["axes"].items()) or "const"
        name = segment(f"{base}_{workload['uuid'][:8]}", room=120)
        while name in names:
            name = segment(f"{name}_", room=120)
        names.add(name)
        workloads.append({"name": name, "params": workload})
    return workloads, len(checked) - len(usable)


def _quant(definition: dict[str, Any]) -> str:
    for tag in definition.get("tags") or []:
        if isinstance(tag, str) and tag.startswith("quantization:"):
            value = tag.split(":", 1)[1].strip()
            return _QUANT.get(value, segment(value, room=32))
    for spec in definition["inputs"].values():
        if spec["dtype"].startswith(("float", "bfloat")):
            return _QUANT.get(spec["dtype"], "fp32")
    return "int"


def _problem(root: Path, file: Path, prov: Provenance, limit: int) -> Problem:
    definition = load_definition(file)
    name = definition["name"]
    workloads, left_out = _workloads(root, file, definition, limit)
    quant = _quant(definition)
    shapes = {k: definition[k] for k in ("axes", "inputs", "outputs")}
    judge = {"format": "flashinfer", "entry": ENTRY, "workloads": workloads,
             "definition": {"name": name, **shapes}, "atol": TOLERANCE, "rtol": TOLERANCE,
             "dtype": quant if quant in _QUANT.values() else "fp32"}  # fmt: skip
    about = str(definition.get("description") or f"The {definition['op_type']} kernel {name}.")
    return Problem(
        format="flashinfer",
        problem_id=name,
        sub_class=segment(name),
        quant=quant,
        title=f"FlashInfer {name}"[:200],
        description=(
            f"{about.strip()}\n\nFlashInfer Trace definition {name} (op_type "
            f"{definition['op_type']}), imported from {prov.source}"
            f"{' at ' + prov.version[:12] if prov.version else ''}. A candidate provides "
            "`run(...)`: `src/main.py`, or the Solution JSON as `src/solution.json`."
        ),
        judge=judge,
        sources={"reference": definition["reference"]},
        reference_src={"main.py": definition["reference"]},
        provenance=prov,
        tags=["flashinfer", segment(str(definition["op_type"]), room=60), "imported"],
        extra={"definition": definition, "left_out_workloads": left_out},
    )


def read(path: Path, *, max_workloads: int = MAX_WORKLOADS) -> tuple[list[Problem], list[Skipped]]:
    """Every definition under `path` (a dataset, a definitions folder or one file), each with
    its workloads, and those skipped."""
    prov = provenance(path)
    root = _dataset_root(path)
    problems: list[Problem] = []
    skipped: list[Skipped] = []
    for file in _definition_files(path):
        try:
            problems.append(_problem(root, file, prov, max_workloads))
        except ProblemError as exc:
            skipped.append(Skipped.of(file.stem, exc))
    return problems, skipped
