"""The lifecycle's shared part (``LifecycleBase``): the ports (``SandboxStarts``: where the
reconciler kicks a start again), ``kick``, a lifecycle move (``_move``: its entry names the
states and the generation), a lost or rebooted sandbox.
The loop's steps, the API's operations and the reconciler build on it."""

from __future__ import annotations

import logging
import secrets
from datetime import datetime, timedelta
from typing import Any, Protocol

from openagents.domain.lifecycle import STALE_LEASE_GRACE, Failure, wake_at
from openagents.domain.models import LifecycleState, Session, SessionStatus
from openagents.sandbox.port import Reboots, SandboxDriver, SandboxError, SandboxState, SnapshotRef
from openagents.services import Clock, IdFactory, Metrics
from openagents.services.transitions import Change, Entry, Keep, Transitions
from openagents.settings import Settings
from openagents.store.port import StaleState, Store
from openagents.workflows import Workflows

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


class SandboxStarts(Protocol):
    """Where the reconciler kicks a sandbox start again (``ProvisioningService.kick``): a
    start lost with a crash, and a lost sandbox's restore. A port of the reconciler's own; the
    kick calls nothing back."""

    def kick(self, session: Session, generation: int | None = None) -> object: ...


class LifecycleBase:
    """What every part of the lifecycle shares: its ports, the kick that starts a run, a
    lifecycle move, and what becomes of a sandbox that died (lost, or started again)."""

    def __init__(
        self,
        store: Store,
        driver: SandboxDriver,
        workflows: Workflows,
        settings: Settings,
        clock: Clock,
        ids: IdFactory,
        metrics: Metrics,
        starts: SandboxStarts | None = None,
        reboots: Reboots | None = None,
    ) -> None:
        self._reboots = reboots  # a driver whose sandboxes outlive the runtime (one machine)
        self._starts = starts  # the reconciler's re-kicks of sandbox starts
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

    def _drop_snapshot(self, previous: SnapshotRef | None, keep: SnapshotRef | None) -> None:
        if previous and (keep is None or previous.id != keep.id):
            try:
                self._driver.delete_snapshot(previous)
            except SandboxError as exc:  # an orphan costs storage, never data
                log.warning("could not delete the previous snapshot: %s", exc)
