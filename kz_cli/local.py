"""Where the commands that talk to NATS find it: `--nats-url`, `KZ_NATS_URL`, or the
embedded server a `kz up` in the same data directory is running.

`kz up` picks a free port for its embedded server each start and writes the URL to
`<data_dir>/nats.url`, removing it when it stops, so `kz events tail`, `kz audit` or
`kz index` run next to it need no flag.
"""

from __future__ import annotations

from pathlib import Path

from kz_events.config import Settings
from kz_events.errors import ConfigError

__all__ = ["URL_FILE", "forget_local_url", "nats_url_for", "remember_local_url"]

URL_FILE = "nats.url"


def remember_local_url(data_dir: Path, url: str) -> None:
    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / URL_FILE).write_text(url + "\n")


def forget_local_url(data_dir: Path) -> None:
    (data_dir / URL_FILE).unlink(missing_ok=True)


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
