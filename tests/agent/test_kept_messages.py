"""Between the steps of one invocation the loop keeps the chat's messages it wrote: a step does
not read the chat again, unless the run moved on without it (another invocation's steps), when
it reads what the chat holds."""

from __future__ import annotations

import json
from typing import Any

import pytest
from openagents.agent.loop import AgentLoop
from openagents.agent.parts import OtherPart
from openagents.services.agent_turns import AgentHost
from openagents.store import runs_sqlite, sqlite_writes
from openagents.store.runs import Progress
from openagents.store.sqlite import SqliteStore

from tests.agent.conftest import AgentApi
from tests.agent.test_stop_and_stream import wait_run

TODO = {"todos": [{"id": "1", "content": "kept", "status": "pending"}]}
STEPS = [{"toolCalls": [{"name": "todo_write", "input": TODO}]} for _ in range(4)]


def assistant(api: AgentApi, session_id: str, chat_id: str) -> dict[str, Any]:
    page = api.get(f"/api/sessions/{session_id}/chats/{chat_id}/messages").body
    (message,) = [m for m in page["messages"] if m["role"] == "assistant"]
    return dict(message)


def test_a_turn_reads_the_chat_once_and_writes_every_step(
    agent_api: AgentApi, live_session: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    session_id, chat_id = live_session
    reads: list[str] = []
    messages = AgentHost.messages

    def counted(host: AgentHost, run: Any) -> Any:
        reads.append(run.id)
        return messages(host, run)

    monkeypatch.setattr(AgentHost, "messages", counted)
    agent_api.script.set([*STEPS, {"text": "Done."}])
    assert agent_api.turn(session_id, chat_id, "four todos").status == 202
    assert wait_run(agent_api, session_id, "completed", "failed")["status"] == "completed"
    assert len(reads) == 2  # begin and the first model step; the other eight steps kept it
    parts = assistant(agent_api, session_id, chat_id)["parts"]
    assert [p["type"] for p in parts].count("step-start") == 5
    tools = [p for p in parts if p["type"] == "tool-todo_write"]
    assert [p["state"] for p in tools] == ["output-available"] * 4


def test_a_step_reads_the_chat_when_the_run_moved_on_without_it(
    agent_api: AgentApi, live_session: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another invocation wrote a step meanwhile (the run's steps moved on, the message holds
    its part): the next step here starts from the chat, so that part is kept."""
    session_id, chat_id = live_session
    tool_step = AgentLoop.tool_step
    moved: list[str] = []

    def elsewhere(
        loop: AgentLoop, run_id: str, call_id: str, *, last: bool, since: int | None = None
    ) -> Any:
        if not moved:  # before the first tool step: a step of another invocation
            moved.append(run_id)
            run = loop._runs.get(run_id)
            assert run is not None
            _, message = loop._message(run)
            elsewhere = {"type": "data-elsewhere", "data": {"step": run.steps}}
            message.parts.append(OtherPart.model_validate(elsewhere))
            stored = loop._host.stored(run, message)
            progress = Progress(run.steps + 1, run.model_calls, run.usage)
            loop._runs.append(run_id, [{"type": "data-elsewhere"}], progress, stored)
        return tool_step(loop, run_id, call_id, last=last, since=since)

    monkeypatch.setattr(AgentLoop, "tool_step", elsewhere)
    agent_api.script.set([*STEPS[:2], {"text": "Done."}])
    assert agent_api.turn(session_id, chat_id, "two todos").status == 202
    assert wait_run(agent_api, session_id, "completed", "failed")["status"] == "completed"
    types = [p["type"] for p in assistant(agent_api, session_id, chat_id)["parts"]]
    assert types.count("data-elsewhere") == 1
    assert types.count("tool-todo_write") == 2


def test_each_step_writes_only_what_it_changed_and_the_end_writes_it_whole(
    agent_api: AgentApi, live_session: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """After the first, a step writes the message's parts from the first it changed (a
    segment, a step's size); the turn's end writes the message whole once, replacing them."""
    session_id, chat_id = live_session
    laid: list[tuple[int, int]] = []
    lay = sqlite_writes.lay_segment

    def recorded(
        db: Any, session: Any, chat: Any, message: Any, segment: Any, size: int
    ) -> int | None:
        laid.append((segment.start, size))
        return lay(db, session, chat, message, segment, size)

    monkeypatch.setattr(runs_sqlite, "lay_segment", recorded)
    big = {"todos": [{"id": str(n), "content": "x" * 2000, "status": "pending"} for n in range(4)]}
    steps = [{"toolCalls": [{"name": "todo_write", "input": big}]} for _ in range(4)]
    agent_api.script.set([*steps, {"text": "Done."}])
    assert agent_api.turn(session_id, chat_id, "big todos").status == 202
    assert wait_run(agent_api, session_id, "completed", "failed")["status"] == "completed"
    parts = assistant(agent_api, session_id, chat_id)["parts"]
    assert [p["state"] for p in parts if p["type"] == "tool-todo_write"] == ["output-available"] * 4
    # every step after the first wrote a segment: the first call's tool step, then each model
    # step with its todo_write call (one step: ``Tool.in_model_step``), then the closing text
    assert len(laid) >= 5
    assert [start for start, _ in laid] == sorted(start for start, _ in laid)  # moving on
    whole = len(json.dumps(parts).encode())
    assert whole > 4 * 8000  # four calls of 8 KB inputs, each echoed in its output too
    assert max(size for _, size in laid) < whole / 2  # a step's size, not the message's
    store = agent_api.container.chats._store
    assert isinstance(store, SqliteStore)
    assert store.db.read("SELECT COUNT(*) FROM message_segments", ()) == [(0,)]  # merged
