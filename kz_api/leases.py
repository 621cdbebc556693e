"""Lease tokens for HTTP runners: an HMAC-signed claim that any API replica can verify.

The token binds a submission, attempt, lease, runner and runner key to the reply subject of the
JetStream message, so any replica can heartbeat, ack or nak the task by publishing there, and a
runner cannot present (or forge) a lease it was not given, nor use one given to another key.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets

import msgspec

from kz_api.errors import ApiError

__all__ = ["LeaseClaim", "LeaseSigner", "lease_secret_from_env"]


class LeaseClaim(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What a lease token asserts."""

    submission_id: str
    kernel_id: str
    attempt: int
    lease_id: str
    runner_id: str
    key_id: str  # the runner key the lease was handed to (kz_api.auth.runner_key_id)
    reply: str


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _stale(message: str) -> ApiError:
    return ApiError(409, "stale_lease", message)


class LeaseSigner:
    """Signs and verifies lease tokens with a secret shared by the API replicas."""

    def __init__(self, secret: bytes) -> None:
        if len(secret) < 16:
            raise ValueError("a lease secret needs at least 16 bytes")
        self._secret = secret

    def _mac(self, payload: bytes) -> bytes:
        return hmac.new(self._secret, payload, hashlib.sha256).digest()

    def sign(self, claim: LeaseClaim) -> str:
        payload = msgspec.json.encode(claim)
        return f"{_b64(payload)}.{_b64(self._mac(payload))}"

    def verify(self, token: str) -> LeaseClaim:
        """The claim a token carries; a malformed or forged token is a stale lease."""
        head, _, mac = token.partition(".")
        try:
            payload, given = _unb64(head), _unb64(mac)
        except (ValueError, UnicodeEncodeError) as exc:
            raise _stale("the lease token is malformed") from exc
        if not hmac.compare_digest(self._mac(payload), given):
            raise _stale("the lease token was not issued by this service")
        try:
            return msgspec.json.decode(payload, type=LeaseClaim)
        except msgspec.DecodeError as exc:
            raise _stale("the lease token is malformed") from exc


def lease_secret_from_env() -> bytes:
    """`KZ_LEASE_SECRET`, or a fresh random secret (only right for one replica, open mode)."""
    given = os.environ.get("KZ_LEASE_SECRET", "")
    return given.encode() if given else secrets.token_bytes(32)
