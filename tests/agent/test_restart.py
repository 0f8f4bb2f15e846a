"""A run a previous process left running is carried on at the next start, never left running:
one whose execution was never created (the process ended between the run's claim and its
start) is started then (tests/agent/test_turn_replay.py: one whose execution was mid-step)."""

from __future__ import annotations

from datetime import UTC, datetime

from openagents.artifacts.folder import FolderArtifactStore
from openagents.store.runs import Run
from openagents.store.runs_sqlite import SqliteRunStore
from openagents.store.sqlite import SqliteStore

from tests.agent.conftest import AgentApi


def test_a_run_left_without_its_execution_is_started(agent_api: AgentApi) -> None:
    created = agent_api.post("/api/sessions", {})
    assert created.status == 201, created.body
    settings = agent_api.settings
    store = SqliteStore(
        settings.sqlite_path,
        FolderArtifactStore(settings.artifacts_dir),
        settings.inline_message_bytes,
    )
    runs = SqliteRunStore(store)  # the server's database, on connections of its own
    left = Run(
        id="left-running",
        session_id=created.body["session"]["id"],
        chat_id=created.body["chat"]["id"],
        user_id="alice",
        message_id="m",
        assistant_message_id="a",
        model_id="scripted/default",
        started_at=datetime.now(UTC),
    )
    runs.start(left)
    assert agent_api.container.agent.recover() == 1
    agent_api.container.agent.engine.wait(left.id)  # type: ignore[attr-defined]
    ended = runs.get(left.id)
    assert ended is not None
    assert ended.status.ended  # its turn ran (here it fails: its user message is not stored)
    assert runs.active_run_id(left.session_id, left.chat_id) is None
    assert [e.chunk["type"] for e in runs.events(left.id, 0)][-1] == "finish"
    assert agent_api.container.agent.recover() == 0
    runs.db.close()
