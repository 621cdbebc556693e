"""The harness's own errors: it imports nothing of the platform, so benchmarks can use it alone.

HarnessError            a harness call was used in a way it cannot honour
└── HarnessUnavailable      the hardware or library a call needs is missing here
"""

from __future__ import annotations

__all__ = ["HarnessError", "HarnessUnavailable"]


class HarnessError(Exception):
    """Root of the errors the harness raises on purpose."""


class HarnessUnavailable(HarnessError):
    """The device or library a timing path needs is not present (e.g. no CUDA device)."""
