"""Settings of CONTRACTS.md, from the environment or a YAML file (the environment wins).

Every setting is validated at start; a bad one stops start-up with one line naming the
variable and what it expects.
"""

from __future__ import annotations

import ipaddress
import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec
import yaml

from kz_events.errors import ConfigError

__all__ = ["Settings", "check_exposure", "exposure_problems", "is_loopback", "load_settings"]


class Settings(msgspec.Struct, frozen=True, kw_only=True):
    """All settings of every part; each part reads the ones it needs."""

    nats_url: str | None = None
    data_dir: Path = Path(".kz")
    nats_sync_always: bool = True
    kernel_repo_path: Path = Path("kernel_data")
    index_path: Path | None = None
    host: str = "127.0.0.1"
    port: int = 8000
    runner_keys: dict[str, list[str]] = msgspec.field(default_factory=dict)
    submitter_tokens: dict[str, str] = msgspec.field(default_factory=dict)
    maintainers: list[str] = msgspec.field(default_factory=list)
    longpoll_timeout_s: float = 30.0
    git_author_name: str = "kernel zoo"
    git_author_email: str = "bot@kernel-zoo.invalid"
    # runner
    server_url: str = "http://127.0.0.1:8000"
    runner_key: str | None = None
    runner_arch: list[str] = msgspec.field(default_factory=list)
    runner_id: str | None = None
    runner_backend: str = "sandbox"
    runner_image: str = "kernel-zoo-runner:latest"
    runner_gpus: str | None = None  # none, all or indices "0,1" (default: sandbox none, docker all)
    runner_readonly: list[str] = msgspec.field(default_factory=list)  # more read-only paths
    runner_bwrap: str = "bwrap"  # the sandbox's bubblewrap binary
    runner_cpu: int | None = None  # the CPU a runner's judges are pinned to (None: the last)
    task_timeout_s: float = 600.0
    step_timeout_s: float = 300.0
    runner_workdir: Path = Path(".kz/work")
    heartbeat_s: float = 2.0
    lease_s: float = 15.0
    max_attempts: int = 3
    # limits
    max_upload_bytes: int = 32 * 1024 * 1024
    max_open_submissions: int = 50
    # submissions of one kernel by one submitter per window (0: no limit); kz_events.admission
    resubmit_limit: int = 6
    resubmit_window_s: float = 3600.0
    replicas: int = 1
    lease_secret: str | None = None
    # an API on an address other than loopback (check_exposure)
    open_submissions: bool = False
    max_kernel_lease_s: float = 24 * 3600.0
    # bounds on clients of the API
    head_timeout_s: float = 10.0
    slow_reader_s: float = 30.0
    max_event_streams: int = 200

    @property
    def effective_index_path(self) -> Path:
        return self.index_path or (self.kernel_repo_path.parent / "index.json")


# Variable name → (field, parser description). JSON-valued variables are decoded first.
_ENV: dict[str, str] = {
    "KZ_NATS_URL": "nats_url",
    "KZ_DATA_DIR": "data_dir",
    "KZ_NATS_SYNC_ALWAYS": "nats_sync_always",
    "KZ_KERNEL_REPO_PATH": "kernel_repo_path",
    "KZ_INDEX_PATH": "index_path",
    "KZ_HOST": "host",
    "KZ_PORT": "port",
    "KZ_RUNNER_KEYS_JSON": "runner_keys",
    "KZ_SUBMITTER_TOKENS_JSON": "submitter_tokens",
    "KZ_MAINTAINERS": "maintainers",
    "KZ_LONGPOLL_TIMEOUT_S": "longpoll_timeout_s",
    "KZ_GIT_AUTHOR_NAME": "git_author_name",
    "KZ_GIT_AUTHOR_EMAIL": "git_author_email",
    "KZ_SERVER_URL": "server_url",
    "KZ_RUNNER_KEY": "runner_key",
    "KZ_RUNNER_ARCH": "runner_arch",
    "KZ_RUNNER_ID": "runner_id",
    "KZ_RUNNER_BACKEND": "runner_backend",
    "KZ_RUNNER_IMAGE": "runner_image",
    "KZ_RUNNER_GPUS": "runner_gpus",
    "KZ_RUNNER_READONLY": "runner_readonly",
    "KZ_RUNNER_BWRAP": "runner_bwrap",
    "KZ_RUNNER_CPU": "runner_cpu",
    "KZ_TASK_TIMEOUT_S": "task_timeout_s",
    "KZ_STEP_TIMEOUT_S": "step_timeout_s",
    "KZ_RUNNER_WORKDIR": "runner_workdir",
    "KZ_HEARTBEAT_S": "heartbeat_s",
    "KZ_LEASE_S": "lease_s",
    "KZ_MAX_ATTEMPTS": "max_attempts",
    "KZ_MAX_UPLOAD_BYTES": "max_upload_bytes",
    "KZ_MAX_OPEN_SUBMISSIONS": "max_open_submissions",
    "KZ_RESUBMIT_LIMIT": "resubmit_limit",
    "KZ_RESUBMIT_WINDOW_S": "resubmit_window_s",
    "KZ_REPLICAS": "replicas",
    "KZ_LEASE_SECRET": "lease_secret",
    "KZ_OPEN_SUBMISSIONS": "open_submissions",
    "KZ_MAX_KERNEL_LEASE_S": "max_kernel_lease_s",
    "KZ_HEAD_TIMEOUT_S": "head_timeout_s",
    "KZ_SLOW_READER_S": "slow_reader_s",
    "KZ_MAX_EVENT_STREAMS": "max_event_streams",
}
_FIELD_TO_ENV = {field: env for env, field in _ENV.items()}
_JSON_FIELDS = {"runner_keys", "submitter_tokens"}
_LIST_FIELDS = {"maintainers", "runner_arch", "runner_readonly"}
_POSITIVE = {
    "port",
    "longpoll_timeout_s",
    "task_timeout_s",
    "step_timeout_s",
    "heartbeat_s",
    "lease_s",
    "max_attempts",
    "max_upload_bytes",
    "max_open_submissions",
    "resubmit_window_s",
    "replicas",
    "max_kernel_lease_s",
    "head_timeout_s",
    "slow_reader_s",
    "max_event_streams",
}
MIN_LEASE_SECRET = 16
_BACKENDS = {"docker", "sandbox", "stub"}


def _from_env(environ: Mapping[str, str], problems: list[str]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for env, field in _ENV.items():
        raw = environ.get(env)
        if raw is None or raw == "":
            continue
        if field in _JSON_FIELDS:
            try:
                values[field] = json.loads(raw)
            except json.JSONDecodeError as exc:
                problems.append(f"{env}: expected JSON, got {raw!r} ({exc.msg})")
        elif field in _LIST_FIELDS:
            values[field] = [item.strip() for item in raw.split(",") if item.strip()]
        else:
            values[field] = raw
    return values


def _from_file(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"--config {path}: cannot read YAML settings ({exc})") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"--config {path}: expected a mapping of settings, got {type(data).__name__}"
        )
    values: dict[str, Any] = {}
    for key, value in data.items():
        field = _ENV.get(str(key), str(key).lower().removeprefix("kz_").removesuffix("_json"))
        if field not in Settings.__struct_fields__:
            raise ConfigError(f"--config {path}: unknown setting {key!r}")
        values[field] = value
    return values


def _name(field: str) -> str:
    return _FIELD_TO_ENV.get(field, field)


def load_settings(
    environ: Mapping[str, str] | None = None, config_file: Path | str | None = None
) -> Settings:
    """Settings from `config_file` overlaid by `environ` (default: the process environment).

    Every bad value is reported, one line each, in a single `ConfigError`.
    """
    environ = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    problems: list[str] = []
    if config_file:
        values.update(_from_file(Path(config_file)))
    values.update(_from_env(environ, problems))
    for field, value in values.items():
        try:
            _convert({field: value})
        except msgspec.ValidationError as exc:
            problems.append(_describe(field, value, exc))
    if not problems:
        settings = _convert(values)
        problems.extend(_check(settings))
    if problems:
        raise ConfigError("\n".join(problems), details={"problems": problems})
    return settings


def _convert(values: dict[str, Any]) -> Settings:
    return msgspec.convert(values, Settings, strict=False, dec_hook=_decode_path)


def _decode_path(kind: type, value: Any) -> Any:
    """msgspec has no `Path` type of its own: build one from a non-empty string."""
    if kind is Path and isinstance(value, str) and value:
        return Path(value)
    raise TypeError("Expected `path`")


def _describe(field: str, value: Any, exc: msgspec.ValidationError) -> str:
    """One line from msgspec's "Expected `int`, got `str` - at `$.port`" and the bad value."""
    message, _, where = str(exc).partition(" - at `$.")
    expected = message.split(", got")[0].replace("`", "")
    inner = where.rstrip("`").removeprefix(field)
    at = f" at {field}{inner}" if inner else ""
    return f"{_name(field)}: {expected[:1].lower()}{expected[1:]}{at}, got {value!r}"


def _check(settings: Settings) -> list[str]:
    problems: list[str] = []
    for field in sorted(_POSITIVE):
        value = getattr(settings, field)
        if not (math.isfinite(value) and value > 0):
            problems.append(f"{_name(field)}: expected a positive number, got {value}")
    if settings.runner_cpu is not None and settings.runner_cpu < 0:
        problems.append(
            f"KZ_RUNNER_CPU: expected a CPU number (0, 1, ...), got {settings.runner_cpu}"
        )
    if settings.resubmit_limit < 0:
        problems.append(
            f"KZ_RESUBMIT_LIMIT: expected a count of submissions (0: no limit), "
            f"got {settings.resubmit_limit}"
        )
    if settings.port > 65535:
        problems.append(f"KZ_PORT: expected a port number 1-65535, got {settings.port}")
    if settings.runner_backend not in _BACKENDS:
        got = settings.runner_backend
        problems.append(f"KZ_RUNNER_BACKEND: expected one of docker, sandbox, stub, got {got!r}")
    problems.extend(_runner_device_problems(settings))
    if settings.nats_url is not None and not settings.nats_url.startswith(("nats://", "tls://")):
        problems.append(f"KZ_NATS_URL: expected a nats:// or tls:// URL, got {settings.nats_url!r}")
    for key, arches in settings.runner_keys.items():
        if not key or not arches:
            problems.append(
                f'KZ_RUNNER_KEYS_JSON: expected {{"key": ["arch", ...]}}, got key {key!r}'
            )
    if settings.lease_secret is not None and len(settings.lease_secret) < MIN_LEASE_SECRET:
        problems.append(
            f"KZ_LEASE_SECRET: expected at least {MIN_LEASE_SECRET} characters, "
            f"got {len(settings.lease_secret)}"
        )
    return problems


def _runner_device_problems(settings: Settings) -> list[str]:
    """KZ_RUNNER_GPUS is none, all or device indices; KZ_RUNNER_READONLY absolute paths."""
    problems: list[str] = []
    gpus = settings.runner_gpus
    if gpus is not None and gpus.strip().lower() not in ("none", "all"):
        items = gpus.split(",")
        if not all(item.strip().isdigit() for item in items):
            problems.append(
                f"KZ_RUNNER_GPUS: expected none, all or device indices such as 0,1, got {gpus!r}"
            )
    for path in settings.runner_readonly:
        if not path.startswith("/"):
            problems.append(f"KZ_RUNNER_READONLY: expected absolute paths, got {path!r}")
    return problems


def is_loopback(host: str) -> bool:
    """Whether an API bound to `host` is reachable from this machine only."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name or a wildcard address: reachable from elsewhere


def exposure_problems(settings: Settings, host: str | None = None) -> list[str]:
    """What an API listening on `host` (default `settings.host`) lacks to be open to others:
    one line per missing setting, none when `host` is loopback.

    Off loopback, strangers reach the API: every runner needs a key (without keys any
    `X-Runner-Key` is accepted), submitters need tokens unless open submissions are chosen
    explicitly, and lease tokens need a secret that every API replica shares (each replica
    makes its own otherwise, and refuses the leases of the others)."""
    host = settings.host if host is None else host
    if is_loopback(host):
        return []
    where = f"the API listens on {host}, not on loopback"
    problems: list[str] = []
    if not settings.runner_keys:
        problems.append(
            f'KZ_RUNNER_KEYS_JSON: {where}: expected runner keys {{"key": ["arch", ...]}}, got none'
        )
    if not settings.submitter_tokens and not settings.open_submissions:
        problems.append(
            f'KZ_SUBMITTER_TOKENS_JSON: {where}: expected submitter tokens {{"token": '
            '"submitter-id"}, or KZ_OPEN_SUBMISSIONS=true to accept any X-Submitter-Id, got neither'
        )
    if not settings.lease_secret:
        problems.append(
            f"KZ_LEASE_SECRET: {where}: expected a secret of at least {MIN_LEASE_SECRET} "
            "characters shared by every API replica, got none"
        )
    return problems


def check_exposure(settings: Settings, host: str | None = None) -> None:
    """Refuse to serve on `host` (see `exposure_problems`) with one line per missing setting."""
    problems = exposure_problems(settings, host)
    if problems:
        raise ConfigError("\n".join(problems), details={"problems": problems})
