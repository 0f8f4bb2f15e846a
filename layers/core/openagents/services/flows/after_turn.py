"""After a turn: hold released → auto-commit / auto-PR → idle loop kicked."""

from __future__ import annotations

from openagents.domain.identity import Identity
from openagents.domain.runs import Run
from openagents.services.auto_commit import AutoCommitService
from openagents.services.lifecycle import Activity, LifecycleService


class AfterTurn:
    def __init__(self, lifecycle: LifecycleService, auto_commit: AutoCommitService) -> None:
        self._lifecycle, self._auto_commit = lifecycle, auto_commit

    def finished(self, identity: Identity, session_id: str, run: Run | None = None) -> Activity:
        """A turn's natural end: hold released → auto-commit / auto-PR → idle loop kicked.
        ``run`` keys the auto-commit's entry (a follow-up run again records it once)."""
        session = self._lifecycle.touch(identity, session_id, "end")
        if session is None:
            return Activity(success=False, reason="not-active")
        outcome = self._auto_commit.after_turn(session, run)
        self._lifecycle.turn_released(session)
        return Activity(success=True, after_turn=outcome)
