"""A problem as a board: the reference kernel's package, whose judge every kernel of the board
carries and whose `src/` is the board's pinned reference.

The board is `<arch>/<Set>/<problem>[.vN]/<quant>`, its reference kernel `…/reference`; version
N > 1 is a changed problem's new board, never a new judge on an old one. `benchmark.py` calls
`kz_harness.problemsets.problem_benchmark` on the problem's description and its own sources,
verbatim; desc.yaml carries the workloads, the metric and, under `x-problem`, the provenance:
the set, the problem id, the source and commit, the problem's digest and the licence.
"""

from __future__ import annotations

import copy
import io
import json
import pprint
from collections.abc import Mapping
from typing import Any

import yaml

from kz_events.ids import KernelId
from kz_package import (
    PACKAGE_DIR,
    Package,
    load_yaml,
    pack_files,
    read_package,
    validate_package_files,
)
from kz_problems.model import Problem

__all__ = [
    "FORMAT_NAMES",
    "REFERENCE_NAME",
    "BoardPackage",
    "board_package",
    "candidate_files",
    "kernel_id",
]

REFERENCE_NAME = "reference"
FORMAT_NAMES = {"kernelbench": "KernelBench", "gpumode": "GPU MODE",
                "flashinfer": "FlashInfer Trace"}  # fmt: skip
_CONVENTIONS = {
    "kernelbench": "`src/model_new.py` defining `ModelNew`, built from `get_init_inputs()`",
    "gpumode": "`src/submission.py` defining `custom_kernel(data)`",
    "flashinfer": "`run(...)`: `src/main.py`, or the Solution JSON as `src/solution.json`",
}
_METRIC = {"name": "latency", "unit": "us", "better": "lower"}


def kernel_id(problem: Problem, arch: str, version: int = 1) -> KernelId:
    """The reference kernel of `problem`'s board at `version` on `arch`."""
    sub_class = problem.sub_class if version == 1 else f"{problem.sub_class}.v{version}"
    return KernelId(arch, problem.op_class, sub_class, problem.quant, REFERENCE_NAME)


def _benchmark(problem: Problem, kid: KernelId, device: str) -> str:
    judge = {**problem.judge, "device": device}
    literal = pprint.pformat(judge, width=96, sort_dicts=False)
    sources = "".join(
        f"    {name!r}: {text!r},\n" for name, text in sorted(problem.sources.items())
    )
    return f'''"""The judge of the board {kid.group}: {FORMAT_NAMES[problem.format]} problem
{problem.problem_id}, written by `kz problems import`; every kernel on the board is measured by it.

kz_harness.problemsets draws the inputs the set's way from the task's secret seed, runs the set's
own reference (SOURCES, the problem's files verbatim) on pristine copies and checks the outputs
with the set's tolerances. A candidate provides {_CONVENTIONS[problem.format]}.
"""

from kz_harness.problemsets import problem_benchmark

PROBLEM = {literal}

SOURCES = {{
{sources}}}

BENCHMARK = problem_benchmark(PROBLEM, SOURCES)

if __name__ == "__main__":
    raise SystemExit(BENCHMARK.main())
'''


def _build(kid: KernelId, device: str) -> str:
    cuda = (
        "\n    if not torch.cuda.is_available():\n"
        '        print("no CUDA device visible: this board runs on a GPU", file=sys.stderr)\n'
        "        return 1"
        if device == "cuda"
        else ""
    )
    return f'''"""Prepares the environment for the board {kid.group}: an imported problem
set's board needs numpy and torch{" and a CUDA device" if device == "cuda" else ""}.

Exit 0 when ready; a non-zero exit fails the task with reason build_failed.
"""

from __future__ import annotations

import sys


def main() -> int:
    try:
        import numpy
        import torch
    except ImportError as exc:
        print(f"missing dependency: {{exc.name}} (install the torch extra)", file=sys.stderr)
        return 1{cuda}
    print(f"ready: torch {{torch.__version__}}, numpy {{numpy.__version__}}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
'''


def _desc(problem: Problem, kid: KernelId, version: int) -> dict[str, Any]:
    prov = problem.provenance
    licence = prov.licence
    description = problem.description
    tags = list(problem.tags)
    if licence is not None and licence.conditions:
        description += f"\n\nLicence: {licence.conditions}."
        tags.append("licence-conditions")
    x_problem: dict[str, Any] = {
        "format": problem.format,
        "id": problem.problem_id,
        "board_version": version,
        "digest": problem.digest,
        "source": prov.source,
        "commit": prov.version,
        "entry": problem.judge["entry"],
        **copy.deepcopy(problem.extra),
    }
    if licence is not None:
        x_problem["licence"] = licence.to_dict()
    desc: dict[str, Any] = {
        "schema_version": 1,
        "kernel_id": str(kid),
        "title": f"{problem.title} (reference)"[:200],
        "description": description[:20000],
        "authors": [f"{FORMAT_NAMES[problem.format]} contributors ({prov.source})"[:200]],
        "language": "python",
        "metric": dict(_METRIC),
        "workloads": copy.deepcopy(problem.workloads),
        "reference": "the set's own reference: this kernel's src/, and SOURCES in benchmark.py",
        "tags": tags[:50],
    }
    if licence is not None:
        desc["license"] = licence.spdx[:128]
    desc["x-problem"] = x_problem
    return desc


def _yaml(data: dict[str, Any]) -> bytes:
    # A JSON round trip first: no object is shared, so the dump has no anchors (refused).
    plain = json.loads(json.dumps(data))
    return yaml.safe_dump(plain, sort_keys=False, allow_unicode=True, width=100).encode()


class BoardPackage:
    """The reference kernel's package of a problem's board: its files, canonical tarball,
    sha256, and the package as the platform's checks read it."""

    def __init__(self, problem: Problem, arch: str, version: int = 1) -> None:
        self.problem = problem
        self.version = version
        self.kernel_id = kernel_id(problem, arch, version)
        device = "cpu" if arch == "cpu" else "cuda"
        kid = self.kernel_id
        files = {
            f"{PACKAGE_DIR}/desc.yaml": _yaml(_desc(problem, kid, version)),
            f"{PACKAGE_DIR}/bench_result.yaml": _yaml({"schema_version": 1, "kernel_id": str(kid)}),
            f"{PACKAGE_DIR}/benchmark.py": _benchmark(problem, kid, device).encode(),
            f"{PACKAGE_DIR}/build_test_env.py": _build(kid, device).encode(),
            **{f"src/{path}": text.encode() for path, text in problem.reference_src.items()},
        }
        self.files = files
        buffer = io.BytesIO()
        self.digest = pack_files({path: (0o644, data) for path, data in files.items()}, buffer)
        self.tarball = buffer.getvalue()
        self.package: Package = validate_package_files(
            read_package(self.tarball), expected_kernel_id=kid
        )


def board_package(problem: Problem, arch: str, version: int = 1) -> BoardPackage:
    """The checked package of `problem`'s board at `version`; raises PackageError when the
    package the problem makes fails the platform's checks (its limits, say)."""
    return BoardPackage(problem, arch, version)


def candidate_files(board: BoardPackage, name: str, src: Mapping[str, bytes]) -> dict[str, bytes]:
    """A new kernel `name` for `board`'s board: the board's judge files byte for byte, its
    desc.yaml under the new id, an empty scoreboard, and `src` (path under `src/` → bytes) in
    the set's own convention, the reference's `src/` when `src` is empty."""
    kid = KernelId(*board.kernel_id.parts[:4], name)
    desc = load_yaml(board.files[f"{PACKAGE_DIR}/desc.yaml"], path="desc.yaml")
    desc["kernel_id"] = str(kid)
    desc["title"] = f"{board.problem.title}: {name}"[:200]
    files = {
        path: data
        for path, data in board.files.items()
        if path.startswith(PACKAGE_DIR) and not path.endswith(("desc.yaml", "bench_result.yaml"))
    }
    files[f"{PACKAGE_DIR}/desc.yaml"] = _yaml(desc)
    files[f"{PACKAGE_DIR}/bench_result.yaml"] = _yaml({"schema_version": 1, "kernel_id": str(kid)})
    given = dict(src) or {p.removeprefix("src/"): d for p, d in board.files.items()
                          if p.startswith("src/")}  # fmt: skip
    files.update({f"src/{path}": data for path, data in given.items()})
    return files
