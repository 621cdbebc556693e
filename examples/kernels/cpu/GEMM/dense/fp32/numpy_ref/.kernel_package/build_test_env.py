"""Prepares the environment for cpu/GEMM/dense/fp32/numpy_ref.

Checks that the numpy and PyYAML this benchmark needs are importable.

Exit 0 when ready; a non-zero exit fails the task with reason build_failed.
"""

from __future__ import annotations

import sys


def main() -> int:
    try:
        import numpy
        import yaml  # noqa: F401  (the benchmark reads the baseline with it)
    except ImportError as exc:
        print(f"missing dependency: {exc.name}", file=sys.stderr)
        return 1
    print(f"ready: python {sys.version.split()[0]}, numpy {numpy.__version__}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
