"""The permission model as data: the deployment file is exactly what the renderer makes, and
each role's subjects match what the role may do and nothing it may not."""

from __future__ import annotations

from pathlib import Path

import pytest

from kz_events.cluster import (
    DEPLOY_ARCHES,
    deploy_passwords,
    password_env_var,
    render_permissions,
    role_permissions,
    role_users,
    runner_user,
)
from kz_events.errors import ConfigError, InvalidInput

pytestmark = pytest.mark.unit

ACCOUNTS_CONF = Path(__file__).resolve().parents[3] / "deploy" / "nats" / "accounts.conf"


def matches(pattern: str, subject: str) -> bool:
    """NATS subject matching: `*` is one token, `>` one or more trailing tokens."""
    pat, sub = pattern.split("."), subject.split(".")
    for i, token in enumerate(pat):
        if token == ">":
            return len(sub) > i
        if i >= len(sub) or (token != "*" and token != sub[i]):
            return False
    return len(pat) == len(sub)


def may_publish(user: str, subject: str, arches: tuple[str, ...] = DEPLOY_ARCHES) -> bool:
    return any(matches(p, subject) for p in role_permissions(arches)[user].publish)


def test_deploy_file_matches_the_renderer() -> None:
    """`deploy/nats/accounts.conf` is the renderer's output for the deployed architectures;
    regenerate it with `python -m kz_events.cluster deploy/nats/accounts.conf`."""
    expected = render_permissions(list(DEPLOY_ARCHES), deploy_passwords(DEPLOY_ARCHES))
    assert ACCOUNTS_CONF.read_text() == expected


@pytest.mark.parametrize(
    ("user", "subject", "allowed"),
    [
        ("runner-sm90", "kz.ev.submission.sm90.S.claimed", True),
        ("runner-sm90", "kz.ev.submission.sm90.S.result", True),
        ("runner-sm90", "kz.ev.submission.sm90.S.accepted", False),
        ("runner-sm90", "kz.ev.submission.sm90.S.submitted", False),
        ("runner-sm90", "kz.ev.submission.sm80.S.claimed", False),
        ("runner-sm90", "kz.ev.kernel.sm90.K.imported", False),
        ("runner-sm90", "kz.live.task.sm90.S", True),
        ("runner-sm90", "kz.live.task.sm80.S", False),
        ("runner-sm90", "$JS.API.CONSUMER.MSG.NEXT.KZ_EVENTS.runners-sm90", True),
        ("runner-sm90", "$JS.API.CONSUMER.MSG.NEXT.KZ_EVENTS.runners-sm80", False),
        ("runner-sm90", "$JS.ACK.KZ_EVENTS.runners-sm90.1.2.3.4.0", True),
        ("runner-sm90", "$JS.ACK.KZ_EVENTS.runners-sm80.1.2.3.4.0", False),
        ("runner-sm90", "$JS.API.CONSUMER.CREATE.KZ_EVENTS", False),
        ("runner-sm90", "$JS.API.CONSUMER.DURABLE.CREATE.KZ_EVENTS.runners-sm90", False),
        ("runner-sm90", "$O.KZ_LOGS.C.nuid", True),
        ("runner-sm90", "$O.KZ_PACKAGES.C.nuid", False),
        ("runner-sm90", "$JS.API.STREAM.PURGE.OBJ_KZ_LOGS", False),
        ("api", "kz.ev.submission.sm90.S.submitted", True),
        ("api", "kz.ev.submission.sm90.S.accepted", False),
        ("api", "kz.ev.kernel.sm90.K.claimed", True),
        ("api", "kz.ev.kernel.sm90.K.imported", False),
        ("api", "$JS.API.CONSUMER.MSG.NEXT.KZ_EVENTS.runners-sm80", True),
        ("projector", "kz.ev.submission.sm90.S.committed", True),
        ("projector", "kz.ev.kernel.sm90.K.imported", True),
        ("projector", "kz.ev.submission.sm90.S.submitted", False),
        ("projector", "$O.KZ_LOGS.C.nuid", False),
    ],
)
def test_each_role_publishes_only_its_subjects(user: str, subject: str, allowed: bool) -> None:
    """The table of what each role may and may not publish holds for the rendered model."""
    assert may_publish(user, subject) is allowed


@pytest.mark.parametrize("user", ["api", "projector", "runner-sm80", "runner-sm90"])
@pytest.mark.parametrize("stream", ["KZ_EVENTS", "KZ_LIVE", "OBJ_KZ_PACKAGES", "OBJ_KZ_LOGS"])
def test_no_service_can_delete_or_reconfigure_a_stream(user: str, stream: str) -> None:
    """Deleting, updating or (for the log) purging a stream is left to the admin user."""
    for action in ("DELETE", "UPDATE"):
        assert not may_publish(user, f"$JS.API.STREAM.{action}.{stream}")
    assert not may_publish(user, "$JS.API.STREAM.PURGE.KZ_EVENTS")
    assert may_publish("admin", f"$JS.API.STREAM.DELETE.{stream}")


def test_runners_subscribe_only_to_inboxes() -> None:
    """A runner receives only replies and deliveries to its inboxes, never raw event traffic."""
    for arch in DEPLOY_ARCHES:
        assert role_permissions(DEPLOY_ARCHES)[runner_user(arch)].subscribe == ("_INBOX.>",)


def test_arch_tokens_are_encoded_in_subjects_and_names() -> None:
    """An architecture with a dot is percent-encoded in subjects and mapped in env names."""
    perms = role_permissions(["sm_9.0"])["runner-sm_9.0"]
    assert "kz.ev.submission.sm_9%2E0.*.claimed" in perms.publish
    assert all(".sm_9.0." not in subject for subject in perms.publish)
    assert password_env_var("runner-sm_9.0") == "KZ_NATS_RUNNER_SM_9_0_PASSWORD"


def test_passwords_render_as_quoted_literals_or_variables() -> None:
    """A `$VAR` password stays a variable reference; any other is a quoted string."""
    passwords = {user: f"secret-{user}" for user in role_users(["sm90"])}
    passwords["api"] = "$KZ_NATS_API_PASSWORD"
    text = render_permissions(["sm90"], passwords)
    assert "password: $KZ_NATS_API_PASSWORD\n" in text
    assert 'password: "secret-runner-sm90"\n' in text


def test_a_missing_password_is_named() -> None:
    """Rendering without a password for some user fails and names that user."""
    passwords = {user: "x" for user in role_users(["sm90"]) if user != "runner-sm90"}
    with pytest.raises(ConfigError, match="runner-sm90"):
        render_permissions(["sm90"], passwords)


@pytest.mark.parametrize("bad", ["", 'quo"te', "back\\slash", "new\nline"])
def test_unsafe_passwords_are_refused(bad: str) -> None:
    """A password that cannot be written safely into the configuration is refused."""
    passwords = {user: "fine" for user in role_users(["sm90"])}
    passwords["api"] = bad
    with pytest.raises(ConfigError, match="password of api"):
        render_permissions(["sm90"], passwords)


def test_an_invalid_arch_is_refused() -> None:
    """An architecture that is not a kernel id segment cannot name a runner user."""
    with pytest.raises(InvalidInput, match="arch"):
        role_permissions(["sm 90"])
