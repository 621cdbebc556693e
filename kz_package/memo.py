"""Answers kept by content: a pure function of a file's bytes, asked again with the same bytes.

Every submission of a kernel carries much the same desc.yaml, bench_result.yaml and judge
scripts, and the judge bundle it is compared with changes only when main does, so parsing
and checking them again and again is wasted work. `by_content` keeps the answers for inputs up
to a size (larger ones are computed each time, so the cache stays small). The answers are
shared between callers: a decorated function returns values nobody changes (tuples, or data
the caller copies before handing it on).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Concatenate, ParamSpec, TypeVar, cast

__all__ = ["by_content"]

P = ParamSpec("P")
R = TypeVar("R")


def by_content(
    max_bytes: int, maxsize: int = 256
) -> Callable[[Callable[Concatenate[bytes, P], R]], Callable[Concatenate[bytes, P], R]]:
    """Keep `fn(data, *args)` for `data` of at most `max_bytes` (the `maxsize` latest); the
    other arguments must be hashable."""

    def wrap(fn: Callable[Concatenate[bytes, P], R]) -> Callable[Concatenate[bytes, P], R]:
        kept = cast(Callable[Concatenate[bytes, P], R], functools.lru_cache(maxsize)(fn))

        @functools.wraps(fn)
        def call(data: bytes, /, *args: P.args, **kwargs: P.kwargs) -> R:
            if len(data) > max_bytes:
                return fn(data, *args, **kwargs)
            return kept(data, *args, **kwargs)

        return call

    return wrap
