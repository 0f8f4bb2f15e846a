"""One-machine HS256 tokens and identities from authorizer claims."""

from __future__ import annotations

import base64
import json
import stat
from pathlib import Path
from typing import Any

import jwt
import pytest
from openagents.auth.tokens import LocalTokens, identity_from_claims, load_or_create_secret
from openagents.domain.errors import Unauthenticated
from openagents.domain.identity import Identity

SECRET = "s" * 64
ISSUER = "openagents-local"
AUDIENCE = "openagents"


@pytest.fixture
def tokens() -> LocalTokens:
    return LocalTokens(SECRET, ISSUER, AUDIENCE)


def _b64(data: dict[str, Any]) -> str:
    raw = json.dumps(data, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _claims(token: str) -> dict[str, Any]:
    payload = token.split(".")[1]
    data: dict[str, Any] = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    return data


# ------------------------------------------------------------- LocalTokens


def test_mint_then_verify(tokens: LocalTokens) -> None:
    token = tokens.mint("alice", ttl_seconds=60)
    assert tokens.verify(token) == Identity(user_id="alice", username="alice")


def test_mint_carries_name_and_standard_claims(tokens: LocalTokens) -> None:
    token = tokens.mint("bob", name="Bob Builder", ttl_seconds=120)
    claims = _claims(token)
    assert claims["sub"] == "bob"
    assert claims["iss"] == ISSUER
    assert claims["aud"] == AUDIENCE
    assert claims["exp"] - claims["iat"] == 120
    assert "gty" not in claims
    identity = tokens.verify(token)
    assert identity.name == "Bob Builder"
    assert identity.machine is False


def test_machine_tokens(tokens: LocalTokens) -> None:
    token = tokens.mint("ci-bot", ttl_seconds=60, machine=True)
    assert _claims(token)["gty"] == "client-credentials"
    assert tokens.verify(token).machine is True


def test_expired_token(tokens: LocalTokens) -> None:
    token = tokens.mint("alice", ttl_seconds=-10)
    with pytest.raises(Unauthenticated) as info:
        tokens.verify(token)
    assert info.value.message == "Token expired"


def test_tampered_payload(tokens: LocalTokens) -> None:
    header, _, signature = tokens.mint("alice", ttl_seconds=60).split(".")
    claims = _claims(tokens.mint("alice", ttl_seconds=60))
    forged = ".".join([header, _b64({**claims, "sub": "mallory"}), signature])
    with pytest.raises(Unauthenticated) as info:
        tokens.verify(forged)
    assert info.value.message == "Not authenticated"


def test_tampered_signature(tokens: LocalTokens) -> None:
    token = tokens.mint("alice", ttl_seconds=60)
    head, _, sig = token.rpartition(".")
    flipped = ("A" if sig[0] != "A" else "B") + sig[1:]
    with pytest.raises(Unauthenticated):
        tokens.verify(f"{head}.{flipped}")


def test_other_secret_issuer_or_audience(tokens: LocalTokens) -> None:
    for other in (
        LocalTokens("t" * 64, ISSUER, AUDIENCE),
        LocalTokens(SECRET, "someone-else", AUDIENCE),
        LocalTokens(SECRET, ISSUER, "another-api"),
    ):
        with pytest.raises(Unauthenticated):
            tokens.verify(other.mint("alice", ttl_seconds=60))


def test_unsigned_and_other_algorithms_rejected(tokens: LocalTokens) -> None:
    claims = _claims(tokens.mint("alice", ttl_seconds=60))
    unsigned = f"{_b64({'alg': 'none', 'typ': 'JWT'})}.{_b64(claims)}."
    with pytest.raises(Unauthenticated):
        tokens.verify(unsigned)
    hs512 = jwt.encode(claims, SECRET, algorithm="HS512")
    with pytest.raises(Unauthenticated):
        tokens.verify(hs512)


def test_required_claims(tokens: LocalTokens) -> None:
    claims = _claims(tokens.mint("alice", ttl_seconds=60))
    for missing in ("sub", "exp", "iat"):
        partial = {k: v for k, v in claims.items() if k != missing}
        with pytest.raises(Unauthenticated):
            tokens.verify(jwt.encode(partial, SECRET, algorithm="HS256"))


@pytest.mark.parametrize("garbage", ["", "abc", "a.b.c", "Bearer x.y.z"])
def test_garbage_tokens(tokens: LocalTokens, garbage: str) -> None:
    with pytest.raises(Unauthenticated):
        tokens.verify(garbage)


class _Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _counting_decode(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every token PyJWT is asked to verify, in order."""
    seen: list[str] = []
    real = jwt.decode

    def decode(token: str, *args: Any, **kwargs: Any) -> Any:
        seen.append(token)
        return real(token, *args, **kwargs)

    monkeypatch.setattr(jwt, "decode", decode)
    return seen


def test_a_verified_token_is_remembered_until_it_expires(monkeypatch: pytest.MonkeyPatch) -> None:
    minted = LocalTokens(SECRET, ISSUER, AUDIENCE).mint("alice", ttl_seconds=60)
    exp = _claims(minted)["exp"]
    clock = _Clock(exp - 59)
    tokens = LocalTokens(SECRET, ISSUER, AUDIENCE, clock=clock)
    seen = _counting_decode(monkeypatch)
    for _ in range(3):
        assert tokens.verify(minted) == Identity(user_id="alice", username="alice")
    assert seen == [minted]  # the signature and claims were checked once
    clock.now = exp - 0.001
    assert tokens.verify(minted).user_id == "alice"
    clock.now = exp  # expired at exp, as PyJWT decides
    with pytest.raises(Unauthenticated) as info:
        tokens.verify(minted)
    assert info.value.message == "Token expired"
    assert seen == [minted]


def test_remembering_never_admits_a_token_that_was_not_verified(tokens: LocalTokens) -> None:
    good = tokens.mint("alice", ttl_seconds=60)
    assert tokens.verify(good).user_id == "alice"
    header, _, signature = good.split(".")
    forged = ".".join([header, _b64({**_claims(good), "sub": "mallory"}), signature])
    head, _, sig = good.rpartition(".")
    flipped = f"{head}.{'A' if sig[0] != 'A' else 'B'}{sig[1:]}"
    for bad in (forged, flipped, good + "x"):
        with pytest.raises(Unauthenticated):
            tokens.verify(bad)
    assert tokens.verify(good).user_id == "alice"


def test_remembered_tokens_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    tokens = LocalTokens(SECRET, ISSUER, AUDIENCE, keep=2)
    first, second, third = (tokens.mint(u, ttl_seconds=60) for u in ("a", "b", "c"))
    seen = _counting_decode(monkeypatch)
    for token in (first, second, third, second, third, first):
        tokens.verify(token)
    assert seen == [first, second, third, first]  # the oldest was dropped for the third


def test_secret_is_created_private_then_reused(tmp_path: Path) -> None:
    path = tmp_path / "home" / "jwt-secret"
    first = load_or_create_secret(path)
    assert len(first) >= 32
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_or_create_secret(path) == first
    other = load_or_create_secret(tmp_path / "other" / "jwt-secret")
    assert other != first


# -------------------------------------------------------- identity_from_claims


def test_identity_from_cognito_id_token_claims() -> None:
    identity = identity_from_claims(
        {
            "sub": "u-1",
            "cognito:username": "alice",
            "name": "Alice Liddell",
            "email": "alice@example.com",
            "token_use": "id",
        }
    )
    assert identity == Identity(
        user_id="u-1", username="alice", name="Alice Liddell", email="alice@example.com"
    )


def test_identity_prefers_username_claim() -> None:
    identity = identity_from_claims({"sub": "u-1", "username": "a", "cognito:username": "b"})
    assert identity.username == "a"


@pytest.mark.parametrize("claims", [{}, {"sub": ""}, {"sub": None}, {"sub": 42}, {"username": "x"}])
def test_claims_without_subject(claims: dict[str, Any]) -> None:
    with pytest.raises(Unauthenticated):
        identity_from_claims(claims)


@pytest.mark.parametrize(
    ("claims", "machine"),
    [
        ({"sub": "c1", "gty": "client-credentials"}, True),
        ({"sub": "c1", "gty": "client-credentials", "username": "svc"}, True),
        ({"sub": "c1", "token_use": "access", "client_id": "app", "scope": "api/all"}, True),
        ({"sub": "u1", "token_use": "access", "client_id": "app", "username": "alice"}, False),
        ({"sub": "u1", "token_use": "access", "username": "alice"}, False),
        ({"sub": "u1", "token_use": "access"}, False),
        ({"sub": "u1", "token_use": "id", "client_id": "app"}, False),
        ({"sub": "u1", "gty": "password"}, False),
        ({"sub": "u1"}, False),
    ],
)
def test_machine_detection(claims: dict[str, Any], machine: bool) -> None:
    assert identity_from_claims(claims).machine is machine


def test_empty_optional_claims_become_none() -> None:
    identity = identity_from_claims({"sub": "u1", "username": "", "name": "", "email": ""})
    assert identity == Identity(user_id="u1")
