"""The task tool: subagents with their own loop and tool set, in the turn's real sandbox."""

from __future__ import annotations

from typing import Any

from tests.agent.conftest import AgentApi
from tests.agent.test_stop_and_stream import wait_run

EXECUTOR_TASK = {
    "subagentType": "executor",
    "task": "Write the notes",
    "instructions": "Create notes.txt saying hello, and clean up the keep folder.",
}
EXPLORER_TASK = {
    "subagentType": "explorer",
    "task": "Read the notes",
    "instructions": "Say what notes.txt contains. Do not change anything.",
}
SCRIPT: list[dict[str, Any]] = [
    {"text": "Delegating.", "toolCalls": [{"name": "task", "input": EXECUTOR_TASK}]},
    {  # the executor: its own model calls, the run's 2nd and 3rd
        "toolCalls": [
            {"name": "write", "input": {"filePath": "notes.txt", "content": "hello\n"}},
            {"name": "write", "input": {"filePath": "keep/file.txt", "content": "kept\n"}},
            {"name": "bash", "input": {"command": "rm -rf keep"}},  # needs approval: refused
            {"name": "task", "input": EXPLORER_TASK},  # no subagents in subagents
        ]
    },
    {"text": "**Summary**: wrote notes.txt; rm -rf needs approval. **Answer**: done"},
    {"toolCalls": [{"name": "task", "input": EXPLORER_TASK}]},
    {  # the explorer: read-only
        "toolCalls": [
            {"name": "write", "input": {"filePath": "sneaky.txt", "content": "x"}},
            {"name": "read", "input": {"filePath": "notes.txt"}},
        ]
    },
    {"text": "**Summary**: read notes.txt. **Answer**: it says hello"},
    {"text": "All done."},
]


def test_subagents_work_in_the_sandbox_with_their_own_tools_and_budget(
    agent_api: AgentApi, live_session: tuple[str, str]
) -> None:
    session_id, chat_id = live_session
    agent_api.script.set(SCRIPT)
    started = agent_api.turn(session_id, chat_id, "delegate the notes")
    assert started.status == 202, started.body
    events = [event["chunk"] for event in agent_api.events(chat_id)]
    run = wait_run(agent_api, session_id, "completed", "failed")
    assert run["status"] == "completed", run
    assert run["steps"] == 5  # 3 model steps of the turn + 2 task calls
    # the subagents' model calls are the run's: the script's 7 responses, in order
    finals = [
        c for c in events if c["type"] == "tool-output-available" and not c.get("preliminary")
    ]
    executor, explorer = (c["output"] for c in finals)
    assert executor["subagentType"] == "executor"
    assert executor["summary"].startswith("**Summary**: wrote notes.txt")
    assert executor["toolCalls"] == ["write", "write", "bash", "task"]
    assert executor["modelCalls"] == 2
    assert explorer["summary"].endswith("it says hello")
    assert explorer["toolCalls"] == ["write", "read"]
    preliminary = [c for c in events if c.get("preliminary")]
    assert preliminary
    assert preliminary[0]["output"]["status"] == "running"
    files = f"/api/sessions/{session_id}/sandbox/files/content"
    assert agent_api.get(files, query={"path": "notes.txt"}).body["content"] == "hello\n"
    # the approval a subagent cannot ask for was refused: the folder is still there
    assert agent_api.get(files, query={"path": "keep/file.txt"}).body["content"] == "kept\n"
    # the explorer has no write tool
    probe = agent_api.post(
        f"/api/sessions/{session_id}/sandbox/exec", {"command": "test -e sneaky.txt; echo $?"}
    )
    assert probe.body["stdout"].strip() == "1"
    # the parent model saw the summaries: the assistant message holds the task parts' outputs
    messages = agent_api.get(f"/api/sessions/{session_id}/chats/{chat_id}/messages").body[
        "messages"
    ]
    parts = messages[-1]["parts"]
    tasks = [p for p in parts if p["type"] == "tool-task"]
    assert [p["state"] for p in tasks] == ["output-available", "output-available"]
    assert parts[-1]["text"] == "All done."
    assert run["usage"]["outputTokens"] > 0
