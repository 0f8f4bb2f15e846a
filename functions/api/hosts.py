"""One machine: answer only the ``Host`` names this server serves, and tell loopback clients.

A browser page on ``evil.example`` whose name an attacker re-points at 127.0.0.1 (DNS
rebinding) reaches the local server with ``Host: evil.example``: it gets 421, so it can neither
mint a token nor read an answer. AWS mode is unchanged (API Gateway and CloudFront route by
name before the app sees a request)."""

from __future__ import annotations

import ipaddress
from collections.abc import Callable

from openagents.settings import Mode, Settings
from starlette.types import ASGIApp, Receive, Scope, Send

from functions.api.errors import error_response

LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})
MISDIRECTED = 421


def host_name(value: str) -> str | None:
    """The name of a ``Host`` value (``name``, ``name:port``, ``[v6]``, ``[v6]:port``),
    lower-cased; None when it is not a well-formed one."""
    value = value.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        name, rest = (value[1:end], value[end + 1 :]) if end > 0 else ("", "")
    else:
        name, colon, port = value.partition(":")
        rest = colon + port
    if not name or (rest and not (rest.startswith(":") and rest[1:].isdigit())):
        return None
    return name


def served_names(settings: Settings) -> frozenset[str]:
    configured = (host_name(entry) for entry in settings.allowed_hosts)
    return LOOPBACK_NAMES | {name for name in configured if name}


def is_loopback(address: str | None) -> bool:
    """True for a client address on this machine (127.0.0.0/8, ::1, ::ffff:127.x)."""
    if not address:
        return False
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    mapped = getattr(ip, "ipv4_mapped", None)
    return bool(ip.is_loopback or (mapped is not None and mapped.is_loopback))


class HostGuard:
    """In local mode, refuses (421 ``misdirected_request``) a request whose ``Host`` is missing
    or not served: loopback names, plus ``OPENAGENTS_ALLOWED_HOSTS``."""

    def __init__(self, app: ASGIApp, settings: Callable[[], Settings]) -> None:
        self._app = app
        self._settings = settings
        self._served: tuple[Settings, frozenset[str]] | None = None  # per settings, built once

    def _allowed(self, settings: Settings) -> frozenset[str]:
        if self._served is None or self._served[0] is not settings:
            self._served = (settings, served_names(settings))
        return self._served[1]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self._app(scope, receive, send)
            return
        settings = self._settings()
        if settings.mode is not Mode.LOCAL:
            await self._app(scope, receive, send)
            return
        values = [v.decode("latin-1") for k, v in scope.get("headers") or [] if k == b"host"]
        names = [host_name(value) for value in values]
        allowed = self._allowed(settings)
        if names and all(name in allowed for name in names):
            await self._app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        shown = (values[0] if values else "")[:100]
        message = (
            f"This server does not serve host {shown!r}; "
            "add it to OPENAGENTS_ALLOWED_HOSTS to serve it"
            if values
            else "A Host header is required"
        )
        await error_response(MISDIRECTED, "misdirected_request", message, "host")(
            scope, receive, send
        )
