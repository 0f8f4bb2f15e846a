"""Preview grants: who may reach which port of which session, until when, signed with HMAC-SHA256.

A grant is minted twice: as the short-lived ``link`` token in a preview URL, then, once that URL
is visited, as the longer-lived ``cookie`` token the browser keeps for that preview host alone.
The kind is signed too, so neither stands in for the other. Preview hosts name the session in
a case-insensitive form (host names are lower-cased by browsers; session ids are not):
``<port>-<base32 of the id>``."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
from dataclasses import dataclass
from enum import StrEnum

PREVIEW_KEY_LABEL = b"openagents-preview-v1"
MAX_TOKEN_CHARS = 1024
LABEL = re.compile(r"([1-9][0-9]{0,4})-([a-z2-7]{1,52})")


class Kind(StrEnum):
    LINK = "link"
    COOKIE = "cookie"
    PUBLIC = "public"  # never signed: admitted from a public preview's record


@dataclass(frozen=True)
class Grant:
    kind: Kind
    session_id: str
    port: int
    user_id: str
    expires_at: int  # seconds since the epoch


def preview_key(root: bytes) -> bytes:
    """The signing key, derived from a key we already hold (no new secret to store)."""
    return hmac.new(root, PREVIEW_KEY_LABEL, hashlib.sha256).digest()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def sign(key: bytes, grant: Grant) -> str:
    payload = json.dumps(
        [grant.kind.value, grant.session_id, grant.port, grant.user_id, grant.expires_at],
        separators=(",", ":"),
    ).encode()
    mac = hmac.new(key, payload, hashlib.sha256).digest()
    return f"{_b64(payload)}.{_b64(mac)}"


def verify(key: bytes, token: str, kind: Kind, now: int) -> Grant | None:
    """The grant a token carries when it is ours, of ``kind`` and not expired; else None."""
    if len(token) > MAX_TOKEN_CHARS or token.count(".") != 1:
        return None
    body, _, mac = token.partition(".")
    try:
        payload, presented = _unb64(body), _unb64(mac)
    except (ValueError, binascii.Error):
        return None
    expected = hmac.new(key, payload, hashlib.sha256).digest()
    if not hmac.compare_digest(expected, presented):
        return None
    try:
        said, session_id, port, user_id, expires_at = json.loads(payload)
    except (ValueError, TypeError):
        return None
    if said != kind.value or not isinstance(expires_at, int) or expires_at <= now:
        return None
    return Grant(kind, str(session_id), int(port), str(user_id), expires_at)


def host_label(session_id: str, port: int) -> str:
    """``<port>-<session>``: the session id as lower-case base32, unpadded (a DNS label)."""
    encoded = base64.b32encode(session_id.encode()).decode().rstrip("=").lower()
    return f"{port}-{encoded}"


def parse_label(label: str) -> tuple[str, int] | None:
    """(session id, port) of a preview host's first label; None for any other name."""
    matched = LABEL.fullmatch(label)
    if matched is None:
        return None
    port = int(matched.group(1))
    encoded = matched.group(2).upper()
    try:
        session_id = base64.b32decode(encoded + "=" * (-len(encoded) % 8)).decode()
    except (ValueError, binascii.Error, UnicodeDecodeError):
        return None
    if port > 65535 or host_label(session_id, port) != label:
        return None
    return session_id, port
