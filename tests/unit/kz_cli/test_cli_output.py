"""What the `kz` command prints for people: the kernel list and package problems."""

from __future__ import annotations

import pytest

from kz_cli.cmd_submit import error_lines, kernel_table

pytestmark = pytest.mark.unit


def test_the_kernel_list_is_an_aligned_table_with_rounded_values() -> None:
    lines = kernel_table([
        {"id": "cpu/GEMM/dense/fp32/blas_matmul", "metric": {"unit": "us"}, "accepted_count": 3,
         "best": {"value": 190.06526081585767, "submitter": "linus"}},
        {"id": "sm90/Norm/RMSNorm/bf16/new", "metric": {"unit": "us"}, "accepted_count": 0,
         "best": None},
    ])
    assert lines == [
        "KERNEL                           BEST      BY     ACCEPTED",
        "cpu/GEMM/dense/fp32/blas_matmul  190.1 us  linus  3",
        "sm90/Norm/RMSNorm/bf16/new       -         -      0",
    ]
    assert kernel_table([]) == ["no kernels"]


def test_a_problem_about_a_whole_file_has_no_empty_field() -> None:
    body = {"error": {"code": "invalid_package", "details": {"problems": [
        {"path": "pkg", "field": "", "message": "package must be a directory"},
        {"path": ".kernel_package/desc.yaml", "field": "metric.better",
         "message": "must be one of lower, higher"},
    ]}}}
    assert error_lines(body) == [
        "pkg: package must be a directory",
        ".kernel_package/desc.yaml: metric.better: must be one of lower, higher",
    ]
