"""GPU MODE reference-kernels: a problem is a folder with `task.yml` (the files a run is made
of, `tests` and `benchmarks` shapes), `reference.py` (`generate_input(**shape)`, `ref_kernel`,
`check_implementation`) and the task's own modules (`task.py`, the set's `utils.py`).

A solution is `submission.py` defining `custom_kernel(data)`; the judge serves the task's
modules (`task`, `utils`, `reference`) to it as the set's evaluator does. Each benchmark shape
is a workload; its public seed is combined with one drawn from the task's secret seed, as the
evaluator's secret seed is. Tolerances are those `check_implementation =
make_match_reference(ref_kernel, rtol=…, atol=…)` names (else `match_reference`'s defaults).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import yaml

from kz_problems.errors import ProblemError, Skipped
from kz_problems.model import Problem, Provenance, segment
from kz_problems.provenance import provenance

__all__ = ["ENTRY", "SOLUTION_FILE", "read"]

ENTRY = "submission:custom_kernel"
SOLUTION_FILE = "submission.py"
_SUBMISSION = "@SUBMISSION@"
_DEFAULT_TOLERANCE = {"rtol": 1e-05, "atol": 1e-08}  # the set's match_reference defaults
_MULTI_GPU_ARGS = {"world_size", "ranks", "num_ranks", "num_gpus"}
_DTYPES = {"float16": "fp16", "half": "fp16", "bfloat16": "bf16", "float32": "fp32",
           "float64": "fp64", "double": "fp64",
           "float": "fp32", "float8_e4m3fn": "fp8", "float8_e5m2": "fp8",
           "float8_e4m3fnuz": "fp8", "int8": "int8"}  # fmt: skip
_TORCH_DTYPE = re.compile(r"torch\.(\w+)")
_REFERENCE_SUBMISSION = '''"""The reference, as a GPU MODE submission."""

from reference import ref_kernel


def custom_kernel(data):
    return ref_kernel(data)
'''


def _tasks(path: Path) -> list[Path]:
    if path.is_file():
        path = path.parent
    found = sorted(p.parent for p in path.rglob("task.yml") if ".git" not in p.parts)
    if not found:
        raise ProblemError(str(path), "expected a reference-kernels checkout, a problems folder "
                           "or a task folder holding task.yml, found none")  # fmt: skip
    return found


def _problem_id(task: Path) -> str:
    parts = task.resolve().parts
    if "problems" in parts[:-1]:
        at = len(parts) - 1 - parts[::-1].index("problems")
        return "/".join(parts[at + 1 :])
    return f"{task.parent.name}/{task.name}"


def _load_task(task: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load((task / "task.yml").read_text())
    except yaml.YAMLError as exc:
        raise ProblemError(f"{task}/task.yml", f"is not YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ProblemError(f"{task}/task.yml", "expected a mapping at the top")
    return data


def _modules(task: Path, data: dict[str, Any]) -> dict[str, str]:
    """The task's own modules, by name, from its `files` list (the submission and the
    evaluator left out)."""
    files = data.get("files")
    if not isinstance(files, list) or not files:
        raise ProblemError(f"{task}/task.yml", "files: expected a list of {name, source}")
    main = str((data.get("config") or {}).get("main", "eval.py"))
    modules: dict[str, str] = {}
    for number, item in enumerate(files):
        if not isinstance(item, dict) or "name" not in item or "source" not in item:
            raise ProblemError(f"{task}/task.yml", f"files[{number}]: expected {{name, source}}")
        name, source = str(item["name"]), str(item["source"])
        if source == _SUBMISSION or name == main or not name.endswith(".py"):
            continue
        file = (task / source).resolve()
        if not file.is_file():
            raise ProblemError(f"{task}/task.yml", f"files[{number}].source: {source} not found")
        modules[name.removesuffix(".py")] = file.read_text()
    if "reference" not in modules:
        raise ProblemError(f"{task}/task.yml", "files: expected reference.py among them")
    return modules


def _defaults(utils: str | None) -> dict[str, float]:
    """rtol and atol defaults of the set's `match_reference`, where utils.py defines it."""
    found = dict(_DEFAULT_TOLERANCE)
    try:
        tree = ast.parse(utils or "")
    except SyntaxError:
        return found
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "match_reference":
            args = node.args.args[len(node.args.args) - len(node.args.defaults) :]
            for arg, default in zip(args, node.args.defaults, strict=True):
                value = default.value if isinstance(default, ast.Constant) else None
                if arg.arg in found and isinstance(value, int | float):
                    found[arg.arg] = float(value)
    return found


def _number(where: str, keyword: ast.keyword) -> float:
    try:
        value = ast.literal_eval(keyword.value)
    except ValueError:
        value = None
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise ProblemError(where, f"check_implementation: {keyword.arg} must be a number")
    return float(value)


def _tolerances(task: Path, reference: str, utils: str | None) -> dict[str, float]:
    where = f"{task}/reference.py"
    try:
        tree = ast.parse(reference)
    except SyntaxError as exc:
        raise ProblemError(f"{where}:{exc.lineno}", f"does not parse: {exc.msg}") from None
    names = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    for name in ("generate_input", "ref_kernel"):
        if name not in names:
            raise ProblemError(where, f"{name}: expected a top-level function {name}")
    if "check_implementation" in names:
        raise ProblemError(where, "check_implementation is the task's own function: only "
                           "make_match_reference(ref_kernel, rtol=..., atol=...) is supported "
                           "yet")  # fmt: skip
    found = _defaults(utils)
    for node in tree.body:
        if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)):
            continue
        if not any(isinstance(t, ast.Name) and t.id == "check_implementation"
                   for t in node.targets):  # fmt: skip
            continue
        for keyword in node.value.keywords:
            if keyword.arg in found:
                found[keyword.arg] = _number(where, keyword)
        return found
    raise ProblemError(where, "check_implementation: expected make_match_reference(ref_kernel, "
                       "...)")  # fmt: skip


def _workloads(task: Path, data: dict[str, Any]) -> list[dict[str, Any]]:
    shapes = data.get("benchmarks")
    if not isinstance(shapes, list) or not shapes:
        raise ProblemError(f"{task}/task.yml", "benchmarks: expected a list of shapes")
    workloads: list[dict[str, Any]] = []
    names: set[str] = set()
    for number, shape in enumerate(shapes[:100]):
        if not isinstance(shape, dict):
            raise ProblemError(f"{task}/task.yml", f"benchmarks[{number}]: expected a mapping")
        if _MULTI_GPU_ARGS & set(shape):
            raise ProblemError(f"{task}/task.yml", f"benchmarks[{number}]: a multi-GPU shape "
                               "(world_size): not supported yet")  # fmt: skip
        base = segment("_".join(f"{k}{v}" for k, v in shape.items() if k != "seed") or "shape",
                       room=120)  # fmt: skip
        name, extra = base, 2
        while name in names:
            name, extra = f"{base}_{extra}", extra + 1
        names.add(name)
        workloads.append({"name": name, "params": dict(shape)})
    return workloads


def _quant(reference: str) -> str:
    """The board's quant: the one dtype generate_input names, else `mixed`."""
    tree = ast.parse(reference)
    body = next(n for n in tree.body if isinstance(n, ast.FunctionDef)
                and n.name == "generate_input")  # fmt: skip
    found = {_DTYPES[m] for m in _TORCH_DTYPE.findall(ast.unparse(body)) if m in _DTYPES}
    return found.pop() if len(found) == 1 else "mixed"


def _problem(task: Path, prov: Provenance) -> Problem:
    data = _load_task(task)
    if str(data.get("lang", "py")) != "py":
        raise ProblemError(f"{task}/task.yml", f"lang: {data.get('lang')!r} submissions are not "
                           "supported yet (expected py)")  # fmt: skip
    if data.get("multi_gpu"):
        raise ProblemError(f"{task}/task.yml", "multi_gpu: multi-GPU tasks are not supported yet")
    modules = _modules(task, data)
    tolerances = _tolerances(task, modules["reference"], modules.get("utils"))
    problem_id = _problem_id(task)
    quant = _quant(modules["reference"])
    judge = {"format": "gpumode", "entry": ENTRY, "workloads": _workloads(task, data),
             **tolerances, "dtype": quant if quant != "mixed" else "fp32"}  # fmt: skip
    about = str(data.get("description") or "A GPU MODE task.").strip()
    return Problem(
        format="gpumode",
        problem_id=problem_id,
        sub_class=segment(problem_id.replace("/", ".")),
        quant=quant,
        title=f"GPU MODE {problem_id}"[:200],
        description=(
            f"{about}\n\nGPU MODE task {problem_id}, imported from {prov.source}"
            f"{' at ' + prov.version[:12] if prov.version else ''}. A candidate is "
            f"`src/{SOLUTION_FILE}` defining `custom_kernel(data)`; the task's modules "
            f"({', '.join(sorted(modules))}) are served to it."
        ),
        judge=judge,
        sources=modules,
        reference_src={SOLUTION_FILE: _REFERENCE_SUBMISSION},
        provenance=prov,
        tags=["gpumode", "imported"],
        extra={"tests": list(data.get("tests") or [])},
    )


def read(path: Path) -> tuple[list[Problem], list[Skipped]]:
    """Every task under `path` (a checkout, a problems folder or a task), and those skipped."""
    prov = provenance(path)
    problems: list[Problem] = []
    skipped: list[Skipped] = []
    for task in _tasks(path):
        try:
            problems.append(_problem(task, prov))
        except ProblemError as exc:
            skipped.append(Skipped.of(_problem_id(task), exc))
    return problems, skipped
