"""The assistant UIMessage a run builds, from typed parts (``parts.py``), and the model-visible
history read back from a chat's UI messages (stored JSON, any role).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import ClassVar, TypeAlias

from pydantic import ValidationError

from openagents.agent.models.port import (
    ContentBlock,
    DocumentBlock,
    ImageBlock,
    JsonValue,
    Message,
    ReasoningBlock,
    TextBlock,
    ToolCall,
    ToolResult,
)
from openagents.agent.parts import (
    TOOL_PREFIX,
    Part,
    ReasoningPart,
    TextPart,
    ToolPart,
    ToolState,
    parse_parts,
)
from openagents.agent.ui_model import Json, UIModel
from openagents.domain.attachments import AttachmentFile, sniff_image

UIMessageJson: TypeAlias = Mapping[str, JsonValue]
FileReader: TypeAlias = Callable[[str], AttachmentFile | None]
"""A user message's ``file`` part's URL → the attachment with its bytes (None: not one of the
run's user's, or gone)."""
FINAL_TOOL_STATES = frozenset({"output-available", "output-error", "output-denied"})
NOT_RUN = "The tool call did not complete (the turn was stopped)."


class Metadata(UIModel):
    """The assistant message's metadata: each model step's finish reason, the run's model and
    its usage so far."""

    OPTIONAL: ClassVar[frozenset[str]] = frozenset({"stepFinishReasons", "modelId", "usage"})
    step_finish_reasons: list[str] | None = None
    model_id: str | None = None
    usage: Json = None


@dataclass
class AssistantMessage:
    """The run's assistant message, built by the steps from typed parts."""

    id: str
    parts: list[Part] = field(default_factory=list)
    metadata: Metadata = field(default_factory=Metadata)

    @classmethod
    def load(cls, data: UIMessageJson | None, message_id: str) -> AssistantMessage:
        """A stored message, validated (its parts typed) once, as a step takes it up."""
        if data is None:
            return cls(message_id)
        parts = data.get("parts")
        metadata = data.get("metadata")
        return cls(
            message_id,
            parse_parts(parts) if isinstance(parts, Sequence) else [],
            _metadata(metadata),
        )

    def to_json(self) -> dict[str, JsonValue]:
        return {
            "id": self.id,
            "role": "assistant",
            "parts": [part.to_json() for part in self.parts],
            "metadata": self.metadata.to_json(),
        }

    def tool_part(self, call_id: str) -> ToolPart | None:
        """The newest part of that call (a continued message may reuse a model's call ids)."""
        for part in reversed(self.parts):
            if isinstance(part, ToolPart) and part.tool_call_id == call_id:
                return part
        return None

    def put(self, part: ToolState) -> None:
        """``part`` in place of the newest part of its call (its next state)."""
        for i in range(len(self.parts) - 1, -1, -1):
            old = self.parts[i]
            if isinstance(old, ToolPart) and old.tool_call_id == part.tool_call_id:
                self.parts[i] = part
                return
        raise KeyError(part.tool_call_id)

    def finish_streaming(self) -> None:
        for part in self.parts:
            if isinstance(part, TextPart | ReasoningPart) and part.state == "streaming":
                part.state = "done"


def _metadata(data: JsonValue) -> Metadata:
    try:
        return Metadata.model_validate(data) if isinstance(data, Mapping) else Metadata()
    except ValidationError:  # not ours: the counts start again
        return Metadata()


def is_tool_part(part: Mapping[str, JsonValue]) -> bool:
    kind = part.get("type")
    return isinstance(kind, str) and kind.startswith(TOOL_PREFIX)


def tool_name(part: Mapping[str, JsonValue]) -> str:
    return str(part.get("type", "")).removeprefix(TOOL_PREFIX)


def _text_of(message: UIMessageJson) -> str:
    parts = message.get("parts")
    if not isinstance(parts, Sequence):
        return ""
    return "\n".join(
        str(part.get("text", ""))
        for part in parts
        if isinstance(part, Mapping) and part.get("type") == "text"
    )


def _result_text(output: JsonValue) -> str:
    return output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)


def _signature(part: Mapping[str, JsonValue]) -> str | None:
    meta = part.get("providerMetadata")
    if isinstance(meta, Mapping):
        ours = meta.get("openagents")
        if isinstance(ours, Mapping) and isinstance(ours.get("signature"), str):
            return str(ours["signature"])
    return None


def _steps(parts: Sequence[Mapping[str, JsonValue]]) -> Iterator[list[Mapping[str, JsonValue]]]:
    step: list[Mapping[str, JsonValue]] = []
    for part in parts:
        if part.get("type") == "step-start":
            if step:
                yield step
            step = []
        else:
            step.append(part)
    if step:
        yield step


def _step(step: Sequence[Mapping[str, JsonValue]]) -> list[Message]:
    """One assistant step's parts: its blocks, then its tool results."""
    blocks: list[ContentBlock] = []
    results: list[ToolResult] = []
    for part in step:
        kind = part.get("type")
        if kind == "text" and part.get("text"):
            blocks.append(TextBlock(str(part["text"])))
        elif kind == "reasoning" and part.get("text"):
            blocks.append(ReasoningBlock(str(part["text"]), _signature(part)))
        elif is_tool_part(part):
            call_id = str(part.get("toolCallId", ""))
            arguments = part.get("input")
            blocks.append(
                ToolCall(
                    call_id,
                    tool_name(part),
                    dict(arguments) if isinstance(arguments, Mapping) else {},
                )
            )
            results.append(_result(part, call_id))
    produced: list[Message] = []
    if blocks:
        produced.append(Message("assistant", tuple(blocks)))
    if results:
        produced.append(Message.tool_results(results))
    return produced


def _result(part: Mapping[str, JsonValue], call_id: str) -> ToolResult:
    state = part.get("state")
    if state == "output-available":
        return ToolResult(call_id, _result_text(part.get("output")))
    if state == "output-error":
        return ToolResult(call_id, str(part.get("errorText", "error")), is_error=True)
    if state == "output-denied":
        approval = part.get("approval")
        reason = approval.get("reason") if isinstance(approval, Mapping) else None
        why = f": {reason}" if reason else ""
        return ToolResult(call_id, f"The user denied this tool call{why}", is_error=True)
    return ToolResult(call_id, NOT_RUN, is_error=True)


def _user(message: UIMessageJson, files: FileReader | None) -> list[Message]:
    """The user's text (its parts joined by newlines) and files, in the parts' order: an image
    as an ``ImageBlock``, a text file as a ``DocumentBlock``, one that cannot be read as a
    note saying so."""
    parts = message.get("parts")
    if not isinstance(parts, Sequence) or files is None:
        text = _text_of(message)
        return [Message.user(text)] if text else []
    blocks: list[ContentBlock] = []
    texts: list[str] = []

    def flush() -> None:
        if texts:
            joined = "\n".join(texts)
            if joined:
                blocks.append(TextBlock(joined))
            texts.clear()

    for part in parts:
        if not isinstance(part, Mapping):
            continue
        if part.get("type") == "text":
            texts.append(str(part.get("text", "")))
        elif part.get("type") == "file":
            flush()
            blocks.append(_file_block(part, files))
    flush()
    return [Message("user", tuple(blocks))] if blocks else []


def _file_block(part: Mapping[str, JsonValue], files: FileReader) -> ContentBlock:
    url = part.get("url")
    name = part.get("filename")
    label = str(name) if isinstance(name, str) and name else "attachment"
    found = files(url) if isinstance(url, str) else None
    if found is None:
        return TextBlock(f"[The attached file {label} is no longer available.]")
    media_type = found.attachment.media_type
    image = sniff_image(found.data)
    if image is not None:
        return ImageBlock(image, found.data)
    if media_type.startswith("image/"):  # the record says image, the bytes disagree
        return TextBlock(f"[The attached file {label} could not be read.]")
    return DocumentBlock(label, media_type, found.data.decode("utf-8", errors="replace"))


def history(
    messages: Sequence[UIMessageJson], files: FileReader | None = None
) -> tuple[Message, ...]:
    """The model-visible conversation of a chat's UI messages (oldest first): user text and
    files (read through ``files``; without it, files are left out), and per assistant step its
    blocks then its tool results; same-role neighbours merged."""
    return History()(messages, files)


_Key: TypeAlias = tuple[int, ...]


class History:
    """``history`` kept between the model steps of one run: a user message, or an assistant
    message's step, whose JSON objects are the very ones converted at the previous call is not
    converted again (the chat's other messages are the same objects from step to step, and an
    unchanged part's JSON form is the same object: ``UIModel.to_json``). A user message with a
    file part is converted at every call (its file is read then, never kept). Only what the
    last call used is kept, with the objects its keys are the ids of (so no id is reused)."""

    def __init__(self) -> None:
        self._kept: dict[_Key, tuple[Sequence[object], list[Message]]] = {}

    def __call__(
        self, messages: Sequence[UIMessageJson], files: FileReader | None = None
    ) -> tuple[Message, ...]:
        used: dict[_Key, tuple[Sequence[object], list[Message]]] = {}
        out: list[Message] = []
        for message in messages:
            for item in self._produced(message, files, used):
                if out and out[-1].role == item.role:
                    out[-1] = Message(item.role, out[-1].content + item.content)
                else:
                    out.append(item)
        self._kept = used
        return tuple(out)

    def _produced(
        self,
        message: UIMessageJson,
        files: FileReader | None,
        used: dict[_Key, tuple[Sequence[object], list[Message]]],
    ) -> Iterator[Message]:
        if message.get("role") == "user":
            if files is not None and _has_file(message):
                yield from _user(message, files)
                return
            yield from self._kept_or(
                used, (id(message),), (message,), partial(_user, message, files)
            )
            return
        parts = message.get("parts")
        if not isinstance(parts, Sequence):
            return
        typed = [part for part in parts if isinstance(part, Mapping)]
        for step in _steps(typed):
            key = tuple(id(part) for part in step)
            yield from self._kept_or(used, key, step, partial(_step, step))

    def _kept_or(
        self,
        used: dict[_Key, tuple[Sequence[object], list[Message]]],
        key: _Key,
        objects: Sequence[object],
        convert: Callable[[], list[Message]],
    ) -> list[Message]:
        kept = self._kept.get(key) or used.get(key)
        if kept is None:
            kept = (objects, convert())
        used[key] = kept
        return kept[1]


def _has_file(message: UIMessageJson) -> bool:
    parts = message.get("parts")
    return isinstance(parts, Sequence) and any(
        isinstance(part, Mapping) and part.get("type") == "file" for part in parts
    )
