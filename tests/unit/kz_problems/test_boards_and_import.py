"""A problem as a board and its import through the log (on the in-memory log, which the log
contract suite holds to the real one): one reference kernel per board, re-imports that change
nothing, and a changed problem on a new board version, never on the old judge."""

from __future__ import annotations

import dataclasses
import io
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from kz_events.events import KernelImported
from kz_events.memlog import MemoryLog
from kz_events.subjects import PACKAGES_BUCKET
from kz_package import load_yaml, pack_files, read_package, validate_package_files
from kz_package.pyparse import parse_python
from kz_problems import (
    Problem,
    board_package,
    build_boards,
    candidate_files,
    import_boards,
    read_set,
)
from kz_problems.model import Provenance, segment

pytestmark = pytest.mark.unit

Copy = Callable[[str], Path]
NOW = datetime(2026, 6, 1, tzinfo=UTC)


def _problems(example_set: Copy, fmt: str) -> list[Problem]:
    return read_set(fmt, example_set(fmt))[0]


async def _import(log: MemoryLog, problems: list[Problem], arch: str = "cpu") -> list[str]:
    outcomes = await import_boards(log, build_boards(problems, arch), arch=arch,
                                   submitter="import", clock=lambda: NOW)  # fmt: skip
    return [f"{o.state} {o.kernel_id}" for o in outcomes]


async def _imports(log: MemoryLog) -> list[KernelImported]:
    return [e async for _, e in log.replay(1) if isinstance(e, KernelImported)]


def test_a_board_package_passes_the_platforms_checks(example_set: Copy) -> None:
    """The reference kernel's package is valid, its judge parses, its desc says where the
    problem came from, and a licence with conditions is carried and said."""
    problem = _problems(example_set, "gpumode")[0]
    board = board_package(problem, "sm90")
    assert str(board.kernel_id) == "sm90/GPUMODE/kz_demo.matmul_py/fp32/reference"
    desc = load_yaml(board.files[".kernel_package/desc.yaml"], path="desc.yaml")
    x = desc["x-problem"]
    assert (x["format"], x["id"], x["digest"]) == ("gpumode", "kz_demo/matmul_py", problem.digest)
    assert x["licence"]["conditions"] and "publish" in x["licence"]["text"]
    assert desc["license"].startswith("LicenseRef-") and "licence-conditions" in desc["tags"]
    assert "Licence: Example Reciprocal Benchmark License" in desc["description"]
    benchmark = board.files[".kernel_package/benchmark.py"].decode()
    parse_python(benchmark)
    assert "'device': 'cuda'" in benchmark and "problem_benchmark(PROBLEM, SOURCES)" in benchmark
    assert b"torch.cuda.is_available()" in board.files[".kernel_package/build_test_env.py"]
    assert board.package.kernel_id == board.kernel_id


def test_the_version_goes_into_the_board_and_provenance_stays_out_of_the_digest(
    example_set: Copy,
) -> None:
    problem = _problems(example_set, "kernelbench")[0]
    later = dataclasses.replace(problem, provenance=Provenance("elsewhere", "f" * 40))
    assert later.digest == problem.digest
    assert str(board_package(problem, "cpu", 3).kernel_id) == (
        "cpu/KernelBench/L1_1_Row_Softmax.v3/fp32/reference"
    )
    assert segment("a/b c" * 30) == segment("a/b c" * 30) and len(segment("x" * 300)) <= 58


def test_a_candidate_carries_the_boards_judge_byte_for_byte(example_set: Copy) -> None:
    board = board_package(_problems(example_set, "kernelbench")[2], "cpu")
    files = candidate_files(board, "fused", {"model_new.py": b"class ModelNew: ...\n"})
    for name in ("benchmark.py", "build_test_env.py"):
        assert files[f".kernel_package/{name}"] == board.files[f".kernel_package/{name}"]
    tarball, _ = _tarball(files)
    package = validate_package_files(read_package(tarball))
    assert str(package.kernel_id) == "cpu/KernelBench/L2_1_Linear_GELU_Scale/fp32/fused"
    assert files["src/model_new.py"] == b"class ModelNew: ...\n"
    again = candidate_files(board, "reference", {})
    assert again["src/model_new.py"] == board.files["src/model_new.py"]


def _tarball(files: dict[str, bytes]) -> tuple[bytes, str]:
    out = io.BytesIO()
    digest = pack_files({p: (0o644, d) for p, d in files.items()}, out)
    return out.getvalue(), digest


async def test_import_then_again_changes_nothing(example_set: Copy) -> None:
    """One `imported` per board with its package stored; the second import appends nothing."""
    log = MemoryLog()
    problems = _problems(example_set, "flashinfer")
    first = await _import(log, problems)
    assert first == [
        "imported cpu/FlashInfer/gemm_n1024_k1024/fp32/reference",
        "imported cpu/FlashInfer/add_rmsnorm_h2048/fp32/reference",
        "imported cpu/FlashInfer/rmsnorm_h4096/bf16/reference",
    ]
    events = await _imports(log)
    stored = read_package(await log.get_object_bytes(PACKAGES_BUCKET, events[0].package_digest))
    assert stored.data("src/main.py") == problems[0].reference_src["main.py"].encode()
    assert events[0].summary is not None and events[0].summary.language == "python"
    assert await _import(log, problems) == [line.replace("imported", "unchanged") for line in first]
    assert len(await _imports(log)) == 3


async def test_a_changed_problem_becomes_the_next_board_version(example_set: Copy) -> None:
    """The changed problem gets `.v2`; the first board keeps its judge; importing the change
    again is unchanged, and the first version from a later commit is unchanged too."""
    log = MemoryLog()
    root = example_set("kernelbench")
    await _import(log, read_set("kernelbench", root)[0])
    file = root / "KernelBench" / "level1" / "1_Row_Softmax.py"
    file.write_text(file.read_text().replace("batch_size = 512", "batch_size = 640"))
    changed = read_set("kernelbench", file)[0]
    assert await _import(log, changed) == [
        "imported cpu/KernelBench/L1_1_Row_Softmax.v2/fp32/reference"
    ]
    assert await _import(log, changed) == [
        "unchanged cpu/KernelBench/L1_1_Row_Softmax.v2/fp32/reference"
    ]
    file.write_text(file.read_text().replace("batch_size = 640", "batch_size = 512"))
    first = read_set("kernelbench", file)[0]
    moved = [dataclasses.replace(p, provenance=Provenance("a-fork", "e" * 40)) for p in first]
    assert await _import(log, moved) == [
        "unchanged cpu/KernelBench/L1_1_Row_Softmax/fp32/reference"
    ]


async def test_a_kernel_id_held_by_another_package_is_left_alone(example_set: Copy) -> None:
    """A board whose reference kernel was imported without this problem's digest is not
    touched: the problem takes the next version."""
    log = MemoryLog()
    problem = _problems(example_set, "kernelbench")[1]
    board = board_package(problem, "cpu")
    other = dict(board.files)
    desc = other[".kernel_package/desc.yaml"].replace(b"x-problem:", b"x-elsewhere:")
    other[".kernel_package/desc.yaml"] = desc
    tarball, digest = _tarball(other)
    await log.put_object(PACKAGES_BUCKET, digest, tarball)
    await log.append(KernelImported(event_id=str(uuid.uuid4()), occurred_at=NOW, actor="x",
                                    kernel_id=str(board.kernel_id), package_digest=digest,
                                    submitter_id="x"))  # fmt: skip
    assert await _import(log, [problem]) == [
        "imported cpu/KernelBench/L1_2_Square_Matmul.v2/fp32/reference"
    ]
