"""Secrets found by their shape (domain/secrets.py): each known shape, values learned from a
NAME=value line redacted elsewhere, and ordinary text left alone."""

from __future__ import annotations

import pytest
from openagents.domain.secrets import REDACTED, Redactor, scrubbed, strings


def redacted(*texts: str) -> list[str]:
    redactor = Redactor()
    for text in texts:
        redactor.learn(text)
    return [redactor.redact(text) for text in texts]


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("id AKIAIOSFODNN7EXAMPLE ok", f"id {REDACTED} ok"),
        ("ASIAIOSFODNN7EXAMPLE", REDACTED),
        ("gho_0123456789abcdefghijABCD", REDACTED),
        ("github_pat_11AAAA0123456789_abcdefghij", REDACTED),
        ("key sk-ant-api03-abcdefgh", f"key {REDACTED}"),
        ("xoxb-1234567890-abcdef", REDACTED),
        ("-----BEGIN PRIVATE KEY-----\nabc\n-----END PRIVATE KEY-----\nnext", f"{REDACTED}\nnext"),
        ("-----BEGIN OPENSSH PRIVATE KEY-----\ncut short", REDACTED),
        ("https://bob:pw123@host/x", f"https://bob:{REDACTED}@host/x"),
        ("export STRIPE_SECRET_KEY='rk_live_abc'", f"export STRIPE_SECRET_KEY='{REDACTED}'"),
        ("aws_secret_access_key = abc/def+ghi", f"aws_secret_access_key = {REDACTED}"),
    ],
)
def test_each_known_shape_is_redacted(text: str, shown: str) -> None:
    assert redacted(text) == [shown]


def test_a_value_seen_in_an_assignment_is_redacted_everywhere() -> None:
    assert redacted("echo done: hunter2-pass", "DB_PASSWORD=hunter2-pass") == [
        f"echo done: {REDACTED}",
        f"DB_PASSWORD={REDACTED}",
    ]


@pytest.mark.parametrize(
    "text",
    [
        "DEBUG=1 PORT=8080 NODE_ENV=production",
        "def password_ok(password): return len(password) > 8",
        "the task-list and desk-lamp; sk-short",
    ],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert redacted(text) == [text]


def test_a_short_value_is_hidden_where_assigned_but_not_searched_elsewhere() -> None:
    assert redacted("PASSWORD=abc", "abc") == [f"PASSWORD={REDACTED}", "abc"]


def test_structural_fields_are_kept_and_everything_else_scrubbed() -> None:
    key = "sk-abcdefghijk"
    part = {"type": "tool-bash", "toolCallId": key, "output": {"o": [key]}}
    redactor = Redactor()
    assert list(strings(part)) == [key]
    assert scrubbed(part, redactor) == {**part, "output": {"o": [REDACTED]}}
    assert redactor.count == 1
