"""The lifecycle workflow's steps: wait until due, then hibernate (kill the commands, a verified
snapshot written ahead, activity re-checked, stop); a failed hibernation keeps the sandbox."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from openagents.domain.lifecycle import Failure, due_at, wake_at
from openagents.domain.models import LifecycleState, Session, SessionStatus
from openagents.sandbox.port import SandboxDriver, SandboxError, SandboxHandle, SnapshotRef
from openagents.services.lifecycle_base import ACTIVE, HIBERNATING, RUNNING, LifecycleBase
from openagents.services.transitions import Change
from openagents.store.port import StaleState
from openagents.workflows import TaskError

log = logging.getLogger(__name__)


class SnapshotFailed(Exception):
    """Snapshot or its verification failed; the sandbox keeps running (Step Functions retries)."""


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


class LoopSteps(LifecycleBase):
    """The lifecycle workflow's steps (``functions/lifecycle/``: claim, evaluate, hibernate,
    recover): a run that owns the session waits, then hibernates it through a verified
    snapshot."""

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
