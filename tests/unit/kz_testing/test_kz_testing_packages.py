"""The trivial package builder of `kz_testing`: valid packages, unique by salt, the same bytes
in memory as packed from a folder."""

from __future__ import annotations

import hashlib
import io
from pathlib import Path

import pytest

from kz_events.ids import KernelId
from kz_package import PackageError, pack_directory, validate_tarball
from kz_testing import package_files, package_tarball, write_package

pytestmark = pytest.mark.unit

KID = "cpu/Norm/RMSNorm/fp32/kz_testing"


@pytest.mark.parametrize("better", ["lower", "higher"])
def test_the_package_validates_for_its_kernel(better: str) -> None:
    """The tarball passes the API's own check, with the title, direction and workload asked for."""
    files = package_files(KID, title="A title", better=better, workload="tiny")
    package = validate_tarball(
        io.BytesIO(package_tarball(files)), expected_kernel_id=KernelId.parse(KID)
    )
    assert package.desc.title == "A title" and package.desc.metric.better == better
    assert [w.name for w in package.desc.workloads] == ["tiny"]


def test_salts_make_distinct_digests_and_equal_inputs_equal_bytes() -> None:
    """Two salts give two digests; the same arguments give the same bytes."""
    digests = {
        hashlib.sha256(package_tarball(package_files(KID, salt=salt))).hexdigest()
        for salt in ("a", "b", "a")
    }
    assert len(digests) == 2


def test_scripts_and_sources_are_the_ones_given() -> None:
    """`benchmark`, `build_test_env` and `src` land where the runner looks for them."""
    files = package_files(
        KID, benchmark="print(2)\n", build_test_env="pass\n", src={"a.py": "A = 1\n"}, salt="s"
    )
    assert files[".kernel_package/benchmark.py"] == b"print(2)\n"
    assert files[".kernel_package/build_test_env.py"] == b"pass\n"
    assert {p for p in files if p.startswith("src/")} == {"src/a.py", "src/salt.txt"}


def test_a_written_folder_packs_to_the_same_bytes(tmp_path: Path) -> None:
    """`write_package` then `pack_directory` makes exactly the bytes `package_tarball` makes."""
    files = package_files(KID, salt="x")
    out = io.BytesIO()
    pack_directory(write_package(tmp_path / "pkg", files), out)
    assert out.getvalue() == package_tarball(files)


def test_an_invalid_direction_is_passed_through() -> None:
    """A test may ask for a broken desc.yaml: the validator then refuses the package."""
    data = package_tarball(package_files(KID, better="sideways"))
    with pytest.raises(PackageError):
        validate_tarball(io.BytesIO(data))
