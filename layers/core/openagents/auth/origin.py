"""The CloudFront origin check: API Gateway's execute-api URL stays reachable (disabling it
would refuse CloudFront too), so the API refuses requests without CloudFront's secret header —
WAF and the bot rules cannot be bypassed by calling API Gateway directly."""

from __future__ import annotations

import hmac
import threading
from collections.abc import Callable, Mapping

from openagents.domain.errors import AccessDenied

HEADER = "x-openagents-origin-verify"


class OriginGuard:
    def __init__(self, secret: Callable[[], str]) -> None:
        self._load = secret
        self._secret: str | None = None
        self._lock = threading.Lock()

    def _value(self) -> str:
        with self._lock:
            if self._secret is None:
                self._secret = self._load()  # once per execution environment
            return self._secret

    def check(self, headers: Mapping[str, str]) -> None:
        given = headers.get(HEADER, "")
        if not hmac.compare_digest(given.encode(), self._value().encode()):
            raise AccessDenied("Access denied")
