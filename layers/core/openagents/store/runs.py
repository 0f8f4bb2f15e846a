"""The run store port: agent runs (one per turn), their numbered stream events, and the
per-chat claim that allows one live turn at a time. Adapters: ``runs_sqlite`` (one machine)
and ``runs_dynamodb`` (AWS); ``tests/contract/test_runs.py`` proves them alike.

- ``start`` is one conditional write: the run, the chat's active-run claim, the "this user
  message started this run" marker, the user message itself (``TurnMessage``, with the
  activity it refreshes) and the chat's live-run marks (``Chat.active_stream_id`` and the
  session's chat mark ``streaming``, which the lists read). A second live run on the chat raises
  ``TurnInProgress``; the same user message id again returns the run it started
  (``Started.created`` is False) and writes nothing.
- Events are numbered per run from 1 (``seq``) by ``append``, in order, without gaps; the
  same write records the run's progress (``Progress``: steps, model calls, usage) when given,
  so a step of the loop ends with one run-store write.
- ``finish`` ends the run (and releases the chat's claim and marks when it still holds them);
  its events are kept ``retention`` after that (TTL).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Protocol, TypeAlias

from openagents.domain.checkpoints import Checkpoint, RevertRecord
from openagents.domain.models import Chat, Message, Page, Session
from openagents.domain.runs import Progress as Progress
from openagents.domain.runs import Run as Run
from openagents.domain.runs import RunStatus as RunStatus
from openagents.domain.runs import RunUsage as RunUsage
from openagents.domain.runs import as_reverted as as_reverted
from openagents.domain.runs import with_checkpoint as with_checkpoint
from openagents.store.port import Activity

JsonValue: TypeAlias = (
    bool | int | float | str | Sequence["JsonValue"] | Mapping[str, "JsonValue"] | None
)
Chunk: TypeAlias = Mapping[str, JsonValue]  # one AI SDK UI message chunk: {"type": ..., ...}

RUN_ID = re.compile(r"[\w-]{1,80}")


@dataclass(frozen=True)
class StreamEvent:
    seq: int
    chunk: Chunk


@dataclass(frozen=True)
class Started:
    run: Run
    created: bool  # False: the same user message already started ``run``


@dataclass(frozen=True)
class TurnMessage:
    """A message a run writes: the user message it starts from (in the run's own conditional
    write), or its assistant message at a step's end (with the step's events)."""

    session: Session
    chat: Chat
    message: Message
    activity: Activity | None
    # the message's first ``kept_parts`` parts are as the store holds them (the run's previous
    # write left them so): the adapter may write only the rest, as a segment (``Segment``)
    kept_parts: int = 0


class MessageBodies(Protocol):
    """Where a store adapter keeps large message bodies (written before the transaction)."""

    def stage_body(self, message: Message) -> tuple[str | None, str | None]: ...
    def staged(self, message: Message) -> tuple[str | None, str | None, int]: ...
    def drop_body(self, body_ref: str | None) -> None: ...
    def segment(self, message: Message, start: int) -> tuple[str, int] | None: ...


def start_with_body(
    bodies: MessageBodies,
    message: TurnMessage | None,
    start: Callable[[str | None, str | None, int], Started],
) -> Started:
    """``start(body, body_ref, size)`` with the message's body staged first, and dropped again
    when the start writes no message (refused, or the run this message started already)."""
    body, body_ref, size = bodies.staged(message.message) if message else (None, None, 0)
    try:
        started = start(body, body_ref, size)
    except BaseException:
        bodies.drop_body(body_ref)
        raise
    if not started.created:
        bodies.drop_body(body_ref)
    return started


class TurnInProgress(Exception):
    """The chat already has a live run."""

    def __init__(self, run_id: str) -> None:
        super().__init__(f"run {run_id} is in progress")
        self.run_id = run_id


class RunNotFound(Exception):
    pass


class RunStore(Protocol):
    def start(self, run: Run, message: TurnMessage | None = None) -> Started:
        """Insert ``run``, claim its chat and store ``message``, in one conditional write (see
        the module). ``MessageIdTaken``: the message id belongs to another chat or role;
        ``Gone``: the chat or session is gone."""
        ...

    def get(self, run_id: str) -> Run | None: ...

    def active_run_id(self, session_id: str, chat_id: str) -> str | None:
        """The chat's claimed (live) run, if any."""
        ...

    def latest(self, session_id: str, chat_id: str) -> Run | None:
        """The chat's most recently started run."""
        ...

    def list_for_session(self, session_id: str, limit: int, cursor: str | None) -> Page[Run]:
        """Runs newest first; ``BadCursor`` for a cursor that is not one of ours."""
        ...

    def list_for_user(self, user_id: str, start: datetime, end: datetime, limit: int) -> list[Run]:
        """The user's runs (every session's) started in ``[start, end)``, oldest first, at
        most ``limit``: one index read keyed by the user, never a scan."""
        ...

    def append(
        self,
        run_id: str,
        chunks: Sequence[Chunk],
        progress: Progress | None = None,
        message: TurnMessage | None = None,
        *,
        bounded: bool = True,
    ) -> int:
        """Number ``chunks`` after the run's last event and store them, with ``progress`` (a
        running run only) in the same write, and upsert the run's assistant ``message`` (one
        transaction on SQLite; DynamoDB writes it just before the events' transaction, once it
        found the run) — only its parts after ``message.kept_parts`` when the adapter can (a
        segment, so a step writes what it changed, not the whole message); the new last seq.
        ``RunNotFound`` writes neither. The chunks' bytes count in the user's storage:
        ``StorageFull`` past its limit (nothing written), unless not ``bounded`` (a run's
        closing chunks: a turn that filled the storage still ends)."""
        ...

    def events(self, run_id: str, after: int, limit: int = 1000) -> list[StreamEvent]:
        """Events with ``seq > after``, in order."""
        ...

    def request_cancel(self, run_id: str) -> bool:
        """Set the run's cancel flag; False if it had already ended."""
        ...

    def cancel_requested(self, run_id: str) -> bool: ...

    def finish(
        self,
        run_id: str,
        status: RunStatus,
        *,
        at: datetime,
        error: str | None = None,
        cost_usd: float | None = None,
        retention: timedelta,
    ) -> Run:
        """End a running run (idempotent: an ended run is returned as it is) and release its
        chat's claim if it still holds it; events expire ``retention`` after ``at``."""
        ...

    def running(self) -> list[Run]:
        """Every run still ``running`` (the one-machine runtime's restart check)."""
        ...

    def record_checkpoint(self, run_id: str, checkpoint: Checkpoint) -> Run | None:
        """Keep the run's checkpoint; the first one stays (a replayed step changes nothing).
        None for an unknown run."""
        ...

    def mark_reverted(self, run_id: str, revert: RevertRecord | None = None) -> Run | None:
        """Mark the run ``reverted``; the run a revert went back to before also keeps
        ``revert``. None for an unknown run."""
        ...


# --- the stored form, shared by the adapters ------------------------------------------------


def run_to_json(run: Run) -> dict[str, JsonValue]:
    return {
        "id": run.id,
        "sessionId": run.session_id,
        "chatId": run.chat_id,
        "userId": run.user_id,
        "messageId": run.message_id,
        "assistantMessageId": run.assistant_message_id,
        "modelId": run.model_id,
        "startedAt": run.started_at.isoformat(),
        "status": run.status.value,
        "error": run.error,
        "steps": run.steps,
        "modelCalls": run.model_calls,
        "usage": run.usage.to_json(),
        "costUsd": run.cost_usd,
        "finishedAt": run.finished_at.isoformat() if run.finished_at else None,
        "cancelRequested": run.cancel_requested,
        "lastSeq": run.last_seq,
        "checkpoint": run.checkpoint.to_json() if run.checkpoint else None,
        "reverted": run.reverted,
        "revert": run.revert.to_json() if run.revert else None,
        "continuedParts": run.continued_parts,
    }


def run_from_json(data: Mapping[str, object]) -> Run:
    def text(key: str) -> str:
        return str(data[key])

    def moment(key: str) -> datetime | None:
        value = data.get(key)
        return datetime.fromisoformat(str(value)) if value else None

    started = moment("startedAt")
    if started is None:
        raise ValueError("a run has a start time")
    usage = data.get("usage")
    cost = data.get("costUsd")
    error = data.get("error")
    checkpoint, revert = data.get("checkpoint"), data.get("revert")
    continued = data.get("continuedParts")
    return Run(
        id=text("id"),
        session_id=text("sessionId"),
        chat_id=text("chatId"),
        user_id=text("userId"),
        message_id=text("messageId"),
        assistant_message_id=text("assistantMessageId"),
        model_id=text("modelId"),
        started_at=started,
        status=RunStatus(text("status")),
        error=str(error) if error is not None else None,
        steps=int(str(data.get("steps", 0))),
        model_calls=int(str(data.get("modelCalls", 0))),
        usage=RunUsage.from_json(usage) if isinstance(usage, Mapping) else RunUsage(),
        cost_usd=float(str(cost)) if cost is not None else None,
        finished_at=moment("finishedAt"),
        cancel_requested=bool(data.get("cancelRequested", False)),
        last_seq=int(str(data.get("lastSeq", 0))),
        checkpoint=Checkpoint.from_json(checkpoint) if isinstance(checkpoint, Mapping) else None,
        reverted=bool(data.get("reverted", False)),
        revert=RevertRecord.from_json(revert) if isinstance(revert, Mapping) else None,
        continued_parts=int(str(continued)) if continued is not None else None,
    )


def started_key(run: Run) -> str:
    """The sort key of a session's run list: start time (UTC, fixed width), then id."""
    return f"{run.started_at.astimezone(UTC).strftime('%Y-%m-%dT%H:%M:%S.%fZ')}#{run.id}"


def started_bound(at: datetime) -> str:
    """A bound on ``started_key``: every run started at or after ``at`` sorts at or after it,
    every run started before it sorts before (``#`` sorts before any run id's character)."""
    return f"{at.astimezone(UTC).strftime('%Y-%m-%dT%H:%M:%S.%fZ')}#"


STARTED_KEY = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z#[\w-]{1,80}")
