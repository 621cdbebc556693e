"""`python -m kz_testing.gpucheck OUT [--dry-run]`: the GPU check's steps (docs/gpu.md)."""

from __future__ import annotations

import sys

from kz_testing.gpucheck.run import main

sys.exit(main(sys.argv[1:]))
