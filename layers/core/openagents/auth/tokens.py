"""Identity from JWT claims: verified HS256 tokens (one machine) or authorizer claims (AWS)."""

from __future__ import annotations

import os
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from openagents.domain.errors import Unauthenticated
from openagents.domain.identity import Identity

if TYPE_CHECKING:
    from openagents.settings import Settings

ALGORITHM = "HS256"
VERIFIED_TOKENS_KEPT = 4096  # distinct live tokens remembered; the oldest is dropped past it


def identity_from_claims(claims: Mapping[str, Any]) -> Identity:
    """Map OIDC/Cognito claims to an identity. A token without ``sub`` is not a caller."""
    subject = claims.get("sub")
    if not isinstance(subject, str) or not subject:
        raise Unauthenticated("Not authenticated")
    username = claims.get("username") or claims.get("cognito:username")
    machine = claims.get("gty") == "client-credentials" or (
        claims.get("token_use") == "access" and not username and "client_id" in claims
    )
    return Identity(
        user_id=subject,
        username=str(username) if username else None,
        name=str(claims["name"]) if claims.get("name") else None,
        email=str(claims["email"]) if claims.get("email") else None,
        machine=machine,
    )


def load_or_create_secret(path: Path) -> str:
    """The local signing secret, generated (0600) on first use and reused after."""
    if path.exists():
        return path.read_text().strip()
    path.parent.mkdir(parents=True, exist_ok=True)
    secret = secrets.token_urlsafe(48)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(secret)
    return secret


class LocalTokens:
    """Mints and verifies the one-machine runtime's HS256 bearer tokens.

    A token verified once is remembered (keyed by the whole token, so by its signature too)
    until its ``exp``: a status poll every 15 s with the same token pays the HMAC and the
    claim checks once, not per request. The signing secret never changes while this object
    lives, so a remembered verdict stays true until the token expires."""

    def __init__(
        self,
        secret: str,
        issuer: str,
        audience: str,
        *,
        clock: Callable[[], float] = time.time,
        keep: int = VERIFIED_TOKENS_KEPT,
    ) -> None:
        self._secret = secret
        self._issuer = issuer
        self._audience = audience
        self._clock = clock
        self._keep = keep
        self._verified: dict[str, tuple[Identity, float]] = {}  # token -> (identity, exp)
        self._lock = threading.Lock()

    def mint(
        self, user: str, *, name: str | None = None, ttl_seconds: int, machine: bool = False
    ) -> str:
        now = int(time.time())
        claims: dict[str, Any] = {
            "sub": user,
            "username": user,
            "iss": self._issuer,
            "aud": self._audience,
            "iat": now,
            "exp": now + ttl_seconds,
        }
        if name:
            claims["name"] = name
        if machine:
            claims["gty"] = "client-credentials"
        import jwt  # one machine only: AWS trusts the API Gateway authorizer (cold start)

        return jwt.encode(claims, self._secret, algorithm=ALGORITHM)

    def verify(self, token: str) -> Identity:
        remembered = self._verified.get(token)
        if remembered is not None:
            identity, expires = remembered
            if self._clock() < expires:  # PyJWT's rule: expired once now >= exp
                return identity
            with self._lock:
                self._verified.pop(token, None)
            raise Unauthenticated("Token expired")
        import jwt  # one machine only (see mint)

        try:
            claims = jwt.decode(
                token,
                self._secret,
                algorithms=[ALGORITHM],
                audience=self._audience,
                issuer=self._issuer,
                options={"require": ["sub", "exp", "iat"]},
            )
        except jwt.ExpiredSignatureError:
            raise Unauthenticated("Token expired") from None
        except jwt.InvalidTokenError:
            raise Unauthenticated("Not authenticated") from None
        identity = identity_from_claims(claims)
        self._remember(token, identity, float(claims["exp"]))
        return identity

    def _remember(self, token: str, identity: Identity, expires: float) -> None:
        with self._lock:
            while len(self._verified) >= self._keep:
                del self._verified[next(iter(self._verified))]  # the oldest remembered
            self._verified[token] = (identity, expires)


def local_tokens(settings: Settings) -> LocalTokens:
    """The one machine's token issuer and verifier (its HS256 secret made on first use)."""
    secret = load_or_create_secret(settings.jwt_secret_path)
    return LocalTokens(secret, settings.jwt_issuer, settings.jwt_audience)
