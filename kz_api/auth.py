"""Who is asking: submitters (open mode `X-Submitter-Id`, token mode bearer tokens), runners
(`X-Runner-Key` bound to architectures) and maintainers. Each rule is a Litestar dependency.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import dataclass
from typing import Annotated

from litestar.di import NamedDependency
from litestar.params import HeaderParameter

from kz_api.context import Ctx
from kz_api.errors import ApiError
from kz_events.config import Settings

__all__ = [
    "RUNNER_KEY_ACTOR",
    "RunnerAuth",
    "RunnerDep",
    "Submitter",
    "SubmitterDep",
    "identify_runner",
    "identify_submitter",
    "optional_submitter",
    "resolve_submitter",
    "runner_key_id",
]

SubmitterHeader = Annotated[
    str | None, HeaderParameter(name="X-Submitter-Id", required=False, description="open mode id")
]
AuthorizationHeader = Annotated[
    str | None,
    HeaderParameter(name="Authorization", required=False, description="token mode: Bearer <token>"),
]
RunnerKeyHeader = Annotated[
    str | None, HeaderParameter(name="X-Runner-Key", required=False, description="runner key")
]

_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@+\-]{0,127}")
RUNNER_KEY_ACTOR = "runner-key:"
"""Prefix of the actor of a registration made with a runner key; the key's id follows."""


def runner_key_id(key: str) -> str:
    """A runner key's public name: 16 hex digits of its SHA-256 (keys are random secrets, so
    the name gives nothing away). Registrations record it, binding a runner id to its key."""
    return hashlib.sha256(b"kz-runner-key\0" + key.encode()).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class Submitter:
    """An authenticated submitter; `maintainer` may change judges, cancel and disqualify."""

    id: str
    maintainer: bool


@dataclass(frozen=True, slots=True)
class RunnerAuth:
    """A runner key and the architectures it covers (None: any, open mode without keys)."""

    key: str
    arches: frozenset[str] | None

    @property
    def key_id(self) -> str:
        return runner_key_id(self.key)

    @property
    def actor(self) -> str:
        """The actor of what this key registers: binds the runner id to the key."""
        return RUNNER_KEY_ACTOR + self.key_id

    def allows(self, arch: str) -> bool:
        return self.arches is None or arch in self.arches

    def require(self, arch: str) -> None:
        if not self.allows(arch):
            raise ApiError(
                403,
                "arch_not_allowed",
                f"this runner key serves {sorted(self.arches or ())}, not architecture {arch}",
                details={"arch": arch},
            )


SubmitterDep = NamedDependency[Submitter]
RunnerDep = NamedDependency[RunnerAuth]


def _unauthenticated(message: str) -> ApiError:
    return ApiError(401, "unauthenticated", message)


def _token_owner(settings: Settings, token: str) -> str | None:
    owner: str | None = None
    for known, submitter in settings.submitter_tokens.items():
        if hmac.compare_digest(known.encode(), token.encode()):
            owner = submitter
    return owner


def resolve_submitter(
    settings: Settings, submitter_id: str | None, authorization: str | None
) -> Submitter | None:
    """The submitter the headers prove, None when they prove nobody; bad credentials raise."""
    if settings.submitter_tokens:
        if not authorization:
            return None
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise _unauthenticated("expected 'Authorization: Bearer <token>'")
        owner = _token_owner(settings, token.strip())
        if owner is None:
            raise _unauthenticated("the bearer token is not known")
        return Submitter(owner, owner in settings.maintainers)
    if not submitter_id:
        return None
    if not _ID.fullmatch(submitter_id):
        raise _unauthenticated(
            "X-Submitter-Id must be 1-128 characters of A-Z a-z 0-9 _ . @ + - starting with a "
            f"letter or digit, got {submitter_id[:64]!r}"
        )
    return Submitter(submitter_id, submitter_id in settings.maintainers)


async def optional_submitter(
    ctx: Ctx,
    x_submitter_id: SubmitterHeader = None,
    authorization: AuthorizationHeader = None,
) -> Submitter | None:
    return resolve_submitter(ctx.settings, x_submitter_id, authorization)


async def identify_submitter(
    ctx: Ctx,
    x_submitter_id: SubmitterHeader = None,
    authorization: AuthorizationHeader = None,
) -> Submitter:
    found = resolve_submitter(ctx.settings, x_submitter_id, authorization)
    if found is None:
        mode = "Authorization: Bearer" if ctx.settings.submitter_tokens else "X-Submitter-Id"
        raise _unauthenticated(f"this endpoint needs a submitter: send {mode}")
    return found


async def identify_runner(
    ctx: Ctx,
    x_runner_key: RunnerKeyHeader = None,
) -> RunnerAuth:
    settings = ctx.settings
    if not x_runner_key:
        raise _unauthenticated("this endpoint needs a runner: send X-Runner-Key")
    if not settings.runner_keys:
        if settings.submitter_tokens:
            raise _unauthenticated("no runner keys are configured on this server")
        return RunnerAuth(x_runner_key, None)
    arches: list[str] | None = None
    for key, allowed in settings.runner_keys.items():
        if hmac.compare_digest(key.encode(), x_runner_key.encode()):
            arches = allowed
    if arches is None:
        raise _unauthenticated("the runner key is not known")
    return RunnerAuth(x_runner_key, frozenset(arches))
