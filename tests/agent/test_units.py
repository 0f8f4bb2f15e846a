"""The loop's pure pieces: UI messages → model history, event coalescing, elision, paths and
approval rules; the host's heartbeat."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pytest
from openagents.agent.context import ELIDED, elide
from openagents.agent.models.port import Message, ReasoningBlock, TextBlock, ToolCall, ToolResult
from openagents.agent.stream import EventWriter
from openagents.agent.tools.base import ToolFailure, cap, workspace_path
from openagents.agent.tools.files import ReadTool
from openagents.agent.tools.shell import needs_approval
from openagents.agent.ui import NOT_RUN, UIMessageJson, history
from openagents.domain.identity import Identity
from openagents.services.agent_turns import AgentHost
from openagents.services.lifecycle import Activity
from openagents.store.runs import Chunk, Run

from tests.sandboxd_fake import SandboxdFake
from tests.support import NoMetrics


def test_history_splits_steps_and_pairs_tool_results() -> None:
    messages: list[UIMessageJson] = [
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]},
        {
            "id": "a1",
            "role": "assistant",
            "parts": [
                {"type": "step-start"},
                {
                    "type": "reasoning",
                    "text": "think",
                    "providerMetadata": {"openagents": {"signature": "sig"}},
                },
                {"type": "text", "text": "ok"},
                {
                    "type": "tool-bash",
                    "toolCallId": "c1",
                    "state": "output-available",
                    "input": {"command": "ls"},
                    "output": {"exitCode": 0},
                },
                {
                    "type": "tool-read",
                    "toolCallId": "c2",
                    "state": "output-error",
                    "input": {},
                    "errorText": "nope",
                },
                {
                    "type": "tool-read",
                    "toolCallId": "c3",
                    "state": "output-denied",
                    "input": {},
                    "approval": {"reason": "no"},
                },
                {"type": "tool-bash", "toolCallId": "c4", "state": "input-available", "input": {}},
                {"type": "step-start"},
                {"type": "text", "text": "done"},
            ],
        },
        {"id": "u2", "role": "user", "parts": [{"type": "text", "text": "more"}]},
    ]
    assert history(messages) == (
        Message.user("hi"),
        Message(
            "assistant",
            (
                ReasoningBlock("think", "sig"),
                TextBlock("ok"),
                ToolCall("c1", "bash", {"command": "ls"}),
                ToolCall("c2", "read", {}),
                ToolCall("c3", "read", {}),
                ToolCall("c4", "bash", {}),
            ),
        ),
        Message(
            "user",
            (
                ToolResult("c1", '{"exitCode": 0}'),
                ToolResult("c2", "nope", is_error=True),
                ToolResult("c3", "The user denied this tool call: no", is_error=True),
                ToolResult("c4", NOT_RUN, is_error=True),
            ),
        ),
        Message("assistant", (TextBlock("done"),)),
        Message.user("more"),
    )


class Recorder:
    def __init__(self) -> None:
        self.batches: list[list[Chunk]] = []

    def append(
        self, run_id: str, chunks: Sequence[Chunk], progress: object = None, message: object = None
    ) -> int:
        self.batches.append(list(chunks))
        return 0


def test_the_writer_merges_deltas_and_flushes_on_time() -> None:
    now = [0.0]
    store = Recorder()
    writer = EventWriter(store, "r", clock=lambda: now[0])  # type: ignore[arg-type]
    writer.add({"type": "text-start", "id": "t"})
    writer.add({"type": "text-delta", "id": "t", "delta": "a"})
    writer.add({"type": "text-delta", "id": "t", "delta": "b"})
    assert store.batches == []
    now[0] = 0.25
    writer.add({"type": "text-delta", "id": "t", "delta": "c"})
    assert store.batches == [
        [{"type": "text-start", "id": "t"}, {"type": "text-delta", "id": "t", "delta": "abc"}]
    ]
    writer.add({"type": "text-end", "id": "t"})
    writer.flush()
    writer.flush()
    assert store.batches[1:] == [[{"type": "text-end", "id": "t"}]]


def test_elision_keeps_structure_and_the_recent_outputs() -> None:
    results = [Message.tool_results([ToolResult(f"c{i}", "x" * 100)]) for i in range(6)]
    elided = elide(tuple(results))
    contents = [m.content[0].content for m in elided]  # type: ignore[union-attr]
    assert contents == [ELIDED, ELIDED, "x" * 100, "x" * 100, "x" * 100, "x" * 100]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("a/b.py", "a/b.py"),
        ("./a//b.py", "a/b.py"),
        ("/workspace/a.py", "a.py"),
        (".", "."),
        ("a/../b", "b"),
    ],
)
def test_workspace_paths(raw: str, expected: str) -> None:
    assert workspace_path(raw) == expected


@pytest.mark.parametrize("raw", ["/etc/passwd", "../x", "a/../../x", "a\x00b", 3])
def test_paths_outside_the_workspace_are_refused(raw: object) -> None:
    with pytest.raises(ToolFailure):
        workspace_path(raw)


def test_approval_rules_and_the_cap() -> None:
    assert needs_approval("rm -rf build")
    assert needs_approval("cd x && rm -fr y")
    assert needs_approval("cat .env")
    assert needs_approval("cp a config/.env.local")
    assert needs_approval("rm -r file.txt") is None
    assert needs_approval("echo environment") is None
    assert ReadTool().approval({"filePath": "app/.env.production"})
    assert ReadTool().approval({"filePath": "env.py"}) is None
    assert cap("x" * 10, 5) == "xxxxx\n… [truncated: 5 more characters not shown]"


class _Lifecycle:
    """The lifecycle as the heartbeat sees it: each ``activity`` answers the next of ``answers``."""

    def __init__(self, *answers: Activity) -> None:
        self.answers = list(answers)
        self.beats = 0

    def activity(self, identity: Identity, session_id: str, turn: str | None) -> Activity:
        assert turn == "start"
        self.beats += 1
        return self.answers.pop(0)

    def resume(self, identity: Identity, session_id: str) -> Any:
        raise AssertionError("not resumed here")

    def finished(self, identity: Identity, session_id: str, run: Any = None) -> Activity:
        raise AssertionError("no turn ends here")


def test_a_heartbeat_that_did_not_take_is_sent_again_at_the_next_step() -> None:
    """A turn that resumes its session beats first while it is not active: that beat holds
    nothing, so the next step beats again; one that took holds for a minute."""
    lifecycle = _Lifecycle(
        Activity(success=False, reason="not-active"), Activity(success=True), Activity(success=True)
    )
    store: Any = None  # the heartbeat reads nothing
    host = AgentHost(
        store,
        lambda h: SandboxdFake(),
        lifecycle,
        lambda: datetime.now(UTC),
        ids=str,
        metrics=NoMetrics(),
        after_turn=lifecycle,
        restore=lifecycle,
    )
    run = Run(
        id="run-1",
        session_id="s1",
        chat_id="c1",
        user_id="alice",
        message_id="m1",
        assistant_message_id="a1",
        model_id="scripted/default",
        started_at=datetime.now(UTC),
    )
    host.heartbeat(run)  # restoring: not active
    host.heartbeat(run)  # active now: held
    host.heartbeat(run)  # within the minute: not sent
    assert lifecycle.beats == 2
