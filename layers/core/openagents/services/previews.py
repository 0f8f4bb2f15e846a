"""Previews: the ports listening in a session's sandbox, and private links to them.

``create`` signs a short-lived link token (``auth/previews.py``) for the owner; the preview
proxy (``functions/api/preview.py``) trades it for a cookie scoped to that preview host, checks
the cookie on every request, and reaches the port through sandboxd's tunnel (``tunnel``): the
session is looked up each time, so a preview ends with its session's sandbox.

A public preview (``visibility: "public"``) is a record in the store (``PreviewStore``): its link
carries the record's secret (``pub.<secret>``), traded for a cookie holding the same; each
request checks the record (read at most every ``PUBLIC_CACHE_SECONDS`` on the service's clock,
dropped at once here when revoked), and its session being neither archived nor deleted.
Nothing of the owner's travels with it: the tunnel is the same as a private preview's."""

from __future__ import annotations

import copy
import hmac
import logging
import secrets
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
from openagents.domain.models import Session, SessionStatus
from openagents.domain.previews import PublicPreview
from openagents.sandbox.port import Sandboxd, SandboxdClients, SandboxError, SandboxHandle
from openagents.services import Clock
from openagents.services.sandbox_tools import running_sandbox, sandbox_of
from openagents.services.sessions import owned
from openagents.store.port import Store

log = logging.getLogger(__name__)

LINK_SECONDS = 300
ACTIVITY_EVERY_SECONDS = 60.0  # a preview in use keeps its sandbox awake, one write a minute
COOKIE_SECONDS = 12 * 3600
MAX_PATH_CHARS = 2048
PUBLIC_PREFIX = "pub."  # a public preview's link token and cookie: the prefix, then its secret
PUBLIC_CACHE_SECONDS = 2.0  # how stale a revocation may be seen by another process
VISIBILITIES = ("private", "public")


class PortNotListening(NotFound):
    code = "port_not_listening"


class PreviewNotFound(NotFound):
    code = "preview_not_found"


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
    expires_at: datetime | None  # None: public, until revoked
    visibility: str = "private"
    port: int | None = None
    created_at: datetime | None = None


@dataclass(frozen=True)
class PreviewTarget:
    """A port of one sandbox generation: ``key`` (session, generation, port, public) and
    ``open``, which opens a new tunnel to it (``PortNotListening``, ``SandboxNotRunning``)."""

    key: tuple[str, int, int, bool]
    open: Callable[[], socket.socket]


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
        self._public: dict[tuple[str, int], tuple[datetime, PublicPreview | None]] = {}
        self._public_lock = threading.Lock()

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
        twin._public, twin._public_lock = {}, threading.Lock()
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
        self,
        identity: Identity,
        session_id: str,
        port: int,
        path: str | None,
        visibility: str = "private",
    ) -> PreviewLink:
        check_port(port)
        target = check_path(path)
        if visibility not in VISIBILITIES:
            raise InvalidInput("visibility must be private or public", field="visibility")
        session, client = self.running(identity.user_id, session_id)
        try:
            listening = {p.port for p in client.ports()}
        except SandboxError as exc:
            raise self.unavailable(session, exc) from exc
        if port not in listening:
            raise PortNotListening(f"Nothing listens on port {port}", field="port")
        if visibility == "public":
            made = PublicPreview(
                session.id, port, identity.user_id, secrets.token_urlsafe(32), self._clock()
            )
            record = self._store.publish_preview(made)
            self._forget(session.id, port)
            return self._public_link(record, target)
        expires = self._clock() + timedelta(seconds=LINK_SECONDS)
        grant = Grant(Kind.LINK, session.id, port, identity.user_id, int(expires.timestamp()))
        query = urlencode({"token": sign(self._key(), grant), "path": target})
        url = f"{self.site.scheme}://{self.site.host(session.id, port)}/__preview/auth?{query}"
        return PreviewLink(url, datetime.fromtimestamp(grant.expires_at, UTC))

    def _public_link(self, record: PublicPreview, path: str = "/") -> PreviewLink:
        query = urlencode({"token": PUBLIC_PREFIX + record.secret, "path": path})
        host = self.site.host(record.session_id, record.port)
        url = f"{self.site.scheme}://{host}/__preview/auth?{query}"
        return PreviewLink(url, None, "public", record.port, record.created_at)

    def public(self, identity: Identity, session_id: str) -> list[PreviewLink]:
        """The session's public previews (their links), by port."""
        session = owned(self._store.get_session(session_id), identity)
        return [self._public_link(r) for r in self._store.public_previews(session.id)]

    def revoke(self, identity: Identity, session_id: str, port: int) -> None:
        """End the port's public preview (404 ``preview_not_found`` when it has none)."""
        check_port(port)
        session = owned(self._store.get_session(session_id), identity)
        removed = self._store.revoke_preview(session.id, port)
        self._forget(session.id, port)
        if not removed:
            raise PreviewNotFound(f"Port {port} has no public preview", field="port")

    def revoke_all(self, session_id: str) -> int:
        """End every public preview of the session (archive and unarchive); how many."""
        ended = 0
        for record in self._store.public_previews(session_id):
            ended += self._store.revoke_preview(session_id, record.port)
            self._forget(session_id, record.port)
        return ended

    def _forget(self, session_id: str, port: int) -> None:
        with self._public_lock:
            self._public.pop((session_id, port), None)

    def _record(self, session_id: str, port: int) -> PublicPreview | None:
        """The port's public preview while its session is neither archived nor deleted, read
        again once ``PUBLIC_CACHE_SECONDS`` old."""
        now = self._clock()
        with self._public_lock:
            cached = self._public.get((session_id, port))
        if cached is not None and (now - cached[0]).total_seconds() < PUBLIC_CACHE_SECONDS:
            return cached[1]
        record = self._store.public_preview(session_id, port)
        if record is not None:
            session = self._store.get_session(session_id)
            live = session is not None and session.status is not SessionStatus.ARCHIVED
            if not live or session is None or session.user_id != record.user_id:
                record = None
        with self._public_lock:
            if len(self._public) > 4096:
                self._public.clear()
            self._public[(session_id, port)] = (now, record)
        return record

    def _admit_public(self, session_id: str, port: int, token: str) -> Grant:
        record = self._record(session_id, port)
        secret = token.removeprefix(PUBLIC_PREFIX).encode()
        if record is None or not hmac.compare_digest(record.secret.encode(), secret):
            raise Unauthenticated("This public preview was revoked, or never was")
        expires = int(self._clock().timestamp()) + COOKIE_SECONDS
        return Grant(Kind.PUBLIC, session_id, port, record.user_id, expires)

    def redeem(self, session_id: str, port: int, token: str, path: str | None) -> PreviewCookie:
        """A link token for exactly this preview host, traded for its cookie (a public
        preview's: its own token again, checked on every request)."""
        try:
            target = check_path(path)
        except InvalidInput:
            target = "/"
        if token.startswith(PUBLIC_PREFIX):
            self._admit_public(session_id, port, token)
            return PreviewCookie(token, COOKIE_SECONDS, target)
        grant = self._verify(session_id, port, token, Kind.LINK)
        expires = int(self._clock().timestamp()) + COOKIE_SECONDS
        cookie = Grant(Kind.COOKIE, grant.session_id, port, grant.user_id, expires)
        return PreviewCookie(sign(self._key(), cookie), COOKIE_SECONDS, target)

    def admit(self, session_id: str, port: int, cookie: str | None) -> Grant:
        if cookie is not None and cookie.startswith(PUBLIC_PREFIX):
            return self._admit_public(session_id, port, cookie)
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

    def reach(self, grant: Grant) -> PreviewTarget:
        """The granted port of the session's running sandbox (checked again: owner, running),
        and how to open a tunnel to it; the key names that sandbox's generation, so no tunnel
        kept for one (``functions/api/preview_pool.py``) ever serves another."""
        found = self._store.get_session(grant.session_id)  # one read, whoever visits
        if grant.kind is Kind.PUBLIC and (found is None or found.status is SessionStatus.ARCHIVED):
            self._forget(grant.session_id, grant.port)  # archived or deleted since: over
            raise Unauthenticated("This public preview was revoked, or never was")
        session, client = sandbox_of(owned(found, Identity(user_id=grant.user_id)), self._clients)
        if grant.kind is not Kind.PUBLIC:  # strangers' visits do not keep the sandbox awake
            self._touch(grant)
        generation = session.sandbox.generation if session.sandbox is not None else 0

        def open_tunnel() -> socket.socket:
            try:
                return client.open_tunnel(grant.port)
            except SandboxError as exc:
                if exc.status == 404:
                    raise PortNotListening(f"Nothing listens on port {grant.port}") from exc
                raise self.unavailable(session, exc) from exc

        key = (session.id, generation, grant.port, grant.kind is Kind.PUBLIC)
        return PreviewTarget(key, open_tunnel)
