"""The compiled schema check never lets through what the reference validator refuses.

`schemas.validate` trusts jsonschema-rs's "valid" and asks the reference validator only when
the compiled check says no; so the one thing that must never happen is the compiled check
accepting an instance the reference refuses. Valid documents of every schema are mutated at
random (wrong types, missing and unknown fields, bad formats and patterns, odd numbers) and
both are asked.
"""

from __future__ import annotations

import copy
import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kz_events.result import Metric
from kz_package.schemas import _is_valid, _validator, validate
from kz_package.yaml_safe import load_yaml
from kz_projector.scoreboard import Accepted, Board, board_accept, scoreboard
from kz_runner.backends.stub import _document

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples/kernels/cpu/Norm/RMSNorm/fp32/numpy_ref/.kernel_package"
KID = "cpu/Norm/RMSNorm/fp32/numpy_ref"


def _board_doc() -> dict[str, Any]:
    result = _document(True, 12.5, KID)
    item = Accepted(
        seq=7,
        submission_id="00000000-0000-4000-8000-000000000001",
        submitter="alice",
        runner_id="r1",
        digest="ab" * 32,
        value=12.5,
        at="2026-01-01T00:00:00Z",
        result=result,
        environment={"device": "cpu"},
        commit="c" * 40,
    )
    metric = Metric(name="latency", unit="us", better="lower")
    return scoreboard(board_accept(Board(kernel_id=KID, metric=metric), item, metric))


SEEDS: dict[str, list[Any]] = {
    "result": [_document(True, 12.5, KID), _document(False, 3.0, KID)],
    "desc": [load_yaml((EXAMPLE / "desc.yaml").read_text(), path="desc.yaml")],
    "bench_result": [
        load_yaml((EXAMPLE / "bench_result.yaml").read_text(), path="bench_result.yaml"),
        _board_doc(),
    ],
    "submission_form": [
        {"kernel_id": KID, "submitter_id": "alice", "base_commit": "a" * 40, "message": "faster"}
    ],
}

ODD_VALUES = [
    None,
    True,
    False,
    0,
    -1,
    1,
    2**70,
    1.5,
    -0.0,
    math.nan,
    math.inf,
    "",
    "x",
    "x" * 300,
    "a" * 40,
    "a" * 40 + "\n",
    "A" * 40,
    "cpu/a/b/c/d",
    "cpu/a/b/c",
    "cpu/a/b/c/d/e",
    "../a/b/c/d",
    "lower",
    "higher",
    "faster",
    "2026-01-01T00:00:00Z",
    "2026-13-01T00:00:00Z",
    "2026-01-01",
    datetime(2026, 1, 1, tzinfo=UTC).isoformat(),
    "00000000-0000-4000-8000-000000000001",
    "00000000000040008000000000000001",
    [],
    [1],
    {},
    {"x": 1},
]


def _paths(doc: Any, here: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [here]
    if isinstance(doc, dict):
        for key, value in doc.items():
            out += _paths(value, (*here, key))
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            out += _paths(value, (*here, i))
    return out


def _mutate(doc: Any, path: tuple[Any, ...], how: int, value: Any) -> Any:
    doc = copy.deepcopy(doc)
    if not path:
        return value
    parent = doc
    for part in path[:-1]:
        parent = parent[part]
    last = path[-1]
    if how == 0:  # replace
        parent[last] = value
    elif how == 1 and isinstance(parent, dict):  # drop
        del parent[last]
    elif how == 1 and isinstance(parent, list):
        parent.pop(last)
    elif how == 2 and isinstance(parent[last], dict):  # add an unknown field
        parent[last]["unexpected_field"] = value
    elif how == 2 and isinstance(parent[last], list):  # append
        parent[last].append(value)
    else:
        parent[last] = value
    return doc


@pytest.mark.parametrize("name", sorted(SEEDS))
def test_seeds_are_valid_for_both(name: str) -> None:
    for seed in SEEDS[name]:
        assert _is_valid(name)(seed) and _validator(name).is_valid(seed)
        assert validate(name, seed) == []


@pytest.mark.parametrize("name", sorted(SEEDS))
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_the_compiled_check_never_accepts_what_the_reference_refuses(
    name: str, data: st.DataObject
) -> None:
    doc = data.draw(st.sampled_from(SEEDS[name]))
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(_paths(doc)))
        how = data.draw(st.integers(0, 2))
        value = data.draw(st.sampled_from(ODD_VALUES))
        doc = _mutate(doc, path, how, value)
    reference = _validator(name).is_valid(doc)
    assert reference or not _is_valid(name)(doc), f"compiled check accepted {doc!r}"
    assert (validate(name, doc) == []) == reference
