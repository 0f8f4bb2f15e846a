"""The sandbox lifecycle: the wait-then-hibernate loop's steps, resume, pause, status, activity,
extend, and the reconciler. Every transition is a conditional write with an audit entry."""

from __future__ import annotations

import contextlib
import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
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
    lease_is_stale,
    snapshot_ref,
    wake_at,
)
from openagents.domain.models import LifecycleState, Session, SessionStatus
from openagents.sandbox.port import (
    Reboots,
    SandboxDriver,
    SandboxError,
    SandboxHandle,
    SandboxState,
    SnapshotRef,
)
from openagents.services import Clock, IdFactory, Metrics
from openagents.services.sessions import owned
from openagents.services.transitions import Change, Entry, Keep, Transitions
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


@dataclass
class Down:
    """What ``openagents down`` did: sessions hibernated, sandboxes of no session stopped,
    sessions it could not hibernate (and why), sandboxes still running after all that."""

    hibernated: list[str] = field(default_factory=list)
    stopped: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    left: list[str] = field(default_factory=list)  # sandboxes still running at the end


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
        after_turn: Callable[[Session], dict[str, Any]] | None = None,
        reboots: Reboots | None = None,
    ) -> None:
        self._after_turn = after_turn
        self._reboots = reboots  # a driver whose sandboxes outlive the runtime (one machine)
        self._restore = restore
        self._store = store
        self._driver = driver
        self._workflows = workflows
        self._settings = settings
        self._clock = clock
        self._ids = ids
        self._metrics = metrics
        # clock and ids read through the service: a test that sets them sets the moves' too
        self._transitions = Transitions(store, lambda: self._clock(), lambda: self._ids(), metrics)

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
            rebooted = self._reboot(session, run_id)  # on its own volume, when it is there
            if rebooted is None:
                self.mark_lost(session, "the sandbox stopped on its own")
                return Decision(Action.EXIT, reason="sandbox-lost")
            session = rebooted
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
                Change(lifecycle_state=LifecycleState.HIBERNATING),
                "sandbox.hibernating",
                run_id,
            )
        handle = session.sandbox
        if handle is None:
            raise SandboxError("the hibernating session has no sandbox")
        try:
            snapshot = self._quiet_snapshot(handle)
        except SandboxError as exc:
            message = f"Snapshot failed: {exc}"
            self._move(
                session,
                HIBERNATING,
                Change(lifecycle_state=LifecycleState.ACTIVE)
                | Change.failed(Failure.SNAPSHOT_FAILED),
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
                Change(lifecycle_state=LifecycleState.ACTIVE),
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
        hibernated = self._hibernated(snapshot)
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

    def _quiet_snapshot(self, handle: SandboxHandle) -> SnapshotRef:
        """The hibernation's snapshot of a sandbox whose commands were killed first (the stop
        ends them anyway: no memory state is kept), so that a fork bomb or a runaway command
        cannot wedge it; a failed snapshot is tried once more, after another kill."""
        kill_commands(self._driver, handle)
        try:
            return self._driver.snapshot(handle)
        except SandboxError as exc:
            log.warning(
                "snapshot of %s failed (%s): killing its commands, once more",
                handle.session_id,
                exc,
            )
            kill_commands(self._driver, handle)
            return self._driver.snapshot(handle)

    def _hibernated(self, snapshot: SnapshotRef) -> Change:
        return Change(
            lifecycle_state=LifecycleState.HIBERNATED,
            hibernated_at=self._clock(),
            lifecycle_error=None,
            snapshot=snapshot,
            sandbox=None,
            sandbox_expires_at=None,
            hibernate_after=None,
            turn_active_until=None,
            lifecycle_run_id=None,
        )

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
                Change(lifecycle_state=LifecycleState.ACTIVE) | Change.failed(Failure.PAUSE_FAILED),
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
            changes = Change(
                lifecycle_state=LifecycleState.HIBERNATED, hibernated_at=self._clock()
            ) | Change.failed(code)
        else:
            code = Failure.SANDBOX_LOST_NO_SNAPSHOT
            changes = Change(lifecycle_state=LifecycleState.FAILED) | Change.failed(code)
        changes |= Change(
            sandbox=None,
            sandbox_expires_at=None,
            hibernate_after=None,
            turn_active_until=None,
            lifecycle_run_id=None,
        )
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
            updated = self._transitions.move(session, ACTIVE, changes)
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
        one-machine runtime's start: every workflow and lifecycle run died with the previous
        process, its sandboxes did not) first stops the sandboxes no running session names,
        then recovers every running session (``_recover``) and restarts every start."""
        now = self._clock()
        kicked = restarted = 0
        if check_all:
            self._stop_orphans()
        horizon = now + timedelta(days=3650) if check_all else now
        overdue = self._store.overdue(horizon)
        for session_id in overdue:
            session = self._store.get_session(session_id)
            if session is None:
                continue
            if session.lifecycle_state in STARTING_STATES:
                restarted += self._restart(session, runtime_restarted=check_all)
                continue
            kicked += self._recover(session) if check_all else self._kick_overdue(session, now)
        try:  # deletes whose children a failure left behind (their tombstones)
            purged = self._store.purge_deleted()
        except Exception as exc:
            log.warning("reconciler could not purge deleted items: %s", exc)
            purged = 0
        return Reconciled(overdue=len(overdue), kicked=kicked, restarted=restarted, purged=purged)

    def _kick_overdue(self, session: Session, now: datetime) -> bool:
        """A due session whose run is missing or stale gets one (a lost run, on record)."""
        due = due_at(session)
        if due is None or due > now:
            return False
        if session.lifecycle_run_id and not lease_is_stale(session, now):
            return False
        try:
            started = self.kick(session, "reconciler")
            if started and session.lifecycle_run_id:  # a lost run: put it on record
                self._rescued(session)
            return started
        except Exception as exc:  # one bad session must not stop the sweep
            log.warning("reconciler could not kick %s: %s", session.id, exc)
            return False

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
            detail = {
                "staleRun": f"provision-{session.id}-g{current}",
                "state": str(session.lifecycle_state),
                "generation": generation,
            }
            rescued = Entry("sandbox.run_rescued", detail)
            self._transitions.record(session, rescued, metric="LifecycleRunRescued")
        return True

    # ------------------------------------------------------ the runtime's start

    def _recover(self, session: Session) -> bool:
        """One running session at the runtime's start, by the loop's own rules: a hibernation
        whose verified snapshot was written ahead is finished; a sandbox still alive (re-adopted:
        identity proven by the driver) keeps its generation; one that died starts again on its
        own workspace volume; one whose volume is gone too is lost (its last snapshot restored,
        else failed). A kept session's lifecycle run — lost with the runtime — starts again, so
        a timer that passed meanwhile (idle, max lifetime) hibernates it soon. True when a run
        started."""
        try:
            if self._written_ahead(session):
                self._finish_hibernation(session)
                return False
            if not self._alive(session):
                rebooted = self._reboot(session)
                if rebooted is None:
                    self._lost(session)
                    return False
                session = rebooted
            if session.lifecycle_run_id:  # its run died with the runtime: on record, replaced
                self._store.release_lease(session.id, session.lifecycle_run_id)
                self._rescued(session)
            return self.kick(session, "runtime-restarted")
        except Exception as exc:  # one bad session must not stop the sweep
            log.warning("could not recover %s at start: %s", session.id, exc)
            return False

    @staticmethod
    def _written_ahead(session: Session) -> bool:
        """Hibernating, with a verified snapshot of this generation taken after the last
        activity: the newest copy of the work, so the hibernation can be finished from it."""
        snapshot, handle, active = session.snapshot, session.sandbox, session.last_activity_at
        return (
            session.lifecycle_state is LifecycleState.HIBERNATING
            and snapshot is not None
            and handle is not None
            and snapshot.generation == handle.generation
            and (active is None or snapshot.created_at >= active)
        )

    def _finish_hibernation(self, session: Session) -> None:
        assert session.sandbox is not None
        assert session.snapshot is not None
        self._driver.stop(session.sandbox)
        snapshot = session.snapshot
        detail = {"snapshotBytes": snapshot.size_bytes, "snapshotId": snapshot.id}
        self._move(
            session,
            HIBERNATING,
            self._hibernated(snapshot),
            "sandbox.hibernated",
            None,
            detail=detail | {"finishedAtStart": True},
        )
        self._metrics.count("SandboxHibernated")

    def _reboot(self, session: Session, run_id: str | None = None) -> Session | None:
        """A sandbox that died (the runtime down, or under a lifecycle run ``run_id``, which
        keeps its lease), started again as the next generation on its own workspace volume (a
        reboot, not a re-clone): the session active with every file, commit and ref. None when
        it cannot be (no volume, no such driver)."""
        handle = session.sandbox
        if self._reboots is None or handle is None:
            return None
        generation = handle.generation + 1
        try:
            self._store.claim_generation(session.id, generation)  # a crash: the same one again
            rebooted = self._reboots.reboot(handle, generation)
        except (SandboxError, StaleState) as exc:
            log.warning("sandbox of %s could not be started again: %s", session.id, exc)
            return None
        if rebooted is None:
            return None
        changes = Change(lifecycle_state=LifecycleState.ACTIVE, sandbox=rebooted)
        changes |= Change.cleared_error()
        if run_id is None:
            changes |= Change(lifecycle_run_id=None)  # its run died with the runtime
        detail = {"generation": generation, "rebootedFrom": handle.generation}
        try:
            moved = self._move(session, RUNNING, changes, "sandbox.resumed", run_id, detail=detail)
        except StaleState:  # the session moved on meanwhile: this sandbox is nobody's
            self._driver.stop(rebooted)
            return None
        self._metrics.count("SandboxRebooted")
        return moved

    def _lost(self, session: Session) -> None:
        """No sandbox and no volume: the last verified snapshot restored (an active session),
        else failed, with the reason on record."""
        reason = "the sandbox stopped while the runtime was down"
        if self._reboots is not None:
            reason += " and its workspace volume is gone"
        lost = self.mark_lost(session, reason)
        if (
            self._restore is None
            or session.lifecycle_state is not LifecycleState.ACTIVE
            or lost.lifecycle_state is not LifecycleState.HIBERNATED
        ):
            return
        restoring = self._move(
            lost,
            frozenset({LifecycleState.HIBERNATED}),
            Change(lifecycle_state=LifecycleState.RESTORING) | Change.cleared_error(),
            "sandbox.restoring",
            None,
            bump=True,
        )
        self._restore(restoring, restoring.sandbox_generation + 1)

    def _stop_orphans(self) -> None:
        """Stop the sandboxes of the driver that no running session names (a start the runtime
        died in, restarted below as the next generation; a stop it never made). The driver
        names only sandboxes whose identity it proved: a stranger is never among them."""
        if self._reboots is None:
            return
        for handle in self._reboots.running():
            session = self._store.get_session(handle.session_id)
            if session is None or not _names(session, handle):
                log.info("stopping sandbox %s/%s: no session runs it", handle.session_id,
                         handle.generation)  # fmt: skip
                self._driver.stop(handle)

    # ------------------------------------------------------------ openagents down

    def hibernate_all(self) -> Down:
        """``openagents down`` (no runtime running): every running sandbox hibernated now, in
        this process, by the loop's own steps (a verified snapshot, then stop); one that no
        running session names is stopped. What was done, and what failed with why."""
        down = Down()
        if self._reboots is None:
            return down
        for handle in self._reboots.running():
            session = self._store.get_session(handle.session_id)
            if session is None or not _names(session, handle):
                self._driver.stop(handle)
                down.stopped.append(f"{handle.session_id}/{handle.generation}")
                continue
            if session.status is SessionStatus.ARCHIVED:  # its archive still bundles from it
                down.failed[session.id] = "archived, its workspace still being bundled: try again"
                continue
            try:
                self._hibernate_now(session)
                down.hibernated.append(session.id)
            except Exception as exc:  # the others are still hibernated
                down.failed[session.id] = str(exc) or type(exc).__name__
        down.left = [f"{h.session_id}/{h.generation}" for h in self._reboots.running()]
        return down

    def _hibernate_now(self, session: Session) -> None:
        run_id = f"down-{secrets.token_hex(6)}"
        any_due = self._clock() + timedelta(days=3650)  # no run lives: every lease is stale
        if not self._store.claim_lease(session.id, run_id, any_due, replace_active=True):
            raise Conflict("its lifecycle lease could not be taken")
        if session.lifecycle_state is LifecycleState.ACTIVE:
            changes = Change(hibernate_after=self._clock(), turn_active_until=None)
            self._move(session, ACTIVE, changes, "sandbox.pause_requested", run_id)
        decision = self.hibernate(session.id, run_id)
        if decision.reason != "hibernated":
            raise Conflict(f"not hibernated: {decision.reason}")

    def _rescued(self, session: Session) -> None:
        detail = {"staleRun": session.lifecycle_run_id, "state": str(session.lifecycle_state)}
        rescued = Entry("sandbox.run_rescued", detail)
        self._transitions.record(session, rescued, metric="LifecycleRunRescued")

    # ---------------------------------------------------------------- helpers

    def _wake(self, session: Session) -> datetime:
        minimum = timedelta(seconds=self._settings.lifecycle_min_sleep_seconds)
        return wake_at(session, self._clock(), minimum)

    def _move(
        self,
        session: Session,
        expect: frozenset[LifecycleState],
        changes: Change,
        kind: str,
        lease: str | None,
        *,
        bump: bool = False,
        detail: dict[str, Any] | None = None,
    ) -> Session:
        """A lifecycle move: its entry names the states it went from and to, and the generation."""
        to = changes.lifecycle_state
        entry = Entry(
            kind,
            {
                "from": str(session.lifecycle_state),
                "to": str(session.lifecycle_state if isinstance(to, Keep) else to),
                "generation": session.sandbox_generation,
                **(detail or {}),
            },
        )
        return self._transitions.move(session, expect, changes, entry, lease=lease, bump=bump)

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
        changes = Change(snapshot=snapshot)
        try:
            return self._transitions.move(session, HIBERNATING, changes, lease=run_id)
        except StaleState:
            pass
        try:
            return self._transitions.move(session, HIBERNATING, changes)
        except StaleState:
            self._drop_snapshot(snapshot, keep=None)
            return None

    def _drop_snapshot(self, previous: SnapshotRef | None, keep: SnapshotRef | None) -> None:
        if previous and (keep is None or previous.id != keep.id):
            try:
                self._driver.delete_snapshot(previous)
            except SandboxError as exc:  # an orphan costs storage, never data
                log.warning("could not delete the previous snapshot: %s", exc)


def kill_commands(driver: SandboxDriver, handle: SandboxHandle) -> int:
    """Kill a sandbox's commands (sandboxd kept) before its work is saved; a failure is logged,
    never raised: the save that follows says whether the sandbox answers."""
    try:
        killed = driver.kill_commands(handle)
    except SandboxError as exc:
        log.warning("could not kill the commands of %s: %s", handle.session_id, exc)
        return 0
    if killed:
        log.info("killed %d processes of %s before saving it", killed, handle.session_id)
    return killed


def _names(session: Session, handle: SandboxHandle) -> bool:
    """The session's sandbox is this one (its generation, the driver's ref) and it keeps it:
    not a start, which the runtime's start runs again as the next generation (an archive
    still bundling from it keeps it)."""
    held = session.sandbox
    return (
        session.lifecycle_state not in STARTING_STATES
        and held is not None
        and (held.generation, held.ref) == (handle.generation, handle.ref)
    )
