"""The events of agent turns: started, finished, reverted."""

from __future__ import annotations

from typing import Literal

from pydantic import MISSING, Field

from openagents.events.envelope import Checkpoint, Envelope, Part


class Tokens(Part):
    input_tokens: int = Field(ge=0)
    output_tokens: int = Field(ge=0)
    cache_read_tokens: int = Field(ge=0)
    cache_write_tokens: int = Field(ge=0)


class AgentTurnStarted(Envelope):
    """A user message (`POST /api/chat`) or an answer (`POST /api/chat/{chatId}/respond`)
    started an agent turn."""

    type: Literal["agent.turn_started"]
    name: Literal["Agent Turn Started"]
    run_id: str = Field(min_length=1, description="The run (GET /api/sessions/{id}/runs).")
    chat_id: str = Field(min_length=1, description="The chat the turn runs in.")
    model_id: str = Field(min_length=1, description="The model, `provider/model`.")


class AgentTurnFinished(Envelope):
    """An agent turn ended: `completed` (a natural finish: auto-commit follows), `waiting` (an
    approval or a question), `aborted` (stopped) or `failed` (`error` says why)."""

    type: Literal["agent.turn_finished"]
    name: Literal["Agent Turn Finished"]
    run_id: str = Field(min_length=1, description="The run (GET /api/sessions/{id}/runs).")
    chat_id: str = Field(min_length=1, description="The chat the turn runs in.")
    model_id: str = Field(min_length=1, description="The model, `provider/model`.")
    status: Literal["completed", "waiting", "aborted", "failed"] = Field(
        description="How the run ended."
    )
    steps: int = Field(ge=0, description="Model and tool steps the run took.")
    usage: Tokens = Field(description="Tokens of the turn's model calls.")
    error: str | MISSING = Field(default=MISSING, description="Why the run failed.")


class AgentTurnReverted(Envelope):
    """The session's workspace was put back as it was before a run's first tool step
    (`POST /api/sessions/{id}/runs/{runId}/revert`): `restored` files written back, `removed`
    files created since; the run and every later run of the session (`revertedRuns`) are marked
    reverted; `saved` is the state the revert replaced."""

    type: Literal["agent.turn_reverted"]
    name: Literal["Agent Turn Reverted"]
    run_id: str = Field(min_length=1, description="The run the workspace went back to before.")
    chat_id: str = Field(min_length=1, description="The chat of that run.")
    revert_id: str = Field(
        min_length=1,
        description="The revert (its saved state is "
        "refs/openagents/checkpoints/revert-<revertId>).",
    )
    checkpoint: Checkpoint = Field(description="The run's checkpoint the workspace went back to.")
    saved: Checkpoint = Field(
        description="The state the revert replaced; reverting to it undoes the revert."
    )
    restored_count: int = Field(ge=0, description="Files written back.")
    removed_count: int = Field(ge=0, description="Files removed (created since the checkpoint).")
    restored: list[str] = Field(max_length=100, description="The first 100 paths written back.")
    removed: list[str] = Field(max_length=100, description="The first 100 paths removed.")
    reverted_runs: list[str] = Field(
        description="The runs marked reverted: the run and every later run of the session, "
        "newest first."
    )


AGENT_EVENTS = (AgentTurnStarted, AgentTurnFinished, AgentTurnReverted)
