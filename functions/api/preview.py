"""The preview proxy: ``<port>-<session>.localhost[:port]`` (``auth/previews.py``) is a port in
that session's sandbox; every other Host passes through untouched.

``/__preview/auth?token=&path=`` trades a preview link's token for a cookie on that preview
host alone (no Domain attribute: host-only, HttpOnly, SameSite=Lax) and redirects to ``path``.
A public preview's link (``token=pub.<secret>``) sets a cookie holding that secret instead,
checked against its record on every request (``services/previews.py``): revoked, it is 401.
Any other request needs that cookie, else 401 before the sandbox is contacted; then it is
carried as HTTP/1.1 over a tunnel through sandboxd (``preview_http.py``), our cookie removed and
nothing of ours added, on a tunnel kept from an earlier request to the same port of the same
sandbox generation when one waits (``preview_pool.py``); WebSockets likewise, each on a new
tunnel (``preview_ws.py``). A request another site's page
makes (an ``Origin`` not the preview's own; ``Sec-Fetch-Site`` same-site or cross-site, but for
a navigation) is refused (403): another preview is same-site with this one and gets its cookie.
Placed outside HostGuard: these names are the previews', not the API's."""

from __future__ import annotations

import html
import logging
import socket
from collections.abc import Callable
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qs

from openagents.auth.previews import Grant, Kind, parse_label
from openagents.domain.errors import (
    AccessDenied,
    DomainError,
    SandboxNotRunning,
    Unauthenticated,
)
from openagents.services.previews import Previews, PreviewTarget
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Receive, Scope, Send

from functions.api.errors import STATUS
from functions.api.hosts import host_name
from functions.api.preview_pool import Key, Tunnel, TunnelPool, replayable, wrap

COOKIE = "openagents_preview"
AUTH_PATH = "/__preview/auth"
SUFFIX = ".localhost"
log = logging.getLogger(__name__)


def preview_target(scope: Scope, domain: str = SUFFIX) -> tuple[str, int] | None:
    """(session id, port) when the request's one Host is a preview host (``<label><domain>``);
    else None."""
    values = [v for k, v in scope.get("headers") or [] if k == b"host"]
    if len(values) != 1:
        return None
    name = host_name(values[0].decode("latin-1"))
    if name is None or not name.endswith(domain):
        return None
    label = name[: -len(domain)]
    return parse_label(label) if "." not in label else None


def _cookie(scope: Scope) -> str | None:
    jar: SimpleCookie = SimpleCookie()
    for name, value in scope.get("headers") or []:
        if name == b"cookie":
            try:
                jar.load(value.decode("latin-1"))
            except Exception:
                return None
    morsel = jar.get(COOKIE)
    return morsel.value if morsel is not None else None


async def _plain(send: Send, status: int, text: str, headers: list[tuple[bytes, bytes]]) -> None:
    body = text.encode() + b"\n"
    await send({
        "type": "http.response.start", "status": status,
        "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                    (b"content-length", str(len(body)).encode()),
                    (b"cache-control", b"no-store"), *headers],
    })  # fmt: skip
    await send({"type": "http.response.body", "body": body})


def _header(scope: Scope, name: bytes) -> str | None:
    values = [v for k, v in scope.get("headers") or [] if k == name]
    return values[0].decode("latin-1") if len(values) == 1 else None


def foreign(scope: Scope, scheme: str = "http") -> bool:
    """A request some other page made: another origin's (a WebSocket always names its page's),
    or a same-site or cross-site fetch that is no navigation."""
    origin = _header(scope, b"origin")
    own = f"{scheme}://{_header(scope, b'host') or ''}".lower()
    if origin is not None and origin.lower() != own:
        return True
    if scope["type"] == "websocket" and origin is None:
        return True
    site = (_header(scope, b"sec-fetch-site") or "").lower()
    mode = (_header(scope, b"sec-fetch-mode") or "").lower()
    return site in ("same-site", "cross-site") and mode != "navigate"


def _wants_html(scope: Scope) -> bool:
    return "text/html" in (_header(scope, b"accept") or "")


RESUME_PAGE = """<!doctype html><meta charset="utf-8"><title>Preview paused</title>
<p>This session's sandbox is not running, so its preview cannot answer.</p>
<p><a href="{url}" target="_top">Resume it in Open Agents</a>, then reload this page.</p>
"""


async def _resume_page(send: Send, url: str) -> None:
    """A hibernated (or stopped) session's preview says so, and where to resume it (409)."""
    body = RESUME_PAGE.format(url=html.escape(url, quote=True)).encode()
    await send({
        "type": "http.response.start", "status": 409,
        "headers": [(b"content-type", b"text/html; charset=utf-8"),
                    (b"content-length", str(len(body)).encode()),
                    (b"cache-control", b"no-store"),
                    (b"content-security-policy", b"default-src 'none'")],
    })  # fmt: skip
    await send({"type": "http.response.body", "body": body})


def _admit(
    previews: Previews, session_id: str, port: int, cookie: str | None
) -> tuple[Grant, PreviewTarget]:
    grant = previews.admit(session_id, port, cookie)
    return grant, previews.reach(grant)


async def _opened(target: PreviewTarget) -> Tunnel:
    return await wrap(await run_in_threadpool(target.open))


def _status(error: DomainError) -> int:
    return next(STATUS[cls] for cls in type(error).__mro__ if cls in STATUS)


class PreviewProxy:
    """``domain``: what preview hosts end with (``.localhost``; the preview gateway on AWS:
    ``.<previewDomain>``), read without building the container (the API's cold start)."""

    def __init__(
        self,
        app: ASGIApp,
        container: Callable[[], Any],
        domain: str = SUFFIX,
        pool: TunnelPool | None = None,
    ) -> None:
        self._app = app
        self._container = container
        self._domain = domain
        self._pool = pool  # idle tunnels kept for the next request (``preview_pool.py``)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        found = (
            preview_target(scope, self._domain) if scope["type"] in ("http", "websocket") else None
        )
        if found is None:
            await self._app(scope, receive, send)
            return
        previews: Previews = self._container().previews
        session_id, port = found
        websocket = scope["type"] == "websocket"
        grant: Grant | None = None
        try:
            if scope["path"] == AUTH_PATH and not websocket:
                await self._redeem(scope, send, previews, session_id, port)
                return
            if foreign(scope, previews.site.scheme):
                raise AccessDenied("A preview answers its own pages only")
            cookie = _cookie(scope)
            # one hop to a thread for both: the cookie, then the session read
            grant, reach = await run_in_threadpool(_admit, previews, session_id, port, cookie)
            opened = await self._open(reach, scope)
        except DomainError as error:
            if isinstance(error, SandboxNotRunning) and self._pool is not None:
                self._pool.drop(session_id)  # stopped or hibernated: its tunnels are of no use
            await self._refused(scope, send, previews, session_id, grant, error)
            return
        host = f"localhost:{port}"
        if isinstance(opened, Tunnel):
            await self._forward(scope, receive, send, reach, opened, host)
            return
        # imported at the first preview (one machine only): wsproto is in the local extra, and
        # the API's cold start on Lambda neither needs nor has it
        from functions.api.preview_ws import relay

        await relay(scope, receive, send, opened, host, COOKIE.encode())

    async def _open(self, reach: PreviewTarget, scope: Scope) -> socket.socket | Tunnel:
        """A new tunnel for a WebSocket; for HTTP, one kept for this very target if any, for a
        request that may be sent again on a new one should the dev server have closed the kept
        one meanwhile (bodiless, safe: ``preview_http.py``); any other gets a new tunnel."""
        if scope["type"] == "websocket":
            return await run_in_threadpool(reach.open)
        kept = self._tunnels().take(Key(*reach.key)) if replayable(scope) else None
        return kept if kept is not None else await _opened(reach)

    async def _forward(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        reach: PreviewTarget,
        tunnel: Tunnel,
        host: str,
    ) -> None:
        from functions.api.preview_http import forward  # h11: imported at the first preview

        pool, key = self._tunnels(), Key(*reach.key)
        await forward(
            scope,
            receive,
            send,
            tunnel,
            host.encode(),
            COOKIE.encode(),
            lambda: _opened(reach),
            lambda kept: pool.give(key, kept),
        )

    async def _refused(
        self,
        scope: Scope,
        send: Send,
        previews: Previews,
        session_id: str,
        grant: Grant | None,
        error: DomainError,
    ) -> None:
        if scope["type"] == "websocket":  # refused before the accept: the browser sees a 403
            await send({"type": "websocket.close", "code": 1008})
            return
        owners = grant is None or grant.kind is not Kind.PUBLIC  # Resume is the owner's
        if isinstance(error, SandboxNotRunning) and _wants_html(scope) and owners:
            await _resume_page(send, previews.site.session_page(session_id))
            return
        await _plain(send, _status(error), f"{error.code}: {error.message}", [])

    def _tunnels(self) -> TunnelPool:
        """The idle tunnels (given, or made at the first preview request)."""
        if self._pool is None:
            self._pool = TunnelPool()
        return self._pool

    async def _redeem(
        self, scope: Scope, send: Send, previews: Previews, session_id: str, port: int
    ) -> None:
        if scope["method"] not in ("GET", "HEAD"):
            raise Unauthenticated("Open the preview link with GET")
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        token = (query.get("token") or [""])[-1]
        path = (query.get("path") or ["/"])[-1]
        cookie = await run_in_threadpool(previews.redeem, session_id, port, token, path)
        value = f"{COOKIE}={cookie.value}; Max-Age={cookie.max_age}; Path=/; HttpOnly; SameSite=Lax"
        if previews.site.scheme == "https":
            value += "; Secure"
        headers = [
            (b"location", cookie.path.encode()),
            (b"set-cookie", value.encode()),
            (b"referrer-policy", b"no-referrer"),
        ]
        await _plain(send, 302, "Found", headers)
