"""Request and response bodies of the agent routes (``routes/chat.py``)."""

from datetime import datetime
from typing import Any, Literal

from openagents.agent.models.registry import ModelInfo
from openagents.domain.checkpoints import Checkpoint, RevertRecord
from openagents.store.runs import Run, RunStatus
from pydantic import Field

from functions.api.schemas import Body, ClientId, ModelId, Out, UIMessage


class ChatTurnIn(Body):
    session_id: ClientId
    chat_id: ClientId
    message: UIMessage = Field(description="The user's UI message ({id, role: user, parts})")
    model_id: ModelId | None = Field(default=None, max_length=300)


class RunStartedOut(Out):
    run_id: str
    status: RunStatus


class UsageOut(Out):
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int


class CheckpointOut(Out):
    ref: str = Field(description="The hidden ref in the sandbox: refs/openagents/checkpoints/<id>")
    commit: str
    files: int = Field(description="Files in the checkpoint (ignored files are not kept)")

    @classmethod
    def of(cls, checkpoint: Checkpoint) -> "CheckpointOut":
        return cls(ref=checkpoint.ref, commit=checkpoint.commit, files=checkpoint.files)


class RevertRecordOut(Out):
    """The last revert to before this run: the chat shows "Reverted to before this turn"."""

    revert_id: str
    at: datetime
    user_id: str
    restored: int = Field(description="How many files it wrote back")
    removed: int = Field(description="How many files it removed")
    saved: CheckpointOut = Field(description="The state it replaced (revert to it to undo)")

    @classmethod
    def of(cls, record: RevertRecord) -> "RevertRecordOut":
        return cls(
            revert_id=record.id,
            at=record.at,
            user_id=record.user_id,
            restored=record.restored,
            removed=record.removed,
            saved=CheckpointOut.of(record.saved),
        )


class RunOut(Out):
    run_id: str
    chat_id: str
    message_id: str = Field(description="The user message that started the run")
    assistant_message_id: str = Field(description="The assistant message the run writes")
    model_id: str
    status: RunStatus
    error: str | None = None
    steps: int
    usage: UsageOut
    cost_usd: float | None = None
    started_at: datetime
    finished_at: datetime | None = None
    checkpoint: CheckpointOut | None = Field(
        default=None, description="The workspace before the run's first tool step"
    )
    reverted: bool = Field(default=False, description="A revert undid the run's changes")
    revert: RevertRecordOut | None = None

    @classmethod
    def of(cls, run: Run) -> "RunOut":
        return cls(
            run_id=run.id,
            chat_id=run.chat_id,
            message_id=run.message_id,
            assistant_message_id=run.assistant_message_id,
            model_id=run.model_id,
            status=run.status,
            error=run.error,
            steps=run.steps,
            usage=UsageOut.model_validate(run.usage.to_json()),
            cost_usd=run.cost_usd,
            started_at=run.started_at,
            finished_at=run.finished_at,
            checkpoint=CheckpointOut.of(run.checkpoint) if run.checkpoint else None,
            reverted=run.reverted,
            revert=RevertRecordOut.of(run.revert) if run.revert else None,
        )


class RevertOut(Out):
    run_id: str
    dry_run: bool
    restored: list[str] = Field(description="Files written back (changed or deleted since)")
    removed: list[str] = Field(description="Files created since, removed")
    saved: CheckpointOut | None = Field(
        default=None, description="The state the revert replaced (none for a dry run)"
    )
    reverted_runs: list[str] = Field(description="The runs marked reverted, newest first")


class RunListOut(Out):
    runs: list[RunOut]
    next_cursor: str | None


class StreamEventOut(Out):
    seq: int
    chunk: dict[str, Any] = Field(description="An AI SDK UI message chunk ({type, ...})")


class StreamOut(Out):
    run_id: str
    status: RunStatus
    events: list[StreamEventOut]
    next: int = Field(description="Ask again with after=next")
    continues: dict[str, Any] | None = Field(
        default=None,
        description="On the page for after=0 of a run that continues a stored assistant message"
        " (after respond): that UI message with the parts it had when the run started (the"
        " earlier parts as stored). Fold the events from seq 1 onto it; null otherwise",
    )


class RespondIn(Body):
    tool_call_id: str = Field(min_length=1, max_length=200)
    approved: bool | None = Field(default=None, description="Answers an approval")
    reason: str | None = Field(default=None, max_length=2000)
    answers: Any = Field(default=None, description="Answers an ask_user_question call")


class RespondOut(Out):
    run_id: str
    status: RunStatus
    pending: int = Field(description="Calls still waiting for an answer (0: a run continues)")


class StopOut(Out):
    success: Literal[True] = True
    run_id: str | None = None
    status: RunStatus | None = None


class ModelOut(Out):
    id: str
    provider: str
    name: str
    context_window: int

    @classmethod
    def of(cls, info: ModelInfo) -> "ModelOut":
        return cls(
            id=info.id, provider=info.provider, name=info.name, context_window=info.context_window
        )


class ModelListOut(Out):
    models: list[ModelOut]
    default_model_id: str | None
    message: str | None = Field(default=None, description="Set when no model is configured")


class AttachmentOut(Out):
    """An uploaded attachment: send it in a user message as an AI SDK file part ``{type:
    "file", mediaType, filename?, url}`` with this ``url`` and ``mediaType``."""

    id: str
    url: str = Field(description="/api/sessions/{sessionId}/attachments/{id}: the file part's url")
    media_type: str = Field(description="Sniffed from the bytes (images) or the claimed text type")
    size: int = Field(description="Bytes")
    filename: str | None = None
