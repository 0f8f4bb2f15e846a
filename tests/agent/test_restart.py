"""A run a previous process left running ends failed at the next start, never left running."""

from __future__ import annotations

from datetime import UTC, datetime

from openagents.store.runs import Run, RunStatus
from openagents.store.runs_sqlite import SqliteRunStore

from tests.agent.conftest import AgentApi


def test_runs_left_running_are_marked_failed(agent_api: AgentApi) -> None:
    runs = SqliteRunStore(agent_api.settings.sqlite_path)
    left = Run(
        id="left-running",
        session_id="gone-session",
        chat_id="gone-chat",
        user_id="alice",
        message_id="m",
        assistant_message_id="a",
        model_id="scripted/default",
        started_at=datetime.now(UTC),
    )
    runs.start(left)
    assert agent_api.container.agent.recover() == 1
    ended = runs.get(left.id)
    assert ended is not None
    assert ended.status is RunStatus.FAILED
    assert ended.error is not None
    assert "interrupted by a restart" in ended.error
    assert runs.active_run_id("gone-chat") is None
    assert [e.chunk["type"] for e in runs.events(left.id, 0)] == ["finish"]
    assert agent_api.container.agent.recover() == 0
    runs.db.close()
