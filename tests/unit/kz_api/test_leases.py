"""Lease tokens: they round-trip, and a changed payload, MAC or secret is a stale lease."""

from __future__ import annotations

import pytest

from kz_api.errors import ApiError
from kz_api.leases import LeaseClaim, LeaseSigner

pytestmark = pytest.mark.unit

CLAIM = LeaseClaim(
    submission_id="s",
    kernel_id="cpu/a/b/c/d",
    attempt=2,
    lease_id="L",
    runner_id="r1",
    key_id="0123456789abcdef",
    reply="$JS.ACK.KZ_EVENTS.runners-cpu.1.5.5.0.0",
)


def test_token_round_trips() -> None:
    """A signed token verifies back to its claim."""
    signer = LeaseSigner(b"k" * 32)
    assert signer.verify(signer.sign(CLAIM)) == CLAIM


@pytest.mark.parametrize(
    "mangle",
    [
        lambda t: "A" + t[1:],
        lambda t: t[:-2] + "AA",
        lambda t: t.replace(".", ""),
        lambda t: "@@@." + t.split(".")[1],
        lambda t: LeaseSigner(b"other-secret-0123456789").sign(CLAIM),
    ],
)
def test_tampered_tokens_are_stale(mangle: object) -> None:
    """Any change to the token or a token from another secret is refused as stale_lease."""
    signer = LeaseSigner(b"k" * 32)
    with pytest.raises(ApiError) as caught:
        signer.verify(mangle(signer.sign(CLAIM)))  # type: ignore[operator]
    assert caught.value.code == "stale_lease" and caught.value.status == 409


def test_short_secret_is_refused() -> None:
    """A secret under 16 bytes is a configuration mistake."""
    with pytest.raises(ValueError, match="16 bytes"):
        LeaseSigner(b"short")
