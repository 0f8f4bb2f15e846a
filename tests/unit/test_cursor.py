"""Opaque page cursors: round trip, and nothing but our own cursors of the right kind."""

from __future__ import annotations

import base64
import json
import re

import pytest
from openagents.store import cursor
from openagents.store.keys import CREATED_KEY, EVENT_SK, MESSAGE_SK
from openagents.store.port import BadCursor

MESSAGE_KEY = "M#1767225600000#msg-1"
CREATED = "2026-01-01T00:00:00.123456+00:00#AbC_d-1"
EVENT = "E#2026-01-01T00:00:00+00:00#evt-1"


def raw(data: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")


@pytest.mark.parametrize(
    ("key", "pattern"),
    [(MESSAGE_KEY, MESSAGE_SK), (CREATED, CREATED_KEY), (EVENT, EVENT_SK)],
)
def test_round_trip(key: str, pattern: re.Pattern[str]) -> None:
    encoded = cursor.encode(key)
    assert cursor.decode(encoded, pattern) == key


def test_encoding_is_url_safe_and_unpadded() -> None:
    for key in (MESSAGE_KEY, "M#0000000000001#" + "?" * 50 + "~>", CREATED):
        encoded = cursor.encode(key)
        assert re.fullmatch(r"[A-Za-z0-9_-]+", encoded), encoded
        assert key not in encoded  # opaque, not the raw key


def test_decode_accepts_padded_form() -> None:
    padded = base64.urlsafe_b64encode(json.dumps({"v": 1, "k": MESSAGE_KEY}).encode()).decode()
    assert cursor.decode(padded, MESSAGE_SK) == MESSAGE_KEY


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "garbage",
        "!!!!",
        "====",
        "é",
        "%00",
        base64.urlsafe_b64encode(b"\xff\xfe\xfd").decode(),  # not UTF-8
        raw("just a string"),
        raw([1, 2]),
        raw(None),
        raw({"k": MESSAGE_KEY}),  # no version
        raw({"v": 2, "k": MESSAGE_KEY}),  # other version
        raw({"v": "1", "k": MESSAGE_KEY}),
        raw({"v": 1}),
        raw({"v": 1, "k": 123}),
        raw({"v": 1, "k": None}),
        raw({"v": 1, "k": ""}),
        raw({"v": 1, "k": "M#123#x"}),  # not 13 digits
        raw({"v": 1, "k": "M#1767225600000#has space"}),
        raw({"v": 1, "k": MESSAGE_KEY + "\n"}),
        raw({"v": 1, "k": "X" + MESSAGE_KEY}),
        raw({"v": 1, "k": CREATED}),  # a session cursor is not a message cursor
        raw({"v": 1, "k": EVENT}),
    ],
)
def test_rejects_garbage_and_foreign_cursors(bad: str) -> None:
    with pytest.raises(BadCursor):
        cursor.decode(bad, MESSAGE_SK)


def test_cursor_of_one_kind_is_refused_by_another() -> None:
    for key, wrong in ((MESSAGE_KEY, CREATED_KEY), (CREATED, EVENT_SK), (EVENT, MESSAGE_SK)):
        with pytest.raises(BadCursor):
            cursor.decode(cursor.encode(key), wrong)


def test_created_key_rejects_injected_session_ids() -> None:
    for key in (
        "2026-01-01T00:00:00+00:00#a b",
        "2026-01-01T00:00:00+00:00#" + "x" * 65,
        "2026-01-01T00:00:00+00:00#x#S#y",
        "2026-01-01T00:00:00Z#x",
    ):
        with pytest.raises(BadCursor):
            cursor.decode(cursor.encode(key), CREATED_KEY)
