"""A session's pull request: kept current (the reference's check-pr rules, §2.5) after each agent
turn and when the session is opened, merged or closed through the git host port, and the GitHub
webhook's ``pull_request`` events (a closed PR archives its sessions)."""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Protocol

from openagents.domain.errors import Conflict, InvalidInput, Unavailable
from openagents.domain.identity import Identity
from openagents.domain.models import (
    LifecycleState,
    PrStatus,
    Session,
    SessionStatus,
    pr_key,
)
from openagents.git import GitHost, GitHostError, MergeMethod
from openagents.sandbox.port import SandboxdClients
from openagents.services import Clock, IdFactory, Metrics
from openagents.services.sessions import owned
from openagents.services.transitions import Change, Entry, Transitions
from openagents.store.port import StaleState, Store

log = logging.getLogger(__name__)
LIVE = frozenset({LifecycleState.ACTIVE, LifecycleState.HIBERNATING})
ANY_STATE = frozenset(LifecycleState)
DELIVERY_TTL = timedelta(days=7)  # GitHub redelivers a webhook for 3 days; ids are kept longer


@dataclass(frozen=True)
class PullRequestEventId:
    """What a signed ``pull_request`` body says the event is (``event_identity``)."""

    action: str
    owner: str
    name: str
    number: int
    head_sha: str | None
    updated_at: str | None


def event_identity(event: PullRequestEventId, body: bytes) -> str:
    """The event's own identity, kept beside the delivery ids: its action, repository, PR
    number, head sha and ``updated_at`` (GitHub sends both on every such event; without them
    the body's digest stands in, so two real events are never taken for one)."""
    fields: list[object] = [
        event.action,
        event.owner.lower(),
        event.name.lower(),
        event.number,
        event.head_sha,
        event.updated_at,
    ]
    if event.head_sha is None or event.updated_at is None:
        fields.append(hashlib.sha256(body).hexdigest())
    return "event:" + hashlib.sha256(json.dumps(fields).encode()).hexdigest()


@dataclass(frozen=True)
class PullRequestUpdate:
    """What a ``pull_request`` delivery did: the status it set on the sessions of that PR
    (None for a replayed delivery, which does nothing)."""

    duplicate: bool = False
    pr_status: PrStatus | None = None
    matched_sessions: int = 0
    updated_sessions: int = 0
    archived_sessions: int = 0


class Archives(Protocol):
    """Archiving, as a merge and a closed PR's webhook ask for it."""

    def archive(self, session: Session, *, pr_status: PrStatus | None = None) -> Session: ...


class NoPullRequest(Conflict):
    code = "no_pull_request"


class NotMergeable(Conflict):
    code = "not_mergeable"


class PullRequestService:
    def __init__(
        self,
        store: Store,
        workspaces: SandboxdClients,
        git_host: GitHost | None,
        clock: Clock,
        ids: IdFactory,
        metrics: Metrics,
        *,
        archive: Archives,
        host_setting: str,
        refresh_seconds: float,
        monotonic: Callable[[], float] = time.monotonic,
        blockers: Callable[[Session], Sequence[str]] | None = None,
    ) -> None:
        self._blockers = blockers  # merge readiness: what stops a merge now
        self._store, self._workspaces, self._git_host = store, workspaces, git_host
        self._clock, self._ids, self._metrics = clock, ids, metrics
        self._transitions = Transitions(store, lambda: self._clock(), lambda: self._ids(), metrics)
        self._archive = archive
        self._host_setting = host_setting  # named by the 400 when no git host is configured
        self._refresh_seconds = refresh_seconds
        self._monotonic = monotonic
        self._last: dict[str, float] = {}  # session id -> when this process last refreshed it
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ refresh

    def refresh(self, session_id: str) -> Session | None:
        """Branch and PR state from the running sandbox and the git host; never raises."""
        session = self._store.get_session(session_id)
        if session is None:
            return None
        try:
            changes = self._check(session)
            if not changes.fields():
                return session
            return self._transitions.move(session, ANY_STATE, changes)
        except StaleState:
            return self._store.get_session(session_id)
        except Exception as exc:  # a refresh never fails the turn or the read
            log.warning("PR refresh of %s failed: %s", session_id, exc)
            return session

    def refresh_if_due(self, session: Session) -> Session:
        """``refresh`` at most once per ``refresh_seconds`` per session (this process): the
        session's page calls it on every open, so most opens cost nothing."""
        if session.status is SessionStatus.ARCHIVED or not session.sandbox:
            return session
        now = self._monotonic()
        with self._lock:
            last = self._last.get(session.id)
            if last is not None and now - last < self._refresh_seconds:
                return session
            self._last[session.id] = now
        return self.refresh(session.id) or session

    def _check(self, session: Session) -> Change:
        """The reference's check-pr rules, with one change: the sandbox's branch is only shown.
        The branch the sandbox is on is saved as ``branch`` (what the session page shows); the
        pull request is looked up for the session's own branch only, never for a branch the
        sandbox names (checking out ``bob/feature`` must not hand this session bob's PR to
        merge or close). Without a git host (no token) or an own branch nothing more; a PR found
        is saved when it changed; none found leaves the stored PR alone."""
        if session.lifecycle_state not in LIVE or not session.sandbox:
            return Change()
        changes = Change()
        seen = self._workspaces(session.sandbox).git_branch().branch
        if seen is not None and seen != session.branch:
            changes = Change(branch=seen)
        own = session.own_branch
        if self._git_host is None or own is None or not (session.clone_url or session.repo_name):
            return changes
        found = self._git_host.pull_request_for_branch(session.repo, own)
        if found is None:
            return changes
        if found.number != session.pr_number or found.state is not session.pr_status:
            changes |= Change(
                pr_number=found.number,
                pr_status=found.state,
                pr_key=pr_key(session.repo_owner, session.repo_name, found.number),
            )
        return changes

    # ------------------------------------------------------------- merge, close

    def merge(self, identity: Identity, session_id: str, method: MergeMethod) -> Session:
        """Merge the session's PR; then ``prStatus: merged``, its event, and the session is
        archived (the reference's client archives after a merge; here the server does)."""
        session, host, number = self._pull_request(identity, session_id)
        reasons = list(self._blockers(session)) if self._blockers is not None else []
        if reasons:
            raise NotMergeable(f"Pull request #{number} cannot be merged: {' '.join(reasons)}")
        try:
            merged = host.merge_pull_request(session.repo, number, method=method)
        except GitHostError as exc:
            raise self._refused(exc, f"Pull request #{number} cannot be merged") from None
        session = self._record(session, merged.state, "session.pr_merged", method=method)
        if session.status is not SessionStatus.ARCHIVED:
            session = self._archive.archive(session)  # keeps the merged status just written
        return session

    def close(self, identity: Identity, session_id: str) -> Session:
        """Close the session's PR without merging; ``prStatus: closed`` and its event."""
        session, host, number = self._pull_request(identity, session_id)
        try:
            closed = host.close_pull_request(session.repo, number)
        except GitHostError as exc:
            raise self._refused(exc, f"Pull request #{number} cannot be closed") from None
        return self._record(session, closed.state, "session.pr_closed")

    def _pull_request(self, identity: Identity, session_id: str) -> tuple[Session, GitHost, int]:
        session = owned(self._store.get_session(session_id), identity)
        if self._git_host is None:
            raise InvalidInput(
                f"No GitHub token is configured: set {self._host_setting}", field=None
            )
        if session.pr_number is None:
            raise NoPullRequest("The session has no pull request", field="sessionId")
        return session, self._git_host, session.pr_number

    @staticmethod
    def _refused(exc: GitHostError, what: str) -> Exception:
        if exc.status in (405, 409, 422):
            return NotMergeable(f"{what}: {exc.message}")
        if exc.status == 404:
            return NoPullRequest(f"{what}: the git host does not know it", field="sessionId")
        return Unavailable(f"{what}: {exc.message}")

    def _record(self, session: Session, status: PrStatus, kind: str, **detail: Any) -> Session:
        entry = Entry(kind, {"prNumber": session.pr_number, "prStatus": status.value, **detail})
        metric = "PullRequestMerged" if status is PrStatus.MERGED else "PullRequestClosed"
        return self._transitions.move(
            session, ANY_STATE, Change(pr_status=status), entry, metric=metric
        )

    # -------------------------------------------------------------------- webhook

    def pull_request_event(
        self,
        action: str,
        owner: str,
        name: str,
        number: int,
        merged: bool,
        *,
        identity: str,
        delivery: str | None = None,
    ) -> PullRequestUpdate:
        """``pull_request`` closed/reopened: update prStatus; closed also archives. An event
        seen before is a replay — acknowledged, nothing done: the same delivery id (GitHub's
        ``X-GitHub-Delivery``, not signed) or the same body's ``identity`` (``event_identity``:
        the signed body without the header, or under another id), each kept ``DELIVERY_TTL``.
        An event whose handling fails is forgotten, so GitHub's redelivery runs it again."""
        now = self._clock()
        claimed: list[str] = []
        for key in (delivery, identity):
            if key is not None:
                if not self._store.claim_delivery(key, now, now + DELIVERY_TTL):
                    return PullRequestUpdate(duplicate=True)
                claimed.append(key)
        try:
            return self._pull_request_event(action, owner, name, number, merged)
        except BaseException:
            for key in claimed:
                self._store.forget_delivery(key)
            raise

    def _pull_request_event(
        self, action: str, owner: str, name: str, number: int, merged: bool
    ) -> PullRequestUpdate:
        status = (
            PrStatus.OPEN
            if action == "reopened"
            else (PrStatus.MERGED if merged else PrStatus.CLOSED)
        )
        sessions = self._store.sessions_for_pr(owner, name, number)
        updated = archived = 0
        for session in sessions:
            try:
                if action == "closed" and session.status is not SessionStatus.ARCHIVED:
                    self._archive.archive(session, pr_status=status)
                    archived += 1
                    updated += 1
                elif session.pr_status is not status:
                    self._transitions.move(session, ANY_STATE, Change(pr_status=status))
                    updated += 1
            except StaleState:  # archived meanwhile (a replay, or the user): nothing to do
                continue
        return PullRequestUpdate(
            pr_status=status,
            matched_sessions=len(sessions),
            updated_sessions=updated,
            archived_sessions=archived,
        )
