"""The platform reads the referee's rule from the harness without loading the judge's
machinery: importing the API, the projectors, the event model or the agents' tools loads
neither the judge nor its worker, channel, GPU timer or the runner."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.unit

PLATFORM = ("kz_events", "kz_events.lifecycle", "kz_projector", "kz_api.app", "kz_mcp")
MACHINERY = (
    "kz_harness.judge",
    "kz_harness.worker",
    "kz_harness.channel",
    "kz_harness.link",
    "kz_harness.measure",
    "kz_harness.gpu",
    "kz_harness.timing",
    "kz_runner",
)


def _loaded_by(module: str) -> list[str]:
    """The modules a fresh interpreter holds after importing `module` alone."""
    code = f"import importlib, json, sys; importlib.import_module({module!r}); " + (
        "print(json.dumps(sorted(sys.modules)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    loaded: list[str] = json.loads(done.stdout)
    return loaded


@pytest.mark.parametrize("module", PLATFORM)
def test_the_platform_loads_none_of_the_judges_machinery(module: str) -> None:
    loaded = _loaded_by(module)
    held = [name for name in loaded if name.startswith(MACHINERY)]
    assert held == [], f"importing {module} loads {held}"


def test_the_harness_names_still_resolve_where_a_benchmark_uses_them() -> None:
    """The lazy exports give a benchmark the same objects as their modules do."""
    import kz_harness
    from kz_harness import judge

    assert kz_harness.Benchmark is judge.Benchmark
    assert set(kz_harness.__all__) <= set(dir(kz_harness))
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        _ = kz_harness.nothing  # type: ignore[attr-defined]


def test_no_export_is_shadowed_by_a_submodule_of_its_name() -> None:
    """Importing a submodule sets the package's attribute of its name to the module: an
    exported name that is also a submodule's (`verdict`) must still be the function."""
    import importlib
    import types

    import kz_harness

    for name in kz_harness.__all__:
        with contextlib.suppress(ModuleNotFoundError):
            importlib.import_module(f"kz_harness.{name}")
    shadowed = [
        n for n in kz_harness.__all__ if isinstance(getattr(kz_harness, n), types.ModuleType)
    ]
    assert shadowed == []
