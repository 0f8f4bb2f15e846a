"""Stop within 2 s (model stream and sandbox command), resumable streams, one live turn per
chat, safe retries."""

from __future__ import annotations

import time
from typing import Any

from tests.agent.conftest import AgentApi


def wait_run(api: AgentApi, session_id: str, *statuses: str, timeout: float = 30) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        runs = api.get(f"/api/sessions/{session_id}/runs").body["runs"]
        if runs and runs[0]["status"] in statuses:
            return dict(runs[0])
        time.sleep(0.05)
    raise AssertionError(f"run did not reach {statuses}: {runs}")


def wait_event(api: AgentApi, chat_id: str, kind: str, timeout: float = 30) -> None:
    after = 0
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        page = api.get(f"/api/chat/{chat_id}/stream", query={"after": str(after), "wait": "2"})
        assert page.status == 200, page.body
        if any(e["chunk"]["type"] == kind for e in page.body["events"]):
            return
        after = page.body["next"]
    raise AssertionError(f"no {kind} event")


def sleeps(api: AgentApi, session_id: str) -> str:
    ps = api.post(
        f"/api/sessions/{session_id}/sandbox/exec",
        {"command": "ps -eo args | grep '[s]leep 60' || true"},
    )
    return str(ps.body["stdout"]).strip()


def test_stop_during_bash_ends_the_run_within_2s_and_kills_the_command(
    agent_api: AgentApi, live_session: tuple[str, str]
) -> None:
    session_id, chat_id = live_session
    agent_api.script.set(
        [
            {
                "text": "Sleeping.",
                "toolCalls": [{"name": "bash", "input": {"command": "sleep 60"}}],
            },
            {"text": "never reached"},
        ]
    )
    assert agent_api.turn(session_id, chat_id, "sleep").status == 202
    wait_event(agent_api, chat_id, "tool-input-available")
    deadline = time.monotonic() + 10
    while not sleeps(agent_api, session_id):
        assert time.monotonic() < deadline, "sleep never started"
        time.sleep(0.1)
    stopped_at = time.monotonic()
    stop = agent_api.post(f"/api/chat/{chat_id}/stop")
    assert stop.status == 200, stop.body
    run = wait_run(agent_api, session_id, "aborted", "completed", "failed", timeout=5)
    assert time.monotonic() - stopped_at < 2.0
    assert run["status"] == "aborted"
    assert sleeps(agent_api, session_id) == ""
    kinds = [e["chunk"]["type"] for e in agent_api.events(chat_id)]
    assert kinds[-2:] == ["abort", "finish"]
    assert "tool-output-error" in kinds
    # the partial message is kept; stop again is a no-op
    messages = agent_api.get(f"/api/sessions/{session_id}/chats/{chat_id}/messages").body
    parts = messages["messages"][-1]["parts"]
    assert {"type": "text", "text": "Sleeping.", "state": "done"} in parts
    bash = next(p for p in parts if p["type"] == "tool-bash")
    assert bash["state"] == "output-error"
    again = agent_api.post(f"/api/chat/{chat_id}/stop")
    assert again.status == 200
    assert again.body["status"] == "aborted"


def test_stop_during_bash_kills_what_left_the_commands_process_group(
    agent_api: AgentApi, live_session: tuple[str, str]
) -> None:
    """A hostile command's setsid and double-forked children outlive a kill of its group; the
    stop goes through the exec's keeper, which kills every descendant (issue 22)."""
    session_id, chat_id = live_session
    command = (
        "setsid sh -c 'exec sleep 60' > /dev/null 2>&1 & "
        "( setsid sh -c 'exec sleep 60' > /dev/null 2>&1 & ) ; sleep 60"
    )
    agent_api.script.set(
        [
            {"text": "Hiding.", "toolCalls": [{"name": "bash", "input": {"command": command}}]},
            {"text": "never reached"},
        ]
    )
    assert agent_api.turn(session_id, chat_id, "hide").status == 202
    deadline = time.monotonic() + 10
    while len(sleeps(agent_api, session_id).splitlines()) < 3:
        assert time.monotonic() < deadline, "the sleeps never started"
        time.sleep(0.1)
    assert agent_api.post(f"/api/chat/{chat_id}/stop").status == 200
    assert wait_run(agent_api, session_id, "aborted", "completed", "failed")["status"] == "aborted"
    deadline = time.monotonic() + 10
    while left := sleeps(agent_api, session_id):
        assert time.monotonic() < deadline, f"left running after the stop: {left}"
        time.sleep(0.1)


def test_stop_during_the_model_stream(agent_api: AgentApi, live_session: tuple[str, str]) -> None:
    session_id, chat_id = live_session
    words = " ".join(f"word{i}" for i in range(400))
    agent_api.script.set([{"text": words, "chunkDelayMs": 50}])
    assert agent_api.turn(session_id, chat_id, "talk").status == 202
    wait_event(agent_api, chat_id, "text-delta")
    stopped_at = time.monotonic()
    assert agent_api.post(f"/api/chat/{chat_id}/stop").status == 200
    run = wait_run(agent_api, session_id, "aborted", "completed", timeout=5)
    assert time.monotonic() - stopped_at < 2.0
    assert run["status"] == "aborted"
    messages = agent_api.get(f"/api/sessions/{session_id}/chats/{chat_id}/messages").body
    text = next(p for p in messages["messages"][-1]["parts"] if p["type"] == "text")
    assert text["text"].startswith("word0 ")
    assert len(text["text"]) < len(words)


def test_the_stream_resumed_from_any_seq_gives_the_same_events(
    agent_api: AgentApi, live_session: tuple[str, str]
) -> None:
    session_id, chat_id = live_session
    agent_api.script.set(
        [
            {
                "reasoning": "one two three",
                "text": "four five six",
                "toolCalls": [{"name": "bash", "input": {"command": "echo hi"}}],
                "chunkDelayMs": 20,
            },
            {"text": "seven eight nine", "chunkDelayMs": 20},
        ]
    )
    assert agent_api.turn(session_id, chat_id, "go").status == 202
    everything = agent_api.events(chat_id)
    assert [e["seq"] for e in everything] == list(range(1, len(everything) + 1))
    for after in (0, 1, 3, len(everything) // 2, len(everything) - 1):
        assert agent_api.events(chat_id, after=after) == everything[after:]
    # past the last event of an ended run: nothing (204)
    done = agent_api.get(f"/api/chat/{chat_id}/stream", query={"after": str(len(everything))})
    assert done.status == 204


def test_a_second_live_turn_is_409_and_the_same_message_returns_its_run(
    agent_api: AgentApi, live_session: tuple[str, str]
) -> None:
    session_id, chat_id = live_session
    agent_api.script.set([{"text": " ".join(["slow"] * 100), "chunkDelayMs": 30}])
    first = agent_api.turn(session_id, chat_id, "one", message_id="msg-one")
    assert first.status == 202, first.body
    assert first.body["status"] == "running"
    retried = agent_api.turn(session_id, chat_id, "one", message_id="msg-one")
    assert retried.status == 202
    assert retried.body["runId"] == first.body["runId"]
    second = agent_api.turn(session_id, chat_id, "two", message_id="msg-two")
    assert second.status == 409
    assert second.error["code"] == "turn_in_progress"
    assert second.error["field"] == "chatId"
    agent_api.post(f"/api/chat/{chat_id}/stop")
    wait_run(agent_api, session_id, "aborted")
    messages = agent_api.get(f"/api/sessions/{session_id}/chats/{chat_id}/messages").body
    assert [m["id"] for m in messages["messages"] if m["role"] == "user"] == ["msg-one"]
    # the chat is free again; the finished run's message id still answers that run
    agent_api.script.set([{"text": "ok"}])
    third = agent_api.turn(session_id, chat_id, "three", message_id="msg-three")
    assert third.status == 202
    assert third.body["runId"] != first.body["runId"]
    wait_run(agent_api, session_id, "completed")
    again = agent_api.turn(session_id, chat_id, "one", message_id="msg-one")
    assert again.body["runId"] == first.body["runId"]
    assert again.body["status"] == "aborted"


def test_a_continued_run_gives_the_message_it_continues_on_its_first_page(
    agent_api: AgentApi, live_session: tuple[str, str]
) -> None:
    session_id, chat_id = live_session
    command = {"command": "mkdir -p build && rm -rf build && echo gone"}
    agent_api.script.set([{"text": "Clearing.", "toolCalls": [{"name": "bash", "input": command}]}])
    agent_api.turn(session_id, chat_id, "clean")
    wait_run(agent_api, session_id, "waiting")
    stream = f"/api/chat/{chat_id}/stream"
    own = agent_api.get(stream, query={"after": "0", "wait": "0"})
    assert own.status == 200
    assert own.body["continues"] is None  # a turn of its own
    messages = f"/api/sessions/{session_id}/chats/{chat_id}/messages"
    waiting = agent_api.get(messages).body["messages"][-1]
    agent_api.script.set([{"text": "The build folder is gone."}])
    answer = {"toolCallId": "scripted-0-0", "approved": True}
    assert agent_api.post(f"/api/chat/{chat_id}/respond", answer).body["pending"] == 0
    wait_run(agent_api, session_id, "completed", "failed")
    first = agent_api.get(stream, query={"after": "0", "wait": "0"}).body
    continues = first["continues"]
    assert continues["id"] == waiting["id"]
    # the parts it had when the run started (as stored: the approved call has its output now)
    assert [p["type"] for p in continues["parts"]] == [p["type"] for p in waiting["parts"]]
    assert continues["parts"][-1]["toolCallId"] == "scripted-0-0"
    assert first["events"][1]["chunk"]["type"] == "tool-output-available"  # completes that part
    final = agent_api.get(messages).body["messages"][-1]
    assert final["parts"][: len(continues["parts"])] == continues["parts"]
    assert final["parts"][-1]["text"] == "The build folder is gone."
    assert len(final["parts"]) > len(continues["parts"])  # the run's own parts are not in it
    later = agent_api.get(stream, query={"after": "1", "wait": "0"}).body
    assert later["continues"] is None  # only the page from the run's first event
