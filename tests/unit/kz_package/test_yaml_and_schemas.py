"""Strict YAML loading and schema messages: plain data in, actionable problems out."""

from __future__ import annotations

import pytest

from kz_package import Limits, PackageError, Problem, load_yaml, schemas

pytestmark = pytest.mark.unit


def test_plain_yaml_loads_as_json_data() -> None:
    """Mappings, lists and scalars load; dates stay strings so the data is JSON."""
    assert load_yaml("a: 1\nb: [x, 2.5]\nwhen: 2024-01-01\n", path="f.yaml") == {
        "a": 1,
        "b": ["x", 2.5],
        "when": "2024-01-01",
    }


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a: &x 1\nb: *x\n", "f.yaml: line 1: anchors are not allowed (found &x)"),
        (
            "a: !!binary aGk=\n",
            "f.yaml: line 1: explicit tags are not allowed (found tag:yaml.org,2002:binary)",
        ),
        ("no: 1\n", "f.yaml: line 1: mapping keys must be strings, got bool False (quote it)"),
        ("a: 1\n---\nb: 2\n", "f.yaml: line 2: not valid YAML: but found another document"),
    ],
)
def test_refused_yaml_names_file_and_line(text: str, message: str) -> None:
    """Anchors, tags, non-string keys and multiple documents are refused with their line."""
    with pytest.raises(PackageError) as caught:
        load_yaml(text, path="f.yaml")
    assert caught.value.code == "invalid_package"
    assert caught.value.message == f"invalid package: {message}"


def test_yaml_size_limit_applies_before_parsing() -> None:
    """A file over max_yaml_bytes is refused as too large without being parsed."""
    with pytest.raises(PackageError) as caught:
        load_yaml("a: [" * 100, path="f.yaml", limits=Limits(max_yaml_bytes=10))
    assert caught.value.code == "package_too_large"
    assert caught.value.details == {
        "problems": [
            {
                "path": "f.yaml",
                "field": "",
                "message": "YAML file must be at most 10 bytes, got 400",
            }
        ]
    }


def test_schema_problems_read_like_the_issue() -> None:
    """A wrong enum value reads `metric.better: must be "lower" or "higher", got "faster"`."""
    problems = schemas.validate(
        "desc", {"metric": {"name": "latency", "unit": "us", "better": "faster"}}, path="d.yaml"
    )
    assert Problem("d.yaml", "metric.better", 'must be "lower" or "higher", got "faster"') in (
        problems
    )
    assert Problem("d.yaml", "title", "is required") in problems


def test_every_schema_accepts_its_own_examples() -> None:
    """Each schema is valid draft 2020-12, has an $id, and accepts the examples it ships."""
    for name in schemas.SCHEMA_NAMES:
        schema = schemas.load_schema(name)
        assert schema["$id"].endswith(f"/{name}.schema.json")
        assert schema["examples"]
        for example in schema["examples"]:
            assert schemas.validate(name, example) == []


def test_every_schema_field_has_a_description() -> None:
    """Every property of every schema carries a description."""

    def walk(node: object, where: str) -> list[str]:
        missing: list[str] = []
        if isinstance(node, dict):
            for key, sub in node.get("properties", {}).items():
                if "description" not in sub:
                    missing.append(f"{where}.{key}")
            for key, sub in node.items():
                if key not in {"if", "then"}:  # conditions restate fields described above
                    missing += walk(sub, f"{where}.{key}")
        elif isinstance(node, list):
            for i, sub in enumerate(node):
                missing += walk(sub, f"{where}[{i}]")
        return missing

    for name in schemas.SCHEMA_NAMES:
        assert walk(schemas.load_schema(name), name) == []


def test_field_paths_use_dots_and_indexes() -> None:
    """Field paths read `workloads[0].name`."""
    assert schemas.field_path(["workloads", 0, "name"]) == "workloads[0].name"
    assert schemas.field_path([]) == ""


def test_unknown_schema_name_is_a_key_error() -> None:
    """Asking for a schema that does not exist names the ones that do."""
    with pytest.raises(KeyError, match="expected one of desc"):
        schemas.load_schema("nope")
