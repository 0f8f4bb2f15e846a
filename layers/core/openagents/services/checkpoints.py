"""Reverting a session's workspace to before an agent turn: ``POST
/api/sessions/{id}/runs/{runId}/revert``. The turn's checkpoint (taken by the engine before its
first tool step, ``agent/loop.py``) is put back in the sandbox; a real revert first saves the
state it replaces (so it can be undone), marks that run and every later run of the session
``reverted``, keeps the record on the run (the chat's "Reverted to before this turn") and writes
an audit entry and its event."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from openagents.domain.checkpoints import Checkpoint, NoCheckpoint, RevertRecord, checkpoint_ref
from openagents.domain.errors import Conflict, NotFound
from openagents.domain.identity import Identity
from openagents.domain.models import AuditEntry
from openagents.services import Clock, IdFactory
from openagents.services.sandbox_tools import SandboxTools
from openagents.services.sessions import owned
from openagents.store.port import Store
from openagents.store.runs import Run, RunStore, started_key

log = logging.getLogger(__name__)
AUDITED_PATHS = 100  # the audit entry lists this many paths of each kind (and the counts)
RUNS_PAGE = 100


class TurnRunning(Conflict):
    code = "turn_in_progress"


@dataclass(frozen=True)
class RevertOutcome:
    run: Run
    dry_run: bool
    restored: list[str]
    removed: list[str]
    saved: Checkpoint | None  # the state the revert replaced (None: a dry run)
    reverted_runs: list[str]  # the run and every later run of the session


class Checkpoints:
    def __init__(
        self,
        store: Store,
        runs: RunStore,
        tools: SandboxTools,  # revert: the session's running sandbox, or 409
        clock: Clock,
        ids: IdFactory,
        refresh_diff: Callable[[Identity, str], object] | None = None,
    ) -> None:
        self._store, self._runs, self._tools = store, runs, tools
        self._clock, self._ids = clock, ids
        self._refresh_diff = refresh_diff

    def revert(
        self, identity: Identity, session_id: str, run_id: str, *, dry_run: bool
    ) -> RevertOutcome:
        session = owned(self._store.get_session(session_id), identity)
        run = self._runs.get(run_id)
        if run is None or run.session_id != session.id:
            raise NotFound("Run not found", field="runId")
        if run.checkpoint is None:
            raise NoCheckpoint("This turn has no checkpoint (it ran no tool)", field="runId")
        if session.has_streaming:  # the chat marks a turn's start writes with its claim
            raise TurnRunning("A turn is running in this session; stop it first", field="runId")
        revert_id = self._ids()
        answer = self._tools.revert(
            identity,
            session.id,
            run.checkpoint.ref,
            save_ref=None if dry_run else checkpoint_ref(f"revert-{revert_id}"),
            dry_run=dry_run,
        )
        restored, removed, saved = list(answer.restored), list(answer.removed), answer.saved
        if dry_run or saved is None:
            return RevertOutcome(run, True, restored, removed, None, [])
        record = RevertRecord(
            id=revert_id,
            at=self._clock(),
            user_id=identity.user_id,
            restored=len(restored),
            removed=len(removed),
            saved=saved,
        )
        reverted = [later.id for later in self._from(run)]
        for other in reverted:
            self._runs.mark_reverted(other, record if other == run.id else None)
        self._audit(run, record, restored, removed, reverted)
        if self._refresh_diff is not None:  # the cached diff and line counts follow the files
            try:
                self._refresh_diff(identity, session.id)
            except Exception:
                log.exception("refreshing the diff after reverting to before run %s", run.id)
        marked = self._runs.get(run.id) or run
        return RevertOutcome(marked, False, restored, removed, record.saved, reverted)

    def _from(self, run: Run) -> Iterator[Run]:
        """The run and every run of its session started after it (newest first)."""
        first = started_key(run)
        cursor: str | None = None
        while True:
            page = self._runs.list_for_session(run.session_id, RUNS_PAGE, cursor)
            for other in page.items:
                if started_key(other) < first:
                    return
                yield other
            if page.cursor is None:
                return
            cursor = page.cursor

    def _audit(
        self,
        run: Run,
        record: RevertRecord,
        restored: list[str],
        removed: list[str],
        reverted: list[str],
    ) -> None:
        checkpoint = run.checkpoint.to_json() if run.checkpoint else None
        entry = AuditEntry(
            id=self._ids(),
            session_id=run.session_id,
            at=record.at,
            type="agent.turn_reverted",
            detail={
                "runId": run.id,
                "chatId": run.chat_id,
                "revertId": record.id,
                "checkpoint": checkpoint,
                "saved": record.saved.to_json(),
                "restoredCount": len(restored),
                "removedCount": len(removed),
                "restored": restored[:AUDITED_PATHS],
                "removed": removed[:AUDITED_PATHS],
                "revertedRuns": reverted,
            },
        )
        try:
            self._store.append_entry(entry)
        except Exception:  # the workspace is reverted; the record's failure is logged
            log.exception("recording the revert to before run %s", run.id)
