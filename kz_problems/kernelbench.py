"""KernelBench: a problem is one Python file defining `Model(nn.Module)`, `get_inputs()` and
`get_init_inputs()`, found as `KernelBench/level<N>/<number>_<Name>.py` in a checkout.

A solution is a file defining `ModelNew`, the candidate's `src/model_new.py`; the judge builds
both models after `torch.manual_seed(INIT_SEED)` (KernelBench's own default seed, public), so
a `ModelNew` that makes the same layers gets the reference's weights. Inputs come from
`get_inputs()` after `torch.manual_seed` of a number drawn from the task's secret seed; outputs
are compared with KernelBench's fp32 tolerance. The files are read, never run, here.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

from kz_problems.errors import ProblemError, Skipped
from kz_problems.model import Problem, Provenance, segment
from kz_problems.provenance import provenance

__all__ = ["ENTRY", "INIT_SEED", "SOLUTION_FILE", "TOLERANCE", "read"]

ENTRY = "model_new:ModelNew"
SOLUTION_FILE = "model_new.py"
INIT_SEED = 42
TOLERANCE = 1e-4  # KernelBench's get_tolerance_for_precision("fp32"), as atol and rtol
_LEVEL = re.compile(r"level(\d+)")
_REQUIRED = {"Model": ast.ClassDef, "get_inputs": ast.FunctionDef,
             "get_init_inputs": ast.FunctionDef}  # fmt: skip
_HUB = re.compile(r"\bfrom_pretrained\b|^\s*(from|import)\s+transformers\b", re.MULTILINE)
_MAX_PARAMS = 64
_AS_SOLUTION = "\n\n\n# The reference in KernelBench's solution convention.\nModelNew = Model\n"


def _problem_files(path: Path) -> list[Path]:
    if path.is_file():
        if path.suffix != ".py":
            raise ProblemError(str(path), "expected a KernelBench problem file (.py)")
        return [path]
    found = sorted(
        p for p in path.rglob("*.py")
        if _LEVEL.fullmatch(p.parent.name) and ".git" not in p.parts
    )  # fmt: skip
    if not found:
        found = sorted(p for p in path.glob("*.py") if not p.name.startswith("_"))
    if not found:
        raise ProblemError(
            str(path),
            "expected a KernelBench checkout (KernelBench/level<N>/*.py), a level folder or a "
            "problem file, found no problem",
        )
    return found


def _problem_id(file: Path) -> tuple[str, int | None]:
    level = _LEVEL.fullmatch(file.parent.name)
    if level is None:
        return file.stem, None
    return f"{file.parent.name}/{file.stem}", int(level.group(1))


def _check(file: Path, source: str, level: int | None) -> ast.Module:
    try:
        tree = ast.parse(source, filename=str(file))
    except SyntaxError as exc:
        raise ProblemError(f"{file}:{exc.lineno}", f"does not parse: {exc.msg}") from None
    defined = {node.name: type(node) for node in tree.body
               if isinstance(node, ast.ClassDef | ast.FunctionDef)}  # fmt: skip
    for name, kind in _REQUIRED.items():
        if defined.get(name) is not kind:
            what = "class" if kind is ast.ClassDef else "function"
            raise ProblemError(str(file), f"{name}: expected a top-level {what} {name}")
    if level == 4 or _HUB.search(source):
        raise ProblemError(
            str(file),
            "loads a model from the Hugging Face hub (level 4, from_pretrained): runners have "
            "no network to fetch weights, not supported yet",
        )
    return tree


def _constants(tree: ast.Module) -> dict[str, Any]:
    """The module's literal settings (batch_size = 16, ...): the workload's parameters."""
    found: dict[str, Any] = {}
    for node in tree.body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
            continue
        target = node.targets[0]
        if not isinstance(target, ast.Name):
            continue
        try:
            value = ast.literal_eval(node.value)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
        if isinstance(value, bool | int | float | str) and len(found) < _MAX_PARAMS:
            found[target.id] = value
    return found


def _description(tree: ast.Module, problem_id: str, prov: Provenance) -> str:
    model = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model")
    doc = ast.get_docstring(model) or "A PyTorch model."
    return (
        f"{doc.strip()}\n\nKernelBench problem {problem_id}, imported from {prov.source}"
        f"{' at ' + prov.version[:12] if prov.version else ''}. A candidate is a file "
        f"`src/{SOLUTION_FILE}` defining `ModelNew`, built like `Model` from "
        f"`get_init_inputs()` after `torch.manual_seed({INIT_SEED})`."
    )


def _problem(file: Path, prov: Provenance) -> Problem:
    source = file.read_text()
    problem_id, level = _problem_id(file)
    tree = _check(file, source, level)
    name = file.stem.split("_", 1)[-1].replace("_", " ").strip() or file.stem
    workloads = [{"name": "default", "params": _constants(tree)}]
    judge = {
        "format": "kernelbench",
        "entry": ENTRY,
        "workloads": workloads,
        "init_seed": INIT_SEED,
        "atol": TOLERANCE,
        "rtol": TOLERANCE,
        "dtype": "fp32",
    }
    level_text = f"level {level}" if level is not None else "custom"
    return Problem(
        format="kernelbench",
        problem_id=problem_id,
        sub_class=segment(f"L{level}_{file.stem}" if level is not None else file.stem),
        quant="fp32",
        title=f"KernelBench {level_text}, {file.stem.split('_', 1)[0]}: {name}"[:200],
        description=_description(tree, problem_id, prov),
        judge=judge,
        sources={"problem": source},
        reference_src={SOLUTION_FILE: source.rstrip() + _AS_SOLUTION},
        provenance=prov,
        tags=["kernelbench", level_text.replace(" ", ""), "imported"],
        extra={"file": file.name},
    )


def read(path: Path) -> tuple[list[Problem], list[Skipped]]:
    """Every problem under `path` (a checkout, a level folder or one file), and those skipped."""
    prov = provenance(path)
    problems: list[Problem] = []
    skipped: list[Skipped] = []
    for file in _problem_files(path):
        try:
            problems.append(_problem(file, prov))
        except ProblemError as exc:
            skipped.append(Skipped.of(_problem_id(file)[0], exc))
    return problems, skipped
