"""The lifecycle's API operations: status (kicks an overdue run), activity (moves
``hibernateAfter``; a turn's hold), extend, pause (hibernate now), and a resume's first step
(``begin_restore``: hibernated → restoring; the restore flow, ``services/flows/restore.py``,
then kicks the start)."""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from openagents.domain.errors import Conflict, NotFound, SessionArchived
from openagents.domain.identity import Identity
from openagents.domain.lifecycle import (
    ChipStatus,
    chip_status,
    due_at,
    lease_is_stale,
    snapshot_ref,
)
from openagents.domain.models import LifecycleState, Session, SessionStatus
from openagents.services.lifecycle_base import ACTIVE, BUSY, LifecycleBase
from openagents.services.sessions import owned
from openagents.services.transitions import Change
from openagents.store.port import StaleState

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StatusView:
    session: Session
    status: ChipStatus
    server_time: datetime
    overdue: bool = False  # due, and no lifecycle run holds it: ``kick_overdue`` starts one


@dataclass(frozen=True)
class Activity:
    """What an activity report did: refreshed, or not (``reason``); after a turn's natural end,
    what auto-commit / auto-PR did (``after_turn``)."""

    success: bool
    reason: str | None = None
    after_turn: dict[str, Any] | None = None  # the auto-commit outcome, free-form like audit


@dataclass(frozen=True)
class Resumed:
    """A resume: a restore started from ``restored_from`` (the snapshot's opaque id), or the
    sandbox was already running (``state``). ``session``: the restoring session, whose start
    the restore flow kicks."""

    restoring: bool = False
    restored_from: str | None = None
    already_running: bool = False
    state: LifecycleState | None = None
    session: Session | None = None


class LifecycleApi(LifecycleBase):
    """The API's lifecycle operations: status, activity, extend, pause, a restore begun."""

    def status(self, identity: Identity, session_id: str) -> StatusView:
        """One GetItem, no write (a read cheap enough for the event loop); ``overdue`` when
        the session is due and no lifecycle run holds it."""
        session = owned(self._store.get_session(session_id), identity)
        now = self._clock()
        due = due_at(session)
        overdue = (
            due is not None
            and now >= due
            and (session.lifecycle_run_id is None or lease_is_stale(session, now))
        )
        return StatusView(session, chip_status(session), now, overdue)

    def kick_overdue(self, session: Session) -> None:
        """The run an overdue session's status poll asks for (a poll never fails for it)."""
        with contextlib.suppress(Exception):
            self.kick(session, "status-check-overdue")

    def activity(self, identity: Identity, session_id: str, turn: str | None) -> Activity:
        """Activity moves ``hibernateAfter``; ``turn`` "start" holds hibernation off for a
        heartbeat, "end" and "release" (a turn over) release it and kick the idle loop (a
        natural finish's auto-commit is a step of its own: ``services/after_turn.py``)."""
        touched = self.touch(identity, session_id, turn)
        if touched is None:
            return Activity(success=False, reason="not-active")
        if turn in ("end", "release"):
            self.turn_released(touched)
        return Activity(success=True)

    def touch(self, identity: Identity, session_id: str, turn: str | None) -> Session | None:
        """The activity's move (only while active): the session after it, else None."""
        session = owned(self._store.get_session(session_id), identity)
        if session.lifecycle_state is not LifecycleState.ACTIVE:
            return None
        if turn in ("end", "release") and session.turn_active_until is None:
            # no turn holds it: a Pause released the hold since (it hibernates now, and a turn
            # ending after it must not put that off by an idle timeout), or an end already did
            return session
        now = self._clock()
        changes = Change(
            last_activity_at=now,
            hibernate_after=now + timedelta(seconds=self._settings.idle_timeout_seconds),
        )
        if turn == "start":
            heartbeat = timedelta(seconds=self._settings.turn_heartbeat_seconds)
            changes |= Change(turn_active_until=now + heartbeat)
        elif turn in ("end", "release"):
            changes |= Change(turn_active_until=None)
        try:
            return self._transitions.move(session, ACTIVE, changes)
        except StaleState:
            return None

    def turn_released(self, session: Session) -> None:
        """A turn's hold released: its due moved earlier than the run's wake-up, so a new run
        replaces the waiting one."""
        self.kick(session, "turn-ended", force=True)

    def extend(self, identity: Identity, session_id: str) -> Session:
        session = owned(self._store.get_session(session_id), identity)
        if (
            session.lifecycle_state is not LifecycleState.ACTIVE
            or session.sandbox_expires_at is None
        ):
            raise Conflict("Sandbox is not active", field="sessionId")
        now = self._clock()
        step = timedelta(seconds=self._settings.extend_seconds)
        changes = Change(
            sandbox_expires_at=session.sandbox_expires_at + step,
            last_activity_at=now,
            hibernate_after=now + timedelta(seconds=self._settings.idle_timeout_seconds),
        )
        try:
            return self._move(
                session,
                ACTIVE,
                changes,
                "sandbox.extended",
                None,
                bump=True,
                detail={"seconds": self._settings.extend_seconds},
            )
        except StaleState:
            raise Conflict("Sandbox is not active", field="sessionId") from None

    def pause(self, identity: Identity, session_id: str) -> Session:
        """Hibernate now, through the same verified path (a new run replaces the waiting one).
        A sandbox already hibernating or hibernated is left to that: pausing it is a no-op."""
        session = owned(self._store.get_session(session_id), identity)
        if session.lifecycle_state in (LifecycleState.HIBERNATING, LifecycleState.HIBERNATED):
            return session
        if session.lifecycle_state is not LifecycleState.ACTIVE:
            raise Conflict("Sandbox is not running", field="sessionId")
        changes = Change(hibernate_after=self._clock(), turn_active_until=None)
        try:
            session = self._move(
                session, ACTIVE, changes, "sandbox.pause_requested", None, bump=True
            )
        except StaleState:  # it started hibernating meanwhile
            return owned(self._store.get_session(session_id), identity)
        self.kick(session, "manual-pause", force=True)
        return session

    def begin_restore(self, identity: Identity, session_id: str) -> Resumed:
        """A resume's lifecycle step: ``hibernated → restoring`` (the restore flow then starts
        the provisioning workflow seeded from the snapshot). The conditional write lets exactly
        one of many concurrent resumes in."""
        session = owned(self._store.get_session(session_id), identity)
        busy = self._already_running(session)
        if busy is not None:
            return busy
        if not session.snapshot:
            raise NotFound("No sandbox available for resume")
        try:
            restoring = self._move(
                session,
                frozenset({LifecycleState.HIBERNATED, LifecycleState.FAILED}),
                Change(lifecycle_state=LifecycleState.RESTORING, lifecycle_error=None),
                "sandbox.restoring",
                None,
                bump=True,
            )
        except StaleState:  # another write won: a resume (running) or an archive (409)
            busy = self._already_running(owned(self._store.get_session(session_id), identity))
            if busy is None:
                raise Conflict("The session changed meanwhile; try again") from None
            return busy
        restored_from = snapshot_ref(session.snapshot.id)
        return Resumed(restoring=True, restored_from=restored_from, session=restoring)

    @staticmethod
    def _already_running(session: Session) -> Resumed | None:
        """A resume's answer when there is nothing to resume: an archived session is 409
        (also when the archive won a race with this resume), a busy one is already running."""
        if session.status is SessionStatus.ARCHIVED:
            raise SessionArchived("Session is archived; unarchive it first", field="sessionId")
        if session.lifecycle_state in BUSY:
            return Resumed(already_running=True, state=session.lifecycle_state)
        return None
