"""A strict YAML loader for package files: plain data only, bounded, no anchors or tags.

Anchors and aliases are refused outright (that is what makes "billion laughs" an error and not
an outage), as are explicit tags, non-string keys, duplicate keys and deep nesting. Dates stay
strings so every value is JSON data.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.events import (
    AliasEvent,
    CollectionEndEvent,
    CollectionStartEvent,
    NodeEvent,
    ScalarEvent,
)
from yaml.nodes import MappingNode, Node

from kz_package.errors import INVALID_PACKAGE, PACKAGE_TOO_LARGE, PackageError
from kz_package.limits import Limits

__all__ = ["load_yaml"]

_TIMESTAMP = "tag:yaml.org,2002:timestamp"


class _YamlRefused(Exception):
    """Raised inside the loader; turned into a PackageError at the boundary."""

    def __init__(self, message: str, line: int) -> None:
        super().__init__(message)
        self.message = message
        self.line = line


def _admit_event(event: Any, depth: int, max_depth: int) -> int:
    """Refuse aliases, anchors, explicit tags and deep nesting; the depth after `event`."""
    line = event.start_mark.line + 1 if event.start_mark else 0
    if isinstance(event, AliasEvent):
        raise _YamlRefused(f"aliases are not allowed (found *{event.anchor})", line)
    if isinstance(event, NodeEvent) and event.anchor is not None:
        raise _YamlRefused(f"anchors are not allowed (found &{event.anchor})", line)
    if isinstance(event, ScalarEvent | CollectionStartEvent) and event.tag is not None:
        raise _YamlRefused(f"explicit tags are not allowed (found {event.tag})", line)
    if isinstance(event, CollectionStartEvent):
        depth += 1
        if depth > max_depth:
            raise _YamlRefused(f"nesting deeper than {max_depth} levels", line)
    return depth


class _StrictMappings:
    """Mapping construction that refuses non-string and duplicate keys."""

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)  # type: ignore[attr-defined]
            line = key_node.start_mark.line + 1
            if not isinstance(key, str):
                raise _YamlRefused(
                    f"mapping keys must be strings, got {type(key).__name__} {key!r} (quote it)",
                    line,
                )
            if key in seen:
                raise _YamlRefused(f"duplicate key {key!r}", line)
            seen.add(key)
        mapping: dict[Any, Any] = super().construct_mapping(node, deep=deep)  # type: ignore[misc]
        return mapping


class _StrictLoader(_StrictMappings, yaml.SafeLoader):
    max_depth = 64

    yaml_implicit_resolvers = {
        key: [(tag, rx) for tag, rx in resolvers if tag != _TIMESTAMP]
        for key, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        event = self.peek_event()  # type: ignore[no-untyped-call]
        self._depth = _admit_event(event, self._depth, self.max_depth)
        try:
            return super().compose_node(parent, index)
        finally:
            if isinstance(event, CollectionStartEvent):
                self._depth -= 1


class _FastStrictLoader(_StrictMappings, yaml.CSafeLoader):
    """libyaml's parser and composer with the strict constructor: used after `_prescan`."""

    yaml_implicit_resolvers = _StrictLoader.yaml_implicit_resolvers


def _prescan(text: str, max_depth: int) -> None:
    """Refuse anchors, aliases, tags and deep nesting from libyaml's event stream."""
    depth = 0
    for event in yaml.parse(text, Loader=yaml.CSafeLoader):
        depth = _admit_event(event, depth, max_depth)
        if isinstance(event, CollectionEndEvent):
            depth -= 1


def _load(text: str, max_depth: int) -> Any:
    """One document of plain data: libyaml when present (fast), else the pure-Python loader.

    A document libyaml refuses as malformed is parsed again by the pure loader, so the
    messages people see do not depend on whether libyaml is installed.
    """
    if FAST:
        try:
            _prescan(text, max_depth)
        except yaml.MarkedYAMLError:
            pass  # let the pure loader find and word the syntax error
        else:
            fast = _FastStrictLoader(text)
            try:
                return fast.get_single_data()
            finally:
                fast.dispose()
    loader = _StrictLoader(text)
    loader.max_depth = max_depth
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


FAST = bool(getattr(yaml, "__with_libyaml__", False))


def _decode(data: bytes | str, path: str) -> str:
    if isinstance(data, str):
        return data
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PackageError.one(
            INVALID_PACKAGE, path, "", f"must be UTF-8 text, got a bad byte at offset {exc.start}"
        ) from exc


def load_yaml(data: bytes | str, *, path: str, limits: Limits = Limits()) -> Any:  # noqa: B008
    """Parse one YAML document of plain data; raise PackageError naming `path` on any refusal."""
    size = len(data.encode("utf-8")) if isinstance(data, str) else len(data)
    if size > limits.max_yaml_bytes:
        raise PackageError.one(
            PACKAGE_TOO_LARGE,
            path,
            "",
            f"YAML file must be at most {limits.max_yaml_bytes} bytes, got {size}",
        )
    text = _decode(data, path)
    try:
        return _load(text, limits.max_yaml_depth)
    except _YamlRefused as exc:
        raise PackageError.one(
            INVALID_PACKAGE, path, "", f"line {exc.line}: {exc.message}"
        ) from None
    except yaml.MarkedYAMLError as exc:
        line = exc.problem_mark.line + 1 if exc.problem_mark else 0
        raise PackageError.one(
            INVALID_PACKAGE, path, "", f"line {line}: not valid YAML: {exc.problem}"
        ) from None
    except yaml.YAMLError as exc:
        raise PackageError.one(INVALID_PACKAGE, path, "", f"not valid YAML: {exc}") from None
