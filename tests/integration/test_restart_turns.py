"""A turn outlives the control plane (issue 21), end to end: ``openagents dev`` in a child
process with a real confined sandbox and the scripted model; the agent's ``bash`` step runs
``git commit`` behind a fifo the test holds, and the server is killed (kill -9 of its process
group, as a crash) while the command waits. The next start carries the run on from its last
durable checkpoint: the re-run step collects the command that kept running in the surviving
sandbox instead of running it again, the turn reaches ``completed``, the commit exists exactly
once and the stream's seqs run from 1 with no gap or repeat. The same for Ctrl-C and SIGTERM, and
for each of them in the middle of a model step's stream: the message is the one an
uninterrupted run writes."""

from __future__ import annotations

import json
import signal
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_restart_sandboxes import Server, until
from tests.support import git, make_origin

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]

GATED_COMMIT = (
    "touch started && cat gate >/dev/null && echo work > work.txt && git add work.txt && "
    "git -c user.name=Agent -c user.email=agent@example.com commit -qm agent-commit && "
    "echo committed"
)
SCRIPT = {
    "responses": [
        {
            "text": "Committing.",
            "toolCalls": [{"name": "bash", "input": {"command": GATED_COMMIT}}],
        },
        {"text": "Done: the work is committed."},
    ]
}


def stream(server: Server, chat_id: str) -> list[dict[str, Any]]:
    """Every event of the chat's latest run, read page by page from ``after=0``."""
    events: list[dict[str, Any]] = []
    after = 0
    while True:
        page = server.api.get(
            f"/api/chat/{chat_id}/stream", query={"after": str(after), "wait": "0"}
        )
        if page.status == 204:
            return events
        assert page.status == 200, page.body
        events += page.body["events"]
        if page.body["next"] == after:
            return events
        after = page.body["next"]


@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
def test_a_turn_stopped_mid_bash_step_carries_on_and_commits_once(
    tmp_path: Path, how: signal.Signals
) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    server = Server(tmp_path)
    server.env["OPENAGENTS_SCRIPTED_MODEL_FILE"] = str(script)
    server.start()
    try:
        created = server.api.post("/api/sessions", {})
        assert created.status == 201, created.body
        sid, chat = created.body["session"]["id"], created.body["chat"]["id"]
        server.settled(sid, "active")
        client = server.sandbox(sid)[1]
        assert client.exec("mkfifo gate").exit_code == 0
        message = {"id": "m-1", "role": "user", "parts": [{"type": "text", "text": "commit"}]}
        started = server.api.post(
            "/api/chat", {"sessionId": sid, "chatId": chat, "message": message}
        )
        assert started.status == 202, started.body
        run_id = started.body["runId"]
        until(lambda: client.exec("test -e started").exit_code == 0, 60, "the command runs")

        server.stop(how)  # Ctrl-C, a stop, or a crash, mid bash step
        server.start()
        assert "1 turn(s) the restart interrupted carry on" in server.log.read_text()

        # the command the dead server started is still waiting in the surviving sandbox
        assert client.exec("test -e started && test ! -e work.txt").exit_code == 0
        assert client.exec("echo go > gate").exit_code == 0

        def ended() -> dict[str, Any] | None:
            runs = server.api.get(f"/api/sessions/{sid}/runs").body["runs"]
            run = next(r for r in runs if r["runId"] == run_id)
            return run if run["status"] != "running" else None

        run = until(ended, 120, "the run ends")
        assert (run["status"], run["error"]) == ("completed", None), run
        log = client.exec("git log --format=%s").stdout.split()
        assert log.count("agent-commit") == 1, log
        events = stream(server, chat)
        assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
        text = "".join(e["chunk"].get("delta", "") for e in events)
        assert "Done: the work is committed." in text
        outputs = [e["chunk"] for e in events if e["chunk"]["type"] == "tool-output-available"]
        assert len(outputs) == 1, outputs  # the command's one result, collected once
        assert "committed" in json.dumps(outputs[0]["output"])
    finally:
        if server.process is not None and server.process.poll() is None:
            server.stop(signal.SIGTERM)
        server.down()


LONG_TEXT = " ".join(f"word{i}" for i in range(60))


@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
def test_a_turn_stopped_mid_model_step_finishes_with_the_uninterrupted_message(
    tmp_path: Path, how: signal.Signals
) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"responses": [{"text": LONG_TEXT, "chunkDelayMs": 100}]}))
    server = Server(tmp_path)
    server.env["OPENAGENTS_SCRIPTED_MODEL_FILE"] = str(script)
    server.start()
    try:
        created = server.api.post("/api/sessions", {})
        assert created.status == 201, created.body
        sid, chat = created.body["session"]["id"], created.body["chat"]["id"]
        server.settled(sid, "active")
        message = {"id": "m-1", "role": "user", "parts": [{"type": "text", "text": "talk"}]}
        started = server.api.post(
            "/api/chat", {"sessionId": sid, "chatId": chat, "message": message}
        )
        assert started.status == 202, started.body
        run_id = started.body["runId"]

        def streaming() -> bool:
            return any(e["chunk"]["type"] == "text-delta" for e in stream(server, chat))

        until(streaming, 60, "the model step streams")
        server.stop(how)  # Ctrl-C, a stop, or a crash, mid model step
        server.start()

        def ended() -> dict[str, Any] | None:
            runs = server.api.get(f"/api/sessions/{sid}/runs").body["runs"]
            run = next(r for r in runs if r["runId"] == run_id)
            return run if run["status"] != "running" else None

        run = until(ended, 120, "the run ends")
        assert (run["status"], run["error"]) == ("completed", None), run
        events = stream(server, chat)
        assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
        streamed = "".join(e["chunk"].get("delta", "") for e in events)
        assert streamed == LONG_TEXT  # no repeated or lost words across the crash
        page = server.api.get(f"/api/sessions/{sid}/chats/{chat}/messages")
        assert page.status == 200, page.body
        (assistant,) = [m for m in page.body["messages"] if m["role"] == "assistant"]
        texts = [p["text"] for p in assistant["parts"] if p["type"] == "text"]
        assert texts == [LONG_TEXT], assistant["parts"]
    finally:
        if server.process is not None and server.process.poll() is None:
            server.stop(signal.SIGTERM)
        server.down()


def _finished(
    server: Server, session_id: str, run_id: str, kind: str = "agent.turn_finished"
) -> list[dict[str, Any]]:
    page = server.api.get(f"/api/sessions/{session_id}/events")
    assert page.status == 200, page.body
    return [
        e
        for e in page.body["events"]
        if e["type"] == kind and (e["detail"].get("runId") == run_id or e["id"].startswith(run_id))
    ]


def _execution_status(server: Server, run_id: str) -> str | None:
    path = server.home / "durable-executions.db"
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
    try:
        row = db.execute(
            "SELECT status FROM executions WHERE execution_name = ?", (run_id,)
        ).fetchone()
    finally:
        db.close()
    return str(row[0]) if row else None


@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
def test_a_server_stopped_between_the_runs_end_and_its_follow_ups_runs_them_once(
    tmp_path: Path, how: signal.Signals
) -> None:
    """Case (d): the follow-ups' diff refresh runs ``git diff`` in the sandbox, and the
    workspace's fsmonitor hook (armed by the turn's last command) holds it on a fifo: the
    server is stopped there, the run's end recorded and its follow-ups step unfinished. The
    next start carries the execution on: the follow-ups step runs again to its end, the turn's
    audit entry stays recorded once, and auto-commit pushes the turn's work exactly once."""
    origin = make_origin(tmp_path)
    server = Server(tmp_path)
    script = tmp_path / "script.json"
    server.env["OPENAGENTS_SCRIPTED_MODEL_FILE"] = str(script)
    server.env["OPENAGENTS_LOCAL_REPO_ROOTS"] = str(tmp_path)
    server.start()
    try:
        body = {"repoUrl": str(origin), "isNewBranch": True, "autoCommitPush": True}
        created = server.api.post("/api/sessions", body)
        assert created.status == 201, created.body
        sid, chat = created.body["session"]["id"], created.body["chat"]["id"]
        branch = created.body["session"]["branch"]  # its own, generated at create
        server.settled(sid, "active")
        client = server.sandbox(sid)[1]
        root = client.exec("pwd").stdout.strip()
        hook = f"#!/bin/sh\\ntouch {root}/.git/hooked\\ncat {root}/.git/gate >/dev/null\\nexit 1\\n"
        armed = client.exec(f"printf '{hook}' > .git/gate-hook && chmod +x .git/gate-hook")
        assert armed.exit_code == 0, armed
        assert client.exec("mkfifo .git/gate").exit_code == 0
        arm = f"echo work > work.txt && git config core.fsmonitor {root}/.git/gate-hook"
        script.write_text(
            json.dumps(
                {
                    "responses": [
                        {"toolCalls": [{"name": "bash", "input": {"command": arm}}]},
                        {"text": "Done."},
                    ]
                }
            )
        )
        message = {"id": "m-1", "role": "user", "parts": [{"type": "text", "text": "arm"}]}
        started = server.api.post(
            "/api/chat", {"sessionId": sid, "chatId": chat, "message": message}
        )
        assert started.status == 202, started.body
        run_id = started.body["runId"]
        until(lambda: client.exec("test -e .git/hooked").exit_code == 0, 60, "the hook holds")
        runs = server.api.get(f"/api/sessions/{sid}/runs").body["runs"]
        assert next(r for r in runs if r["runId"] == run_id)["status"] == "completed"
        assert len(_finished(server, sid, run_id)) == 1  # the first follow-up, the audit entry
        assert _execution_status(server, run_id) == "RUNNING"  # its follow-ups step unfinished

        server.stop(how)  # in the run's follow-ups, after its recorded end
        disarmed = client.exec("git config --unset core.fsmonitor")
        assert disarmed.exit_code == 0, disarmed
        released = client.exec("exec 3<>.git/gate; echo go >&3")  # never blocks
        assert released.exit_code == 0, released
        server.start()
        assert "1 turn(s) the restart interrupted carry on" in server.log.read_text()

        # the follow-ups step, unfinished at the stop, ran to its end in the new process
        until(lambda: _execution_status(server, run_id) == "SUCCEEDED", 120, "it completes")
        finished = _finished(server, sid, run_id)
        assert len(finished) == 1, finished  # and the turn's entry is recorded once
        assert finished[0]["detail"]["status"] == "completed"
        events = stream(server, chat)
        assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
        assert events[-1]["chunk"] == {"type": "finish", "finishReason": "stop"}
        # auto-commit, a follow-up too: the turn's work committed and pushed exactly once
        until(lambda: _finished(server, sid, run_id, "sandbox.auto_commit"), 60, "auto-commit")
        assert len(_finished(server, sid, run_id, "sandbox.auto_commit")) == 1
        pushed = git(origin, "log", "--format=%s", f"main..{branch}").splitlines()
        assert len(pushed) == 1, pushed
        assert git(origin, "show", f"{branch}:work.txt") == "work"
    finally:
        if server.process is not None and server.process.poll() is None:
            server.stop(signal.SIGTERM)
        server.down()
