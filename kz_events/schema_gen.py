"""Generate the JSON Schema of every event type into `schemas/events/<type>.schema.json`.

`python -m kz_events.schema_gen` writes them; `--check` only reports drift (exit 1), which is
what the test suite runs, so a change to an event Struct cannot ship without its schema.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec

from kz_events.events import EVENT_CLASSES

__all__ = ["DEFAULT_DIR", "check", "generate", "main", "schema_of", "write"]

DEFAULT_DIR = Path(__file__).resolve().parent.parent / "schemas" / "events"
DRAFT = "https://json-schema.org/draft/2020-12/schema"


def schema_of(cls: type[msgspec.Struct]) -> dict[str, Any]:
    """The JSON Schema of one event Struct, self-contained, with its tag as the title."""
    tag = str(cls.__struct_config__.tag)
    schema = msgspec.json.schema(cls)
    return {"$schema": DRAFT, "$id": f"kz:event:{tag}", "title": tag, **schema}


def _render(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def generate() -> dict[str, str]:
    """File name → file text for every event type, in a stable order."""
    files: dict[str, str] = {}
    for cls in EVENT_CLASSES:
        tag = str(cls.__struct_config__.tag)
        files[f"{tag}.schema.json"] = _render(schema_of(cls))
    return files


def check(directory: Path = DEFAULT_DIR) -> list[str]:
    """Names of schema files that are missing, stale or left over in `directory`."""
    expected = generate()
    present = {p.name for p in directory.glob("*.schema.json")} if directory.is_dir() else set()
    problems = [
        f"{name}: out of date" if name in present else f"{name}: missing"
        for name, text in expected.items()
        if name not in present or (directory / name).read_text() != text
    ]
    problems += [f"{name}: no such event type" for name in sorted(present - expected.keys())]
    return problems


def write(directory: Path = DEFAULT_DIR) -> list[Path]:
    """Write every schema to `directory` and remove ones of event types that no longer exist."""
    directory.mkdir(parents=True, exist_ok=True)
    expected = generate()
    for stale in directory.glob("*.schema.json"):
        if stale.name not in expected:
            stale.unlink()
    written = []
    for name, text in expected.items():
        path = directory / name
        if not path.is_file() or path.read_text() != text:
            path.write_text(text)
        written.append(path)
    return written


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kz_events.schema_gen", description=__doc__)
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR, help="output directory")
    parser.add_argument("--check", action="store_true", help="report drift, write nothing")
    args = parser.parse_args(argv)
    if args.check:
        problems = check(args.dir)
        for line in problems:
            print(f"{args.dir}/{line}", file=sys.stderr)
        return 1 if problems else 0
    paths = write(args.dir)
    print(f"wrote {len(paths)} event schemas to {args.dir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
