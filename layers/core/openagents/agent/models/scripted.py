"""The scripted model (``scripted/default``): deterministic answers from a JSON file, for tests
and demos. Local mode only. The contract:

- the file (``OPENAGENTS_SCRIPTED_MODEL_FILE``) is read again at every model call;
- it holds ``{"responses": [R0, R1, ...]}``; the k-th model call of a run (k from 0, the
  request's ``step``) answers ``Rk``;
- ``R = {"reasoning"?: str, "text"?: str, "toolCalls"?: [{"name": str, "input": {...}}],
  "chunkDelayMs"?: int}``;
- reasoning, then text, stream word by word, ``chunkDelayMs`` apart;
- a response with ``toolCalls`` ends the step with those calls (``tool_use``); one without ends
  the turn (``end_turn``);
- past the last response: ``ModelError`` "scripted model has no response for step k";
- the call that names a new chat (``purpose`` ``title``) answers the file's optional
  ``"title": str`` (streamed as text), so the turn's own steps keep their indices; without it,
  ``ModelError`` (the automatic title stays);
- the git routes' generations answer the file's optional keys the same way, never a response
  of ``responses``: ``commit_message`` the ``"commitMessage": str`` (subject line, then the
  body), ``pull_request`` the ``"pullRequest": {"title": str, "body": str}`` as the JSON object
  the prompt asks for; without the key, ``ModelError`` (the route answers 502);
- with the optional ``"requestLog": str`` (a path; relative to the file's folder), every call
  appends one JSON line ``{"step", "purpose", "messages"}`` to it before answering: the
  messages as ``Message.to_json`` has them, an image as ``{"type": "image", "mediaType",
  "size", "sha256"}`` (not its bytes) — how a test sees what reached the model.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from openagents.agent.models.cancel import never
from openagents.agent.models.codec import message_json
from openagents.agent.models.port import (
    CancelCheck,
    Finish,
    ImageBlock,
    JsonObject,
    JsonValue,
    ModelError,
    ModelErrorKind,
    ModelEvent,
    ModelRequest,
    ReasoningDelta,
    StopReason,
    TextDelta,
    ToolCall,
    ToolCallComplete,
    Usage,
)
from openagents.agent.models.streaming import MessageBuilder, sleep_unless_cancelled

_KEYS = frozenset({"reasoning", "text", "toolCalls", "chunkDelayMs"})
_WORDS = re.compile(r"\s*\S+\s*|\s+")


@dataclass(frozen=True)
class ScriptedResponse:
    reasoning: str = ""
    text: str = ""
    tool_calls: tuple[tuple[str, JsonObject], ...] = ()
    chunk_delay_ms: int = 0


def words(text: str) -> list[str]:
    """``text`` cut after each word's trailing space: the pieces join back to ``text``."""
    return _WORDS.findall(text)


class ScriptedModel:
    def __init__(self, path: Path, *, model_id: str = "scripted/default") -> None:
        self.model_id = model_id
        self._path = path

    def stream(
        self, request: ModelRequest, *, cancelled: CancelCheck = never
    ) -> Iterator[ModelEvent]:
        self._record(request)
        if request.purpose == "title":
            return self._play(request, self.title(), cancelled)
        if request.purpose == "commit_message":
            return self._play(request, self.commit_message(), cancelled)
        if request.purpose == "pull_request":
            return self._play(request, self.pull_request(), cancelled)
        response = self.response(request.step)  # read before anything streams
        return self._play(request, response, cancelled)

    def _record(self, request: ModelRequest) -> None:
        """One line of the request in the file's ``requestLog``, when it names one."""
        log = _read(self._path).get("requestLog")
        if not isinstance(log, str) or not log:
            return
        messages: list[JsonValue] = []
        for message in request.messages:
            entry = message_json(message)
            shown = cast("list[JsonValue]", entry["content"])
            entry["content"] = [
                _image_summary(block) if isinstance(block, ImageBlock) else json_block
                for block, json_block in zip(message.content, shown, strict=True)
            ]
            messages.append(entry)
        line = {"step": request.step, "purpose": request.purpose, "messages": messages}
        try:
            with (self._path.parent / log).open("a", encoding="utf-8") as handle:
                handle.write(json.dumps(line) + "\n")
        except OSError as error:
            raise ModelError(
                ModelErrorKind.SCRIPT, f"scripted model cannot write its requestLog: {error}"
            ) from None

    def title(self) -> ScriptedResponse:
        """The script's answer to the title call (its ``"title"``), read from the file now."""
        data = _read(self._path)
        title = data.get("title")
        if not isinstance(title, str):
            raise ModelError(ModelErrorKind.SCRIPT, "scripted model has no title response")
        return ScriptedResponse(text=title)

    def commit_message(self) -> ScriptedResponse:
        """The script's commit message (its ``"commitMessage"``), read from the file now."""
        message = _read(self._path).get("commitMessage")
        if not isinstance(message, str):
            raise ModelError(ModelErrorKind.SCRIPT, "scripted model has no commitMessage response")
        return ScriptedResponse(text=message)

    def pull_request(self) -> ScriptedResponse:
        """The script's pull request (its ``"pullRequest": {"title", "body"}``) as JSON text."""
        pull = _read(self._path).get("pullRequest")
        if not isinstance(pull, Mapping) or not all(
            isinstance(pull.get(key), str) for key in ("title", "body")
        ):
            raise ModelError(
                ModelErrorKind.SCRIPT,
                'scripted model has no pullRequest response ({"title": str, "body": str})',
            )
        text = json.dumps({"title": pull["title"], "body": pull["body"]})
        return ScriptedResponse(text=text)

    def response(self, step: int) -> ScriptedResponse:
        """The script's answer to model call ``step`` of a run, read from the file now."""
        responses = _load(self._path)
        if step < 0 or step >= len(responses):
            raise ModelError(
                ModelErrorKind.SCRIPT, f"scripted model has no response for step {step}"
            )
        return _parse(responses[step], step)

    def _play(
        self, request: ModelRequest, response: ScriptedResponse, cancelled: CancelCheck
    ) -> Iterator[ModelEvent]:
        built = MessageBuilder()
        delay = response.chunk_delay_ms / 1000
        output = 0
        first = True

        def stopped() -> Finish | None:
            nonlocal first
            waited = not first and sleep_unless_cancelled(delay, cancelled)
            first = False
            if waited or cancelled():
                return Finish(StopReason.CANCELLED, self._usage(request, output), built.message())
            return None

        for piece in words(response.reasoning):
            if finish := stopped():
                yield finish
                return
            built.reasoning(piece)
            output += 1
            yield ReasoningDelta(piece)
        built.end_block()
        for piece in words(response.text):
            if finish := stopped():
                yield finish
                return
            built.text(piece)
            output += 1
            yield TextDelta(piece)
        for index, (name, arguments) in enumerate(response.tool_calls):
            if finish := stopped():
                yield finish
                return
            call = ToolCall(f"scripted-{request.step}-{index}", name, arguments)
            built.tool_call(call)
            output += 1
            yield ToolCallComplete(call.id, call.name, call.input)
        stop = StopReason.TOOL_USE if response.tool_calls else StopReason.END_TURN
        yield Finish(stop, self._usage(request, output), built.message())

    @staticmethod
    def _usage(request: ModelRequest, output: int) -> Usage:
        """Deterministic counts: about four characters per input token, a chunk per output."""
        size = len(request.system) + sum(len(repr(message)) for message in request.messages)
        return Usage(input_tokens=size // 4, output_tokens=output)


def _image_summary(block: ImageBlock) -> dict[str, JsonValue]:
    digest = hashlib.sha256(block.data).hexdigest()
    size = len(block.data)
    return {"type": "image", "mediaType": block.media_type, "size": size, "sha256": digest}


def _read(path: Path) -> dict[str, object]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ModelError(ModelErrorKind.SCRIPT, f"scripted model file {path} not found") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ModelError(
            ModelErrorKind.SCRIPT, f"scripted model file {path} is not readable JSON: {error}"
        ) from None
    return data if isinstance(data, dict) else {}


def _load(path: Path) -> list[object]:
    responses = _read(path).get("responses")
    if not isinstance(responses, list):
        raise ModelError(
            ModelErrorKind.SCRIPT, f'scripted model file {path} must be {{"responses": [...]}}'
        )
    return responses


def _parse(raw: object, step: int) -> ScriptedResponse:
    def bad(what: str) -> ModelError:
        return ModelError(ModelErrorKind.SCRIPT, f"scripted response {step}: {what}")

    if not isinstance(raw, Mapping):
        raise bad("must be an object")
    unknown = sorted(set(raw) - _KEYS)
    if unknown:
        raise bad(f"unknown keys {unknown} (allowed: {sorted(_KEYS)})")
    reasoning, text = raw.get("reasoning", ""), raw.get("text", "")
    if not isinstance(reasoning, str) or not isinstance(text, str):
        raise bad('"reasoning" and "text" must be strings')
    delay = raw.get("chunkDelayMs", 0)
    if not isinstance(delay, int) or isinstance(delay, bool) or delay < 0:
        raise bad('"chunkDelayMs" must be a non-negative integer')
    calls = raw.get("toolCalls", [])
    if not isinstance(calls, list):
        raise bad('"toolCalls" must be a list')
    parsed: list[tuple[str, JsonObject]] = []
    for call in calls:
        if not isinstance(call, Mapping) or set(call) - {"name", "input"}:
            raise bad('each tool call is {"name": str, "input": {...}}')
        name, arguments = call.get("name"), call.get("input", {})
        if not isinstance(name, str) or not name or not isinstance(arguments, Mapping):
            raise bad('each tool call is {"name": str, "input": {...}}')
        parsed.append((name, arguments))
    return ScriptedResponse(reasoning, text, tuple(parsed), delay)
