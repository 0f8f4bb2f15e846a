"""The run's UI message stream: typed chunks out to the run's event log (``UIStream``), and a
model call's events turned into chunks and parts with the AI SDK's block ids
(``ModelStreamer``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

from openagents.agent.chunks import BLOCK_DELTAS, BLOCK_ENDS, BLOCK_STARTS, UIChunk
from openagents.agent.chunks import ToolInputAvailableChunk as ToolInput
from openagents.agent.models.port import (
    Finish,
    ModelError,
    ModelErrorKind,
    ModelEvent,
    ReasoningBlock,
    ReasoningDelta,
    TextDelta,
    ToolCallComplete,
)
from openagents.agent.parts import ReasoningPart, TextPart, ToolInputAvailable
from openagents.agent.stream import EventWriter
from openagents.agent.ui import AssistantMessage
from openagents.store.runs import Progress, TurnMessage

Block = Literal["text", "reasoning"]


class UIStream:
    """A step's chunks, each turned to JSON once as it leaves for the step's event writer."""

    def __init__(self, writer: EventWriter) -> None:
        self._writer = writer

    def add(self, chunk: UIChunk) -> None:
        self._writer.add(chunk.to_json())

    def send(self, chunk: UIChunk) -> None:
        """A chunk clients should see now (a running tool's output so far): written at once
        with what was buffered before it, not at the step's end nor after the next chunk."""
        self._writer.add(chunk.to_json())
        self._writer.flush()

    def flush(self, progress: Progress, message: TurnMessage) -> int:
        """The step's end: its chunks, the run's progress and its message in one write; the
        run's last seq."""
        return self._writer.flush(progress, message)


class ModelStreamer:
    """One model call streamed into the message's parts and the step's chunks."""

    def __init__(self, stream: UIStream, message: AssistantMessage, step: int) -> None:
        self._stream, self._message, self._step = stream, message, step
        self._open: tuple[Block, str, TextPart | ReasoningPart] | None = None
        self._blocks = 0
        self._reasoning: list[ReasoningPart] = []

    def _close(self) -> None:
        if self._open is not None:
            kind, block_id, part = self._open
            part.state = "done"
            self._stream.add(BLOCK_ENDS[kind](id=block_id))
            self._open = None

    def _delta(self, kind: Block, text: str) -> None:
        if self._open is None or self._open[0] != kind:
            self._close()
            block_id = f"{kind[0]}-{self._step}-{self._blocks}"
            self._blocks += 1
            part: TextPart | ReasoningPart
            if kind == "reasoning":
                part = ReasoningPart(text="", state="streaming")
                self._reasoning.append(part)
            else:
                part = TextPart(text="", state="streaming")
            self._message.parts.append(part)
            self._stream.add(BLOCK_STARTS[kind](id=block_id))
            self._open = (kind, block_id, part)
        _, block_id, part = self._open
        part.text += text
        self._stream.add(BLOCK_DELTAS[kind](id=block_id, delta=text))

    def play(self, events: Iterator[ModelEvent]) -> Finish:
        for event in events:
            if isinstance(event, ReasoningDelta):
                self._delta("reasoning", event.text)
            elif isinstance(event, TextDelta):
                self._delta("text", event.text)
            elif isinstance(event, ToolCallComplete):
                self._close()
                self._message.parts.append(
                    ToolInputAvailable(
                        type=f"tool-{event.name}", tool_call_id=event.id, input=dict(event.input)
                    )
                )
                self._stream.add(
                    ToolInput(tool_call_id=event.id, tool_name=event.name, input=dict(event.input))
                )
            elif isinstance(event, Finish):
                self._close()
                self._sign(event)
                return event
        raise ModelError(ModelErrorKind.INVALID_RESPONSE, "The model's answer ended early.")

    def _sign(self, finish: Finish) -> None:
        """Keep reasoning signatures (Bedrock) on the parts, to send them back next step."""
        blocks = [b for b in finish.message.content if isinstance(b, ReasoningBlock)]
        for part, block in zip(self._reasoning, blocks, strict=False):
            if block.signature:
                part.provider_metadata = {"openagents": {"signature": block.signature}}
