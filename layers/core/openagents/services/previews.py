"""Previews: the ports listening in a session's sandbox, and private links to them.

``create`` signs a short-lived link token (``auth/previews.py``) for the owner; the preview
proxy (``functions/api/preview.py``) trades it for a cookie scoped to that preview host, checks
the cookie on every request, and reaches the port through sandboxd's tunnel (``tunnel``): the
session is looked up each time, so a preview ends with its session's sandbox."""

from __future__ import annotations

import copy
import logging
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from urllib.parse import quote, urlencode

from openagents.auth.previews import Grant, Kind, host_label, sign, verify
from openagents.domain.errors import InvalidInput, NotFound, SandboxNotRunning, Unauthenticated
from openagents.domain.identity import Identity
from openagents.domain.models import Session
from openagents.sandbox.port import Sandboxd, SandboxdClients, SandboxError, SandboxHandle
from openagents.services import Clock
from openagents.services.sandbox_tools import running_sandbox
from openagents.store.port import Store

log = logging.getLogger(__name__)

LINK_SECONDS = 300
ACTIVITY_EVERY_SECONDS = 60.0  # a preview in use keeps its sandbox awake, one write a minute
COOKIE_SECONDS = 12 * 3600
MAX_PATH_CHARS = 2048


class PortNotListening(NotFound):
    code = "port_not_listening"


@dataclass(frozen=True)
class PreviewPort:
    port: int
    address: str
    pid: int | None
    command: str | None
    preview_host: str


@dataclass(frozen=True)
class PreviewLink:
    url: str
    expires_at: datetime


@dataclass(frozen=True)
class PreviewCookie:
    value: str
    max_age: int
    path: str  # where the browser goes next


@dataclass(frozen=True)
class PreviewSite:
    """Where previews are served: ``<label>.<suffix>`` over ``scheme``."""

    scheme: str
    suffix: str  # "localhost:8000" on one machine, the preview domain on AWS
    app_url: str | None = None  # the web app's (None: the suffix serves it, as on one machine)

    def host(self, session_id: str, port: int) -> str:
        return f"{host_label(session_id, port)}.{self.suffix}"

    @property
    def domain(self) -> str:
        """The name every preview host ends with (``.localhost``, ``.<preview domain>``)."""
        return "." + self.suffix.rsplit(":", 1)[0].lower()

    def session_page(self, session_id: str) -> str:
        """The web app's page of the session (where Resume is)."""
        app = (self.app_url or f"{self.scheme}://{self.suffix}").rstrip("/")
        return f"{app}/sessions/{quote(session_id, safe='')}"


def check_port(port: int) -> int:
    if not 0 < port < 65536:
        raise InvalidInput("port must be between 1 and 65535", field="port")
    return port


def check_path(path: str | None) -> str:
    """A path on the preview host: relative, one leading slash (never ``//``: another host)."""
    path = path or "/"
    bad = not path.startswith("/") or path.startswith("//") or "\\" in path
    if bad or len(path) > MAX_PATH_CHARS or any(ord(c) < 33 or ord(c) == 127 for c in path):
        raise InvalidInput("path must be a relative path starting with one '/'", field="path")
    return path


class Previews:
    def __init__(
        self,
        store: Store,
        clients: SandboxdClients,
        clock: Clock,
        key: Callable[[], bytes],
        site: PreviewSite,
        on_unreachable: Callable[[Session], object] | None = None,
        on_activity: Callable[[Identity, str], object] | None = None,
    ) -> None:
        self._on_activity = on_activity
        self._active: dict[str, float] = {}
        self._active_lock = threading.Lock()
        self._store = store
        self._clients = clients
        self._clock = clock
        self._key = key
        self.site = site
        self._on_unreachable = on_unreachable

    def client(self, handle: SandboxHandle) -> Sandboxd:
        return self._clients(handle)

    def reaching(self, clients: SandboxdClients) -> Previews:
        """The same previews, reaching each sandbox through ``clients`` (the preview gateway
        asks ECS where each task is: ``sandbox/fargate_address.py``). A sandbox they cannot
        reach is not marked lost from there (that would start workflows, which the gateway may
        not): the API's own calls and the reconciler do."""
        twin = copy.copy(self)
        twin._clients = clients
        twin._on_unreachable = None
        twin._active, twin._active_lock = {}, threading.Lock()
        return twin

    def running(self, user_id: str, session_id: str) -> tuple[Session, Sandboxd]:
        return running_sandbox(self._store, self._clients, Identity(user_id=user_id), session_id)

    def unavailable(self, session: Session, exc: SandboxError) -> SandboxNotRunning:
        log.info("preview call for %s failed: %s", session.id, exc)
        if exc.status is None and self._on_unreachable is not None:
            self._on_unreachable(session)
        return SandboxNotRunning("The sandbox is unavailable. Please resume it.")

    def ports(self, identity: Identity, session_id: str) -> list[PreviewPort]:
        session, client = self.running(identity.user_id, session_id)
        try:
            found = client.ports()
        except SandboxError as exc:
            raise self.unavailable(session, exc) from exc
        return [
            PreviewPort(p.port, p.address, p.pid, p.command, self.site.host(session.id, p.port))
            for p in found
        ]

    def create(
        self, identity: Identity, session_id: str, port: int, path: str | None
    ) -> PreviewLink:
        check_port(port)
        target = check_path(path)
        session, client = self.running(identity.user_id, session_id)
        try:
            listening = {p.port for p in client.ports()}
        except SandboxError as exc:
            raise self.unavailable(session, exc) from exc
        if port not in listening:
            raise PortNotListening(f"Nothing listens on port {port}", field="port")
        expires = self._clock() + timedelta(seconds=LINK_SECONDS)
        grant = Grant(Kind.LINK, session.id, port, identity.user_id, int(expires.timestamp()))
        query = urlencode({"token": sign(self._key(), grant), "path": target})
        url = f"{self.site.scheme}://{self.site.host(session.id, port)}/__preview/auth?{query}"
        return PreviewLink(url, datetime.fromtimestamp(grant.expires_at, UTC))

    def redeem(self, session_id: str, port: int, token: str, path: str | None) -> PreviewCookie:
        """A link token for exactly this preview host, traded for its cookie."""
        grant = self._verify(session_id, port, token, Kind.LINK)
        try:
            target = check_path(path)
        except InvalidInput:
            target = "/"
        expires = int(self._clock().timestamp()) + COOKIE_SECONDS
        cookie = Grant(Kind.COOKIE, grant.session_id, port, grant.user_id, expires)
        return PreviewCookie(sign(self._key(), cookie), COOKIE_SECONDS, target)

    def admit(self, session_id: str, port: int, cookie: str | None) -> Grant:
        return self._verify(session_id, port, cookie or "", Kind.COOKIE)

    def _verify(self, session_id: str, port: int, token: str, kind: Kind) -> Grant:
        grant = verify(self._key(), token, kind, int(self._clock().timestamp()))
        if grant is None or grant.session_id != session_id or grant.port != port:
            raise Unauthenticated("This preview needs a fresh link from the session's owner")
        return grant

    def _touch(self, grant: Grant) -> None:
        """Record the session's activity, at most once per ``ACTIVITY_EVERY_SECONDS``."""
        if self._on_activity is None:
            return
        now = time.monotonic()
        with self._active_lock:
            if (
                now - self._active.get(grant.session_id, -ACTIVITY_EVERY_SECONDS)
                < ACTIVITY_EVERY_SECONDS
            ):
                return
            if len(self._active) > 4096:
                self._active.clear()
            self._active[grant.session_id] = now
        try:
            self._on_activity(Identity(user_id=grant.user_id), grant.session_id)
        except Exception as exc:  # a preview answers even when the store is slow to
            log.warning("preview activity of %s not recorded: %s", grant.session_id, exc)

    def tunnel(self, grant: Grant) -> socket.socket:
        """A connection to the granted port (the session checked again: owner, running)."""
        session, client = self.running(grant.user_id, grant.session_id)
        self._touch(grant)
        try:
            return client.open_tunnel(grant.port)
        except SandboxError as exc:
            if exc.status == 404:
                raise PortNotListening(f"Nothing listens on port {grant.port}") from exc
            raise self.unavailable(session, exc) from exc
