"""A session's move from state to state, in one place: the conditional write (the states it
expects, the lease, the generation), its audit entry and — in the same write, by the store —
the entry's event through the outbox, then the move's metric once it committed. Every service
that moves a session (lifecycle, provisioning, archive, pull requests) moves it here."""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime
from enum import Enum
from typing import Any, cast

from openagents.domain.lifecycle import Failure, LifecycleFields, failure, with_due
from openagents.domain.models import (
    AuditEntry,
    BundleRef,
    LifecycleState,
    PrStatus,
    SandboxHandle,
    Session,
    SnapshotRef,
)
from openagents.services import Clock, IdFactory, Metrics
from openagents.store.port import LifecycleStore


class Keep(Enum):
    """A field a change leaves as it is (``None`` clears it)."""

    KEEP = "keep"


KEEP = Keep.KEEP


@dataclass(frozen=True, kw_only=True)
class Change:
    """The lifecycle fields a move may change (the store's ``LIFECYCLE_FIELDS``); each one left
    ``KEEP`` stays as it is. The due and idle index fields follow from the others (``with_due``)
    and are set here only when a move clears them outright (an archive)."""

    lifecycle_state: LifecycleState | Keep = KEEP
    lifecycle_error: str | Keep | None = KEEP
    lifecycle_error_code: str | Keep | None = KEEP
    last_activity_at: datetime | Keep | None = KEEP
    hibernate_after: datetime | Keep | None = KEEP
    sandbox_expires_at: datetime | Keep | None = KEEP
    turn_active_until: datetime | Keep | None = KEEP
    hibernated_at: datetime | Keep | None = KEEP
    sandbox: SandboxHandle | Keep | None = KEEP
    snapshot: SnapshotRef | Keep | None = KEEP
    lifecycle_run_id: str | Keep | None = KEEP
    bundle: BundleRef | Keep | None = KEEP
    archive_pending: bool | Keep | None = KEEP
    lines_added: int | Keep | None = KEEP
    lines_removed: int | Keep | None = KEEP
    cached_diff_at: datetime | Keep | None = KEEP
    branch: str | Keep | None = KEEP
    pr_number: int | Keep | None = KEEP
    pr_status: PrStatus | Keep | None = KEEP
    pr_key: str | Keep | None = KEEP
    due_at: datetime | Keep | None = KEEP
    due_shard: str | Keep | None = KEEP
    idle_shard: str | Keep | None = KEEP

    def fields(self) -> LifecycleFields:
        """The changed fields, as the store writes them."""
        changed = {f.name: v for f in fields(self) if (v := getattr(self, f.name)) is not KEEP}
        return cast(LifecycleFields, changed)

    def __or__(self, other: Change) -> Change:
        """This change with ``other``'s fields on top."""
        return Change(**(self.fields() | other.fields()))

    @staticmethod
    def failed(code: Failure) -> Change:
        """A failure's sentence and code (``domain.lifecycle.failure``)."""
        return Change(**failure(code))

    @staticmethod
    def cleared_error() -> Change:
        return Change(lifecycle_error=None, lifecycle_error_code=None)


@dataclass(frozen=True)
class Entry:
    """The audit entry a move records: its type and its detail, exactly as stored. An entry
    keyed by what it records (one per run) names its ``id`` and ``at``, the same on every
    attempt, so recording it again records nothing; else it gets a new id and the time."""

    kind: str
    detail: dict[str, Any]
    id: str | None = None
    at: datetime | None = None


class Transitions:
    def __init__(
        self, store: LifecycleStore, clock: Clock, ids: IdFactory, metrics: Metrics
    ) -> None:
        self._store, self._clock, self._ids, self._metrics = store, clock, ids, metrics

    def entry(self, session_id: str, kind: str, detail: dict[str, Any]) -> AuditEntry:
        return self._audit(session_id, Entry(kind, detail))

    def _audit(self, session_id: str, entry: Entry) -> AuditEntry:
        return AuditEntry(
            id=entry.id or self._ids(),
            session_id=session_id,
            at=entry.at or self._clock(),
            type=entry.kind,
            detail=entry.detail,
        )

    def move(
        self,
        session: Session,
        expect: frozenset[LifecycleState],
        change: Change,
        entry: Entry | None = None,
        *,
        lease: str | None = None,
        generation: int | None = None,
        bump: bool = False,
        metric: str | None = None,
    ) -> Session:
        """The conditional write of ``change`` (with the due and idle indexes it implies) and its
        entry; ``StaleState`` when the session is not in ``expect`` (or the lease or generation
        moved on): nothing written, nothing counted."""
        recorded = self._audit(session.id, entry) if entry else None
        moved = self._store.transition(
            session.id,
            expect=expect,
            changes=with_due(session, change.fields()),
            entry=recorded,
            generation=generation,
            lease=lease,
            bump_version=bump,
        )
        if metric is not None:
            self._metrics.count(metric)
        return moved

    def record(self, session: Session, entry: Entry, *, metric: str | None = None) -> bool:
        """An entry (and its event) with no state change; False when it was recorded before."""
        recorded = self._store.append_entry(self._audit(session.id, entry))
        if recorded and metric is not None:
            self._metrics.count(metric)
        return recorded
