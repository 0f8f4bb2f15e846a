"""The Bedrock adapter pinned at the wire.

Requests: botocore's ``Stubber`` asserts the exact ``ConverseStream`` parameters, which the
client also validates (``ParamValidator``) against the service model. Answers: hand-written
stream events, each validated with ``ParamValidator`` against the service model's
``ConverseStreamOutput`` shape, encoded as real event-stream messages (prelude, headers, CRCs)
and parsed by botocore's own event-stream parser, exception events included. One test goes below
the Stubber and checks the serialized HTTP request.
"""

from __future__ import annotations

import contextvars
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.awsrequest import AWSPreparedRequest, AWSResponse
from openagents.agent.models import (
    Finish,
    JsonObject,
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
    ToolSpec,
    Usage,
)
from openagents.agent.models.bedrock import STOP_REASONS, BedrockModel, converse_params
from openagents.agent.models.port import DocumentBlock, ImageBlock, ImageType

from tests.bedrock_stub import Bedrock, RawStream, encode, make_client

MODEL = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
SCHEMA: JsonObject = {"type": "object", "properties": {"filePath": {"type": "string"}}}
WRITE = ToolSpec("write", "Create or overwrite a file", SCHEMA)


@pytest.fixture
def bedrock() -> Iterator[Bedrock]:
    stub = Bedrock()
    with stub.stubber:
        yield stub
    stub.stubber.assert_no_pending_responses()


def model(bedrock: Bedrock, **options: Any) -> BedrockModel:
    options.setdefault("backoff_base_seconds", 0.001)
    return BedrockModel(bedrock.client, MODEL, **options)


def simple(text: str = "ok", stop: str = "end_turn") -> list[dict[str, Any]]:
    return [
        {"messageStart": {"role": "assistant"}},
        {"contentBlockDelta": {"delta": {"text": text}, "contentBlockIndex": 0}},
        {"contentBlockStop": {"contentBlockIndex": 0}},
        {"messageStop": {"stopReason": stop}},
        {
            "metadata": {
                "usage": {"inputTokens": 5, "outputTokens": 1, "totalTokens": 6},
                "metrics": {"latencyMs": 10},
            }
        },
    ]


REQUEST = ModelRequest(system="You code.", messages=(Message.user("hi"),), max_tokens=100)


# --- tests ---------------------------------------------------------------------------------


def test_a_tool_using_step_at_the_wire(bedrock: Bedrock) -> None:
    history = (
        Message.user("add multiply"),
        Message(
            "assistant",
            (
                ReasoningBlock("plan it", signature="sig-1"),
                ReasoningBlock("unsigned thoughts are not sent back"),
                TextBlock("Writing."),
                ToolCall("tu-1", "write", {"filePath": "m.py", "content": "x"}),
            ),
        ),
        Message.tool_results([ToolResult("tu-1", "wrote m.py")]),
        Message.user("now test it"),  # merged into the same user turn
    )
    expected = {
        "modelId": MODEL,
        "messages": [
            {"role": "user", "content": [{"text": "add multiply"}]},
            {
                "role": "assistant",
                "content": [
                    {
                        "reasoningContent": {
                            "reasoningText": {"text": "plan it", "signature": "sig-1"}
                        }
                    },
                    {"text": "Writing."},
                    {
                        "toolUse": {
                            "toolUseId": "tu-1",
                            "name": "write",
                            "input": {"filePath": "m.py", "content": "x"},
                        }
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "toolResult": {
                            "toolUseId": "tu-1",
                            "content": [{"text": "wrote m.py"}],
                            "status": "success",
                        }
                    },
                    {"text": "now test it"},
                ],
            },
        ],
        "system": [{"text": "You code."}, {"cachePoint": {"type": "default"}}],
        "inferenceConfig": {"maxTokens": 4096},
        "toolConfig": {
            "tools": [
                {
                    "toolSpec": {
                        "name": "write",
                        "description": "Create or overwrite a file",
                        "inputSchema": {"json": SCHEMA},
                    }
                },
                {"cachePoint": {"type": "default"}},
            ]
        },
    }
    bedrock.answer(
        [
            {"messageStart": {"role": "assistant"}},
            {
                "contentBlockDelta": {
                    "delta": {"reasoningContent": {"text": "The test "}},
                    "contentBlockIndex": 0,
                }
            },
            {
                "contentBlockDelta": {
                    "delta": {"reasoningContent": {"text": "goes next."}},
                    "contentBlockIndex": 0,
                }
            },
            {
                "contentBlockDelta": {
                    "delta": {"reasoningContent": {"signature": "sig-2"}},
                    "contentBlockIndex": 0,
                }
            },
            {"contentBlockStop": {"contentBlockIndex": 0}},
            {"contentBlockDelta": {"delta": {"text": "Adding "}, "contentBlockIndex": 1}},
            {"contentBlockDelta": {"delta": {"text": "a test."}, "contentBlockIndex": 1}},
            {"contentBlockStop": {"contentBlockIndex": 1}},
            {
                "contentBlockStart": {
                    "start": {"toolUse": {"toolUseId": "tu-2", "name": "write"}},
                    "contentBlockIndex": 2,
                }
            },
            {
                "contentBlockDelta": {
                    "delta": {"toolUse": {"input": '{"filePath": "te'}},
                    "contentBlockIndex": 2,
                }
            },
            {
                "contentBlockDelta": {
                    "delta": {"toolUse": {"input": 'st_m.py"}'}},
                    "contentBlockIndex": 2,
                }
            },
            {"contentBlockStop": {"contentBlockIndex": 2}},
            {"messageStop": {"stopReason": "tool_use"}},
            {
                "metadata": {
                    "usage": {
                        "inputTokens": 120,
                        "outputTokens": 40,
                        "totalTokens": 1160,
                        "cacheReadInputTokens": 900,
                        "cacheWriteInputTokens": 100,
                    },
                    "metrics": {"latencyMs": 812},
                }
            },
        ],
        expected,
    )
    request = ModelRequest(system="You code.", messages=history, tools=(WRITE,), max_tokens=4096)
    events = list(model(bedrock).stream(request))
    assert events[:-1] == [
        ReasoningDelta("The test "),
        ReasoningDelta("goes next."),
        TextDelta("Adding "),
        TextDelta("a test."),
        ToolCallComplete("tu-2", "write", {"filePath": "test_m.py"}),
    ]
    finish = events[-1]
    assert finish == Finish(
        StopReason.TOOL_USE,
        Usage(input_tokens=120, output_tokens=40, cache_read_tokens=900, cache_write_tokens=100),
        Message(
            "assistant",
            (
                ReasoningBlock("The test goes next.", signature="sig-2"),
                TextBlock("Adding a test."),
                ToolCall("tu-2", "write", {"filePath": "test_m.py"}),
            ),
        ),
    )


def test_the_http_request_and_a_real_event_stream_body() -> None:
    client = make_client()
    sent: list[AWSPreparedRequest] = []
    body = b"".join(
        encode(kind, payload) for event in simple("hi") for kind, payload in event.items()
    )

    def send(request: AWSPreparedRequest, **_: Any) -> AWSResponse:
        sent.append(request)
        headers = {"content-type": "application/vnd.amazon.eventstream"}
        return AWSResponse(request.url, 200, headers, RawStream([body]))  # type: ignore[arg-type]

    client.meta.events.register("before-send.bedrock-runtime.ConverseStream", send)
    events = list(BedrockModel(client, MODEL, prompt_caching=False).stream(REQUEST))
    assert events[0] == TextDelta("hi")
    assert events[-1] == Finish(
        StopReason.END_TURN, Usage(5, 1), Message("assistant", (TextBlock("hi"),))
    )
    [request] = sent
    assert request.method == "POST"
    assert request.url.endswith(
        "/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse-stream"
    )
    sent_body = request.body
    assert isinstance(sent_body, bytes)
    assert json.loads(sent_body) == {
        "messages": [{"role": "user", "content": [{"text": "hi"}]}],
        "system": [{"text": "You code."}],
        "inferenceConfig": {"maxTokens": 100},
    }


def test_every_bedrock_stop_reason_is_mapped(bedrock: Bedrock) -> None:
    enum = bedrock.client.meta.service_model.shape_for("StopReason").enum
    assert set(STOP_REASONS) == set(enum)
    assert STOP_REASONS["guardrail_intervened"] is StopReason.CONTENT_FILTER
    assert STOP_REASONS["model_context_window_exceeded"] is StopReason.CONTEXT_WINDOW
    assert STOP_REASONS["max_tokens"] is StopReason.MAX_TOKENS


@pytest.mark.parametrize(
    ("wire", "port"),
    [
        ("end_turn", StopReason.END_TURN),
        ("max_tokens", StopReason.MAX_TOKENS),
        ("content_filtered", StopReason.CONTENT_FILTER),
    ],
)
def test_stop_reasons_reach_finish(bedrock: Bedrock, wire: str, port: StopReason) -> None:
    bedrock.answer(simple(stop=wire))
    finish = list(model(bedrock).stream(REQUEST))[-1]
    assert isinstance(finish, Finish)
    assert finish.stop_reason is port


def test_throttling_is_retried_with_backoff(bedrock: Bedrock) -> None:
    bedrock.fail("ThrottlingException", "Too many requests, please wait", 429)
    bedrock.answer([{"throttlingException": {"message": "slow down"}}])  # in the stream
    bedrock.answer(simple("third time"))
    events = list(model(bedrock).stream(REQUEST))
    assert events[0] == TextDelta("third time")


def test_throttling_retries_are_bounded(bedrock: Bedrock) -> None:
    for _ in range(3):
        bedrock.fail("ThrottlingException", "Too many requests, please wait", 429)
    with pytest.raises(ModelError) as raised:
        list(model(bedrock, max_attempts=3).stream(REQUEST))
    assert raised.value.kind is ModelErrorKind.THROTTLED
    assert "Too many requests" in raised.value.message


def test_an_error_after_output_is_not_retried(bedrock: Bedrock) -> None:
    bedrock.answer(
        [
            {"messageStart": {"role": "assistant"}},
            {"contentBlockDelta": {"delta": {"text": "partial"}, "contentBlockIndex": 0}},
            {"modelStreamErrorException": {"message": "model failed", "originalStatusCode": 500}},
        ]
    )
    events: list[ModelEvent] = []
    with pytest.raises(ModelError) as raised:
        events.extend(model(bedrock).stream(REQUEST))
    assert events == [TextDelta("partial")]
    assert raised.value.kind is ModelErrorKind.UNAVAILABLE
    assert "model failed" in raised.value.message


@pytest.mark.parametrize(
    ("code", "message", "kind"),
    [
        ("AccessDeniedException", "You don't have access to the model", ModelErrorKind.AUTH),
        ("UnrecognizedClientException", "The security token is invalid", ModelErrorKind.AUTH),
        (
            "ValidationException",
            "Input is too long for requested model.",
            ModelErrorKind.CONTEXT_WINDOW,
        ),
        (
            "ValidationException",
            "prompt is too long: 210000 tokens > 200000 maximum",
            ModelErrorKind.CONTEXT_WINDOW,
        ),
        (
            "ValidationException",
            "messages.1: toolUse must be followed",
            ModelErrorKind.INVALID_REQUEST,
        ),
        ("ResourceNotFoundException", "Model not found", ModelErrorKind.UNAVAILABLE),
    ],
)
def test_errors_are_mapped(bedrock: Bedrock, code: str, message: str, kind: ModelErrorKind) -> None:
    bedrock.fail(code, message)
    with pytest.raises(ModelError) as raised:
        list(model(bedrock).stream(REQUEST))
    assert raised.value.kind is kind
    assert message in raised.value.message
    assert MODEL in raised.value.message


def test_stop_ends_a_silent_stream_within_two_seconds(bedrock: Bedrock) -> None:
    raw = bedrock.answer(simple("first"), stall_after=2)
    stop = threading.Event()
    events: list[ModelEvent] = []
    started = time.monotonic()
    for event in model(bedrock).stream(REQUEST, cancelled=stop.is_set):
        events.append(event)
        if isinstance(event, TextDelta):
            threading.Timer(0.2, stop.set).start()
    assert time.monotonic() - started < 2.0
    assert events[-1] == Finish(
        StopReason.CANCELLED, Usage(), Message("assistant", (TextBlock("first"),))
    )
    assert raw.closed.wait(1.0)  # the HTTP stream was closed


def test_invalid_tool_json_is_an_invalid_response(bedrock: Bedrock) -> None:
    bedrock.answer(
        [
            {
                "contentBlockStart": {
                    "start": {"toolUse": {"toolUseId": "t", "name": "bash"}},
                    "contentBlockIndex": 0,
                }
            },
            {
                "contentBlockDelta": {
                    "delta": {"toolUse": {"input": '{"command": '}},
                    "contentBlockIndex": 0,
                }
            },
            {"contentBlockStop": {"contentBlockIndex": 0}},
        ]
    )
    with pytest.raises(ModelError) as raised:
        list(model(bedrock).stream(REQUEST))
    assert raised.value.kind is ModelErrorKind.INVALID_RESPONSE


def test_a_tool_call_without_input_has_an_empty_input(bedrock: Bedrock) -> None:
    bedrock.answer(
        [
            {
                "contentBlockStart": {
                    "start": {"toolUse": {"toolUseId": "t", "name": "todo_read"}},
                    "contentBlockIndex": 0,
                }
            },
            {"contentBlockStop": {"contentBlockIndex": 0}},
            {"messageStop": {"stopReason": "tool_use"}},
        ]
    )
    events = list(model(bedrock).stream(REQUEST))
    assert events[0] == ToolCallComplete("t", "todo_read", {})


def test_no_caching_for_models_without_cache_points() -> None:
    params = converse_params("meta.llama3-70b-instruct-v1:0", REQUEST, caching=False)
    assert params["system"] == [{"text": "You code."}]
    assert "toolConfig" not in params
    assert BedrockModel(make_client(), "openai.gpt-oss-120b-1:0").model_id == (
        "bedrock/openai.gpt-oss-120b-1:0"
    )


def test_a_stream_cut_before_message_stop_is_unavailable(bedrock: Bedrock) -> None:
    bedrock.answer(simple()[:2])
    events: list[ModelEvent] = []
    with pytest.raises(ModelError) as raised:
        events.extend(model(bedrock).stream(REQUEST))
    assert events == [TextDelta("ok")]
    assert raised.value.kind is ModelErrorKind.UNAVAILABLE
    assert raised.value.retryable


def test_the_call_runs_in_the_callers_context(bedrock: Bedrock) -> None:
    """The model call is made on the stream's worker thread, with the caller's context variables
    (log correlation, the tracer's segment, the least-privilege recorder's function name)."""
    current: contextvars.ContextVar[str] = contextvars.ContextVar("current", default="none")
    seen: list[str] = []
    bedrock.client.meta.events.register(
        "before-parameter-build.bedrock-runtime.ConverseStream",
        lambda **_: seen.append(current.get()),
    )
    bedrock.answer(simple("hi"))
    token = current.set("turn-7")
    try:
        list(model(bedrock).stream(REQUEST))
    finally:
        current.reset(token)
    assert seen == ["turn-7"]


# --- attachments: images and text files in a user message ----------------------------------

NOTES = '<file name="notes.md" type="text/markdown">\n# Notes\nship it\n</file>'
NOTES = '<file name="notes.md" type="text/markdown">\n# Notes\nship it\n</file>'
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + bytes(17)


def test_an_image_and_a_text_file_at_the_wire(bedrock: Bedrock) -> None:
    """An image goes as Converse's ``image`` block (its raw bytes; ParamValidator checks the
    format and the source), a text file inline as text, in the parts' order."""
    user = Message(
        "user",
        (
            TextBlock("what is in these?"),
            ImageBlock("image/png", PNG),
            DocumentBlock("notes.md", "text/markdown", "# Notes\nship it"),
            ImageBlock("image/webp", b"RIFF\x00\x00\x00\x00WEBPVP8 "),
        ),
    )
    expected = {
        "modelId": MODEL,
        "messages": [
            {
                "role": "user",
                "content": [
                    {"text": "what is in these?"},
                    {"image": {"format": "png", "source": {"bytes": PNG}}},
                    {"text": NOTES},
                    {
                        "image": {
                            "format": "webp",
                            "source": {"bytes": b"RIFF\x00\x00\x00\x00WEBPVP8 "},
                        }
                    },
                ],
            }
        ],
        "system": [{"text": "You code."}],
        "inferenceConfig": {"maxTokens": 100},
    }
    bedrock.answer(simple("a chart"), expected)
    request = ModelRequest(system="You code.", messages=(user,), max_tokens=100)
    events = list(model(bedrock, prompt_caching=False).stream(request))
    assert events[0] == TextDelta("a chart")


def test_every_image_type_is_a_converse_format() -> None:
    types: list[tuple[ImageType, str]] = [
        ("image/png", "png"),
        ("image/jpeg", "jpeg"),
        ("image/gif", "gif"),
        ("image/webp", "webp"),
    ]
    for media, wire in types:
        request = ModelRequest(
            system="", messages=(Message("user", (ImageBlock(media, b"x"),)),), max_tokens=10
        )
        params = converse_params(MODEL, request, caching=False)
        assert params["messages"][0]["content"] == [
            {"image": {"format": wire, "source": {"bytes": b"x"}}}
        ]
