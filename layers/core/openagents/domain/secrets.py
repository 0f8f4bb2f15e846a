"""Secrets found by their shape in a shared transcript, and redacted wherever they appear.

Known shapes: AWS access key ids (``AKIA…``, ``ASIA…``), GitHub tokens (``ghp_``, ``gho_``,
``ghu_``, ``ghs_``, ``ghr_``, ``github_pat_``), ``sk-…`` keys (OpenAI, Anthropic, Stripe),
Slack tokens (``xox…``), PEM private keys, the password of a URL (``scheme://user:pw@host``) and
the value of a ``NAME=value`` line whose name says it holds a secret (``API_KEY``,
``DB_PASSWORD``, ``GITHUB_TOKEN``, ``AWS_SECRET_ACCESS_KEY`` …: what ``.env`` files hold). A value
found once is redacted everywhere else in the transcript too (an ``echo $API_KEY`` later).
What has no known shape is not found: redaction is a net, not a guarantee (docs/api.md).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

REDACTED = "[redacted secret]"
MIN_VALUE_CHARS = 6  # a shorter NAME=value value (a flag, a port) is not searched elsewhere
SHAPES = re.compile(
    r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----(?:.*?-----END [A-Z0-9 ]*PRIVATE KEY-----|.*\Z)"
    r"|\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"
    r"|\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})"
    r"|\bsk-[A-Za-z0-9_-]{8,}"
    r"|\bxox[abprs]-[A-Za-z0-9-]{10,}",
    re.DOTALL,
)
URL_PASSWORD = re.compile(r"(?P<head>\b[a-z][a-z0-9+.-]*://[^\s:/@]+):[^\s/@]+@")
SENSITIVE_NAME = (
    r"(?:[A-Z_][A-Z0-9_]*)?(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD|PWD|CREDENTIALS?|AUTH|DSN)"
    r"[A-Z0-9_]*"
    r"|(?i:aws_secret_access_key|aws_session_token)"
)
ASSIGNMENT = re.compile(
    rf"(?<![A-Za-z0-9_])(?P<name>{SENSITIVE_NAME})(?P<sep>[ \t]*=[ \t]*)(?P<quote>['\"]?)"
    r"(?P<value>[^\s'\"\[][^\s'\"]*)"
)
STRUCTURE = frozenset({"type", "toolCallId", "toolName", "state", "id", "role"})


@dataclass
class Redactor:
    """Two passes over the same strings: ``learn`` every one first (values of secret
    ``NAME=value`` assignments), then ``redact`` them."""

    values: set[str] = field(default_factory=set)
    count: int = 0

    def learn(self, text: str) -> None:
        for found in ASSIGNMENT.finditer(text):
            if len(found["value"]) >= MIN_VALUE_CHARS:
                self.values.add(found["value"])

    def redact(self, text: str) -> str:
        text, assigned = ASSIGNMENT.subn(
            lambda m: f"{m['name']}{m['sep']}{m['quote']}{REDACTED}", text
        )
        text, shapes = SHAPES.subn(REDACTED, text)
        text, passwords = URL_PASSWORD.subn(rf"\g<head>:{REDACTED}@", text)
        self.count += shapes + passwords + assigned
        for value in sorted(self.values, key=len, reverse=True):  # a longer value first
            if value in text:
                self.count += text.count(value)
                text = text.replace(value, REDACTED)
        return text


def strings(value: Any) -> Iterable[str]:
    """Every string of a JSON value but its structural fields (ids, types, states)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            if key not in STRUCTURE:
                yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


def scrubbed(value: Any, redactor: Redactor) -> Any:
    """A copy of a JSON value with every string but the structural fields redacted."""
    if isinstance(value, str):
        return redactor.redact(value)
    if isinstance(value, Mapping):
        return {
            key: item if key in STRUCTURE else scrubbed(item, redactor)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [scrubbed(item, redactor) for item in value]
    return value
