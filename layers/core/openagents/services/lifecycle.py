"""The sandbox lifecycle: the wait-then-hibernate loop's steps, resume, pause, status, activity,
extend, and the reconciler. Every transition is a conditional write with an audit entry."""

from __future__ import annotations

import contextlib
import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from openagents.domain.errors import Conflict, NotFound, SessionArchived
from openagents.domain.identity import Identity
from openagents.domain.lifecycle import (
    STALE_LEASE_GRACE,
    STARTING_STATES,
    ChipStatus,
    Failure,
    chip_status,
    due_at,
    failure,
    lease_is_stale,
    snapshot_ref,
    wake_at,
    with_due,
)
from openagents.domain.models import AuditEntry, LifecycleState, Session, SessionStatus
from openagents.sandbox.port import (
    SandboxDriver,
    SandboxError,
    SandboxState,
    SnapshotRef,
)
from openagents.services import Clock, IdFactory, Metrics
from openagents.services.journal import Journal
from openagents.services.sessions import owned
from openagents.settings import Settings
from openagents.store.port import StaleState, Store
from openagents.workflows import TaskError, Workflows

log = logging.getLogger(__name__)
MACHINE = "lifecycle"
ACTIVE = frozenset({LifecycleState.ACTIVE})
HIBERNATING = frozenset({LifecycleState.HIBERNATING})
RUNNING = frozenset({LifecycleState.ACTIVE, LifecycleState.HIBERNATING})
BUSY = frozenset(
    {
        LifecycleState.PROVISIONING,
        LifecycleState.ACTIVE,
        LifecycleState.HIBERNATING,
        LifecycleState.RESTORING,
    }
)


class SnapshotFailed(Exception):
    """Snapshot or its verification failed; the sandbox keeps running (Step Functions retries)."""


@dataclass(frozen=True)
class StatusView:
    session: Session
    status: ChipStatus
    server_time: datetime


class Action(StrEnum):
    """Where the lifecycle loop goes next (its ``Route`` choice)."""

    WAIT = "wait"  # sleep until ``wake_at``, then evaluate
    HIBERNATE = "hibernate"
    EXIT = "exit"  # the run ends (``reason`` says why)


@dataclass(frozen=True)
class Decision:
    """A step's answer to the loop: what to do next, when to wake for it, and why."""

    action: Action
    wake_at: datetime | None = None
    reason: str | None = None


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
    sandbox was already running (``state``)."""

    restoring: bool = False
    restored_from: str | None = None
    already_running: bool = False
    state: LifecycleState | None = None


@dataclass(frozen=True)
class Reconciled:
    """What one reconciler sweep did."""

    overdue: int  # sessions the overdue index returned
    kicked: int  # lifecycle runs started
    restarted: int  # sandbox starts kicked again
    purged: int  # deletes whose children were removed


class LifecycleService:
    def __init__(
        self,
        store: Store,
        driver: SandboxDriver,
        workflows: Workflows,
        settings: Settings,
        clock: Clock,
        ids: IdFactory,
        metrics: Metrics,
        restore: Callable[[Session, int], object] | None = None,
        journal: Journal | None = None,
        after_turn: Callable[[Session], dict[str, Any]] | None = None,
    ) -> None:
        self._after_turn = after_turn
        self._journal = journal or Journal(None, metrics)
        self._restore = restore
        self._store = store
        self._driver = driver
        self._workflows = workflows
        self._settings = settings
        self._clock = clock
        self._ids = ids
        self._metrics = metrics

    # ------------------------------------------------------------------ kick

    def kick(self, session: Session, reason: str, *, force: bool = False) -> bool:
        """Start a lifecycle run if none owns the session (or its lease is stale, or ``force``
        replaces it). The lease is claimed atomically, so concurrent kicks start one run."""
        if session.status is SessionStatus.ARCHIVED or session.lifecycle_state not in RUNNING:
            return False
        now = self._clock()
        run_id = f"lifecycle-{int(now.timestamp() * 1000)}-{secrets.token_hex(6)}"
        if not self._store.claim_lease(
            session.id, run_id, now - STALE_LEASE_GRACE, replace_active=force
        ):
            return False
        try:
            self._workflows.start(MACHINE, run_id, {"sessionId": session.id, "runId": run_id})
        except Exception:
            self._store.release_lease(session.id, run_id)
            raise
        log.info("lifecycle run %s started for %s (%s)", run_id, session.id, reason)
        return True

    # ------------------------------------------------------- the loop's steps

    def _owned_run(self, session_id: str, run_id: str) -> Session | Decision:
        """The session when this run still owns it, else the decision to exit."""
        session = self._store.get_session(session_id)
        if session is None:
            return Decision(Action.EXIT, reason="session-not-found")
        if session.lifecycle_run_id != run_id:
            return Decision(Action.EXIT, reason="run-replaced")
        if session.status is SessionStatus.ARCHIVED or session.lifecycle_state not in RUNNING:
            self._store.release_lease(session_id, run_id)
            return Decision(Action.EXIT, reason=f"session-{session.lifecycle_state or 'idle'}")
        return session

    def claim(self, session_id: str, run_id: str) -> Decision:
        owned_run = self._owned_run(session_id, run_id)
        if isinstance(owned_run, Decision):
            return owned_run
        return Decision(Action.WAIT, self._wake(owned_run))

    def evaluate(self, session_id: str, run_id: str) -> Decision:
        owned_run = self._owned_run(session_id, run_id)
        if isinstance(owned_run, Decision):
            return owned_run
        session, now = owned_run, self._clock()
        if not self._alive(session):
            self.mark_lost(session, "the sandbox stopped on its own")
            return Decision(Action.EXIT, reason="sandbox-lost")
        due = due_at(session)
        if session.lifecycle_state is LifecycleState.ACTIVE and due is not None and now < due:
            return Decision(Action.WAIT, self._wake(session), "not-due-yet")
        return Decision(Action.HIBERNATE)

    def hibernate(self, session_id: str, run_id: str) -> Decision:
        """hibernating → snapshot → verify → re-check activity → stop → hibernated."""
        owned_run = self._owned_run(session_id, run_id)
        if isinstance(owned_run, Decision):
            return owned_run
        session, now = owned_run, self._clock()
        due = due_at(session)
        if session.lifecycle_state is LifecycleState.ACTIVE:
            if due is not None and now < due:
                return Decision(Action.WAIT, self._wake(session), "not-due-yet")
            session = self._move(
                session,
                ACTIVE,
                {"lifecycle_state": LifecycleState.HIBERNATING},
                "sandbox.hibernating",
                run_id,
            )
        handle = session.sandbox
        if handle is None:
            raise SandboxError("the hibernating session has no sandbox")
        try:
            snapshot = self._driver.snapshot(handle)
        except SandboxError as exc:
            message = f"Snapshot failed: {exc}"
            self._move(
                session,
                HIBERNATING,
                {"lifecycle_state": LifecycleState.ACTIVE, **failure(Failure.SNAPSHOT_FAILED)},
                "sandbox.snapshot_failed",
                run_id,
                detail={"code": Failure.SNAPSHOT_FAILED.value, "error": message},
            )
            self._metrics.count("SnapshotFailed")
            raise SnapshotFailed(message) from exc
        # Write-ahead: the verified snapshot is on the session before anything is stopped, so
        # a crash from here on leaves the session pointing at its newest copy (recovery —
        # the reconciler, or ``mark_lost`` — hibernates it from that one).
        previous = session.snapshot
        fresh = self._record_snapshot(session, snapshot, run_id)
        if fresh is None:
            return Decision(Action.EXIT, reason="run-replaced")
        self._drop_snapshot(previous, keep=snapshot)
        if self._activity_moved(fresh):
            self._move(
                fresh,
                HIBERNATING,
                {"lifecycle_state": LifecycleState.ACTIVE},
                "sandbox.hibernate_aborted",
                run_id,
            )
            return Decision(
                Action.WAIT,
                wake_at(
                    fresh.model_copy(update={"lifecycle_state": LifecycleState.ACTIVE}),
                    self._clock(),
                ),
                "activity-moved",
            )
        self._driver.stop(handle)
        hibernated: dict[str, Any] = {
            "lifecycle_state": LifecycleState.HIBERNATED,
            "hibernated_at": self._clock(),
            "lifecycle_error": None,
            "snapshot": snapshot,
            "sandbox": None,
            "sandbox_expires_at": None,
            "hibernate_after": None,
            "turn_active_until": None,
            "lifecycle_run_id": None,
        }
        detail = {"snapshotBytes": snapshot.size_bytes, "snapshotId": snapshot.id}
        try:
            self._move(
                session, HIBERNATING, hibernated, "sandbox.hibernated", run_id, detail=detail
            )
        except StaleState:
            # Another run took the lease meanwhile, but this sandbox is stopped and this
            # verified snapshot is its only copy: record it whoever owns the lease now.
            self._move(session, HIBERNATING, hibernated, "sandbox.hibernated", None, detail=detail)
        self._metrics.count("SandboxHibernated")
        return Decision(Action.EXIT, reason="hibernated")

    def recover(self, session_id: str, run_id: str, error: TaskError | None) -> Decision:
        """After the retries of a failed hibernation: keep the sandbox running, try later."""
        owned_run = self._owned_run(session_id, run_id)
        if isinstance(owned_run, Decision):
            return owned_run
        session = owned_run
        if session.lifecycle_state is LifecycleState.HIBERNATING:
            cause = (error.cause if error else None) or "hibernation failed"
            session = self._move(
                session,
                HIBERNATING,
                {"lifecycle_state": LifecycleState.ACTIVE, **failure(Failure.PAUSE_FAILED)},
                "sandbox.hibernate_failed",
                run_id,
                detail={"code": Failure.PAUSE_FAILED.value, "error": str(cause)[:1000]},
            )
        later = self._clock() + timedelta(seconds=self._settings.snapshot_retry_seconds)
        return Decision(Action.WAIT, later, "retry-later")

    # --------------------------------------------------------- lost sandboxes

    def _alive(self, session: Session) -> bool:
        if not session.sandbox:
            return False
        probe = self._driver.probe(session.sandbox)
        return probe.state not in (SandboxState.STOPPED, SandboxState.GONE)

    def mark_lost(self, session: Session, reason: str) -> Session:
        """A sandbox that died on its own: back to its last snapshot, or failed without one."""
        taken = session.snapshot.created_at.isoformat() if session.snapshot else None
        if session.snapshot:
            code = Failure.SANDBOX_LOST
            changes: dict[str, Any] = {
                "lifecycle_state": LifecycleState.HIBERNATED,
                "hibernated_at": self._clock(),
                **failure(code),
            }
        else:
            code = Failure.SANDBOX_LOST_NO_SNAPSHOT
            changes = {"lifecycle_state": LifecycleState.FAILED, **failure(code)}
        changes |= {
            "sandbox": None,
            "sandbox_expires_at": None,
            "hibernate_after": None,
            "turn_active_until": None,
            "lifecycle_run_id": None,
        }
        try:
            lost = self._move(
                session,
                RUNNING,
                changes,
                "sandbox.lost",
                None,
                detail={"reason": reason, "code": code.value, "snapshotAt": taken},
            )
        except StaleState:
            return session
        self._metrics.count("SandboxLost")
        return lost

    def verify_running(self, session: Session) -> bool:
        """Called when a tool call could not reach the sandbox."""
        if session.lifecycle_state in RUNNING and not self._alive(session):
            self.mark_lost(session, "the sandbox is unreachable")
            return False
        return True

    # ---------------------------------------------------------------- the API

    def status(self, identity: Identity, session_id: str) -> StatusView:
        """One GetItem; a write only when the session is overdue and needs a run."""
        session = owned(self._store.get_session(session_id), identity)
        now = self._clock()
        due = due_at(session)
        overdue = due is not None and now >= due
        if overdue and (session.lifecycle_run_id is None or lease_is_stale(session, now)):
            with contextlib.suppress(Exception):  # a poll never fails because of a kick
                self.kick(session, "status-check-overdue")
        return StatusView(session=session, status=chip_status(session), server_time=now)

    def activity(self, identity: Identity, session_id: str, turn: str | None) -> Activity:
        """Activity moves ``hibernateAfter``; ``turn`` "start" holds hibernation off for a
        heartbeat, "end" releases it after a natural finish (auto-commit / auto-PR follow), and
        "release" (a stopped or failed agent turn) releases it with no follow-up."""
        session = owned(self._store.get_session(session_id), identity)
        if session.lifecycle_state is not LifecycleState.ACTIVE:
            return Activity(success=False, reason="not-active")
        now = self._clock()
        changes: dict[str, Any] = {
            "last_activity_at": now,
            "hibernate_after": now + timedelta(seconds=self._settings.idle_timeout_seconds),
        }
        if turn == "start":
            changes["turn_active_until"] = now + timedelta(
                seconds=self._settings.turn_heartbeat_seconds
            )
        elif turn in ("end", "release"):
            changes["turn_active_until"] = None
        try:
            updated = self._store.transition(
                session.id, expect=ACTIVE, changes=with_due(session, changes), entry=None
            )
        except StaleState:
            return Activity(success=False, reason="not-active")
        if turn not in ("end", "release"):
            return Activity(success=True)
        auto = turn == "end" and self._after_turn is not None
        outcome = self._after_turn(updated) if auto and self._after_turn else None  # commit / PR
        self.kick(updated, "turn-ended", force=True)  # due moved earlier than the run's wake-up
        return Activity(success=True, after_turn=outcome)

    def extend(self, identity: Identity, session_id: str) -> Session:
        session = owned(self._store.get_session(session_id), identity)
        if (
            session.lifecycle_state is not LifecycleState.ACTIVE
            or session.sandbox_expires_at is None
        ):
            raise Conflict("Sandbox is not active", field="sessionId")
        now = self._clock()
        step = timedelta(seconds=self._settings.extend_seconds)
        changes: dict[str, Any] = {
            "sandbox_expires_at": session.sandbox_expires_at + step,
            "last_activity_at": now,
            "hibernate_after": now + timedelta(seconds=self._settings.idle_timeout_seconds),
        }
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
        changes: dict[str, Any] = {"hibernate_after": self._clock(), "turn_active_until": None}
        try:
            session = self._move(
                session, ACTIVE, changes, "sandbox.pause_requested", None, bump=True
            )
        except StaleState:  # it started hibernating meanwhile
            return owned(self._store.get_session(session_id), identity)
        self.kick(session, "manual-pause", force=True)
        return session

    def resume(self, identity: Identity, session_id: str) -> Resumed:
        """``hibernated → restoring``, then a restore run (the provisioning workflow seeded from
        the snapshot). The conditional write lets exactly one of many concurrent resumes in."""
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
                {"lifecycle_state": LifecycleState.RESTORING, "lifecycle_error": None},
                "sandbox.restoring",
                None,
                bump=True,
            )
        except StaleState:  # another write won: a resume (running) or an archive (409)
            busy = self._already_running(owned(self._store.get_session(session_id), identity))
            if busy is None:
                raise Conflict("The session changed meanwhile; try again") from None
            return busy
        if self._restore is not None:
            self._restore(restoring, restoring.sandbox_generation + 1)
        return Resumed(restoring=True, restored_from=snapshot_ref(session.snapshot.id))

    @staticmethod
    def _already_running(session: Session) -> Resumed | None:
        """A resume's answer when there is nothing to resume: an archived session is 409
        (also when the archive won a race with this resume), a busy one is already running."""
        if session.status is SessionStatus.ARCHIVED:
            raise SessionArchived("Session is archived; unarchive it first", field="sessionId")
        if session.lifecycle_state in BUSY:
            return Resumed(already_running=True, state=session.lifecycle_state)
        return None

    # -------------------------------------------------------------- reconciler

    def reconcile(self, *, check_all: bool = False) -> Reconciled:
        """Kick every overdue session whose run is missing or stale. ``check_all`` (the
        one-machine runtime's start) also probes every running sandbox: a runtime that
        restarted lost its child sandboxes, and they are recorded as lost at once."""
        now = self._clock()
        kicked = restarted = 0
        horizon = now + timedelta(days=3650) if check_all else now
        overdue = self._store.overdue(horizon)
        for session_id in overdue:
            session = self._store.get_session(session_id)
            if session is None:
                continue
            if session.lifecycle_state in STARTING_STATES:
                restarted += self._restart(session, runtime_restarted=check_all)
                continue
            if check_all and not self._alive(session):
                self.mark_lost(session, "the runtime restarted")
                continue
            due = due_at(session)
            if due is None or due > now:
                continue
            if session.lifecycle_run_id and not lease_is_stale(session, now):
                continue
            try:
                started = self.kick(session, "reconciler")
                kicked += started
                if started and session.lifecycle_run_id:  # a lost run: put it on record
                    self._rescued(session)
            except Exception as exc:  # one bad session must not stop the sweep
                log.warning("reconciler could not kick %s: %s", session_id, exc)
        try:  # deletes whose children a failure left behind (their tombstones)
            purged = self._store.purge_deleted()
        except Exception as exc:
            log.warning("reconciler could not purge deleted items: %s", exc)
            purged = 0
        return Reconciled(overdue=len(overdue), kicked=kicked, restarted=restarted, purged=purged)

    def _restart(self, session: Session, *, runtime_restarted: bool) -> bool:
        """Re-kick a sandbox start (provisioning, restoring; the overdue index holds them all).
        On a sweep, the same generation: its workflow's execution name makes that a no-op while
        the start runs, and starts it when it never did (a kick lost with a crash). When the
        runtime restarted, the start died with it: the next generation, on record."""
        if self._restore is None or session.status is SessionStatus.ARCHIVED:
            return False
        current = max(session.sandbox_generation, 1)
        generation = session.sandbox_generation + 1 if runtime_restarted else current
        try:
            self._restore(session, generation)
        except Exception as exc:  # one bad session must not stop the sweep
            log.warning("reconciler could not re-kick the start of %s: %s", session.id, exc)
            return False
        if runtime_restarted:
            entry = AuditEntry(
                id=self._ids(),
                session_id=session.id,
                at=self._clock(),
                type="sandbox.run_rescued",
                detail={
                    "staleRun": f"provision-{session.id}-g{current}",
                    "state": str(session.lifecycle_state),
                    "generation": generation,
                },
            )
            self._store.append_entry(entry)
            self._journal.publish(session.user_id, entry)
            self._metrics.count("LifecycleRunRescued")
        return True

    def _rescued(self, session: Session) -> None:
        entry = AuditEntry(
            id=self._ids(),
            session_id=session.id,
            at=self._clock(),
            type="sandbox.run_rescued",
            detail={"staleRun": session.lifecycle_run_id, "state": str(session.lifecycle_state)},
        )
        self._store.append_entry(entry)
        self._journal.publish(session.user_id, entry)
        self._metrics.count("LifecycleRunRescued")

    # ---------------------------------------------------------------- helpers

    def _wake(self, session: Session) -> datetime:
        minimum = timedelta(seconds=self._settings.lifecycle_min_sleep_seconds)
        return wake_at(session, self._clock(), minimum)

    def _move(
        self,
        session: Session,
        expect: frozenset[LifecycleState],
        changes: dict[str, Any],
        kind: str,
        lease: str | None,
        *,
        bump: bool = False,
        detail: dict[str, Any] | None = None,
    ) -> Session:
        to = changes.get("lifecycle_state", session.lifecycle_state)
        entry = AuditEntry(
            id=self._ids(),
            session_id=session.id,
            at=self._clock(),
            type=kind,
            detail={
                "from": str(session.lifecycle_state),
                "to": str(to),
                "generation": session.sandbox_generation,
                **(detail or {}),
            },
        )
        moved = self._store.transition(
            session.id,
            expect=expect,
            changes=with_due(session, changes),
            entry=entry,
            lease=lease,
            bump_version=bump,
        )
        self._journal.publish(session.user_id, entry)
        return moved

    def _activity_moved(self, fresh: Session) -> bool:
        """Activity arrived while the snapshot was taken (re-checked right before stopping):
        the session, were it active, would no longer be due."""
        due = due_at(fresh.model_copy(update={"lifecycle_state": LifecycleState.ACTIVE}))
        return due is not None and due > self._clock()

    def _record_snapshot(
        self, session: Session, snapshot: SnapshotRef, run_id: str
    ) -> Session | None:
        """Record a verified snapshot on the hibernating session (conditional on the lease)
        before its sandbox is stopped. Another run that took the lease meanwhile still gets
        it (it is the newest copy); a session no longer hibernating (archived, lost) does
        not, and the snapshot is deleted: None."""
        changes = {"snapshot": snapshot}
        try:
            return self._store.transition(
                session.id, expect=HIBERNATING, changes=changes, entry=None, lease=run_id
            )
        except StaleState:
            pass
        try:
            return self._store.transition(
                session.id, expect=HIBERNATING, changes=changes, entry=None
            )
        except StaleState:
            self._drop_snapshot(snapshot, keep=None)
            return None

    def _drop_snapshot(self, previous: SnapshotRef | None, keep: SnapshotRef | None) -> None:
        if previous and (keep is None or previous.id != keep.id):
            try:
                self._driver.delete_snapshot(previous)
            except SandboxError as exc:  # an orphan costs storage, never data
                log.warning("could not delete the previous snapshot: %s", exc)
