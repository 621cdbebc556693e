"""The kernel package: its schemas, safe archives, strict YAML, validation and the judge check.

Everything a part of kernel zoo needs to trust a package comes from here; `validate_tarball` is
the one call both the API and `kz submit` make, so local and server errors are the same.
"""

from __future__ import annotations

from kz_package import schemas
from kz_package.archive import (
    PACKAGE_DIR,
    pack_directory,
    pack_files,
    unpack_tarball,
    write_tree,
)
from kz_package.errors import (
    INVALID_KERNEL_ID,
    INVALID_PACKAGE,
    INVALID_RESULT,
    PACKAGE_TOO_LARGE,
    UNSAFE_ARCHIVE,
    PackageError,
    Problem,
)
from kz_package.judge import JUDGE_FILES, JUDGE_PARTS, REFERENCE_DIR, judge_changes
from kz_package.limits import MIB, Limits
from kz_package.memread import (
    MemoryBudgetExceeded,
    PackageFiles,
    read_package,
    read_package_files,
)
from kz_package.model import PACKAGE_FILES, Desc, Metric, Package, Workload
from kz_package.validate import (
    validate_package_dir,
    validate_package_files,
    validate_result_document,
    validate_tarball,
)
from kz_package.yaml_safe import load_yaml

__all__ = [
    "INVALID_KERNEL_ID",
    "INVALID_PACKAGE",
    "INVALID_RESULT",
    "JUDGE_FILES",
    "JUDGE_PARTS",
    "MIB",
    "PACKAGE_DIR",
    "PACKAGE_FILES",
    "PACKAGE_TOO_LARGE",
    "REFERENCE_DIR",
    "UNSAFE_ARCHIVE",
    "Desc",
    "Limits",
    "MemoryBudgetExceeded",
    "Metric",
    "Package",
    "PackageError",
    "PackageFiles",
    "Problem",
    "Workload",
    "judge_changes",
    "load_yaml",
    "pack_directory",
    "pack_files",
    "read_package",
    "read_package_files",
    "schemas",
    "unpack_tarball",
    "validate_package_dir",
    "validate_package_files",
    "validate_result_document",
    "validate_tarball",
    "write_tree",
]
