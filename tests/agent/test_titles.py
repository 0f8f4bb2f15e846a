"""Generated titles: the first user message names a new chat and its session through the
chat's model (the scripted model's ``title`` answer), in a durable step after the turn's first
model step; only automatic titles are replaced, a rename meanwhile wins, and a model error
leaves the automatic titles and the turn alone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from openagents.agent.loop import AgentLoop

from tests.agent.conftest import AgentApi, wait_state
from tests.agent.test_stop_and_stream import wait_event, wait_run
from tests.support import make_origin

FIRST = "please fix the login bug in auth.py, it rejects valid passwords"


def titles(api: AgentApi, session_id: str, chat_id: str) -> tuple[str, str]:
    session = api.get(f"/api/sessions/{session_id}").body["session"]
    chat = api.get(f"/api/sessions/{session_id}/chats/{chat_id}").body["chat"]
    return str(session["title"]), str(chat["title"])


def renames(api: AgentApi, session_id: str) -> list[dict[str, Any]]:
    events = api.get(f"/api/sessions/{session_id}/events").body["events"]
    return [e["detail"] for e in events if e["type"] == "session.renamed"]


def test_the_first_turn_names_the_session_and_the_chat_and_a_second_does_not(
    agent_api: AgentApi, live_session: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    session_id, chat_id = live_session
    title_steps: list[str] = []
    title_step = AgentLoop.title_step

    def counted(loop: AgentLoop, run_id: str) -> str | None:
        title_steps.append(run_id)
        return title_step(loop, run_id)

    monkeypatch.setattr(AgentLoop, "title_step", counted)
    city, _ = titles(agent_api, session_id, chat_id)
    agent_api.script.set([{"text": "Fixed."}], title='"Fix login password check"\nmore')
    assert agent_api.turn(session_id, chat_id, FIRST).status == 202
    assert wait_run(agent_api, session_id, "completed", "failed")["status"] == "completed"
    assert titles(agent_api, session_id, chat_id) == ("Fix login password check",) * 2
    assert renames(agent_api, session_id) == [
        {"title": "Fix login password check", "titleSource": "generated"}
    ]
    listed = agent_api.get("/api/sessions").body["sessions"]
    assert [s["title"] for s in listed if s["id"] == session_id] == ["Fix login password check"]
    assert city != "Fix login password check"

    agent_api.script.set([{"text": "Again."}], title="Something else entirely")
    assert agent_api.turn(session_id, chat_id, "and now the tests").status == 202
    wait_run(agent_api, session_id, "completed", "failed")
    assert titles(agent_api, session_id, chat_id) == ("Fix login password check",) * 2
    assert len(renames(agent_api, session_id)) == 1
    assert len(title_steps) == 1  # the second turn has no title step at all


def test_a_model_error_keeps_the_automatic_titles_and_the_turn_completes(
    agent_api: AgentApi, live_session: tuple[str, str]
) -> None:
    session_id, chat_id = live_session
    city, _ = titles(agent_api, session_id, chat_id)
    agent_api.script.set([{"text": "Fixed."}])  # no title answer: the title call fails
    assert agent_api.turn(session_id, chat_id, FIRST).status == 202
    assert wait_run(agent_api, session_id, "completed", "failed")["status"] == "completed"
    assert titles(agent_api, session_id, chat_id) == (city, FIRST)  # the chat: its 1st message
    assert renames(agent_api, session_id) == []


def test_a_rename_while_the_first_answer_streams_wins(
    agent_api: AgentApi, live_session: tuple[str, str]
) -> None:
    session_id, chat_id = live_session
    slow = {"text": " ".join(["word"] * 40), "chunkDelayMs": 100}  # the title step comes after
    agent_api.script.set([slow], title="Generated name")
    assert agent_api.turn(session_id, chat_id, FIRST).status == 202
    wait_event(agent_api, chat_id, "text-delta")
    assert agent_api.patch(f"/api/sessions/{session_id}", {"title": "Mine"}).status == 200
    chat_path = f"/api/sessions/{session_id}/chats/{chat_id}"
    assert agent_api.patch(chat_path, {"title": "My chat"}).status == 200
    assert wait_run(agent_api, session_id, "completed", "failed")["status"] == "completed"
    assert titles(agent_api, session_id, chat_id) == ("Mine", "My chat")
    assert renames(agent_api, session_id) == [{"title": "Mine"}]


def test_a_given_session_title_is_never_replaced(agent_api: AgentApi, tmp_path: Path) -> None:
    (tmp_path / "given").mkdir()
    origin = make_origin(tmp_path / "given")
    created = agent_api.post(
        "/api/sessions", {"repoUrl": f"file://{origin}", "branch": "feature", "title": "My work"}
    )
    assert created.status == 201, created.body
    session_id, chat_id = created.body["session"]["id"], created.body["chat"]["id"]
    assert wait_state(agent_api, session_id, "active", "failed")["lifecycleState"] == "active"
    agent_api.script.set([{"text": "Fixed."}], title="Generated name")
    assert agent_api.turn(session_id, chat_id, FIRST).status == 202
    assert wait_run(agent_api, session_id, "completed", "failed")["status"] == "completed"
    assert titles(agent_api, session_id, chat_id) == ("My work", "Generated name")
    assert renames(agent_api, session_id) == []
