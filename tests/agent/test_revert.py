"""Turn checkpoints on real sandboxes: the engine checkpoints the workspace before a run's first
tool step, and ``POST /api/sessions/{id}/runs/{runId}/revert`` puts it back exactly (files,
modes, HEAD), across hibernation and across archive → unarchive, never while a turn runs."""

from __future__ import annotations

import time
from typing import Any

from tests.agent.conftest import AgentApi, wait_state
from tests.agent.test_stop_and_stream import wait_run

# every file and folder but .git: path, mode and content hash (or link target), sorted
DIGEST = (
    "find . -path ./.git -prune -o -type d -printf '%P/ %m\\n'"
    " -o -type l -printf '%P -> %l\\n'"
    " -o -type f -printf '%P %m ' -exec sha256sum {} \\; | sort"
)
EDITS: list[dict[str, Any]] = [
    {
        "toolCalls": [
            {"name": "write", "input": {"filePath": "calc.py", "content": "def add(a, b): ...\n"}},
            {
                "name": "edit",
                "input": {"filePath": "app.py", "oldString": "hello", "newString": "changed"},
            },
        ]
    },
    {
        "toolCalls": [
            {
                "name": "bash",
                "input": {
                    "command": "rm notes.txt feature.txt && chmod -x run.sh && mkdir -p pkg"
                    " && echo x > pkg/new.txt && git add -A && git commit -qm 'agent work'"
                },
            }
        ]
    },
    {"text": "Done."},
]


def sh(api: AgentApi, session_id: str, command: str) -> str:
    result = api.post(f"/api/sessions/{session_id}/sandbox/exec", {"command": command})
    assert result.status == 200, result.body
    assert result.body["exitCode"] == 0, result.body
    return str(result.body["stdout"])


def state(api: AgentApi, session_id: str) -> tuple[str, str, str]:
    """The workspace byte for byte, git's status (staged, unstaged, untracked) and HEAD."""
    status = sh(api, session_id, "git status --porcelain=v2 --branch")
    return sh(api, session_id, DIGEST), status, sh(api, session_id, "git rev-parse HEAD")


def seed(api: AgentApi, session_id: str) -> tuple[str, str, str]:
    """Work of the user's before the turn: untracked, executable, staged and unstaged files."""
    sh(
        api,
        session_id,
        "echo notes > notes.txt && printf '#!/bin/sh\\necho hi\\n' > run.sh && chmod +x run.sh"
        " && echo staged >> README.md && git add README.md && echo unstaged >> README.md",
    )
    return state(api, session_id)


def turn(api: AgentApi, session_id: str, chat_id: str, script: list[dict[str, Any]]) -> str:
    api.script.set(script)
    started = api.turn(session_id, chat_id, "do the work")
    assert started.status == 202, started.body
    run = wait_run(api, session_id, "completed", "failed", timeout=120)
    assert run["status"] == "completed", run
    return str(run["runId"])


def revert(api: AgentApi, session_id: str, run_id: str, dry_run: bool, **kw: Any) -> Any:
    return api.post(
        f"/api/sessions/{session_id}/runs/{run_id}/revert",
        query={"dryRun": "true" if dry_run else "false"},
        **kw,
    )


def runs_by_id(api: AgentApi, session_id: str) -> dict[str, dict[str, Any]]:
    return {r["runId"]: r for r in api.get(f"/api/sessions/{session_id}/runs").body["runs"]}


def test_a_turn_is_reverted_exactly_with_every_later_turn(
    agent_api: AgentApi, live_session: tuple[str, str]
) -> None:
    session_id, chat_id = live_session
    before = seed(agent_api, session_id)
    first = turn(agent_api, session_id, chat_id, EDITS)
    second = turn(
        agent_api,
        session_id,
        chat_id,
        [
            {"toolCalls": [{"name": "write", "input": {"filePath": "later.txt", "content": "2"}}]},
            {"text": "More."},
        ],
    )
    checkpoint = runs_by_id(agent_api, session_id)[first]["checkpoint"]
    assert checkpoint["ref"] == f"refs/openagents/checkpoints/{first}"
    assert checkpoint["files"] == 5  # README.md, app.py, feature.txt, notes.txt, run.sh
    assert (
        sh(agent_api, session_id, f"git rev-parse {checkpoint['ref']}").strip()
        == (checkpoint["commit"])
    )
    turned = state(agent_api, session_id)

    preview = revert(agent_api, session_id, first, True)
    assert preview.status == 200, preview.body
    assert preview.body == {
        "runId": first,
        "dryRun": True,
        "restored": ["app.py", "feature.txt", "notes.txt", "run.sh"],
        "removed": ["calc.py", "later.txt", "pkg/new.txt"],
        "saved": None,
        "revertedRuns": [],
    }
    assert state(agent_api, session_id) == turned  # a dry run changes nothing
    assert not any(r["reverted"] for r in runs_by_id(agent_api, session_id).values())

    reverted = revert(agent_api, session_id, first, False)
    assert reverted.status == 200, reverted.body
    assert (reverted.body["restored"], reverted.body["removed"]) == (
        preview.body["restored"],
        preview.body["removed"],
    )
    assert reverted.body["revertedRuns"] == [second, first]
    assert state(agent_api, session_id) == before  # files, modes, index and HEAD
    saved = reverted.body["saved"]
    assert saved["ref"].startswith("refs/openagents/checkpoints/revert-")
    assert sh(agent_api, session_id, f"git rev-parse {saved['ref']}^") == turned[2]

    runs = runs_by_id(agent_api, session_id)
    assert (runs[first]["reverted"], runs[second]["reverted"]) == (True, True)
    record = runs[first]["revert"]
    assert (record["restored"], record["removed"], record["saved"]) == (4, 3, saved)
    assert runs[second]["revert"] is None
    audit = agent_api.get(f"/api/sessions/{session_id}/events").body["events"]
    [entry] = [e for e in audit if e["type"] == "agent.turn_reverted"]
    assert entry["detail"]["runId"] == first
    assert entry["detail"]["removed"] == ["calc.py", "later.txt", "pkg/new.txt"]
    assert entry["detail"]["revertedRuns"] == [second, first]
    # the messages stay: the chat shows the marker at the run's assistant message
    messages = agent_api.get(f"/api/sessions/{session_id}/chats/{chat_id}/messages").body
    assert len(messages["messages"]) == 4


def test_revert_is_refused_while_a_turn_runs_and_for_runs_it_cannot_revert(
    agent_api: AgentApi, live_session: tuple[str, str]
) -> None:
    session_id, chat_id = live_session
    talk = turn(agent_api, session_id, chat_id, [{"text": "Just talking."}])
    refused = revert(agent_api, session_id, talk, False)
    assert refused.status == 409
    assert (refused.body["code"], refused.body["field"]) == ("no_checkpoint", "runId")
    for path in (f"/api/sessions/{session_id}/runs/nope", "/api/sessions/nope/runs/" + talk):
        missing = agent_api.post(f"{path}/revert")
        assert missing.status == 404, missing.body
    other = revert(agent_api, session_id, talk, True, user="bob")  # another user's run
    assert (other.status, other.body["code"]) == (404, "not_found")
    bad = agent_api.post(
        f"/api/sessions/{session_id}/runs/{talk}/revert", query={"dryRun": "maybe"}
    )
    assert (bad.status, bad.body["field"]) == (422, "dryRun")

    agent_api.script.set(
        [
            {"toolCalls": [{"name": "bash", "input": {"command": "sleep 60"}}]},
            {"text": "never reached"},
        ]
    )
    started = agent_api.turn(session_id, chat_id, "sleep")
    assert started.status == 202, started.body
    running = started.body["runId"]
    deadline = time.monotonic() + 60
    while runs_by_id(agent_api, session_id)[running]["checkpoint"] is None:
        assert time.monotonic() < deadline, "no checkpoint before the bash step"
        time.sleep(0.1)
    before = sh(agent_api, session_id, DIGEST)
    busy = revert(agent_api, session_id, running, False)
    assert busy.status == 409
    assert (busy.body["code"], busy.body["field"]) == ("turn_in_progress", "runId")
    assert sh(agent_api, session_id, DIGEST) == before
    assert agent_api.post(f"/api/chat/{chat_id}/stop").status == 200
    assert wait_run(agent_api, session_id, "aborted", "failed")["status"] == "aborted"
    assert revert(agent_api, session_id, running, False).status == 200  # once it ended


def test_revert_across_hibernation(agent_api: AgentApi, live_session: tuple[str, str]) -> None:
    session_id, chat_id = live_session
    before = seed(agent_api, session_id)
    run_id = turn(agent_api, session_id, chat_id, EDITS)
    paused = agent_api.post("/api/sandbox/snapshot", {"sessionId": session_id})
    assert paused.status == 202, paused.body
    wait_state(agent_api, session_id, "hibernated")
    asleep = revert(agent_api, session_id, run_id, True)
    assert (asleep.status, asleep.body["code"]) == (409, "sandbox_not_running")
    resumed = agent_api.put("/api/sandbox/snapshot", {"sessionId": session_id})
    assert resumed.status == 200, resumed.body
    wait_state(agent_api, session_id, "active")
    assert revert(agent_api, session_id, run_id, False).status == 200
    assert state(agent_api, session_id) == before


def test_revert_across_archive_and_unarchive(
    agent_api: AgentApi, live_session: tuple[str, str]
) -> None:
    session_id, chat_id = live_session
    before = seed(agent_api, session_id)
    run_id = turn(agent_api, session_id, chat_id, EDITS)
    archived = agent_api.patch(f"/api/sessions/{session_id}", {"status": "archived"})
    assert archived.status == 200, archived.body
    deadline = time.monotonic() + 120
    back = agent_api.patch(f"/api/sessions/{session_id}", {"status": "running"})
    while back.status == 409 and time.monotonic() < deadline:  # the bundle is still being made
        time.sleep(0.2)
        back = agent_api.patch(f"/api/sessions/{session_id}", {"status": "running"})
    assert back.status == 200, back.body
    wait_state(agent_api, session_id, "active")
    assert revert(agent_api, session_id, run_id, False).status == 200
    assert state(agent_api, session_id) == before
