"""The JSON Schemas of the package files and wire formats: loaded once, cached, and their errors
turned into `Problem`s a person can act on (`metric.better: must be "lower" or "higher", got
"faster"`).

The schemas live in the repository's `schemas/` folder; cross-references between them resolve
through one registry keyed by their `$id`s.
"""

from __future__ import annotations

import difflib
import functools
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any, cast

import jsonschema_rs
from jsonschema import Draft202012Validator, FormatChecker
from jsonschema.exceptions import ValidationError, best_match
from referencing import Registry, Resource

from kz_package.errors import Problem

__all__ = ["SCHEMA_DIR", "SCHEMA_NAMES", "field_path", "load_schema", "validate"]

SCHEMA_DIR = Path(__file__).resolve().parents[1] / "schemas"
SCHEMA_NAMES = ("desc", "bench_result", "result", "submission_form", "index")
_JSON_TYPES = {
    dict: "an object",
    list: "a list",
    str: "a string",
    bool: "a boolean",
    int: "an integer",
    float: "a number",
    type(None): "null",
}
_TYPE_WORDS = {
    "object": "an object",
    "array": "a list",
    "string": "a string",
    "boolean": "a boolean",
    "integer": "an integer",
    "number": "a number",
    "null": "null",
}


def _file(name: str) -> Path:
    stem = name.removesuffix(".json").removesuffix(".schema")
    if stem not in SCHEMA_NAMES:
        raise KeyError(f"unknown schema {name!r}; expected one of {', '.join(SCHEMA_NAMES)}")
    return SCHEMA_DIR / f"{stem}.schema.json"


@cache
def load_schema(name: str) -> dict[str, Any]:
    """The parsed schema `name` (`desc`, `bench_result`, `result`, `submission_form`, `index`)."""
    schema: dict[str, Any] = json.loads(_file(name).read_text(encoding="utf-8"))
    return schema


@cache
def _registry() -> Registry[Any]:
    resources = [
        (load_schema(n)["$id"], Resource.from_contents(load_schema(n))) for n in SCHEMA_NAMES
    ]
    return Registry().with_resources(resources)


@cache
def _format_checker() -> FormatChecker:
    checker = FormatChecker()
    checker.checks("date-time")(_is_date_time)
    return checker


@cache
def _validator(name: str) -> Draft202012Validator:
    schema = load_schema(_file(name).name.removesuffix(".schema.json"))
    return Draft202012Validator(schema, registry=_registry(), format_checker=_format_checker())


@cache
def _is_valid(name: str) -> Callable[[Any], bool]:
    """A compiled check of schema `name` (jsonschema-rs, ~100x faster): it only tells whether
    an instance is valid, and where it says no, `validate` asks the reference validator for
    the problems and takes its answer. Formats are checked by the reference's own checks."""
    stem = _file(name).name.removesuffix(".schema.json")
    checker = _format_checker()
    formats: dict[str, Callable[..., bool]] = {
        fmt: functools.partial(_conforms, checker, fmt) for fmt in _FORMATS_USED
    }
    registry = jsonschema_rs.Registry(
        [(load_schema(n)["$id"], load_schema(n)) for n in SCHEMA_NAMES]
    )
    compiled = jsonschema_rs.validator_for(
        load_schema(stem),
        registry=registry,
        formats=formats,
        validate_formats=True,
        ignore_unknown_formats=False,
    )
    return cast(Callable[[Any], bool], compiled.is_valid)


_FORMATS_USED = ("date-time", "uuid")


def _conforms(checker: FormatChecker, fmt: str, value: str) -> bool:
    return checker.conforms(value, fmt)


def field_path(parts: Iterable[str | int]) -> str:
    """`metric.better`, `workloads[0].name`: a JSON path written the way people read it."""
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _show(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 80 else text[:77] + "..."


def _kind(value: Any) -> str:
    return _JSON_TYPES.get(type(value), type(value).__name__)


def _choices(values: Sequence[Any]) -> str:
    shown = [_show(v) for v in values]
    if len(shown) == 2:
        return f"{shown[0]} or {shown[1]}"
    return "one of " + ", ".join(shown)


def _wanted(error: ValidationError) -> Any:
    """The schema keyword's value (typed loosely by jsonschema)."""
    return error.validator_value


def _instance(error: ValidationError) -> Any:
    return error.instance


def _schema(error: ValidationError) -> dict[str, Any]:
    return dict(error.schema) if isinstance(error.schema, Mapping) else {}


def _got(value: Any) -> str:
    return "null" if value is None else f"{_kind(value)} {_show(value)}"


def _type_message(error: ValidationError) -> str:
    wanted = _wanted(error)
    names = [wanted] if isinstance(wanted, str) else list(wanted)
    words = " or ".join(_TYPE_WORDS.get(n, n) for n in names)
    return f"must be {words}, got {_got(_instance(error))}"


def _pattern_message(error: ValidationError) -> str:
    expected = _schema(error).get("x-expected") or f"a match of {_wanted(error)}"
    return f"must be {expected}, got {_show(_instance(error))}"


def _min_length_message(error: ValidationError) -> str:
    if _wanted(error) == 1:
        return "must not be empty"
    return f"must be at least {_wanted(error)} characters, got {len(_instance(error))}"


def _is_date_time(value: object) -> bool:
    if not isinstance(value, str):
        return True
    if "T" not in value.upper():
        return False
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return False
    return parsed.tzinfo is not None


_SIMPLE: dict[str, Callable[[ValidationError], str]] = {
    "enum": lambda e: f"must be {_choices(_wanted(e))}, got {_show(_instance(e))}",
    "const": lambda e: f"must be {_show(_wanted(e))}, got {_show(_instance(e))}",
    "type": _type_message,
    "pattern": _pattern_message,
    "minLength": _min_length_message,
    "maxLength": lambda e: f"must be at most {_wanted(e)} characters, got {len(_instance(e))}",
    "minItems": lambda e: f"must have at least {_wanted(e)} items, got {len(_instance(e))}",
    "maxItems": lambda e: f"must have at most {_wanted(e)} items, got {len(_instance(e))}",
    "maxProperties": lambda e: f"must have at most {_wanted(e)} fields",
    "minimum": lambda e: f"must be at least {_wanted(e)}, got {_show(_instance(e))}",
    "maximum": lambda e: f"must be at most {_wanted(e)}, got {_show(_instance(e))}",
    "uniqueItems": lambda e: "must not repeat items",
    "format": lambda e: f"must be a valid {_wanted(e)}, got {_show(_instance(e))}",
}


def _extra_problems(error: ValidationError, path: str) -> list[Problem]:
    allowed = list(_schema(error).get("properties", {}))
    patterns = list(_schema(error).get("patternProperties", {}))
    extras = [
        k
        for k in _instance(error)
        if k not in allowed and not any(re.search(p, k) for p in patterns)
    ]
    problems = []
    for key in extras:
        close = difflib.get_close_matches(key, allowed, n=1)
        hint = f"did you mean {close[0]!r}?" if close else f"allowed: {', '.join(allowed)}"
        field = field_path([*error.absolute_path, key])
        problems.append(Problem(path, field, f"unknown field; {hint}"))
    return problems


def _dependent(error: ValidationError) -> tuple[str, list[str]]:
    for key, needs in _wanted(error).items():
        missing = [k for k in needs if k not in _instance(error)]
        if key in _instance(error) and missing:
            return key, missing
    return "", []  # pragma: no cover - jsonschema reports only real failures


def _problems(error: ValidationError, path: str) -> list[Problem]:
    kind = str(error.validator)
    here = list(error.absolute_path)
    if kind == "required":
        missing = [k for k in _wanted(error) if k not in _instance(error)]
        return [Problem(path, field_path([*here, k]), "is required") for k in missing]
    if kind == "dependentRequired":
        needed, needs = _dependent(error)
        return [
            Problem(path, field_path([*here, k]), f"is required when {needed} is present")
            for k in needs
        ]
    if kind == "additionalProperties":
        return _extra_problems(error, path)
    if kind in {"anyOf", "oneOf"} and error.context:
        inner = best_match(error.context)
        return _problems(inner, path)
    render = _SIMPLE.get(kind)
    message = render(error) if render else error.message
    if "then" in error.absolute_schema_path:
        message = message.replace(", got", " when accepted is true, got", 1)
    return [Problem(path, field_path(here), message)]


def validate(name: str, instance: Any, *, path: str = "") -> list[Problem]:
    """Every way `instance` breaks schema `name`, as problems naming `path`, in field order."""
    if _is_valid(name)(instance):
        return []
    problems: list[Problem] = []
    for error in _validator(name).iter_errors(instance):
        problems.extend(_problems(error, path))
    return sorted(set(problems), key=lambda p: (p.field, p.message))
