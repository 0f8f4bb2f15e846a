"""An agent turn's run: its status, its counts and usage, its checkpoint and revert — the
domain's record of a turn, kept by the run store (``store/runs.py``) and read by the agent,
the services and the API."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import StrEnum

from openagents.domain.checkpoints import Checkpoint, RevertRecord
from openagents.domain.usage import Usage


class RunStatus(StrEnum):
    RUNNING = "running"
    WAITING = "waiting"  # an approval or a question: the answer starts a new run
    COMPLETED = "completed"
    ABORTED = "aborted"
    FAILED = "failed"

    @property
    def ended(self) -> bool:
        return self is not RunStatus.RUNNING


RunUsage = Usage  # a run's usage is the sum of its model calls' (one type, not two)


@dataclass(frozen=True)
class Run:
    id: str
    session_id: str
    chat_id: str
    user_id: str
    message_id: str  # the user message that started the run
    assistant_message_id: str  # the assistant message the run writes (continued by respond)
    model_id: str
    started_at: datetime
    status: RunStatus = RunStatus.RUNNING
    error: str | None = None
    steps: int = 0
    model_calls: int = 0
    usage: RunUsage = field(default_factory=RunUsage)
    cost_usd: float | None = None
    finished_at: datetime | None = None
    cancel_requested: bool = False
    last_seq: int = 0  # the seq of its last event (0: none yet)
    checkpoint: Checkpoint | None = None  # the workspace before its first tool step
    reverted: bool = False  # a revert to before it (or an earlier run) undid its changes
    revert: RevertRecord | None = None  # the last revert to before this run
    # a run that continues its assistant message (after respond): the parts it had at the start
    continued_parts: int | None = None

    def progressed(self, progress: Progress) -> Run:
        return replace(
            self, steps=progress.steps, model_calls=progress.model_calls, usage=progress.usage
        )


@dataclass(frozen=True)
class Progress:
    """A running run's counts so far (an ended run's are final and stay)."""

    steps: int
    model_calls: int
    usage: RunUsage


def with_checkpoint(run: Run, checkpoint: Checkpoint) -> Run | None:
    """The run with its first checkpoint; None when it has one already (nothing to write)."""
    return None if run.checkpoint is not None else replace(run, checkpoint=checkpoint)


def as_reverted(run: Run, revert: RevertRecord | None) -> Run:
    return replace(run, reverted=True, revert=revert or run.revert)
