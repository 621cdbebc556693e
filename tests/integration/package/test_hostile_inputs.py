"""Hostile and broken submissions: each is refused with its exact code and message, leaving
nothing on disk."""

from __future__ import annotations

import gzip
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from package_builders import (
    DESC,
    KERNEL_ID,
    Entry,
    billion_laughs,
    package_targz,
    tar_bytes,
    targz,
    valid_files,
    with_file,
    without_file,
)

from kz_events.ids import KernelId
from kz_package import Limits, PackageError, unpack_tarball, validate_tarball

pytestmark = pytest.mark.integration

DESC_PATH = ".kernel_package/desc.yaml"


@dataclass(frozen=True)
class Case:
    id: str
    build: Callable[[], bytes]
    code: str
    message: str  # exact, or a regex when it starts with "re:"
    limits: Limits = field(default_factory=Limits)
    expected_id: str | None = KERNEL_ID


def _desc(replace: str, by: str) -> Callable[[], bytes]:
    assert replace in DESC
    return lambda: with_file(DESC_PATH, DESC.replace(replace, by))


def _nested(depth: int) -> str:
    return DESC + "x-deep: " + "[" * depth + "]" * depth + "\n"


CASES = [
    Case(
        "not-gzip-zip",
        lambda: b"PK\x03\x04rest",
        "invalid_package",
        "invalid package: (archive): format: package must be a gzip tarball (.tar.gz), "
        "got data starting with b'PK'",
    ),
    Case(
        "not-gzip-empty",
        lambda: b"",
        "invalid_package",
        "invalid package: (archive): format: package must be a gzip tarball (.tar.gz), "
        "got data starting with b''",
    ),
    Case(
        "not-gzip-plain-tar",
        lambda: tar_bytes([Entry("a", data=b"x")]),
        "invalid_package",
        "invalid package: (archive): format: package must be a gzip tarball (.tar.gz), "
        "got data starting with b'a\\x00'",
    ),
    Case(
        "truncated-gzip",
        lambda: package_targz()[:200],
        "invalid_package",
        "re:invalid package: \\(archive\\): format: package must be a valid gzip tarball, "
        "got a corrupt or truncated one \\(.+\\)",
    ),
    Case(
        "gzip-of-garbage",
        lambda: gzip.compress(b"\x01" * 2000),
        "invalid_package",
        "re:invalid package: \\(archive\\): format: package must be a valid gzip tarball, "
        "got a corrupt or truncated one \\(.+\\)",
    ),
    Case(
        "empty-archive",
        lambda: targz([]),
        "invalid_package",
        "invalid package: (archive): package archive is empty",
    ),
    Case(
        "absolute-path",
        lambda: package_targz(extra=[Entry("/etc/cron.d/x", data=b"x")]),
        "unsafe_archive",
        "unsafe archive: /etc/cron.d/x: name: entry paths must be relative, got an absolute path",
    ),
    Case(
        "dotdot",
        lambda: package_targz(extra=[Entry("../escape.py", data=b"x")]),
        "unsafe_archive",
        "unsafe archive: ../escape.py: name: entry paths must not contain '..'",
    ),
    Case(
        "dotdot-inside",
        lambda: package_targz(extra=[Entry("src/../../up", data=b"x")]),
        "unsafe_archive",
        "unsafe archive: src/../../up: name: entry paths must not contain '..'",
    ),
    Case(
        "backslash-path",
        lambda: package_targz(extra=[Entry("src\\..\\x", data=b"x")]),
        "unsafe_archive",
        "unsafe archive: src\\..\\x: name: entry paths must be relative, got an absolute path",
    ),
    Case(
        "drive-letter",
        lambda: package_targz(extra=[Entry("C:x", data=b"x")]),
        "unsafe_archive",
        "unsafe archive: C:x: name: entry paths must be relative, got an absolute path",
    ),
    Case(
        "symlink",
        lambda: package_targz(extra=[Entry("src/l", "symlink", target="/etc")]),
        "unsafe_archive",
        "unsafe archive: src/l: type: links of any kind are not allowed, "
        "got a symbolic link to '/etc'",
    ),
    Case(
        "hardlink",
        lambda: package_targz(extra=[Entry("src/h", "hardlink", target="src/kernel.py")]),
        "unsafe_archive",
        "unsafe archive: src/h: type: links of any kind are not allowed, "
        "got a hard link to 'src/kernel.py'",
    ),
    Case(
        "char-device",
        lambda: package_targz(extra=[Entry("src/tty", "chr")]),
        "unsafe_archive",
        "unsafe archive: src/tty: type: devices and FIFOs are not allowed, got a device",
    ),
    Case(
        "block-device",
        lambda: package_targz(extra=[Entry("src/sda", "blk")]),
        "unsafe_archive",
        "unsafe archive: src/sda: type: devices and FIFOs are not allowed, got a device",
    ),
    Case(
        "fifo",
        lambda: package_targz(extra=[Entry("src/pipe", "fifo")]),
        "unsafe_archive",
        "unsafe archive: src/pipe: type: devices and FIFOs are not allowed, got a FIFO",
    ),
    Case(
        "duplicate-entry",
        lambda: package_targz(extra=[Entry("src/kernel.py", data=b"evil = 1\n")]),
        "unsafe_archive",
        "unsafe archive: src/kernel.py: name: duplicate entry in archive",
    ),
    Case(
        "file-over-dir",
        lambda: package_targz(extra=[Entry("src/kernel.py/inner", data=b"x")]),
        "unsafe_archive",
        "unsafe archive: src/kernel.py/inner: name: entry collides with another entry's path",
    ),
    Case(
        "too-many-entries",
        lambda: package_targz(extra=[Entry(f"src/f{i}", data=b"x") for i in range(10)]),
        "package_too_large",
        "package too large: src/f5: entries: package must hold at most 10 entries, got more",
        Limits(max_entries=10),
    ),
    Case(
        "file-too-large",
        lambda: package_targz(extra=[Entry("src/big", data=b"x" * 5000)]),
        "package_too_large",
        "package too large: src/big: size: each file must be at most 4096 bytes, got 5000",
        Limits(max_file_bytes=4096),
    ),
    Case(
        "unpacked-too-large",
        lambda: package_targz(
            extra=[Entry(f"src/part{i}", data=bytes(range(256)) * 8) for i in range(6)]
        ),
        "package_too_large",
        "package too large: src/part4: size: unpacked package must be at most 10000 bytes, "
        "got at least 10662",
        Limits(max_unpacked_bytes=10000),
    ),
    Case(
        "compressed-too-large",
        lambda: package_targz(
            extra=[Entry("src/noise", data=bytes(range(256)) * 64 + b"\x07" * 9)]
        ),
        "package_too_large",
        "package too large: (archive): size: compressed package must be at most 512 bytes, "
        "got more",
        Limits(max_compressed_bytes=512),
    ),
    Case(
        "zip-bomb-ratio",
        lambda: package_targz(extra=[Entry("src/zeros", data=bytes(4 << 20))]),
        "unsafe_archive",
        "re:unsafe archive: src/zeros: ratio: compression ratio must be at most 100, got \\d+",
    ),
    Case(
        "no-kernel-package",
        lambda: package_targz({"src/kernel.py": b"x = 1\n"}),
        "invalid_package",
        "invalid package: .kernel_package: is required: a directory holding desc.yaml, "
        "bench_result.yaml, build_test_env.py, benchmark.py",
    ),
    Case(
        "missing-desc",
        lambda: without_file(DESC_PATH),
        "invalid_package",
        "invalid package: .kernel_package/desc.yaml: is required",
    ),
    Case(
        "missing-benchmark",
        lambda: without_file(".kernel_package/benchmark.py"),
        "invalid_package",
        "invalid package: .kernel_package/benchmark.py: is required",
    ),
    Case(
        "unexpected-meta-file",
        lambda: with_file(".kernel_package/notes.txt", "hi"),
        "invalid_package",
        "invalid package: .kernel_package/notes.txt: unexpected entry; .kernel_package/ holds "
        "only desc.yaml, bench_result.yaml, build_test_env.py, benchmark.py",
    ),
    Case(
        "yaml-billion-laughs",
        lambda: with_file(DESC_PATH, billion_laughs()),
        "invalid_package",
        "invalid package: .kernel_package/desc.yaml: line 1: anchors are not allowed (found &a)",
    ),
    Case(
        "yaml-alias",
        lambda: with_file(DESC_PATH, DESC + "x-copy: *nothing\n"),
        "invalid_package",
        "invalid package: .kernel_package/desc.yaml: line 11: "
        "aliases are not allowed (found *nothing)",
    ),
    Case(
        "yaml-python-tag",
        lambda: with_file(DESC_PATH, DESC + "x-run: !!python/object/apply:os.system ['true']\n"),
        "invalid_package",
        "invalid package: .kernel_package/desc.yaml: line 11: explicit tags "
        "are not allowed (found tag:yaml.org,2002:python/object/apply:os.system)",
    ),
    Case(
        "yaml-custom-tag",
        lambda: with_file(DESC_PATH, DESC + "x-t: !mine 3\n"),
        "invalid_package",
        "invalid package: .kernel_package/desc.yaml: line 11: explicit tags "
        "are not allowed (found !mine)",
    ),
    Case(
        "yaml-deep-nesting",
        lambda: with_file(DESC_PATH, _nested(5000)),
        "invalid_package",
        "invalid package: .kernel_package/desc.yaml: line 11: nesting deeper than 64 levels",
    ),
    Case(
        "yaml-too-large",
        lambda: with_file(DESC_PATH, DESC + "x-pad: '" + "a" * 3000 + "'\n"),
        "package_too_large",
        "package too large: .kernel_package/desc.yaml: must be at most 2048 bytes, got more",
        Limits(max_yaml_bytes=2048),
    ),
    Case(
        "yaml-syntax",
        lambda: with_file(DESC_PATH, "title: [unclosed\n"),
        "invalid_package",
        "invalid package: .kernel_package/desc.yaml: line 2: not valid YAML: "
        "expected ',' or ']', but got '<stream end>'",
    ),
    Case(
        "yaml-duplicate-key",
        lambda: with_file(DESC_PATH, DESC + "title: again\n"),
        "invalid_package",
        "invalid package: .kernel_package/desc.yaml: line 11: duplicate key 'title'",
    ),
    Case(
        "yaml-not-mapping",
        lambda: with_file(DESC_PATH, "- a\n- b\n"),
        "invalid_package",
        "invalid package: .kernel_package/desc.yaml: must be a YAML mapping, got list",
    ),
    Case(
        "yaml-not-utf8",
        lambda: with_file(DESC_PATH, b"title: \xff\xfe\n"),
        "invalid_package",
        "invalid package: .kernel_package/desc.yaml: must be UTF-8 text, "
        "got a bad byte at offset 7",
    ),
    Case(
        "wrong-metric-direction",
        _desc("better: lower", "better: faster"),
        "invalid_package",
        'invalid package: .kernel_package/desc.yaml: metric.better: must be "lower" or '
        '"higher", got "faster"',
    ),
    Case(
        "wrong-type-workloads",
        _desc("workloads:\n  - name: small\n    params: {rows: 4, cols: 8}", "workloads: small"),
        "invalid_package",
        "invalid package: .kernel_package/desc.yaml: workloads: must be a list, "
        'got a string "small"',
    ),
    Case(
        "schema-version-string",
        _desc("schema_version: 1", "schema_version: '1'"),
        "invalid_package",
        'invalid package: .kernel_package/desc.yaml: schema_version: must be 1, got "1"',
    ),
    Case(
        "unknown-field-typo",
        _desc("metric:", "metirc:"),
        "invalid_package",
        "invalid package: .kernel_package/desc.yaml: metirc: unknown field; "
        "did you mean 'metric'? (and 1 more)",
    ),
    Case(
        "duplicate-workloads",
        _desc(
            "    params: {rows: 4, cols: 8}\n", "    params: {rows: 4, cols: 8}\n  - name: small\n"
        ),
        "invalid_package",
        "invalid package: .kernel_package/desc.yaml: workloads[1].name: "
        "workload names must be unique, 'small' repeats",
    ),
    Case(
        "kernel-id-lies",
        lambda: package_targz(),
        "invalid_kernel_id",
        "invalid kernel id: .kernel_package/desc.yaml: kernel_id: must equal the submission's "
        "kernel id cpu/Norm/RMSNorm/fp32/other, got cpu/Norm/RMSNorm/fp32/test_pkg",
        expected_id="cpu/Norm/RMSNorm/fp32/other",
    ),
    Case(
        "kernel-id-bad-grammar",
        _desc(f"kernel_id: {KERNEL_ID}", "kernel_id: cpu/../x/y/z"),
        "invalid_kernel_id",
        "re:invalid kernel id: \\.kernel_package/desc\\.yaml: kernel_id: must be a kernel id "
        '<arch>/.+, got "cpu/\\.\\./x/y/z"',
    ),
    Case(
        "bench-result-other-kernel",
        lambda: with_file(
            ".kernel_package/bench_result.yaml", "schema_version: 1\nkernel_id: cpu/a/b/c/d\n"
        ),
        "invalid_kernel_id",
        "invalid kernel id: .kernel_package/bench_result.yaml: kernel_id: "
        "must equal desc.yaml's kernel_id cpu/Norm/RMSNorm/fp32/test_pkg, got cpu/a/b/c/d",
    ),
    Case(
        "benchmark-syntax-error",
        lambda: with_file(".kernel_package/benchmark.py", "def broken(:\n"),
        "invalid_package",
        "invalid package: .kernel_package/benchmark.py: line 1: not valid Python: invalid syntax",
    ),
    Case(
        "script-not-utf8",
        lambda: with_file(".kernel_package/build_test_env.py", b"x = '\xff'\n"),
        "invalid_package",
        "invalid package: .kernel_package/build_test_env.py: "
        "must be UTF-8 text, got a bad byte at offset 5",
    ),
]


def _matches(expected: str, actual: str) -> bool:
    if expected.startswith("re:"):
        return re.fullmatch(expected[3:], actual) is not None
    return expected == actual


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_hostile_input_is_refused_with_its_code_and_message(
    case: Case, tmp_path: Path, private_tmp: Path
) -> None:
    """Each broken or hostile tarball raises PackageError with its exact code and message."""
    tarball = tmp_path / "package.tar.gz"
    tarball.write_bytes(case.build())
    expected = KernelId.parse(case.expected_id) if case.expected_id else None
    with pytest.raises(PackageError) as caught:
        validate_tarball(tarball, expected_kernel_id=expected, limits=case.limits)
    error = caught.value
    assert error.code == case.code
    assert _matches(case.message, error.message), error.message
    assert error.details["problems"][0]["message"] in error.message
    assert list(private_tmp.iterdir()) == []


def test_there_are_at_least_thirty_cases() -> None:
    """The table covers at least thirty distinct hostile or broken inputs."""
    assert len({c.id for c in CASES}) >= 30


@pytest.mark.parametrize(
    "case",
    [
        c
        for c in CASES
        if c.code in {"unsafe_archive", "package_too_large"} and ".kernel_package" not in c.message
    ],
    ids=lambda c: c.id,
)
def test_refused_archive_leaves_no_destination_and_no_temp(case: Case, tmp_path: Path) -> None:
    """A refused archive never creates the destination and removes its temporary directory."""
    dest = tmp_path / "out" / "package"
    with pytest.raises(PackageError):
        unpack_tarball(_write(tmp_path, case.build()), dest, case.limits)
    assert not dest.exists()
    assert list((tmp_path / "out").iterdir()) == []


def test_every_problem_is_listed_at_once(tmp_path: Path) -> None:
    """A package with several problems reports all of them in one error, in a stable order."""
    files = valid_files()
    broken = DESC.replace("better: lower", "better: up").replace("title:", "titel:")
    files[DESC_PATH] = broken.encode()
    del files[".kernel_package/benchmark.py"]
    with pytest.raises(PackageError) as caught:
        validate_tarball(_write(tmp_path, package_targz(files)))
    assert [(p["path"], p["field"]) for p in caught.value.details["problems"]] == [
        (".kernel_package/benchmark.py", ""),
        (DESC_PATH, "metric.better"),
        (DESC_PATH, "titel"),
        (DESC_PATH, "title"),
    ]


def _write(tmp_path: Path, data: bytes) -> Path:
    path = tmp_path / "in.tar.gz"
    path.write_bytes(data)
    return path
