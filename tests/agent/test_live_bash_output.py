"""A running bash command's output reaches the chat while it runs (issue 25): a real sandbox,
the scripted model, a command gated on fifos — each line is on the stream (a preliminary
``tool-output-available``) before the command is let go on, and the stored message keeps the
final output only."""

from __future__ import annotations

import itertools
import time
from typing import Any

from tests.agent.conftest import AgentApi

GATED = (
    "mkfifo /tmp/gate1 /tmp/gate2 /tmp/gate3; "
    "for i in 1 2 3; do echo line$i; read x < /tmp/gate$i; done; echo end"
)


class Reader:
    """The chat's stream, read on with ``after=`` (long polls, no sleeps)."""

    def __init__(self, api: AgentApi, chat_id: str) -> None:
        self.api, self.chat_id = api, chat_id
        self.after = 0
        self.events: list[dict[str, Any]] = []

    def until(self, seen: Any, timeout: float = 60) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for event in self.events:
                if seen(event["chunk"]):
                    return event
            page = self.api.get(
                f"/api/chat/{self.chat_id}/stream", query={"after": str(self.after), "wait": "5"}
            )
            if page.status == 204:
                break
            assert page.status == 200, page.body
            self.events += page.body["events"]
            self.after = page.body["next"]
        raise AssertionError(f"not on the stream: {[e['chunk'] for e in self.events]}")


def running_with(line: str) -> Any:
    def seen(chunk: dict[str, Any]) -> bool:
        output = chunk.get("output")
        return (
            chunk["type"] == "tool-output-available"
            and chunk.get("preliminary") is True
            and isinstance(output, dict)
            and line in str(output.get("stdout"))
        )

    return seen


def is_final(chunk: dict[str, Any]) -> bool:
    return chunk["type"] in ("tool-output-available", "tool-output-error") and not chunk.get(
        "preliminary"
    )


def test_each_line_is_on_the_stream_before_the_command_goes_on(
    agent_api: AgentApi, live_session: tuple[str, str]
) -> None:
    session_id, chat_id = live_session
    agent_api.script.set(
        [
            {"toolCalls": [{"name": "bash", "input": {"command": GATED}}]},
            {"text": "Done."},
        ]
    )
    assert agent_api.turn(session_id, chat_id, "run it").status == 202
    reader = Reader(agent_api, chat_id)
    for i in (1, 2, 3):
        seen = reader.until(running_with(f"line{i}\n"))
        assert seen["chunk"]["output"]["status"] == "running"
        assert not any(is_final(e["chunk"]) for e in reader.events)  # still running
        opened = agent_api.post(
            f"/api/sessions/{session_id}/sandbox/exec", {"command": f"echo go > /tmp/gate{i}"}
        )
        assert opened.status == 200, opened.body
    final = reader.until(is_final)["chunk"]
    assert final["type"] == "tool-output-available", final
    assert final["output"]["exitCode"] == 0
    assert final["output"]["stdout"] == "line1\nline2\nline3\nend\n"
    reader.until(lambda chunk: chunk["type"] == "finish")

    seqs = [e["seq"] for e in reader.events]
    assert seqs == sorted(set(seqs)), "the stream's seq goes on with no repeat"
    kinds = [e["chunk"]["type"] for e in reader.events]
    shown = [e["chunk"]["output"] for e in reader.events if e["chunk"].get("preliminary")]
    assert len(shown) >= 3
    assert all(len(a["stdout"]) <= len(b["stdout"]) for a, b in itertools.pairwise(shown))
    assert kinds.index("tool-output-available") < kinds.index("finish")

    messages = agent_api.get(f"/api/sessions/{session_id}/chats/{chat_id}/messages").body
    parts = messages["messages"][-1]["parts"]
    bash = [p for p in parts if p["type"] == "tool-bash"]
    assert len(bash) == 1
    assert bash[0]["state"] == "output-available"
    assert bash[0]["output"]["stdout"] == "line1\nline2\nline3\nend\n"
    assert "status" not in bash[0]["output"]
    assert not bash[0].get("preliminary")
