"""Lifecycle rules (pure): when a sandbox is due to hibernate, and what the status chip shows.

``due = min(max(hibernateAfter, turnActiveUntil), sandboxExpiresAt - 10 s)``: an agent turn in
progress holds off idle hibernation (until its bounded heartbeat runs out), never the hard
lifetime.
"""

from __future__ import annotations

import hashlib
import zlib
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, TypedDict

from openagents.domain.models import (
    BundleRef,
    LifecycleState,
    PrStatus,
    SandboxHandle,
    Session,
    SessionStatus,
    SnapshotRef,
)

EXPIRY_BUFFER = timedelta(seconds=10)
MIN_SLEEP = timedelta(seconds=5)
SHORTEST_WAIT = timedelta(seconds=1)  # a due time sooner than this is waited for this long
STALE_LEASE_GRACE = timedelta(minutes=2)
DUE_SHARDS = 8  # the sparse "overdue" index is spread over this many partitions
RUNNING_STATES = frozenset(
    {LifecycleState.ACTIVE, LifecycleState.HIBERNATING, LifecycleState.RESTORING}
)


class LifecycleFields(TypedDict, total=False):
    """The fields a lifecycle write may change, as the store writes them (its
    ``transition``): the lifecycle, the sandbox and its snapshot, the diff counts, the archive's
    bundle, the git and PR state the archive refreshes, and the due and idle indexes that
    follow from them (``with_due``)."""

    lifecycle_state: LifecycleState
    lifecycle_error: str | None
    lifecycle_error_code: str | None
    last_activity_at: datetime | None
    hibernate_after: datetime | None
    sandbox_expires_at: datetime | None
    turn_active_until: datetime | None
    hibernated_at: datetime | None
    sandbox: SandboxHandle | None
    snapshot: SnapshotRef | None
    lifecycle_run_id: str | None
    bundle: BundleRef | None
    archive_pending: bool | None
    lines_added: int | None
    lines_removed: int | None
    cached_diff_at: datetime | None
    branch: str | None
    pr_number: int | None
    pr_status: PrStatus | None
    pr_key: str | None
    due_at: datetime | None
    due_shard: str | None
    idle_shard: str | None


class ChipStatus(StrEnum):
    ACTIVE = "active"
    PAUSED = "paused"
    NO_SANDBOX = "no_sandbox"


LOOPED_STATES = frozenset({LifecycleState.ACTIVE, LifecycleState.HIBERNATING})
STARTING_STATES = frozenset({LifecycleState.PROVISIONING, LifecycleState.RESTORING})


def due_at(session: Session) -> datetime | None:
    """When the session's sandbox should hibernate; None when no lifecycle run looks after it.
    ``hibernating`` keeps its due time so a run lost mid-hibernation is found and finished."""
    if session.lifecycle_state not in LOOPED_STATES:
        return None
    idle = session.hibernate_after
    if idle is not None and session.turn_active_until is not None:
        idle = max(idle, session.turn_active_until)
    expiry = session.sandbox_expires_at - EXPIRY_BUFFER if session.sandbox_expires_at else None
    candidates = [moment for moment in (idle, expiry) if moment is not None]
    return min(candidates) if candidates else None


def index_due(session: Session) -> datetime | None:
    """The session's place in the sparse ``overdue`` index: its due time while a lifecycle run
    looks after it, and — while its sandbox is being started (provisioning, restoring) — its
    creation time, always past, so every reconciler sweep finds the start and re-kicks it (a
    no-op while the start's workflow runs; the one way out when the runtime died under it)."""
    due = due_at(session)
    if (
        due is None
        and session.lifecycle_state in STARTING_STATES
        and session.status is not SessionStatus.ARCHIVED
    ):
        return session.created_at
    return due


def index_fields(session: Session) -> dict[str, Any]:
    """``due_at``/``due_shard`` of a session as written whole (a create)."""
    due = index_due(session)
    return {"due_at": due, "due_shard": due_shard(session.id) if due is not None else None}


def wake_at(session: Session, now: datetime, minimum: timedelta = MIN_SLEEP) -> datetime:
    """The loop's next wake-up: the due time when it is ahead, however soon (the minimum wait
    must not push a due session a whole period late; only a floor of ``SHORTEST_WAIT`` keeps a
    Wait that wakes a little early from spinning), else ``minimum`` ahead."""
    due = due_at(session)
    if due is not None and due > now:
        return max(due, now + min(minimum, SHORTEST_WAIT))
    return now + minimum


def due_shard(session_id: str) -> str:
    return f"due#{zlib.crc32(session_id.encode()) % DUE_SHARDS}"


def lease_is_stale(session: Session, now: datetime) -> bool:
    """A lease whose session is more than the grace past due belongs to a lost run."""
    due = due_at(session)
    return (
        session.lifecycle_run_id is not None and due is not None and now - due > STALE_LEASE_GRACE
    )


def chip_status(session: Session) -> ChipStatus:
    if session.status is SessionStatus.ARCHIVED:
        return ChipStatus.NO_SANDBOX
    if session.lifecycle_state in RUNNING_STATES and session.sandbox:
        return ChipStatus.ACTIVE
    if session.snapshot:
        return ChipStatus.PAUSED
    return ChipStatus.NO_SANDBOX


DUE_INPUTS = frozenset(
    {"lifecycle_state", "hibernate_after", "sandbox_expires_at", "turn_active_until"}
)


def with_due(session: Session, changes: LifecycleFields) -> LifecycleFields:
    """``changes`` plus the sparse index fields they imply: ``due_at``/``due_shard`` while a
    lifecycle run must look after the sandbox (the "overdue" index), and ``idle_shard`` while
    the session is hibernated (the "idle" index auto-archive reads; ``hibernated_at`` comes
    with the change that hibernates)."""
    if not DUE_INPUTS & changes.keys():
        return changes
    after = session.model_copy(update=dict(changes))
    due = index_due(after)
    indexed: LifecycleFields = {
        **changes,
        "due_at": due,
        "due_shard": due_shard(session.id) if due is not None else None,
    }
    if "lifecycle_state" in changes:
        hibernated = after.lifecycle_state is LifecycleState.HIBERNATED
        since = changes.get("hibernated_at") or after.updated_at
        indexed["hibernated_at"] = since if hibernated else None
        indexed["idle_shard"] = idle_shard(session.id) if hibernated else None
    return indexed


def idle_shard(session_id: str) -> str:
    return f"idle#{zlib.crc32(session_id.encode()) % DUE_SHARDS}"


def snapshot_ref(snapshot_id: str) -> str:
    """The id a client sees for a snapshot (``SnapshotRef.id``): opaque and stable (a digest),
    so no answer names the snapshot store's own id (an EBS snapshot, an S3 key, a file on the
    host)."""
    digest = hashlib.sha256(snapshot_id.encode()).hexdigest()
    return f"snap_{digest[:24]}"


class Failure(StrEnum):
    """Why a session's sandbox is in trouble: the stable code beside ``lifecycleError``."""

    PROVISIONING_NOT_STARTED = "provisioning_not_started"
    PROVISIONING_FAILED = "provisioning_failed"
    RESTORE_FAILED = "restore_failed"
    SNAPSHOT_FAILED = "snapshot_failed"
    PAUSE_FAILED = "pause_failed"
    SANDBOX_LOST = "sandbox_lost"
    SANDBOX_LOST_NO_SNAPSHOT = "sandbox_lost_no_snapshot"
    ARCHIVE_FAILED = "archive_failed"


FAILURE_TEXT: dict[Failure, str] = {
    Failure.PROVISIONING_NOT_STARTED: "Provisioning could not start. Retry the sandbox.",
    Failure.PROVISIONING_FAILED: "Provisioning failed: the sandbox could not be started. Retry "
    "it; if it fails again, check that the repository and branch exist.",
    Failure.RESTORE_FAILED: "Restore failed: the sandbox could not be brought back from its "
    "snapshot, which is kept. Resume to try again.",
    Failure.SNAPSHOT_FAILED: "Snapshot failed: the sandbox could not be saved, so it keeps "
    "running; pausing is tried again later.",
    Failure.PAUSE_FAILED: "Pausing failed: the sandbox keeps running; pausing is tried again "
    "later.",
    Failure.SANDBOX_LOST: "Sandbox lost: it stopped unexpectedly. Resume restores its last "
    "snapshot.",
    Failure.SANDBOX_LOST_NO_SNAPSHOT: "Sandbox lost: it stopped unexpectedly and no snapshot "
    "exists. Retry to start a fresh sandbox.",
    Failure.ARCHIVE_FAILED: "Archiving could not save the workspace yet; it is tried again.",
}


def failure(code: Failure) -> dict[str, Any]:
    """The session fields for a failure: a sentence a user understands and its stable code.
    The internals (HTTP status, sandboxd path, exception) belong in the audit entry's
    ``detail``, never here."""
    return {"lifecycle_error": FAILURE_TEXT[code], "lifecycle_error_code": code.value}
