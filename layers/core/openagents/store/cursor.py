"""Opaque page cursors: base64url JSON of the last item's sort key, checked on the way in."""

from __future__ import annotations

import base64
import binascii
import json
import re

from openagents.store.port import BadCursor


def encode(sort_key: str) -> str:
    raw = json.dumps({"v": 1, "k": sort_key}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode(cursor: str, pattern: re.Pattern[str]) -> str:
    """The sort key inside ``cursor``; ``BadCursor`` unless it is one of ours of this kind."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        data = json.loads(raw)
    except (binascii.Error, ValueError) as exc:
        raise BadCursor from exc
    key = data.get("k") if isinstance(data, dict) and data.get("v") == 1 else None
    if not isinstance(key, str) or not pattern.fullmatch(key):
        raise BadCursor
    return key
