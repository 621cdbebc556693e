"""Where the commands find the running stack: NATS from `--nats-url`, `KZ_NATS_URL`, or the
embedded server a `kz up` in the same data directory is running; the API from `--server`,
`KZ_SERVER_URL`, or that `kz up`'s HTTP address.

`kz up` picks a free port for its embedded server each start and writes the URL to
`<data_dir>/nats.url` (its API's to `<data_dir>/api.url`), removing both when it stops, so
`kz events tail`, `kz audit`, `kz index`, `kz submit` or `kz logs` run next to it need no flag.
"""

from __future__ import annotations

from pathlib import Path

from kz_events.config import Settings
from kz_events.errors import ConfigError

__all__ = [
    "API_URL_FILE",
    "URL_FILE",
    "forget_local_url",
    "nats_url_for",
    "remember_local_url",
    "server_url_for",
]

URL_FILE = "nats.url"
API_URL_FILE = "api.url"


def remember_local_url(data_dir: Path, url: str, name: str = URL_FILE) -> None:
    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / name).write_text(url + "\n")


def forget_local_url(data_dir: Path, name: str = URL_FILE) -> None:
    (data_dir / name).unlink(missing_ok=True)


def server_url_for(flag: str | None, settings: Settings) -> str:
    """The API a command should call: the flag, a configured `KZ_SERVER_URL`, the `kz up`
    of this data dir, else the default address."""
    if flag:
        return flag
    if settings.server_url != Settings().server_url:
        return settings.server_url
    local = Path(settings.data_dir) / API_URL_FILE
    if local.is_file() and (url := local.read_text().strip()):
        return url
    return settings.server_url


def nats_url_for(flag: str | None, settings: Settings) -> str:
    """The NATS URL a command should use; `ConfigError` naming every way to give one."""
    if flag:
        return flag
    if settings.nats_url:
        return settings.nats_url
    local = Path(settings.data_dir) / URL_FILE
    if local.is_file() and (url := local.read_text().strip()):
        return url
    raise ConfigError(
        "KZ_NATS_URL: expected the NATS URL of the running stack (or --nats-url; a `kz up` "
        f"using data dir {settings.data_dir} writes its own to {local})"
    )
