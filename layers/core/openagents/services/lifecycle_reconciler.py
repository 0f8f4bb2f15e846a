"""The reconciler: overdue sessions without a live run get one, starts lost with a crash are
kicked again (through its ``SandboxStarts`` port, ``lifecycle_base.py``); at the one-machine
runtime's start every running session is recovered by the loop's own rules, and ``openagents
down`` hibernates them all."""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from openagents.domain.errors import Conflict
from openagents.domain.lifecycle import STARTING_STATES, due_at, lease_is_stale
from openagents.domain.models import LifecycleState, Session, SessionStatus
from openagents.sandbox.port import SandboxHandle
from openagents.services.lifecycle_base import ACTIVE, HIBERNATING
from openagents.services.lifecycle_steps import LoopSteps
from openagents.services.transitions import Change, Entry

log = logging.getLogger(__name__)


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


class Reconciler(LoopSteps):
    """What a crash left half-done, repaired: the sweep of overdue sessions, the runtime's
    start (every run died with it) and ``openagents down``, by the loop's own steps."""

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
        if self._starts is None or session.status is SessionStatus.ARCHIVED:
            return False
        current = max(session.sandbox_generation, 1)
        generation = session.sandbox_generation + 1 if runtime_restarted else current
        try:
            self._starts.kick(session, generation)
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

    def _lost(self, session: Session) -> None:
        """No sandbox and no volume: the last verified snapshot restored (an active session),
        else failed, with the reason on record."""
        reason = "the sandbox stopped while the runtime was down"
        if self._reboots is not None:
            reason += " and its workspace volume is gone"
        lost = self.mark_lost(session, reason)
        if (
            self._starts is None
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
        self._starts.kick(restoring, restoring.sandbox_generation + 1)

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
