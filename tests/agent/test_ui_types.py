"""The typed UI message: every chunk of the recorded runs the web app checks against ``ai``'s
``uiMessageChunkSchema`` parses as a chunk a turn writes and comes back as it was recorded;
stored parts load typed and are written back unchanged, whatever their kind; a tool part's
next state keeps its call."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from openagents.agent.chunks import TextDeltaChunk, ToolOutputAvailableChunk, parse_chunk
from openagents.agent.parts import (
    Approval,
    TextPart,
    ToolApprovalRequested,
    ToolInputAvailable,
    ToolOutputAvailable,
    ToolOutputError,
    parse_parts,
)
from openagents.agent.ui import AssistantMessage
from pydantic import ValidationError

FIXTURES = Path(__file__).parents[2] / "web" / "src" / "agent" / "fixtures"
RECORDINGS = sorted(FIXTURES.glob("*.json"))


@pytest.mark.parametrize("path", RECORDINGS, ids=lambda p: p.stem)
def test_every_recorded_chunk_is_a_typed_chunk_and_round_trips(path: Path) -> None:
    events = json.loads(path.read_text())["events"]
    assert len(events) > 5
    for event in events:
        chunk = event["chunk"]
        assert parse_chunk(chunk).to_json() == chunk, event["seq"]


def test_the_recordings_are_there() -> None:
    assert {p.stem for p in RECORDINGS} >= {"scripted-turn", "approval-question"}


@pytest.mark.parametrize(
    "chunk",
    [
        {"type": "text-delta", "id": "t"},  # no delta
        {"type": "tool-output-available", "output": 1},  # no call id
        {"type": "no-such-chunk"},
    ],
)
def test_a_malformed_chunk_is_refused(chunk: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        parse_chunk(chunk)


def test_optional_keys_are_left_out_and_a_null_output_is_kept() -> None:
    assert TextDeltaChunk(id="t-0-0", delta="hi").to_json() == {
        "type": "text-delta",
        "id": "t-0-0",
        "delta": "hi",
    }
    assert ToolOutputAvailableChunk(tool_call_id="c", output=None).to_json() == {
        "type": "tool-output-available",
        "toolCallId": "c",
        "output": None,
    }


STORED: list[dict[str, Any]] = [
    {"type": "step-start"},
    {"type": "reasoning", "text": "t", "state": "done", "providerMetadata": {"x": {"y": 1}}},
    {"type": "text", "text": "hi", "state": "done"},
    {"type": "tool-bash", "toolCallId": "c1", "state": "input-available", "input": {"a": 1}},
    {
        "type": "tool-bash",
        "toolCallId": "c2",
        "state": "output-denied",
        "input": {},
        "approval": {"id": "approval-c2", "reason": "no", "approved": False},
    },
    {
        "type": "tool-read",
        "toolCallId": "c3",
        "state": "output-error",
        "input": {},
        "errorText": "x",
    },
    {
        "type": "tool-read",
        "toolCallId": "c4",
        "state": "output-available",
        "input": {},
        "output": None,
    },
    {"type": "tool-read", "toolCallId": "c5", "state": "input-streaming"},  # not a state we write
    {"type": "text", "text": 3},  # not a valid text part: kept as it came
    {"type": "data-note", "data": {"n": 1}, "extra": True},
]


def test_stored_parts_load_typed_and_are_written_back_unchanged() -> None:
    stored: dict[str, Any] = {
        "id": "a1",
        "role": "assistant",
        "parts": STORED,
        "metadata": {"other": 1},
    }
    message = AssistantMessage.load(stored, "a1")
    kinds = [type(part).__name__ for part in message.parts]
    assert kinds[:4] == ["StepStartPart", "ReasoningPart", "TextPart", "ToolInputAvailable"]
    assert kinds[-3:] == ["OtherPart", "OtherPart", "OtherPart"]
    assert message.to_json() == stored


def test_what_is_not_a_part_is_left_out() -> None:
    assert parse_parts([{"no": "type"}, "text", {"type": "step-start"}]) == parse_parts(
        [{"type": "step-start"}]
    )


def test_a_tool_part_s_next_states_keep_its_call_and_approval() -> None:
    part = ToolInputAvailable(type="tool-bash", tool_call_id="c1", input={"command": "ls"})
    asked = part.asked(Approval(id="approval-c1", reason="ask"))
    assert isinstance(asked, ToolApprovalRequested)
    approval = asked.approval
    assert approval is not None
    done = asked.responded(approval.model_copy(update={"approved": True})).available("ok")
    assert isinstance(done, ToolOutputAvailable)
    assert done.to_json() == {
        "type": "tool-bash",
        "toolCallId": "c1",
        "input": {"command": "ls"},
        "approval": {"id": "approval-c1", "approved": True, "reason": "ask"},
        "state": "output-available",
        "output": "ok",
    }
    failed = part.errored("boom")
    assert isinstance(failed, ToolOutputError)
    assert (failed.tool_name, failed.error_text, failed.approval) == ("bash", "boom", None)


def test_a_message_replaces_a_call_s_newest_part_only() -> None:
    first = ToolInputAvailable(type="tool-bash", tool_call_id="c1", input={})
    again = ToolInputAvailable(type="tool-bash", tool_call_id="c1", input={"n": 2})
    message = AssistantMessage("a1", [first, TextPart(text="x"), again])
    message.put(again.errored("no"))
    assert [type(p).__name__ for p in message.parts] == [
        "ToolInputAvailable",
        "TextPart",
        "ToolOutputError",
    ]
    with pytest.raises(KeyError):
        message.put(ToolInputAvailable(type="tool-x", tool_call_id="c9").errored("no"))
    assert message.tool_part("c1") is message.parts[2]
