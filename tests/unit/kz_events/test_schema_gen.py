"""Generated JSON Schemas of the events: present, current, and describing real payloads."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from kz_events import schema_gen
from kz_events.events import ALL_EVENT_TYPES

pytestmark = pytest.mark.unit

GOLDEN = Path(__file__).parent / "golden" / "events.json"


def test_committed_schemas_match_the_code() -> None:
    """schemas/events/ is what the generator makes now (fix: `python -m kz_events.schema_gen`)."""
    assert schema_gen.check() == []


def test_one_schema_per_event_type() -> None:
    """The generator makes one `<type>.schema.json` per event type."""
    assert sorted(schema_gen.generate()) == sorted(f"{t}.schema.json" for t in ALL_EVENT_TYPES)


@pytest.mark.parametrize("tag", ALL_EVENT_TYPES)
def test_golden_payloads_validate_against_their_schema(tag: str) -> None:
    """Each golden payload is valid under its type's schema and invalid under another type's."""
    payload = json.loads(GOLDEN.read_text())[tag]["payload"]
    schema = schema_gen.schema_of(_class_of(tag))
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(payload, schema, cls=jsonschema.Draft202012Validator)
    other = "claimed" if tag != "claimed" else "submitted"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(
            payload, schema_gen.schema_of(_class_of(other)), cls=jsonschema.Draft202012Validator
        )


def test_schemas_allow_unknown_future_fields() -> None:
    """A payload with an extra field still validates: the schemas never forbid new fields."""
    payload = {**json.loads(GOLDEN.read_text())["claimed"]["payload"], "added_later": 1}
    jsonschema.validate(payload, schema_gen.schema_of(_class_of("claimed")))


def test_check_reports_missing_stale_and_leftover_files(tmp_path: Path) -> None:
    """`check` names missing, edited and unknown schema files; `write` repairs all three."""
    schema_gen.write(tmp_path)
    assert schema_gen.check(tmp_path) == []
    (tmp_path / "claimed.schema.json").unlink()
    (tmp_path / "result.schema.json").write_text("{}\n")
    (tmp_path / "teleported.schema.json").write_text("{}\n")
    assert sorted(schema_gen.check(tmp_path)) == [
        "claimed.schema.json: missing",
        "result.schema.json: out of date",
        "teleported.schema.json: no such event type",
    ]
    schema_gen.write(tmp_path)
    assert schema_gen.check(tmp_path) == []


def test_main_check_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--check` exits 1 naming the drift, 0 once the generator has written the files."""
    assert schema_gen.main(["--check", "--dir", str(tmp_path)]) == 1
    assert "missing" in capsys.readouterr().err
    assert schema_gen.main(["--dir", str(tmp_path)]) == 0
    assert schema_gen.main(["--check", "--dir", str(tmp_path)]) == 0


def _class_of(tag: str) -> type:
    from kz_events.events import EVENT_CLASSES

    return next(c for c in EVENT_CLASSES if c.__struct_config__.tag == tag)
