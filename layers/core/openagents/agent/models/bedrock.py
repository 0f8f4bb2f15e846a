"""Bedrock Converse (``bedrock-runtime`` ``ConverseStream``): ``bedrock/<model or inference
profile id>``.

Tool use through ``toolConfig``; reasoning content deltas (with their signatures, so reasoning
can be sent back in later steps); stop reasons and usage (with the prompt cache's read and write
tokens) mapped to the port; throttling and unavailability retried with bounded, cancellable,
jittered backoff before the first chunk; every error a ``ModelError``. The boto3 client is
injected; botocore is imported only when an error needs mapping.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

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
    ReasoningBlock,
    ReasoningDelta,
    StopReason,
    TextBlock,
    TextDelta,
    ToolCall,
    ToolCallComplete,
    ToolResult,
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
    from mypy_boto3_bedrock_runtime import BedrockRuntimeClient

STOP_REASONS = {
    "end_turn": StopReason.END_TURN,
    "tool_use": StopReason.TOOL_USE,
    "max_tokens": StopReason.MAX_TOKENS,
    "stop_sequence": StopReason.STOP_SEQUENCE,
    "guardrail_intervened": StopReason.CONTENT_FILTER,
    "content_filtered": StopReason.CONTENT_FILTER,
    "model_context_window_exceeded": StopReason.CONTEXT_WINDOW,
    "malformed_model_output": StopReason.MALFORMED,
    "malformed_tool_use": StopReason.MALFORMED,
}
# error codes (ClientError, and the stream's exception events in camelCase) -> kind, retryable
ERRORS: dict[str, tuple[ModelErrorKind, bool]] = {
    "ThrottlingException": (ModelErrorKind.THROTTLED, True),
    "ServiceQuotaExceededException": (ModelErrorKind.THROTTLED, False),
    "AccessDeniedException": (ModelErrorKind.AUTH, False),
    "UnrecognizedClientException": (ModelErrorKind.AUTH, False),
    "ExpiredTokenException": (ModelErrorKind.AUTH, False),
    "InvalidSignatureException": (ModelErrorKind.AUTH, False),
    "ResourceNotFoundException": (ModelErrorKind.UNAVAILABLE, False),
    "ModelNotReadyException": (ModelErrorKind.UNAVAILABLE, True),
    "ModelTimeoutException": (ModelErrorKind.UNAVAILABLE, True),
    "InternalServerException": (ModelErrorKind.UNAVAILABLE, True),
    "ServiceUnavailableException": (ModelErrorKind.UNAVAILABLE, True),
    "ModelStreamErrorException": (ModelErrorKind.UNAVAILABLE, True),
    "ModelErrorException": (ModelErrorKind.UNAVAILABLE, False),
    "ValidationException": (ModelErrorKind.INVALID_REQUEST, False),
}
_CONTEXT = re.compile(
    r"too long|context (limit|length|window)|exceeds? .*context|maximum context|too many tokens",
    re.IGNORECASE,
)
_CACHING_FAMILIES = ("anthropic", "claude", "amazon.nova")


class BedrockModel:
    def __init__(
        self,
        client: BedrockRuntimeClient,
        model: str,
        *,
        max_attempts: int = 4,
        backoff_base_seconds: float = 1.0,
        prompt_caching: bool | None = None,
        poll_seconds: float = 0.05,
    ) -> None:
        self.model_id = f"bedrock/{model}"
        self._client = client
        self._model = model
        self._max_attempts = max_attempts
        self._backoff = backoff_base_seconds
        self._poll = poll_seconds
        # cache points after the system prompt and the tools (the models that support them)
        self._caching = (
            any(family in model for family in _CACHING_FAMILIES)
            if prompt_caching is None
            else prompt_caching
        )

    def stream(
        self, request: ModelRequest, *, cancelled: CancelCheck = never
    ) -> Iterator[ModelEvent]:
        return self._stream(converse_params(self._model, request, self._caching), cancelled)

    def _stream(self, params: dict[str, Any], cancelled: CancelCheck) -> Iterator[ModelEvent]:
        attempt = 1
        while True:
            reader = _Reader()
            pump: Pump[Mapping[str, Any]] = Pump(
                lambda closer: self._events(params, closer),
                cancelled=cancelled,
                poll_seconds=self._poll,
            )
            try:
                for event in pump:
                    yield from reader.feed(event)
            except Exception as error:
                failure = map_error(error, self._model)
                if not (failure.retryable and not reader.started and attempt < self._max_attempts):
                    raise failure from error
                delay = backoff_seconds(attempt, base=self._backoff)
                if sleep_unless_cancelled(delay, cancelled):
                    yield reader.finish(StopReason.CANCELLED)
                    return
                attempt += 1
                continue
            yield reader.finish(StopReason.CANCELLED if pump.cancelled else None)
            return

    def _events(self, params: dict[str, Any], closer: Closer) -> Iterator[Mapping[str, Any]]:
        response = self._client.converse_stream(**params)
        stream = response["stream"]
        closer.set(stream.close)
        yield from stream


def converse_params(model: str, request: ModelRequest, caching: bool = False) -> dict[str, Any]:
    """The ``ConverseStream`` parameters of ``request``."""
    params: dict[str, Any] = {
        "modelId": model,
        "messages": _messages(request.messages),
        "inferenceConfig": {"maxTokens": request.max_tokens},
    }
    if request.system:
        system: list[dict[str, Any]] = [{"text": request.system}]
        if caching:
            system.append({"cachePoint": {"type": "default"}})
        params["system"] = system
    if request.tools:
        tools: list[dict[str, Any]] = [
            {
                "toolSpec": {
                    "name": tool.name,
                    "description": tool.description,
                    "inputSchema": {"json": tool.input_schema},
                }
            }
            for tool in request.tools
        ]
        if caching:
            tools.append({"cachePoint": {"type": "default"}})
        params["toolConfig"] = {"tools": tools}
    return params


def _messages(messages: tuple[Message, ...]) -> list[dict[str, Any]]:
    """Converse wants roles to alternate: consecutive messages of one role are merged."""
    out: list[dict[str, Any]] = []
    for message in messages:
        blocks = [block for block in map(_block, message.content) if block is not None]
        if not blocks:
            continue
        if out and out[-1]["role"] == message.role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": message.role, "content": blocks})
    return out


def _block(block: object) -> dict[str, Any] | None:
    if isinstance(block, TextBlock):
        return {"text": block.text} if block.text else None
    if isinstance(block, ReasoningBlock):
        # only signed reasoning can go back to the model
        if block.signature is None:
            return None
        return {
            "reasoningContent": {
                "reasoningText": {"text": block.text, "signature": block.signature}
            }
        }
    if isinstance(block, ToolCall):
        return {"toolUse": {"toolUseId": block.id, "name": block.name, "input": block.input}}
    if isinstance(block, ImageBlock):  # Converse's image block: the raw bytes (boto3 encodes)
        image_format = block.media_type.removeprefix("image/")
        return {"image": {"format": image_format, "source": {"bytes": block.data}}}
    if isinstance(block, DocumentBlock):  # inline text: any model, any file name or type
        return {"text": block.inline}
    if isinstance(block, ToolResult):
        return {
            "toolResult": {
                "toolUseId": block.tool_call_id,
                "content": [{"text": block.content or "(no output)"}],
                "status": "error" if block.is_error else "success",
            }
        }
    raise TypeError(f"unknown content block {block!r}")


class _Reader:
    """Turns ConverseStream events into port events, building the step's message."""

    def __init__(self) -> None:
        self.started = False
        self._built = MessageBuilder()
        self._tools: dict[int, tuple[str, str, list[str]]] = {}
        self._stop: StopReason | None = None
        self._usage = Usage()

    def feed(self, event: Mapping[str, Any]) -> Iterator[ModelEvent]:
        if "contentBlockStart" in event:
            start = event["contentBlockStart"]
            tool = start.get("start", {}).get("toolUse")
            if tool is not None:
                self._tools[start["contentBlockIndex"]] = (tool["toolUseId"], tool["name"], [])
        elif "contentBlockDelta" in event:
            yield from self._delta(event["contentBlockDelta"])
        elif "contentBlockStop" in event:
            yield from self._block_stop(event["contentBlockStop"]["contentBlockIndex"])
        elif "messageStop" in event:
            reason = event["messageStop"]["stopReason"]
            self._stop = STOP_REASONS.get(reason, StopReason.END_TURN)
        elif "metadata" in event:
            usage = event["metadata"].get("usage", {})
            self._usage = Usage(
                input_tokens=usage.get("inputTokens", 0),
                output_tokens=usage.get("outputTokens", 0),
                cache_read_tokens=usage.get("cacheReadInputTokens", 0),
                cache_write_tokens=usage.get("cacheWriteInputTokens", 0),
            )

    def _delta(self, event: Mapping[str, Any]) -> Iterator[ModelEvent]:
        delta = event["delta"]
        if "text" in delta:
            self.started = True
            self._built.text(delta["text"])
            yield TextDelta(delta["text"])
        elif "reasoningContent" in delta:
            reasoning = delta["reasoningContent"]
            if "text" in reasoning:
                self.started = True
                self._built.reasoning(reasoning["text"])
                yield ReasoningDelta(reasoning["text"])
            if "signature" in reasoning:
                self._built.signature(reasoning["signature"])
        elif "toolUse" in delta:
            self.started = True
            tool = self._tools.get(event["contentBlockIndex"])
            if tool is not None:
                tool[2].append(delta["toolUse"]["input"])

    def _block_stop(self, index: int) -> Iterator[ModelEvent]:
        tool = self._tools.pop(index, None)
        if tool is None:
            self._built.end_block()
            return
        tool_id, name, fragments = tool
        call = ToolCall(tool_id, name, _tool_input(name, "".join(fragments)))
        self._built.tool_call(call)
        yield ToolCallComplete(call.id, call.name, call.input)

    def finish(self, override: StopReason | None) -> Finish:
        stop = override or self._stop
        if stop is None:
            raise ModelError(
                ModelErrorKind.UNAVAILABLE,
                "Bedrock's stream ended before the answer was complete",
                retryable=True,
            )
        return Finish(stop, self._usage, self._built.message())


def _tool_input(name: str, raw: str) -> dict[str, Any]:
    try:
        value = json.loads(raw) if raw.strip() else {}
    except json.JSONDecodeError:
        value = None
    if not isinstance(value, dict):
        raise ModelError(
            ModelErrorKind.INVALID_RESPONSE, f"the model sent invalid JSON input for tool {name}"
        )
    return value


def map_error(error: BaseException, model: str) -> ModelError:
    """The ``ModelError`` of a failed call: botocore's errors (the stream's exception events
    included), a connection that broke mid-stream (urllib3), else an unexpected answer (chained,
    so the traceback is kept)."""
    if isinstance(error, ModelError):
        return error
    from botocore import exceptions as boto

    if isinstance(error, boto.ClientError):
        detail = error.response.get("Error", {})
        code = str(detail.get("Code", "Unknown"))
        code = code[:1].upper() + code[1:]  # the stream's events say throttlingException
        message = str(detail.get("Message") or code)
        kind, retryable = ERRORS.get(code, (ModelErrorKind.UNAVAILABLE, False))
        if code == "ValidationException" and _CONTEXT.search(message):
            kind = ModelErrorKind.CONTEXT_WINDOW
        return ModelError(kind, f"Bedrock model {model}: {message} ({code})", retryable=retryable)
    auth: tuple[type[Exception], ...] = (
        boto.NoCredentialsError,
        boto.PartialCredentialsError,
        boto.NoRegionError,
    )
    if isinstance(error, auth):
        return ModelError(ModelErrorKind.AUTH, f"Bedrock model {model}: {error}")
    network: tuple[type[Exception], ...] = (boto.HTTPClientError, boto.ConnectionError)
    if isinstance(error, network):
        return ModelError(
            ModelErrorKind.UNAVAILABLE, f"Bedrock model {model}: {error}", retryable=True
        )
    if isinstance(error, boto.BotoCoreError):
        return ModelError(ModelErrorKind.UNAVAILABLE, f"Bedrock model {model}: {error}")
    import urllib3.exceptions

    if isinstance(error, urllib3.exceptions.HTTPError):  # raised as is while the stream is read
        return ModelError(
            ModelErrorKind.UNAVAILABLE,
            f"Bedrock model {model}: the connection broke mid-answer ({error})",
            retryable=True,
        )
    return ModelError(
        ModelErrorKind.INVALID_RESPONSE,
        f"Bedrock model {model}: unexpected failure ({type(error).__name__}: {error})",
    )
