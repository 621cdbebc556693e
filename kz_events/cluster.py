"""The NATS side of a real deployment: per-role permissions rendered as server configuration,
and `LocalCluster`, an N-node JetStream cluster of `nats-server` processes on loopback.

`render_permissions` is the one source of the permission model: `deploy/nats/accounts.conf` is
generated from it (`python -m kz_events.cluster deploy/nats/accounts.conf`) and tests start
servers with it.

The model holds against the server's own features. Every JetStream API request and every
publish to a stream subject names a reply subject that the server answers on without checking
it against the requester's permissions, so each grant below is also a way to make the server
publish somewhere. What the server publishes that way is a JetStream API document, a publish
acknowledgement, or a copy of a message already stored, never bytes the requester chose: no
role gets the direct get (`$JS.API.DIRECT.GET`), which answers with a stored body verbatim.
Runners get no NATS user at all: they reach the platform through the API with their runner key,
which checks every claim and result against the lifecycle rules (docs/decisions.md).
"""

from __future__ import annotations

import json
import re
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from kz_events.errors import ConfigError, LogUnavailable
from kz_events.server import EmbeddedServer, free_port
from kz_events.subjects import (
    EVENTS_STREAM,
    EXHAUSTED_ADVISORY,
    JUDGES_BUCKET,
    LIVE_STREAM,
    LOGS_BUCKET,
    PACKAGES_BUCKET,
)

__all__ = [
    "LocalCluster",
    "Permissions",
    "deploy_passwords",
    "main",
    "password_env_var",
    "render_permissions",
    "role_permissions",
    "role_users",
]

EVENTS = EVENTS_STREAM
LIVE = LIVE_STREAM
PACKAGES = PACKAGES_BUCKET
LOGS = LOGS_BUCKET
JUDGES = JUDGES_BUCKET
ACCOUNT = "KZ"
SYSTEM_USER = "sys"
SERVICE_USERS = ("admin", "api", "projector")
SWEEPER_ADVISORY = EXHAUSTED_ADVISORY
"""What the sweeper listens on: a task that used up its deliveries (kz_projector.sweeper)."""

_ENV_REFERENCE = re.compile(r"\$[A-Z_][A-Z0-9_]*")
_SUBMISSION_BY_API = (
    "submitted",
    "claimed",
    "result",
    "cancelled",
    "disqualified",
    "suspect_cleared",
)
# The referee opens confirmation runs (`submitted` with `confirms`) and ends them, and
# returns a result it measures again to the queue (`requeued`).
_SUBMISSION_BY_PROJECTOR = (
    "submitted",
    "requeued",
    "accepted",
    "rejected",
    "failed",
    "committed",
    "suspect",
    "confirmed",
    "disputed",
)


@dataclass(frozen=True, slots=True)
class Permissions:
    """The subjects one user may publish to and subscribe to; everything else is refused."""

    publish: tuple[str, ...]
    subscribe: tuple[str, ...]


def role_users() -> tuple[str, ...]:
    """Every user the rendered configuration defines, the system user last (runners have none:
    they use the API with a runner key)."""
    return (*SERVICE_USERS, SYSTEM_USER)


def password_env_var(user: str) -> str:
    """The environment variable a deployment keeps a user's password in."""
    return "KZ_NATS_" + re.sub(r"[^A-Z0-9]", "_", user.upper()) + "_PASSWORD"


def deploy_passwords() -> dict[str, str]:
    """Passwords as `$VAR` references, which nats-server resolves from its environment."""
    return {user: "$" + password_env_var(user) for user in role_users()}


# --- JetStream API subjects, grouped by what a client does ------------------------------


def _js_common() -> list[str]:
    return ["$JS.API.INFO", "$JS.API.STREAM.NAMES", "$JS.API.STREAM.LIST"]


def _stream_provision(stream: str) -> list[str]:
    # Create only: creating an existing stream with the same configuration succeeds, so every
    # service can ensure its streams at start. Update (which could shorten retention) and
    # delete are the admin's.
    return [f"$JS.API.STREAM.CREATE.{stream}"]


def _stream_read(stream: str) -> list[str]:
    # Message get, never direct get: a message get answers with an API document that wraps
    # the stored message, so a reply aimed at an event subject stores no event; a direct get
    # answers with the stored body itself (see the module docstring).
    return [f"$JS.API.STREAM.INFO.{stream}", f"$JS.API.STREAM.MSG.GET.{stream}"]


def _consumers(stream: str) -> list[str]:
    """Create, inspect, pull from, delete and ack any consumer of `stream`."""
    api = "$JS.API.CONSUMER"
    return [
        f"{api}.CREATE.{stream}",
        f"{api}.CREATE.{stream}.>",
        f"{api}.DURABLE.CREATE.{stream}.>",
        f"{api}.INFO.{stream}.>",
        f"{api}.MSG.NEXT.{stream}.>",
        f"{api}.DELETE.{stream}.>",
        f"{api}.NAMES.{stream}",
        f"{api}.LIST.{stream}",
        f"$JS.ACK.{stream}.>",
        f"$JS.FC.{stream}.>",
    ]


def _object_get(bucket: str) -> list[str]:
    # A get reads the meta message, then streams the chunks through an ordered push consumer.
    stream = f"OBJ_{bucket}"
    return [
        *_stream_read(stream),
        f"$JS.API.CONSUMER.CREATE.{stream}",
        f"$JS.API.CONSUMER.CREATE.{stream}.>",
        f"$JS.FC.{stream}.>",
    ]


def _object_put(bucket: str, *, replace: bool) -> list[str]:
    # A put looks up the existing meta, publishes chunks then the meta; replacing an object
    # purges the old chunks, which is the only purge ever granted.
    stream = f"OBJ_{bucket}"
    subjects = [
        f"$JS.API.STREAM.INFO.{stream}",
        f"$JS.API.STREAM.MSG.GET.{stream}",
        f"$O.{bucket}.C.>",
        f"$O.{bucket}.M.>",
    ]
    return [*subjects, f"$JS.API.STREAM.PURGE.{stream}"] if replace else subjects


def _provision_all() -> list[str]:
    streams = (EVENTS, LIVE, f"OBJ_{PACKAGES}", f"OBJ_{LOGS}", f"OBJ_{JUDGES}")
    return [s for stream in streams for s in (*_stream_provision(stream), *_stream_read(stream))]


def _events(aggregate: str, types: Sequence[str], arch: str = "*") -> list[str]:
    return [f"kz.ev.{aggregate}.{arch}.*.{t}" for t in types]


def _dedupe(subjects: Sequence[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(subjects))


def _api() -> Permissions:
    publish = [
        *_events("submission", _SUBMISSION_BY_API),
        *_events("kernel", ("claimed", "released", "board_reviewed", "reference_pinned")),
        *_events("runner", ("registered", "deregistered")),
        "kz.live.>",
        *_js_common(),
        *_provision_all(),
        *_consumers(EVENTS),
        *_consumers(LIVE),
        *_object_get(PACKAGES),
        *_object_put(PACKAGES, replace=True),
        *_object_get(LOGS),
        *_object_put(LOGS, replace=True),
        # Judge bundles are the projector's: the API serves them to runners, never writes them.
        *_object_get(JUDGES),
    ]
    return Permissions(_dedupe(publish), ("kz.>", "_INBOX.>"))


def _projector() -> Permissions:
    publish = [
        *_events("submission", _SUBMISSION_BY_PROJECTOR),
        *_events("kernel", ("imported",)),
        *_js_common(),
        *_provision_all(),
        *_consumers(EVENTS),
        *_consumers(LIVE),
        *_object_get(PACKAGES),
        *_object_put(PACKAGES, replace=True),
        *_object_get(LOGS),
        *_object_get(JUDGES),
        *_object_put(JUDGES, replace=True),
    ]
    return Permissions(_dedupe(publish), ("kz.>", "_INBOX.>", SWEEPER_ADVISORY))


def role_permissions() -> dict[str, Permissions]:
    """Each user of the KZ account and what it may do (pure)."""
    return {"admin": Permissions((">",), (">",)), "api": _api(), "projector": _projector()}


# --- rendering ---------------------------------------------------------------------------


def _quoted(text: str) -> str:
    return json.dumps(text)


def _password(user: str, value: str) -> str:
    if _ENV_REFERENCE.fullmatch(value):
        return value
    if not value or any(c in value for c in '"\\') or not value.isprintable():
        raise ConfigError(
            f"NATS password of {user}: expected printable characters without quotes or "
            "backslashes, or a $VARIABLE reference, got an empty value or one with such a character"
        )
    return _quoted(value)


def _subject_list(subjects: Sequence[str], indent: str) -> str:
    inner = "".join(f"{indent}  {_quoted(s)}\n" for s in subjects)
    return f"[\n{inner}{indent}]"


def _user_block(user: str, password: str, perms: Permissions | None) -> str:
    lines = [f"      {{\n        user: {_quoted(user)}\n        password: {password}\n"]
    if perms is not None:
        pad = " " * 10
        lines.append(
            "        permissions: {\n"
            f"          publish: {{ allow: {_subject_list(perms.publish, pad)} }}\n"
            f"          subscribe: {{ allow: {_subject_list(perms.subscribe, pad)} }}\n"
            "        }\n"
        )
    lines.append("      }\n")
    return "".join(lines)


def render_permissions(passwords: dict[str, str]) -> str:
    """NATS configuration text: the JetStream account `KZ` with one user per role, and `SYS`.

    `passwords` maps every name of `role_users()` to a password or a `$VARIABLE`.
    """
    users = role_users()
    missing = [u for u in users if u not in passwords]
    if missing:
        raise ConfigError(
            f"NATS passwords: expected one for each of {list(users)}, missing {missing}"
        )
    roles = role_permissions()
    kz_users = "".join(_user_block(u, _password(u, passwords[u]), roles[u]) for u in roles)
    sys_user = _user_block(SYSTEM_USER, _password(SYSTEM_USER, passwords[SYSTEM_USER]), None)
    return (
        "# Generated by kz_events.cluster.render_permissions; edit the code, not this file.\n"
        f"accounts {{\n  {ACCOUNT} {{\n    jetstream: enabled\n"
        f"    users: [\n{kz_users}    ]\n  }}\n"
        f"  SYS {{\n    users: [\n{sys_user}    ]\n  }}\n}}\nsystem_account: SYS\n"
    )


# --- a local cluster ---------------------------------------------------------------------


def _http_json(url: str) -> dict[str, object] | None:
    try:
        with urllib.request.urlopen(url, timeout=1.0) as response:  # noqa: S310 (loopback http)
            data: dict[str, object] = json.load(response)
            return data
    except (OSError, ValueError):
        return None


@dataclass
class LocalCluster:
    """`size` `nats-server` processes on loopback forming one JetStream cluster.

    Each node has its own store under `base_dir/node-<i>`, `sync_interval: always`, a route to
    every node and a monitoring port; `extra_config` (accounts, limits) goes to every node.
    """

    base_dir: Path
    size: int = 3
    extra_config: str = ""
    name: str = "kz-local"
    servers: list[EmbeddedServer] = field(default_factory=list, init=False)
    _monitor_ports: list[int] = field(default_factory=list, init=False, repr=False)

    @property
    def urls(self) -> list[str]:
        return [server.url for server in self.servers]

    def monitor_url(self, i: int) -> str:
        return f"http://127.0.0.1:{self._monitor_ports[i]}"

    def start(self, *, timeout_s: float = 30.0) -> LocalCluster:
        if self.size < 1:
            raise ConfigError(f"cluster size: expected at least 1 node, got {self.size}")
        route_ports = [free_port() for _ in range(self.size)]
        self._monitor_ports = [free_port() for _ in range(self.size)]
        routes = ", ".join(f"nats-route://127.0.0.1:{p}" for p in route_ports)
        for i, route_port in enumerate(route_ports):
            cluster = (
                f'http: "127.0.0.1:{self._monitor_ports[i]}"\n'
                f'cluster {{\n  name: "{self.name}"\n  listen: "127.0.0.1:{route_port}"\n'
                f"  routes: [{routes}]\n}}\n"
            )
            server = EmbeddedServer(
                self.base_dir / f"node-{i}",
                server_name=f"{self.name}-{i}",
                extra_config=cluster + self.extra_config,
            )
            self.servers.append(server)
        try:
            for server in self.servers:
                server.start(timeout_s=timeout_s)
            self.wait_ready(timeout_s=timeout_s)
        except BaseException:
            self.stop()
            raise
        return self

    def wait_ready(self, *, timeout_s: float = 30.0) -> None:
        """Wait until JetStream has a meta leader and every running node reports healthy."""
        live = [i for i, s in enumerate(self.servers) if s.pid is not None]
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.meta_leader() is not None and all(self._healthy(i) for i in live):
                return
            time.sleep(0.05)
        raise LogUnavailable(
            f"JetStream cluster {self.name!r}: expected a meta leader and {len(live)} healthy "
            f"nodes within {timeout_s}s, got leader {self.meta_leader()!r}"
        )

    def _healthy(self, i: int) -> bool:
        return _http_json(self.monitor_url(i) + "/healthz") == {"status": "ok"}

    def meta_leader(self) -> str | None:
        """The server name of the JetStream meta leader, as a running node sees it."""
        for i, server in enumerate(self.servers):
            if server.pid is None:
                continue
            jsz = _http_json(self.monitor_url(i) + "/jsz")
            meta = jsz.get("meta_cluster") if jsz else None
            leader = meta.get("leader") if isinstance(meta, dict) else None
            if isinstance(leader, str) and leader:
                return leader
        return None

    def index_of(self, server_name: str) -> int:
        for i, server in enumerate(self.servers):
            if server.server_name == server_name:
                return i
        names = [s.server_name for s in self.servers]
        raise ConfigError(f"cluster node: expected one of {names}, got {server_name!r}")

    def kill(self, i: int) -> None:
        """SIGKILL node `i`, as a crash would; its store stays for `restart`."""
        self.servers[i].kill()

    def restart(self, i: int, *, timeout_s: float = 30.0) -> None:
        """Start node `i` again on the same ports and store, and wait until it is healthy."""
        self.servers[i].start(timeout_s=timeout_s)
        self.wait_ready(timeout_s=timeout_s)

    def stop(self) -> None:
        for server in self.servers:
            server.stop()

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def main(argv: Sequence[str] | None = None) -> int:
    """Write the deployment's permission file: `python -m kz_events.cluster OUT`."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m kz_events.cluster OUT.conf", file=sys.stderr)
        return 2
    Path(args[0]).write_text(render_permissions(deploy_passwords()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
