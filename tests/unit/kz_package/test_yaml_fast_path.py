"""The libyaml fast path of the strict loader answers exactly as the pure-Python loader."""

from __future__ import annotations

import pytest

from kz_package import PackageError, load_yaml, yaml_safe

pytestmark = pytest.mark.unit

DOCUMENTS = [
    "a: 1\nb: [x, 'y', 2.5]\nc: {d: null, e: true}\n",
    "when: 2024-01-02\n",
    "a: &anchor 1\nb: *anchor\n",
    "a: !!python/object:os.system x\n",
    "a: 1\na: 2\n",
    "1: one\n",
    "a: [" * 80 + "]" * 80 + "\n",
    "a: b: c\n",
    "- x\n- y\n",
]


def _outcome(text: str) -> object:
    try:
        return ("ok", load_yaml(text, path="f.yaml"))
    except PackageError as exc:
        return ("refused", exc.code, [str(p) for p in exc.problems])


@pytest.mark.parametrize("text", DOCUMENTS)
def test_fast_and_pure_loaders_agree(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every document gets the same data or the same refusal with libyaml on and off."""
    fast = _outcome(text)
    monkeypatch.setattr(yaml_safe, "FAST", False)
    assert _outcome(text) == fast
