"""What the `kz` command prints for people: the kernel list and package problems."""

from __future__ import annotations

import pytest

from kz_cli.cmd_kernels import claim_line, kernel_table
from kz_cli.http import error_lines

pytestmark = pytest.mark.unit


def test_the_kernel_list_is_an_aligned_table_with_rounded_values() -> None:
    lines = kernel_table(
        [
            {
                "id": "cpu/GEMM/dense/fp32/blas_matmul",
                "metric": {"unit": "us"},
                "accepted_count": 3,
                "best": {"value": 190.06526081585767, "submitter": "linus"},
            },
            {
                "id": "sm90/Norm/RMSNorm/bf16/new",
                "metric": {"unit": "us"},
                "accepted_count": 0,
                "best": None,
            },
        ]
    )
    assert lines == [
        "KERNEL                           BEST      BY     ACCEPTED",
        "cpu/GEMM/dense/fp32/blas_matmul  190.1 us  linus  3",
        "sm90/Norm/RMSNorm/bf16/new       -         -      0",
    ]
    assert kernel_table([]) == ["no kernels"]


def test_a_problem_about_a_whole_file_has_no_empty_field() -> None:
    body = {
        "error": {
            "code": "invalid_package",
            "details": {
                "problems": [
                    {"path": "pkg", "field": "", "message": "package must be a directory"},
                    {
                        "path": ".kernel_package/desc.yaml",
                        "field": "metric.better",
                        "message": "must be one of lower, higher",
                    },
                ]
            },
        }
    }
    assert error_lines(body) == [
        "pkg: package must be a directory",
        ".kernel_package/desc.yaml: metric.better: must be one of lower, higher",
    ]


def test_a_claim_says_who_holds_the_kernel_until_when() -> None:
    held = {
        "kernel_id": "cpu/a/b/fp32/k",
        "holder": "you",
        "lease_id": "L",
        "expires_at": "2026-11-30T16:37:45Z",
    }
    assert claim_line(held).startswith("you holds cpu/a/b/fp32/k until 2026-11-30T16:37:45Z")
    free = {"kernel_id": "cpu/a/b/fp32/k", "holder": None, "lease_id": None, "expires_at": None}
    assert claim_line(free) == "released cpu/a/b/fp32/k: nobody holds it"
