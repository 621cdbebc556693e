"""Settings from the environment and a YAML file: the environment wins, bad values are named."""

from __future__ import annotations

from pathlib import Path

import pytest

from kz_events.config import Settings, load_settings
from kz_events.errors import ConfigError

pytestmark = pytest.mark.unit


def test_defaults_without_any_source() -> None:
    """With no environment and no file every setting has its documented default."""
    settings = load_settings({})
    assert settings == Settings()
    assert (settings.host, settings.port, settings.longpoll_timeout_s) == ("127.0.0.1", 8000, 30.0)
    assert settings.nats_url is None
    assert settings.data_dir == Path(".kz")
    assert settings.task_timeout_s == 600.0
    assert settings.effective_index_path == Path("index.json")


def test_environment_values_are_typed() -> None:
    """Environment strings become ints, floats, bools, paths, lists and JSON mappings."""
    settings = load_settings(
        {
            "KZ_NATS_URL": "nats://10.0.0.1:4222",
            "KZ_DATA_DIR": "/var/lib/kz",
            "KZ_NATS_SYNC_ALWAYS": "false",
            "KZ_KERNEL_REPO_PATH": "/srv/kernels",
            "KZ_PORT": "9000",
            "KZ_LONGPOLL_TIMEOUT_S": "12.5",
            "KZ_RUNNER_KEYS_JSON": '{"k1": ["sm90", "sm80"]}',
            "KZ_SUBMITTER_TOKENS_JSON": '{"t": "alice"}',
            "KZ_MAINTAINERS": "alice, bob,,",
            "KZ_RUNNER_ARCH": "sm90",
            "KZ_RUNNER_BACKEND": "docker",
            "KZ_MAX_ATTEMPTS": "5",
            "KZ_RUNNER_CPU": "3",
        }
    )
    assert settings.nats_url == "nats://10.0.0.1:4222"
    assert settings.data_dir == Path("/var/lib/kz")
    assert settings.nats_sync_always is False
    assert settings.kernel_repo_path == Path("/srv/kernels")
    assert settings.effective_index_path == Path("/srv/index.json")
    assert settings.port == 9000
    assert settings.longpoll_timeout_s == 12.5
    assert settings.runner_keys == {"k1": ["sm90", "sm80"]}
    assert settings.submitter_tokens == {"t": "alice"}
    assert settings.maintainers == ["alice", "bob"]
    assert settings.runner_arch == ["sm90"]
    assert settings.runner_backend == "docker"
    assert settings.max_attempts == 5
    assert settings.runner_cpu == 3


def test_empty_environment_values_count_as_unset() -> None:
    """An empty variable leaves the default in place rather than failing."""
    assert load_settings({"KZ_PORT": "", "KZ_NATS_URL": ""}) == Settings()


def test_yaml_file_accepts_field_and_variable_names(tmp_path: Path) -> None:
    """A YAML file may use field names or the KZ_ variable names, with native YAML types."""
    path = tmp_path / "kz.yaml"
    path.write_text(
        "port: 8100\n"
        "KZ_HOST: 0.0.0.0\n"
        "runner_keys_json: {k: [sm90]}\n"
        "maintainers: [alice]\n"
        "index_path: /tmp/index.json\n"
    )
    settings = load_settings({}, path)
    assert settings.port == 8100
    assert settings.host == "0.0.0.0"
    assert settings.runner_keys == {"k": ["sm90"]}
    assert settings.maintainers == ["alice"]
    assert settings.effective_index_path == Path("/tmp/index.json")


def test_environment_wins_over_the_file(tmp_path: Path) -> None:
    """A variable set in the environment overrides the same setting in the file."""
    path = tmp_path / "kz.yaml"
    path.write_text("port: 8100\nhost: 10.1.1.1\n")
    settings = load_settings({"KZ_PORT": "8200"}, str(path))
    assert (settings.port, settings.host) == (8200, "10.1.1.1")


def test_environment_repairs_a_bad_file_value(tmp_path: Path) -> None:
    """A bad value in the file is not reported when the environment overrides it."""
    path = tmp_path / "kz.yaml"
    path.write_text("port: nope\n")
    assert load_settings({"KZ_PORT": "8300"}, path).port == 8300


def test_process_environment_is_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without an explicit mapping the process environment is read."""
    monkeypatch.setenv("KZ_PORT", "8765")
    assert load_settings().port == 8765


BAD_VALUES = [
    ({"KZ_PORT": "abc"}, "KZ_PORT: expected int, got 'abc'"),
    ({"KZ_PORT": "0"}, "KZ_PORT: expected a positive number, got 0"),
    ({"KZ_PORT": "70000"}, "KZ_PORT: expected a port number 1-65535, got 70000"),
    ({"KZ_NATS_SYNC_ALWAYS": "maybe"}, "KZ_NATS_SYNC_ALWAYS: expected bool, got 'maybe'"),
    ({"KZ_RUNNER_KEYS_JSON": "{"}, "KZ_RUNNER_KEYS_JSON: expected JSON, got '{'"),
    ({"KZ_RUNNER_KEYS_JSON": "[1]"}, "KZ_RUNNER_KEYS_JSON: expected object, got [1]"),
    ({"KZ_RUNNER_KEYS_JSON": '{"k": [1]}'}, "KZ_RUNNER_KEYS_JSON: expected str at runner_keys"),
    ({"KZ_RUNNER_KEYS_JSON": '{"k": []}'}, 'KZ_RUNNER_KEYS_JSON: expected {"key": ["arch", ...]}'),
    ({"KZ_SUBMITTER_TOKENS_JSON": "x"}, "KZ_SUBMITTER_TOKENS_JSON: expected JSON, got 'x'"),
    ({"KZ_LEASE_S": "-1"}, "KZ_LEASE_S: expected a positive number, got -1.0"),
    ({"KZ_LEASE_S": "nan"}, "KZ_LEASE_S: expected a positive number, got nan"),
    ({"KZ_HEARTBEAT_S": "inf"}, "KZ_HEARTBEAT_S: expected a positive number, got inf"),
    ({"KZ_TASK_TIMEOUT_S": "ten"}, "KZ_TASK_TIMEOUT_S: expected float, got 'ten'"),
    ({"KZ_MAX_ATTEMPTS": "1.5"}, "KZ_MAX_ATTEMPTS: expected int, got '1.5'"),
    ({"KZ_MAX_UPLOAD_BYTES": "-5"}, "KZ_MAX_UPLOAD_BYTES: expected a positive number, got -5"),
    ({"KZ_REPLICAS": "0"}, "KZ_REPLICAS: expected a positive number, got 0"),
    ({"KZ_RUNNER_CPU": "-1"}, "KZ_RUNNER_CPU: expected a CPU number (0, 1, ...), got -1"),
    ({"KZ_RUNNER_CPU": "last"}, "KZ_RUNNER_CPU: expected int | null, got 'last'"),
    ({"KZ_RUNNER_BACKEND": "vm"}, "KZ_RUNNER_BACKEND: expected one of docker, sandbox, stub"),
    ({"KZ_NATS_URL": "http://x:4222"}, "KZ_NATS_URL: expected a nats:// or tls:// URL"),
]


@pytest.mark.parametrize(("environ", "line"), BAD_VALUES)
def test_one_clear_line_per_bad_value(environ: dict[str, str], line: str) -> None:
    """A bad value stops loading with one line: the variable, what it expects, what came."""
    with pytest.raises(ConfigError) as caught:
        load_settings(environ)
    message = caught.value.message
    assert "\n" not in message
    assert message.startswith(line)
    assert caught.value.details["problems"] == [message]
    assert caught.value.code == "invalid_config"


def test_every_bad_value_gets_its_own_line() -> None:
    """Several bad values are reported together, one line each."""
    with pytest.raises(ConfigError) as caught:
        load_settings({"KZ_PORT": "abc", "KZ_LEASE_S": "x", "KZ_RUNNER_KEYS_JSON": "{"})
    lines = caught.value.message.splitlines()
    assert len(lines) == 3
    assert {line.split(":")[0] for line in lines} == {
        "KZ_PORT",
        "KZ_LEASE_S",
        "KZ_RUNNER_KEYS_JSON",
    }


def test_every_semantic_problem_gets_its_own_line() -> None:
    """Range and choice checks also report every bad value, not just the first."""
    with pytest.raises(ConfigError) as caught:
        load_settings({"KZ_PORT": "70000", "KZ_RUNNER_BACKEND": "vm", "KZ_LEASE_S": "0"})
    assert len(caught.value.message.splitlines()) == 3


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("- a\n- b\n", "expected a mapping of settings, got list"),
        ("colour: blue\n", "unknown setting 'colour'"),
        ("port: [unclosed\n", "cannot read YAML settings"),
    ],
)
def test_bad_files_are_named(tmp_path: Path, text: str, expected: str) -> None:
    """A file that is not a mapping of known settings is refused naming the file."""
    path = tmp_path / "kz.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match="--config") as caught:
        load_settings({}, path)
    assert expected in caught.value.message
    assert str(path) in caught.value.message


def test_missing_file_is_named(tmp_path: Path) -> None:
    """A config file that does not exist is refused naming its path."""
    with pytest.raises(ConfigError, match="cannot read"):
        load_settings({}, tmp_path / "absent.yaml")


def test_empty_file_means_defaults(tmp_path: Path) -> None:
    """An empty YAML file sets nothing."""
    path = tmp_path / "kz.yaml"
    path.write_text("")
    assert load_settings({}, path) == Settings()


def test_bad_file_value_names_the_setting(tmp_path: Path) -> None:
    """A wrongly typed value in the file is reported against its setting's variable name."""
    path = tmp_path / "kz.yaml"
    path.write_text("port: nope\ndata_dir: 3\n")
    with pytest.raises(ConfigError) as caught:
        load_settings({}, path)
    assert caught.value.message.splitlines() == [
        "KZ_PORT: expected int, got 'nope'",
        "KZ_DATA_DIR: expected path, got 3",
    ]
