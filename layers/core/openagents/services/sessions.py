"""Sessions: create (one transaction), list, read, rename, archive flag, delete, audit log."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from openagents.domain import naming, validation
from openagents.domain.errors import Conflict, InvalidInput, NotFound, RateLimited, Unavailable
from openagents.domain.identity import Identity
from openagents.domain.lifecycle import Failure
from openagents.domain.models import (
    AuditEntry,
    Chat,
    ChatMark,
    LifecycleState,
    ListFilter,
    Page,
    Preferences,
    Repo,
    Session,
    SessionStatus,
    TitleSource,
)
from openagents.git.roots import LocalRepoRefused, LocalRepoRoots, local_repo_roots
from openagents.sandbox.port import SandboxError
from openagents.services import Clock, IdFactory, Metrics, OfferedModel
from openagents.services.transitions import Change, Transitions
from openagents.settings import Settings
from openagents.store.port import (
    BadCursor,
    Gone,
    RateLimitExceeded,
    RateWindow,
    StaleState,
    Store,
    TitleTaken,
)

log = logging.getLogger(__name__)
FIRST_CHAT_TITLE = "New chat"
TITLE_ATTEMPTS = 8
ARCHIVED_DEFAULT_LIMIT = 50
LIST_DEFAULT_LIMIT = 100
MAX_LIMIT = 100
PROVISIONING = frozenset({LifecycleState.PROVISIONING})


class Archives(Protocol):
    """Archive's synchronous part (``services/archive.py``)."""

    def archive(self, session: Session) -> Session: ...


class Unarchives(Protocol):
    """The unarchive flow (``services/flows/unarchive.py``): running again, its start kicked."""

    def unarchive(self, session: Session) -> Session: ...


@dataclass(frozen=True)
class NewSession:
    """A create request, types already checked by the entry point."""

    title: str | None = None
    repo_url: str | None = None
    repo_owner: str | None = None
    repo_name: str | None = None
    clone_url: str | None = None
    branch: str | None = None
    is_new_branch: bool = False
    auto_commit_push: bool | None = None
    auto_create_pr: bool | None = None
    ask_before_bash: bool = False


@dataclass(frozen=True)
class SessionList:
    page: Page[Session]
    archived_count: int


def owned(session: Session | None, identity: Identity) -> Session:
    """Another user's session is indistinguishable from a missing one."""
    if session is None or session.user_id != identity.user_id:
        raise NotFound("Session not found")
    return session


def page_limit(raw: int | None, which: ListFilter) -> int:
    default = ARCHIVED_DEFAULT_LIMIT if which is ListFilter.ARCHIVED else LIST_DEFAULT_LIMIT
    return min(max(raw if raw is not None else default, 1), MAX_LIMIT)


class SessionService:
    def __init__(
        self,
        store: Store,
        settings: Settings,
        clock: Clock,
        ids: IdFactory,
        metrics: Metrics,
        offered: OfferedModel,
        *,
        kick: Callable[[Session], object] | None = None,
        archive: Archives | None = None,
        unarchive: Unarchives | None = None,
        local_roots: LocalRepoRoots | None = None,
        teardown: Callable[[Session], None] | None = None,
    ) -> None:
        self._archive, self._unarchive = archive, unarchive
        self._offered = offered
        self._teardown = teardown
        self._store = store
        self._settings = settings
        self._clock = clock
        self._ids = ids
        self._metrics = metrics
        self._transitions = Transitions(store, lambda: self._clock(), lambda: self._ids(), metrics)
        self._kick = kick
        self._local_roots = local_roots or local_repo_roots(
            settings.local_repo_roots, settings.home
        )

    def create(self, identity: Identity, request: NewSession) -> tuple[Session, Chat]:
        repo = validation.repository(
            url=request.repo_url or request.clone_url,
            owner=request.repo_owner,
            name=request.repo_name,
            field="repoUrl" if request.repo_url else "cloneUrl",
            allowed_hosts=self._settings.allowed_repo_hosts,
            allow_local=self._settings.local_repos_allowed,
        )
        if request.repo_url and request.clone_url:
            raise InvalidInput("Give repoUrl or cloneUrl, not both", field="cloneUrl")
        if repo is not None and (repo.clone_url or "").startswith("file://"):
            repo = self._local_repo(repo, field="repoUrl" if request.repo_url else "cloneUrl")
        branch = request.branch
        if request.is_new_branch:
            branch = naming.branch_name(identity.username, identity.name)
        elif branch is not None:
            branch = validation.branch(branch)
        given_title = validation.title(request.title) if request.title is not None else None

        prefs = self._store.get_user(identity.user_id).preferences
        auto_commit = (
            request.auto_commit_push
            if request.auto_commit_push is not None
            else prefs.auto_commit_push
        )
        auto_pr = (
            request.auto_create_pr if request.auto_create_pr is not None else prefs.auto_create_pr
        )

        now = self._clock()
        rate = self._rate_window(now)
        session_id = self._ids()
        chat = Chat(
            id=self._ids(),
            session_id=session_id,
            title=FIRST_CHAT_TITLE,
            model_id=prefs.default_model_id or self._settings.new_chat_model,
            created_at=now,
            updated_at=now,
        )
        base = Session(
            id=session_id,
            user_id=identity.user_id,
            title=given_title or "",
            title_source=TitleSource.GIVEN if given_title else TitleSource.AUTO,
            repo_owner=repo.owner if repo else None,
            repo_name=repo.name if repo else None,
            clone_url=repo.clone_url if repo else None,
            branch=branch,
            is_new_branch=request.is_new_branch,
            own_branch=branch,
            auto_commit_push_override=auto_commit,
            auto_create_pr_override=auto_pr if auto_commit else False,
            ask_before_bash=request.ask_before_bash,
            lifecycle_state=LifecycleState.PROVISIONING,
            created_at=now,
            updated_at=now,
            chats={chat.id: ChatMark(created_at=now, updated_at=now)},
            owner_name=identity.name or identity.username,
            owner_email=identity.email,
        )
        titles = (
            iter([given_title])
            if given_title
            else naming.city_candidates(self._store.used_titles(identity.user_id))
        )
        for attempt, title in enumerate(titles):
            session = base.model_copy(update={"title": title})
            entry = self._entry(session.id, "session.created", now, {"title": title})
            try:
                self._store.create_session(
                    session, chat, entry, claim_title=given_title is None, rate=rate
                )
            except TitleTaken:
                if attempt + 1 >= TITLE_ATTEMPTS:
                    raise Conflict("Could not pick a unique title; try again") from None
                continue
            except RateLimitExceeded as exc:
                retry = max(1, int((exc.retry_at - now).total_seconds() + 0.999))
                raise RateLimited(
                    "Too many sessions created. Please try again later.",
                    retry_after_seconds=retry,
                ) from None
            self._metrics.count("SessionCreated")
            return self._provision(session), chat
        raise AssertionError("title candidates never run out")  # pragma: no cover

    def _local_repo(self, repo: Repo, *, field: str) -> Repo:
        """A local git repository only under the allowed roots, saved by its real path."""
        try:
            real = self._local_roots.repository(repo.clone_url or "")
        except LocalRepoRefused as exc:
            raise InvalidInput(str(exc), field=field) from None
        return repo.model_copy(update={"clone_url": f"file://{real}"})

    def _provision(self, session: Session) -> Session:
        """Kick provisioning. The session exists whatever happens here: a failed kick is
        recorded on it and ``POST /api/sandbox`` (or the reconciler) kicks again."""
        if self._kick is None:
            return session
        try:
            self._kick(session)
        except Exception as exc:  # the workflow service failed; never lose the create
            log.warning("provisioning kick failed for %s: %s", session.id, exc)
            failed = Change.failed(Failure.PROVISIONING_NOT_STARTED)
            return self._transitions.move(session, PROVISIONING, failed)
        return session

    def list(
        self, identity: Identity, which: ListFilter, limit: int | None, cursor: str | None
    ) -> SessionList:
        try:
            page = self._store.list_sessions(
                identity.user_id, which, page_limit(limit, which), cursor
            )
        except BadCursor:
            raise InvalidInput("Invalid cursor", field="cursor") from None
        archived = self._store.get_user(identity.user_id).archived_count
        return SessionList(page=page, archived_count=archived)

    def get(self, identity: Identity, session_id: str) -> Session:
        return owned(self._store.get_session(session_id), identity)

    def update(
        self,
        identity: Identity,
        session_id: str,
        *,
        title: str | None,
        status: SessionStatus | None,
        ask_before_bash: bool | None = None,
    ) -> Session:
        session = self.get(identity, session_id)
        if title is None and status is None and ask_before_bash is None:
            raise InvalidInput("At least one field is required", field="title")
        if title is not None:
            title = validation.title(title)
        try:
            if title is not None and title != session.title:
                entry = self._entry(session.id, "session.renamed", self._clock(), {"title": title})
                session = self._store.rename_session(session, title, entry)
            if ask_before_bash is not None and ask_before_bash != session.ask_before_bash:
                detail = {"askBeforeBash": ask_before_bash}
                entry = self._entry(session.id, "session.settings_changed", self._clock(), detail)
                session = self._store.set_ask_before_bash(session, ask_before_bash, entry)
            if status is not None and status is not session.status:
                session = self._set_status(session, status)
        except Gone:
            raise NotFound("Session not found") from None
        except StaleState:  # a concurrent archive/unarchive won: same outcome is a no-op
            current = self.get(identity, session_id)
            if current.status is not status:
                raise Conflict("The session changed meanwhile; try again") from None
            return current
        return session

    def _set_status(self, session: Session, status: SessionStatus) -> Session:
        if status is SessionStatus.ARCHIVED and self._archive is not None:
            return self._archive.archive(session)  # services/archive.py
        if status is not SessionStatus.ARCHIVED and self._unarchive is not None:
            return self._unarchive.unarchive(session)  # services/flows/unarchive.py
        lifecycle = LifecycleState.ARCHIVED if status is SessionStatus.ARCHIVED else None
        kind = "session.archived" if status is SessionStatus.ARCHIVED else "session.unarchived"
        entry = self._entry(session.id, kind, self._clock(), {})
        updated = self._store.set_status(session, status, lifecycle, entry)
        self._metrics.count("SessionArchived" if lifecycle else "SessionUnarchived")
        return updated

    def delete(self, identity: Identity, session_id: str) -> None:
        """The sandbox first (stopped, its snapshot and volumes removed: ``teardown``), then
        the session in one transaction. A sandbox that cannot be torn down answers 503 with
        nothing deleted; the retry finishes it (every step is idempotent)."""
        session = self.get(identity, session_id)
        if self._teardown is not None:
            try:
                self._teardown(session)
            except SandboxError as exc:
                log.warning("could not tear down the sandbox of %s: %s", session.id, exc)
                raise Unavailable("The session's sandbox could not be stopped; try again") from exc
        try:
            self._store.delete_session(session)
        except Gone:
            raise NotFound("Session not found") from None
        self._metrics.count("SessionDeleted")

    def events(
        self, identity: Identity, session_id: str, limit: int | None, cursor: str | None
    ) -> Page[AuditEntry]:
        session = self.get(identity, session_id)
        try:
            return self._store.list_events(session.id, min(max(limit or 100, 1), 100), cursor)
        except BadCursor:
            raise InvalidInput("Invalid cursor", field="cursor") from None

    def preferences(self, identity: Identity) -> Preferences:
        return self._store.get_user(identity.user_id).preferences

    def set_preferences(self, identity: Identity, preferences: Preferences) -> Preferences:
        """Stored whole, once valid: a model the registry does not offer is 400 on
        ``defaultModelId`` with nothing written."""
        if preferences.default_model_id:
            model_id = self._offered(preferences.default_model_id, "defaultModelId")
            preferences = preferences.model_copy(update={"default_model_id": model_id})
        self._store.put_preferences(identity.user_id, preferences)
        return preferences

    def _rate_window(self, now: datetime) -> RateWindow:
        return RateWindow(
            action="create-session",
            at=now,
            seconds=self._settings.rate_limit_window_seconds,
            limit=self._settings.rate_limit_per_minute,
        )

    def _entry(
        self, session_id: str, kind: str, at: datetime, detail: dict[str, Any]
    ) -> AuditEntry:
        return AuditEntry(id=self._ids(), session_id=session_id, at=at, type=kind, detail=detail)
