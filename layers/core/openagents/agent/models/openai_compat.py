"""Any OpenAI-compatible chat completions endpoint (``openai/<model>``): OpenAI itself, and the
servers people run locally — Ollama, vLLM, LM Studio, a LiteLLM proxy.

Streaming chat completions with tools (tool call deltas accumulated by index), reasoning deltas
where the server sends them (``reasoning_content`` from vLLM / LiteLLM, ``reasoning`` from
Ollama), usage from ``stream_options.include_usage`` (cached prompt tokens reported apart),
bounded cancellable retries before the first chunk, and every error a ``ModelError``. The
``openai.OpenAI`` client is injected.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, Literal, cast

from openagents.agent.models.cancel import never
from openagents.agent.models.port import (
    CancelCheck,
    DocumentBlock,
    Finish,
    ImageBlock,
    Message,
    ModelError,
    ModelErrorKind,
    ModelEvent,
    ModelRequest,
    ReasoningDelta,
    StopReason,
    TextBlock,
    TextDelta,
    ToolCall,
    ToolCallComplete,
    ToolResult,
    ToolSpec,
    Usage,
)
from openagents.agent.models.streaming import (
    Closer,
    MessageBuilder,
    Pump,
    backoff_seconds,
    sleep_unless_cancelled,
)

if TYPE_CHECKING:
    from openai import OpenAI
    from openai.types.chat import ChatCompletionChunk

MaxTokensParam = Literal["max_tokens", "max_completion_tokens"]
FINISH_REASONS = {
    "stop": StopReason.END_TURN,
    "tool_calls": StopReason.TOOL_USE,
    "function_call": StopReason.TOOL_USE,
    "length": StopReason.MAX_TOKENS,
    "content_filter": StopReason.CONTENT_FILTER,
}
_CONTEXT = re.compile(
    r"context[_ ]length|context window|maximum context|contextwindowexceeded|too many tokens"
    r"|prompt is too long|reduce the length",
    re.IGNORECASE,
)
_FILTER = re.compile(r"content[_ ](filter|policy|management)|responsibleaipolicy", re.IGNORECASE)
_REASONING_FIELDS = ("reasoning_content", "reasoning")


class OpenAICompatModel:
    def __init__(
        self,
        client: OpenAI,
        model: str,
        *,
        max_attempts: int = 4,
        backoff_base_seconds: float = 1.0,
        max_tokens_param: MaxTokensParam | str = "max_tokens",
        poll_seconds: float = 0.05,
    ) -> None:
        self.model_id = f"openai/{model}"
        self._client = client
        self._model = model
        self._max_attempts = max_attempts
        self._backoff = backoff_base_seconds
        self._max_tokens_param = max_tokens_param
        self._poll = poll_seconds

    def stream(
        self, request: ModelRequest, *, cancelled: CancelCheck = never
    ) -> Iterator[ModelEvent]:
        return self._stream(self.params(request), cancelled)

    def params(self, request: ModelRequest) -> dict[str, Any]:
        """The ``chat.completions.create`` parameters of ``request`` (the JSON body sent)."""
        params: dict[str, Any] = {
            "model": self._model,
            "messages": chat_messages(request),
            "stream": True,
            "stream_options": {"include_usage": True},
            self._max_tokens_param: request.max_tokens,
        }
        if request.tools:
            params["tools"] = [_tool(tool) for tool in request.tools]
        return params

    def _stream(self, params: dict[str, Any], cancelled: CancelCheck) -> Iterator[ModelEvent]:
        attempt = 1
        while True:
            reader = _Reader()
            pump: Pump[ChatCompletionChunk] = Pump(
                lambda closer: self._chunks(params, closer),
                cancelled=cancelled,
                poll_seconds=self._poll,
            )
            try:
                for chunk in pump:
                    yield from reader.feed(chunk)
            except Exception as error:
                failure = map_error(error, self._model)
                if not (failure.retryable and not reader.started and attempt < self._max_attempts):
                    raise failure from error
                if sleep_unless_cancelled(backoff_seconds(attempt, base=self._backoff), cancelled):
                    yield reader.finish(cancelled=True)
                    return
                attempt += 1
                continue
            if pump.cancelled:
                yield reader.finish(cancelled=True)
                return
            yield from reader.tool_calls()
            yield reader.finish(cancelled=False)
            return

    def _chunks(self, params: dict[str, Any], closer: Closer) -> Iterator[ChatCompletionChunk]:
        stream = self._client.chat.completions.create(**params)
        closer.set(stream.close)
        yield from cast("Iterator[ChatCompletionChunk]", stream)


def chat_messages(request: ModelRequest) -> list[dict[str, Any]]:
    """The port's messages as chat completion messages: tool results become ``tool`` messages
    right after the assistant message that asked for them; reasoning is not sent back."""
    out: list[dict[str, Any]] = []
    if request.system:
        out.append({"role": "system", "content": request.system})
    for message in request.messages:
        out.extend(_message(message))
    return out


def _message(message: Message) -> list[dict[str, Any]]:
    text = "".join(block.text for block in message.content if isinstance(block, TextBlock))
    if message.role == "assistant":
        calls = [_call(block) for block in message.content if isinstance(block, ToolCall)]
        if not text and not calls:
            return []
        entry: dict[str, Any] = {"role": "assistant", "content": text or None}
        if calls:
            entry["tool_calls"] = calls
        return [entry]
    out: list[dict[str, Any]] = [
        {
            "role": "tool",
            "tool_call_id": block.tool_call_id,
            "content": f"Error: {block.content}" if block.is_error else block.content,
        }
        for block in message.content
        if isinstance(block, ToolResult)
    ]
    content = _user_content(message)
    if content:
        out.append({"role": "user", "content": content})
    return out


def _user_content(message: Message) -> str | list[dict[str, Any]]:
    """The user's text, text files inline (``DocumentBlock.inline``, on lines of their own),
    or content parts once an image is among them: ``text`` and ``image_url`` parts (the image
    as a data URL), in order."""
    parts: list[dict[str, Any]] = []
    texts: list[str] = []
    document = False  # the last text piece was a file: the next starts on a new line
    for block in message.content:
        if isinstance(block, ImageBlock):
            parts.append({"type": "image_url", "image_url": {"url": block.data_url}})
            document = False
        elif isinstance(block, DocumentBlock):
            parts.append({"type": "text", "text": block.inline})
            texts.append(("\n" if texts else "") + block.inline)
            document = True
        elif isinstance(block, TextBlock) and block.text:
            parts.append({"type": "text", "text": block.text})
            texts.append(("\n" if document else "") + block.text)
            document = False
    if any(part["type"] == "image_url" for part in parts):
        return parts
    return "".join(texts)


def _call(call: ToolCall) -> dict[str, Any]:
    arguments = json.dumps(call.input, separators=(",", ":"))
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": arguments},
    }


def _tool(tool: ToolSpec) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.input_schema,
        },
    }


class _Reader:
    """Turns chat completion chunks into port events, building the step's message."""

    def __init__(self) -> None:
        self.started = False
        self._built = MessageBuilder()
        self._calls: dict[int, list[str]] = {}  # index -> [id, name, arguments...]
        self._stop: StopReason | None = None
        self._usage = Usage()

    def feed(self, chunk: ChatCompletionChunk) -> Iterator[ModelEvent]:
        if chunk.usage is not None:
            usage = chunk.usage
            details = usage.prompt_tokens_details
            cached = (details.cached_tokens or 0) if details is not None else 0
            self._usage = Usage(
                input_tokens=max(0, (usage.prompt_tokens or 0) - cached),
                output_tokens=usage.completion_tokens or 0,
                cache_read_tokens=cached,
            )
        for choice in chunk.choices[:1]:
            delta = choice.delta
            extra: Mapping[str, Any] = delta.model_extra or {}
            reasoning = next((extra[key] for key in _REASONING_FIELDS if extra.get(key)), None)
            if isinstance(reasoning, str):
                self.started = True
                self._built.reasoning(reasoning)
                yield ReasoningDelta(reasoning)
            if delta.content:
                self.started = True
                self._built.text(delta.content)
                yield TextDelta(delta.content)
            for call in delta.tool_calls or ():
                self.started = True
                entry = self._calls.setdefault(call.index, ["", ""])
                entry[0] = entry[0] or (call.id or "")
                if call.function is not None:
                    entry[1] = entry[1] or (call.function.name or "")
                    entry.append(call.function.arguments or "")
            if choice.finish_reason is not None:
                self._stop = FINISH_REASONS.get(choice.finish_reason, StopReason.END_TURN)

    def tool_calls(self) -> Iterator[ModelEvent]:
        """The accumulated tool calls, in index order (at the end of the stream)."""
        for index in sorted(self._calls):
            tool_id, name, *fragments = self._calls[index]
            if not name:
                raise ModelError(ModelErrorKind.INVALID_RESPONSE, "a tool call came without a name")
            call = ToolCall(tool_id or f"call_{index}", name, _arguments(name, "".join(fragments)))
            self._built.tool_call(call)
            yield ToolCallComplete(call.id, call.name, call.input)
        self._calls = {}

    def finish(self, *, cancelled: bool) -> Finish:
        if cancelled:
            return Finish(StopReason.CANCELLED, self._usage, self._built.message())
        if self._stop is None:
            raise ModelError(
                ModelErrorKind.UNAVAILABLE,
                "the stream ended before the answer was complete (no finish reason)",
                retryable=True,
            )
        message = self._built.message()
        stop = self._stop
        if message.tool_calls:  # some servers say "stop" after tool calls
            stop = StopReason.TOOL_USE
        return Finish(stop, self._usage, message)


def _arguments(name: str, raw: str) -> dict[str, Any]:
    try:
        value = json.loads(raw) if raw.strip() else {}
    except json.JSONDecodeError:
        value = None
    if not isinstance(value, dict):
        raise ModelError(
            ModelErrorKind.INVALID_RESPONSE,
            f"the model sent invalid JSON arguments for tool {name}",
        )
    return value


def map_error(error: BaseException, model: str) -> ModelError:
    """The ``ModelError`` of a failed call: the ``openai`` SDK's errors, a connection that broke
    mid-stream (httpx), else an unexpected answer (chained, so the traceback is kept)."""
    if isinstance(error, ModelError):
        return error
    import httpx
    import openai

    if isinstance(error, httpx.TransportError):  # raised as is while the stream is read
        return ModelError(
            ModelErrorKind.UNAVAILABLE,
            f"model {model}: the connection broke mid-answer ({type(error).__name__}: {error})",
            retryable=True,
        )
    if not isinstance(error, openai.OpenAIError):
        return ModelError(
            ModelErrorKind.INVALID_RESPONSE,
            f"model {model}: unexpected failure ({type(error).__name__}: {error})",
        )
    if isinstance(error, openai.APIConnectionError):  # includes timeouts
        cause = error.__cause__ or error.__context__
        reason = f"{type(cause).__name__}: {cause}" if cause is not None else str(error)
        return ModelError(
            ModelErrorKind.UNAVAILABLE,
            f"model {model}: the connection to the endpoint failed ({reason})",
            retryable=True,
        )
    if not isinstance(error, openai.APIError):
        return ModelError(ModelErrorKind.UNAVAILABLE, f"model {model}: {error}")
    detail = _detail(error)
    status = error.status_code if isinstance(error, openai.APIStatusError) else None
    text = f"model {model}: {detail}" + (f" (HTTP {status})" if status else "")
    kind, retryable = _kind(status, str(error.code or ""), detail)
    return ModelError(kind, text, retryable=retryable)


def _kind(status: int | None, code: str, detail: str) -> tuple[ModelErrorKind, bool]:
    if status in (401, 403):
        return ModelErrorKind.AUTH, False
    if status == 429:
        return ModelErrorKind.THROTTLED, code != "insufficient_quota"
    if code == "context_length_exceeded" or _CONTEXT.search(detail):
        return ModelErrorKind.CONTEXT_WINDOW, False
    if _FILTER.search(code) or _FILTER.search(detail):
        return ModelErrorKind.CONTENT_FILTER, False
    if status is not None and 400 <= status < 500 and status != 404:
        return ModelErrorKind.INVALID_REQUEST, False
    # 404 (no such model on the server), 5xx, errors inside the stream
    return ModelErrorKind.UNAVAILABLE, status is not None and status >= 500


def _detail(error: Any) -> str:
    """The server's own message: ``{"error": {"message"}}`` (OpenAI, Ollama, LiteLLM) or
    ``{"message"}`` (vLLM), else the SDK's."""
    body = error.body
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        message = inner.get("message") if isinstance(inner, Mapping) else inner
        if isinstance(message, str) and message:
            return message
    if isinstance(body, str) and body:
        return body[:500]
    return str(error.message)
