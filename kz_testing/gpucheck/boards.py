"""The sm90 example boards and their variants, found at run time: each package under
examples/kernels/sm90, and each folder of examples/variants whose `src/` holds the module the
board's judge calls (`entry="module:function"`) and imports torch or triton (a GPU source).
A variant named wrong (bad, broken, incorrect, buggy) is expected to be rejected, one named
slow is left out, any other is a faster one."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

from kz_package.archive import PACKAGE_DIR

__all__ = [
    "EXAMPLES",
    "VARIANTS",
    "Board",
    "entry_module",
    "find_boards",
    "variant_kind",
]

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "kernels" / "sm90"
VARIANTS = REPO / "examples" / "variants"
_WRONG = ("wrong", "bad", "broken", "incorrect", "buggy")
_GPU_IMPORTS = ("import torch", "import triton", "from torch", "from triton")


@dataclass(frozen=True)
class Board:
    """An example package (its kernel id and folder) and the variants made for it."""

    kernel_id: str
    package: Path
    entry: str
    faster: list[Path] = field(default_factory=list)
    wrong: list[Path] = field(default_factory=list)


def entry_module(benchmark: Path) -> str | None:
    """The module of `Benchmark(entry="module:function")` in a judge's source, read by parsing
    (nothing is run)."""
    tree = ast.parse(benchmark.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            for keyword in node.keywords:
                value = keyword.value
                if (
                    keyword.arg == "entry"
                    and isinstance(value, ast.Constant)
                    and isinstance(value.value, str)
                ):
                    return value.value.partition(":")[0]
    return None


def variant_kind(name: str) -> str | None:
    """ "wrong", "faster" or None (a slow one) from a variant folder's name."""
    lowered = name.lower()
    if any(word in lowered for word in _WRONG):
        return "wrong"
    return None if "slow" in lowered else "faster"


def _gpu_source(module: Path) -> bool:
    text = module.read_text()
    return any(marker in text for marker in _GPU_IMPORTS)


def _kernel_id(package: Path) -> str:
    for line in (package / PACKAGE_DIR / "desc.yaml").read_text().splitlines():
        if line.startswith("kernel_id:"):
            return line.split(":", 1)[1].strip().strip("'\"")
    raise ValueError(f"{package}: desc.yaml names no kernel_id")


def find_boards(examples: Path = EXAMPLES, variants: Path = VARIANTS) -> list[Board]:
    """Every example package below `examples`, with the GPU variants whose src/ has its
    module."""
    boards = []
    sources = sorted(p for p in variants.rglob("src") if p.is_dir()) if variants.is_dir() else []
    for desc in sorted(examples.rglob(f"{PACKAGE_DIR}/desc.yaml")):
        package = desc.parent.parent
        module = entry_module(package / PACKAGE_DIR / "benchmark.py")
        if module is None:
            continue
        board = Board(_kernel_id(package), package, module)
        for src in sources:
            source = src / f"{module.replace('.', '/')}.py"
            if not source.is_file() or not _gpu_source(source):
                continue
            kind = variant_kind(src.parent.relative_to(variants).as_posix())
            if kind == "wrong":
                board.wrong.append(src.parent)
            elif kind == "faster":
                board.faster.append(src.parent)
        boards.append(board)
    return boards
