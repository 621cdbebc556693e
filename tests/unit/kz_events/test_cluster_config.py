"""The permission model as data: the deployment file is exactly what the renderer makes, and
each role's subjects match what the role may do and nothing it may not."""

from __future__ import annotations

from pathlib import Path

import pytest

from kz_events.cluster import (
    SWEEPER_ADVISORY,
    deploy_passwords,
    render_permissions,
    role_permissions,
    role_users,
)
from kz_events.errors import ConfigError

pytestmark = pytest.mark.unit

ACCOUNTS_CONF = Path(__file__).resolve().parents[3] / "deploy" / "nats" / "accounts.conf"
STREAMS = ["KZ_EVENTS", "KZ_LIVE", "OBJ_KZ_PACKAGES", "OBJ_KZ_LOGS", "OBJ_KZ_JUDGES"]


def matches(pattern: str, subject: str) -> bool:
    """NATS subject matching: `*` is one token, `>` one or more trailing tokens."""
    pat, sub = pattern.split("."), subject.split(".")
    for i, token in enumerate(pat):
        if token == ">":
            return len(sub) > i
        if i >= len(sub) or (token != "*" and token != sub[i]):
            return False
    return len(pat) == len(sub)


def may_publish(user: str, subject: str) -> bool:
    return any(matches(p, subject) for p in role_permissions()[user].publish)


def test_deploy_file_matches_the_renderer() -> None:
    """`deploy/nats/accounts.conf` is the renderer's output; regenerate it with
    `python -m kz_events.cluster deploy/nats/accounts.conf`."""
    assert ACCOUNTS_CONF.read_text() == render_permissions(deploy_passwords())


def test_the_roles_are_the_services() -> None:
    """admin, api and projector, and the system user: runners have no NATS login."""
    assert role_users() == ("admin", "api", "projector", "sys")
    assert set(role_permissions()) == {"admin", "api", "projector"}


@pytest.mark.parametrize(
    ("user", "subject", "allowed"),
    [
        ("api", "kz.ev.submission.sm90.S.submitted", True),
        ("api", "kz.ev.submission.sm90.S.result", True),
        ("api", "kz.ev.submission.sm90.S.accepted", False),
        ("api", "kz.ev.kernel.sm90.K.claimed", True),
        ("api", "kz.ev.kernel.sm90.K.imported", False),
        ("api", "$JS.API.CONSUMER.MSG.NEXT.KZ_EVENTS.runners-sm80", True),
        ("api", "$JS.API.STREAM.MSG.GET.KZ_EVENTS", True),
        ("api", "$O.KZ_PACKAGES.C.nuid", True),
        ("api", "$O.KZ_JUDGES.C.nuid", False),
        ("api", "$O.KZ_JUDGES.M.name", False),
        ("api", "$JS.API.STREAM.PURGE.OBJ_KZ_JUDGES", False),
        ("api", "$JS.API.STREAM.MSG.GET.OBJ_KZ_JUDGES", True),
        ("projector", "kz.ev.submission.sm90.S.committed", True),
        ("projector", "kz.ev.kernel.sm90.K.imported", True),
        ("projector", "kz.ev.submission.sm90.S.submitted", True),  # confirmation runs
        ("projector", "kz.ev.submission.sm90.S.claimed", False),
        ("projector", "kz.ev.submission.sm90.S.result", False),
        ("projector", "$O.KZ_LOGS.C.nuid", False),
        ("projector", "$O.KZ_JUDGES.C.nuid", True),
        ("projector", "$JS.API.STREAM.PURGE.OBJ_KZ_JUDGES", True),
    ],
)
def test_each_role_publishes_only_its_subjects(user: str, subject: str, allowed: bool) -> None:
    """The table of what each role may and may not publish holds for the rendered model."""
    assert may_publish(user, subject) is allowed


@pytest.mark.parametrize("user", ["api", "projector"])
@pytest.mark.parametrize("stream", STREAMS)
def test_no_service_can_delete_or_reconfigure_a_stream(user: str, stream: str) -> None:
    """Deleting, updating or (for the log) purging a stream is left to the admin user."""
    for action in ("DELETE", "UPDATE"):
        assert not may_publish(user, f"$JS.API.STREAM.{action}.{stream}")
    assert not may_publish(user, "$JS.API.STREAM.PURGE.KZ_EVENTS")
    assert not may_publish(user, "$JS.API.STREAM.MSG.DELETE.KZ_EVENTS")
    assert may_publish("admin", f"$JS.API.STREAM.DELETE.{stream}")


@pytest.mark.parametrize("user", ["api", "projector"])
@pytest.mark.parametrize("stream", STREAMS)
def test_no_role_has_the_direct_get(user: str, stream: str) -> None:
    """A direct get answers with a stored body verbatim on any reply subject, so a role that
    publishes events would forge another's through it: nobody gets it (message get wraps)."""
    assert not may_publish(user, f"$JS.API.DIRECT.GET.{stream}")
    assert not may_publish(user, f"$JS.API.DIRECT.GET.{stream}.kz.ev.submission.a.b.c")


def test_the_projector_hears_the_sweeper_advisory() -> None:
    """The sweeper (in the projector) subscribes to exhausted deliveries of task consumers."""
    assert SWEEPER_ADVISORY in role_permissions()["projector"].subscribe
    assert matches(SWEEPER_ADVISORY, "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.KZ_EVENTS.x")


def test_passwords_render_as_quoted_literals_or_variables() -> None:
    """A `$VAR` password stays a variable reference; any other is a quoted string."""
    passwords = {user: f"secret-{user}" for user in role_users()}
    passwords["api"] = "$KZ_NATS_API_PASSWORD"
    text = render_permissions(passwords)
    assert "password: $KZ_NATS_API_PASSWORD\n" in text
    assert 'password: "secret-projector"\n' in text


def test_a_missing_password_is_named() -> None:
    """Rendering without a password for some user fails and names that user."""
    passwords = {user: "x" for user in role_users() if user != "projector"}
    with pytest.raises(ConfigError, match="projector"):
        render_permissions(passwords)


@pytest.mark.parametrize("bad", ["", 'quo"te', "back\\slash", "new\nline"])
def test_unsafe_passwords_are_refused(bad: str) -> None:
    """A password that cannot be written safely into the configuration is refused."""
    passwords = {user: "fine" for user in role_users()}
    passwords["api"] = bad
    with pytest.raises(ConfigError, match="password of api"):
        render_permissions(passwords)


def test_the_advisory_granted_is_the_one_the_sweeper_hears() -> None:
    """The projector may subscribe to the advisory the event log watches for the sweeper."""
    from kz_events.subjects import EXHAUSTED_ADVISORY

    assert SWEEPER_ADVISORY == EXHAUSTED_ADVISORY
