"""A turn in flight when its runtime dies carries on in the next runtime on the same home, from
its last durable checkpoint: recorded steps return their results, the step in flight runs
again, and the run, its message and its stream end as an uninterrupted run's would."""

from __future__ import annotations

import time
from typing import Any

import pytest
from openagents.agent.stream import EventWriter
from openagents.local.agent_runtime import LocalAgentRuntime

from tests.agent.conftest import AgentApi
from tests.agent.restarts import (
    HeldModels,
    Kill,
    KilledAtFollowUps,
    chunks,
    killable_runtime,
    loop_like,
    parts,
)

SCRIPT: list[dict[str, Any]] = [
    {
        "reasoning": "First look at the files.",
        "text": "Let me look at the workspace.",
        "toolCalls": [{"name": "bash", "input": {"command": "ls"}}],
    },
    {"text": "The workspace holds a readme, an app and a feature file; nothing else to do."},
]


@pytest.fixture(autouse=True)
def every_chunk_an_event(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each chunk written at once (no 200 ms timer): what a crash leaves is exact."""
    defaults = dict(EventWriter.__init__.__kwdefaults__ or {})
    monkeypatch.setattr(EventWriter.__init__, "__kwdefaults__", {**defaults, "flush_seconds": 0})


def _chat(api: AgentApi, session_id: str) -> str:
    made = api.post(f"/api/sessions/{session_id}/chats", {})
    assert made.status in (200, 201), made.body
    return str(made.body["chat"]["id"])


def _assistant(api: AgentApi, session_id: str, chat_id: str) -> dict[str, Any]:
    messages = api.get(f"/api/sessions/{session_id}/chats/{chat_id}/messages").body["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant"]
    return dict(messages[1])


def _uninterrupted(api: AgentApi, session_id: str) -> tuple[list[Any], list[Any]]:
    chat_id = _chat(api, session_id)
    started = api.turn(session_id, chat_id, "Look around")
    assert started.status == 202, started.body
    events = api.events(chat_id)
    # its follow-ups too: a recovery below must find only the interrupted turn's execution
    engine = api.container.agent._engine()
    assert isinstance(engine, LocalAgentRuntime)
    engine.wait(str(started.body["runId"]))
    return chunks(events), parts(_assistant(api, session_id, chat_id))


@pytest.mark.parametrize("held_step", [0, 1])
def test_a_turn_killed_mid_model_step_carries_on(
    agent_api: AgentApi,
    live_session: tuple[str, str],
    monkeypatch: pytest.MonkeyPatch,
    held_step: int,
) -> None:
    session_id, chat_id = live_session
    agent_api.script.set(SCRIPT)
    expected_chunks, expected_parts = _uninterrupted(agent_api, session_id)

    container = agent_api.container
    home, loop = agent_api.settings.home, container.agent_loop
    kill, held = Kill(), HeldModels(loop._models, step=held_step, after=3)
    first = killable_runtime(home, loop, kill, models=held)
    monkeypatch.setattr(container.agent, "_engine", lambda: first)
    started = agent_api.turn(session_id, chat_id, "Look around")
    assert started.status == 202, started.body
    run_id = str(started.body["runId"])
    assert held.reached.wait(60)
    before = agent_api.get(f"/api/chat/{chat_id}/stream", query={"after": "0"}).body
    assert before["status"] == "running"
    assert before["events"]
    kill()  # the first runtime is dead: its threads never write again

    second = LocalAgentRuntime(home, loop._runs, lambda: loop_like(loop))
    monkeypatch.setattr(container.agent, "_engine", lambda: second)
    assert second.recover() == 1
    second.wait(run_id)

    rest = agent_api.events(chat_id, after=before["next"])  # the client that read before
    events = before["events"] + rest
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert chunks(events) == expected_chunks
    assert parts(_assistant(agent_api, session_id, chat_id)) == expected_parts
    ended = loop._runs.get(run_id)
    assert ended is not None
    assert ended.status.value == "completed"


GATED = "echo started > started; read line < gate; echo once >> log.txt; git add log.txt"
GATED += " && git commit -qm 'once' && echo committed"
COMMIT_SCRIPT: list[dict[str, Any]] = [
    {"toolCalls": [{"name": "bash", "input": {"command": "rm -f gate started; mkfifo gate"}}]},
    {"text": "Committing.", "toolCalls": [{"name": "bash", "input": {"command": GATED}}]},
    {"text": "Committed once."},
]


def _sh(api: AgentApi, session_id: str, command: str) -> str:
    done = api.post(f"/api/sessions/{session_id}/sandbox/exec", {"command": command})
    assert done.status == 200, done.body
    return str(done.body["stdout"])


def _wait_started(api: AgentApi, session_id: str) -> None:
    deadline = time.monotonic() + 60
    while _sh(api, session_id, "test -e started && echo yes").strip() != "yes":
        assert time.monotonic() < deadline, "the command never started"


def _commits(api: AgentApi, session_id: str) -> int:
    return int(_sh(api, session_id, "git log --format=%s | grep -cx once || true").strip())


def test_a_turn_killed_mid_bash_step_collects_the_command_it_left_running(
    agent_api: AgentApi, live_session: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    session_id, chat_id = live_session
    agent_api.script.set(COMMIT_SCRIPT)
    baseline = _chat(agent_api, session_id)
    assert agent_api.turn(session_id, baseline, "Commit").status == 202
    _wait_started(agent_api, session_id)
    _sh(agent_api, session_id, "echo go > gate")
    expected_chunks = chunks(agent_api.events(baseline))
    expected_parts = parts(_assistant(agent_api, session_id, baseline))
    assert _commits(agent_api, session_id) == 1
    _sh(agent_api, session_id, "rm -f started")  # what the next wait waits for is this turn's

    container = agent_api.container
    home, loop = agent_api.settings.home, container.agent_loop
    kill = Kill()
    first = killable_runtime(home, loop, kill)
    monkeypatch.setattr(container.agent, "_engine", lambda: first)
    started = agent_api.turn(session_id, chat_id, "Commit")
    assert started.status == 202, started.body
    run_id = str(started.body["runId"])
    _wait_started(agent_api, session_id)  # the command waits on the gate
    before = agent_api.get(f"/api/chat/{chat_id}/stream", query={"after": "0"}).body
    kill()

    second = LocalAgentRuntime(home, loop._runs, lambda: loop_like(loop))
    monkeypatch.setattr(container.agent, "_engine", lambda: second)
    assert second.recover() == 1
    _sh(agent_api, session_id, "echo go > gate")  # the command the dead runtime started ends
    second.wait(run_id)

    events = before["events"] + agent_api.events(chat_id, after=before["next"])
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    # a running command's output so far depends on timing (the baseline's showed "committed"
    # before its end; the collected command answers its result alone): the rest is the same
    assert settled(chunks(events)) == settled(expected_chunks)
    assert parts(_assistant(agent_api, session_id, chat_id)) == expected_parts
    assert _commits(agent_api, session_id) == 2  # the baseline's and this turn's: once each
    ended = loop._runs.get(run_id)
    assert ended is not None
    assert ended.status.value == "completed"


def settled(found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The chunks without the preliminary tool outputs (a running command's output so far)."""
    return [chunk for chunk in found if not chunk.get("preliminary")]


def _finished_entries(api: AgentApi, session_id: str, run_id: str) -> list[dict[str, Any]]:
    events = api.get(f"/api/sessions/{session_id}/events").body["events"]
    return [
        e
        for e in events
        if e["type"] == "agent.turn_finished" and e["detail"].get("runId") == run_id
    ]


def test_a_runtime_killed_between_the_runs_end_and_its_follow_ups_runs_them_once(
    agent_api: AgentApi, live_session: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    session_id, chat_id = live_session
    agent_api.script.set([{"text": "Nothing to change."}])
    container = agent_api.container
    home, loop = agent_api.settings.home, container.agent_loop
    kill = Kill()
    host = KilledAtFollowUps(loop._host, kill)
    first = killable_runtime(home, loop, kill, host=host)
    monkeypatch.setattr(container.agent, "_engine", lambda: first)
    started = agent_api.turn(session_id, chat_id, "Look")
    assert started.status == 202, started.body
    run_id = str(started.body["runId"])
    assert host.reached.wait(60)  # the run's end is recorded; its follow-ups are not
    ended = loop._runs.get(run_id)
    assert ended is not None
    assert ended.status.value == "completed"
    assert _finished_entries(agent_api, session_id, run_id) == []

    second = LocalAgentRuntime(home, loop._runs, lambda: loop_like(loop))
    monkeypatch.setattr(container.agent, "_engine", lambda: second)
    assert second.recover() == 1  # its run ended, its execution did not: carried on
    second.wait(run_id)
    assert len(_finished_entries(agent_api, session_id, run_id)) == 1
    assert second.recover() == 0  # nothing left to carry on
    third = LocalAgentRuntime(home, loop._runs, lambda: loop_like(loop))
    try:
        assert third.recover() == 0  # a later start finds the execution complete
    finally:
        third.close()
    second.close()
