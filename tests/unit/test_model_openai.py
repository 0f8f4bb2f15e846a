"""The OpenAI-compatible adapter pinned at the wire: a real ``openai.OpenAI`` client talks to a
127.0.0.1 server (stdlib ``http.server`` in a thread) that replays recorded SSE chunks and keeps
the request bodies it received."""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
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
    build_registry,
)
from openagents.agent.models.openai_compat import OpenAICompatModel
from openagents.agent.models.port import DocumentBlock, ImageBlock
from openagents.settings import Settings
from openai import OpenAI

SCHEMA: JsonObject = {"type": "object", "properties": {"command": {"type": "string"}}}
BASH = ToolSpec("bash", "Run a shell command", SCHEMA)
REQUEST = ModelRequest(system="You code.", messages=(Message.user("hi"),), max_tokens=64)


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None, **extra: Any) -> str:
    body: dict[str, Any] = {
        "id": "chatcmpl-AbC123",
        "object": "chat.completion.chunk",
        "created": 1764576000,
        "model": "gpt-5.4-2026-03-05",
        "system_fingerprint": "fp_5e1a2b",
        "choices": []
        if delta is None
        else [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
    }
    body.update(extra)
    return json.dumps(body)


# Recorded from OpenAI: text, then two parallel tool calls whose arguments arrive in fragments,
# then the usage chunk that include_usage adds.
TOOL_STEP = [
    chunk({"role": "assistant", "content": "", "refusal": None}),
    chunk({"content": "Running "}),
    chunk({"content": "the tests."}),
    chunk(
        {
            "tool_calls": [
                {
                    "index": 0,
                    "id": "call_Q1",
                    "type": "function",
                    "function": {"name": "bash", "arguments": ""},
                }
            ]
        }
    ),
    chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"comm'}}]}),
    chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'and": "pytest -q"}'}}]}),
    chunk(
        {
            "tool_calls": [
                {
                    "index": 1,
                    "id": "call_Q2",
                    "type": "function",
                    "function": {"name": "bash", "arguments": '{"command": "git status"}'},
                }
            ]
        }
    ),
    chunk({}, "tool_calls"),
    chunk(
        None,
        usage={
            "prompt_tokens": 1500,
            "completion_tokens": 42,
            "total_tokens": 1542,
            "prompt_tokens_details": {"cached_tokens": 1280, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0},
        },
    ),
]
# Recorded from Ollama's /v1 (a thinking model): reasoning in "reasoning", no cached tokens.
OLLAMA_STEP = [
    chunk({"role": "assistant", "content": "", "reasoning": "Simple "}),
    chunk({"role": "assistant", "content": "", "reasoning": "greeting."}),
    chunk({"role": "assistant", "content": "Hello!"}),
    chunk({"role": "assistant", "content": ""}, "stop"),
    chunk(None, usage={"prompt_tokens": 20, "completion_tokens": 9, "total_tokens": 29}),
]


@dataclass
class Reply:
    status: int = 200
    chunks: list[str] = field(default_factory=list)
    error: dict[str, Any] | None = None
    stall_after: int | None = None  # go silent after this many chunks
    ending: str = "done"  # "done": data: [DONE]; "close": just close; "cut": a broken chunk


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


class Server:
    def __init__(self) -> None:
        self.replies: list[Reply] = []
        self.received: list[Received] = []
        self.release = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", 0))
                body = json.loads(self.rfile.read(length))
                headers = {key.lower(): value for key, value in self.headers.items()}
                server.received.append(Received(self.path, headers, body))
                reply = server.replies.pop(0)
                if reply.error is not None:
                    payload = json.dumps(reply.error).encode()
                    self.send_response(reply.status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                self.close_connection = True
                ending = ["[DONE]"] if reply.ending == "done" else []
                for index, data in enumerate([*reply.chunks, *ending]):
                    if index == reply.stall_after:
                        server.release.wait(30)
                        return
                    event = f"data: {data}\n\n".encode()
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
                    self.wfile.flush()
                if reply.ending == "cut":
                    self.wfile.write(b"400\r\ndata: {")  # promises 1024 bytes, sends 7
                else:
                    self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    def client(self) -> OpenAI:
        return OpenAI(base_url=self.url, api_key="sk-test-123", max_retries=0, timeout=10)


@pytest.fixture
def server() -> Iterator[Server]:
    running = Server()
    running.thread.start()
    yield running
    running.release.set()
    running.httpd.shutdown()
    running.httpd.server_close()


def model(server: Server, **options: Any) -> OpenAICompatModel:
    options.setdefault("backoff_base_seconds", 0.001)
    return OpenAICompatModel(server.client(), "gpt-5.4", **options)


def test_a_tool_using_step_at_the_wire(server: Server) -> None:
    server.replies.append(Reply(chunks=TOOL_STEP))
    history = (
        Message.user("run the tests"),
        Message(
            "assistant",
            (
                ReasoningBlock("not sent back", signature="s"),
                TextBlock("Writing it."),
                ToolCall("call_P1", "write", {"filePath": "m.py", "content": "x = 1\n"}),
            ),
        ),
        Message("user", (ToolResult("call_P1", "wrote m.py"), TextBlock("and run them"))),
        Message.tool_results([ToolResult("call_P0", "boom", is_error=True)]),
    )
    request = ModelRequest(system="You code.", messages=history, tools=(BASH,), max_tokens=2048)
    events = list(model(server, max_tokens_param="max_completion_tokens").stream(request))

    [received] = server.received
    assert received.path == "/v1/chat/completions"
    assert received.headers["authorization"] == "Bearer sk-test-123"
    assert received.body == {
        "model": "gpt-5.4",
        "messages": [
            {"role": "system", "content": "You code."},
            {"role": "user", "content": "run the tests"},
            {
                "role": "assistant",
                "content": "Writing it.",
                "tool_calls": [
                    {
                        "id": "call_P1",
                        "type": "function",
                        "function": {
                            "name": "write",
                            "arguments": '{"filePath":"m.py","content":"x = 1\\n"}',
                        },
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_P1", "content": "wrote m.py"},
            {"role": "user", "content": "and run them"},
            {"role": "tool", "tool_call_id": "call_P0", "content": "Error: boom"},
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "bash",
                    "description": "Run a shell command",
                    "parameters": SCHEMA,
                },
            }
        ],
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_completion_tokens": 2048,
    }
    assert events[:-1] == [
        TextDelta("Running "),
        TextDelta("the tests."),
        ToolCallComplete("call_Q1", "bash", {"command": "pytest -q"}),
        ToolCallComplete("call_Q2", "bash", {"command": "git status"}),
    ]
    assert events[-1] == Finish(
        StopReason.TOOL_USE,
        Usage(input_tokens=220, output_tokens=42, cache_read_tokens=1280),
        Message(
            "assistant",
            (
                TextBlock("Running the tests."),
                ToolCall("call_Q1", "bash", {"command": "pytest -q"}),
                ToolCall("call_Q2", "bash", {"command": "git status"}),
            ),
        ),
    )


def test_ollama_reasoning_and_max_tokens(server: Server) -> None:
    server.replies.append(Reply(chunks=OLLAMA_STEP))
    events = list(model(server).stream(REQUEST))
    assert server.received[0].body["max_tokens"] == 64
    assert "tools" not in server.received[0].body
    assert events == [
        ReasoningDelta("Simple "),
        ReasoningDelta("greeting."),
        TextDelta("Hello!"),
        Finish(
            StopReason.END_TURN,
            Usage(input_tokens=20, output_tokens=9),
            Message("assistant", (ReasoningBlock("Simple greeting."), TextBlock("Hello!"))),
        ),
    ]


def test_vllm_reasoning_content_and_a_length_stop(server: Server) -> None:
    server.replies.append(
        Reply(chunks=[chunk({"reasoning_content": "hmm"}), chunk({"content": "cut"}, "length")])
    )
    events = list(model(server).stream(REQUEST))
    assert events[0] == ReasoningDelta("hmm")
    finish = events[-1]
    assert isinstance(finish, Finish)
    assert finish.stop_reason is StopReason.MAX_TOKENS
    assert finish.usage == Usage()  # a server that ignores include_usage


def test_tool_calls_with_a_stop_finish_still_use_tools(server: Server) -> None:
    call = {"index": 0, "id": "c1", "function": {"name": "bash", "arguments": "{}"}}
    server.replies.append(Reply(chunks=[chunk({"tool_calls": [call]}), chunk({}, "stop")]))
    finish = list(model(server).stream(REQUEST))[-1]
    assert isinstance(finish, Finish)
    assert finish.stop_reason is StopReason.TOOL_USE


@pytest.mark.parametrize(
    ("status", "error", "kind", "readable"),
    [
        (
            401,
            {
                "error": {
                    "message": "Incorrect API key provided: sk-test***123.",
                    "type": "invalid_request_error",
                    "code": "invalid_api_key",
                }
            },
            ModelErrorKind.AUTH,
            "Incorrect API key provided",
        ),
        (
            400,
            {
                "error": {
                    "message": "This model's maximum context length is 128000 tokens. "
                    "However, your messages resulted in 130000 tokens.",
                    "type": "invalid_request_error",
                    "code": "context_length_exceeded",
                }
            },
            ModelErrorKind.CONTEXT_WINDOW,
            "maximum context length",
        ),
        (
            400,
            {
                "object": "error",
                "message": "This model's maximum context length is 4096 tokens.",
                "type": "BadRequestError",
                "code": 400,
            },
            ModelErrorKind.CONTEXT_WINDOW,
            "4096 tokens",
        ),  # vLLM's shape
        (
            400,
            {
                "error": {
                    "message": "Your request was rejected by our content filter.",
                    "code": "content_filter",
                    "type": "invalid_request_error",
                }
            },
            ModelErrorKind.CONTENT_FILTER,
            "content filter",
        ),
        (
            404,
            {
                "error": {
                    "message": 'model "llama9" not found, try pulling it first',
                    "type": "api_error",
                }
            },
            ModelErrorKind.UNAVAILABLE,
            "try pulling it first",
        ),  # Ollama
        (
            429,
            {
                "error": {
                    "message": "You exceeded your current quota.",
                    "type": "insufficient_quota",
                    "code": "insufficient_quota",
                }
            },
            ModelErrorKind.THROTTLED,
            "current quota",
        ),
        (
            400,
            {"error": {"message": "Invalid schema for function 'bash'", "code": None}},
            ModelErrorKind.INVALID_REQUEST,
            "Invalid schema",
        ),
    ],
)
def test_errors_are_mapped(
    server: Server, status: int, error: dict[str, Any], kind: ModelErrorKind, readable: str
) -> None:
    server.replies.append(Reply(status=status, error=error))
    with pytest.raises(ModelError) as raised:
        list(model(server).stream(REQUEST))
    assert raised.value.kind is kind
    assert readable in raised.value.message
    assert f"HTTP {status}" in raised.value.message
    assert "sk-test-123" not in raised.value.message
    assert len(server.received) == 1  # not retried


def test_rate_limits_and_server_errors_are_retried(server: Server) -> None:
    slow_down = {"error": {"message": "Rate limit reached", "code": "rate_limit_exceeded"}}
    server.replies += [
        Reply(status=429, error=slow_down),
        Reply(status=503, error={"error": {"message": "overloaded"}}),
        Reply(chunks=OLLAMA_STEP),
    ]
    events = list(model(server).stream(REQUEST))
    assert len(server.received) == 3
    assert events[-1] == Finish(
        StopReason.END_TURN,
        Usage(20, 9),
        Message("assistant", (ReasoningBlock("Simple greeting."), TextBlock("Hello!"))),
    )


def test_retries_are_bounded(server: Server) -> None:
    slow_down = {"error": {"message": "Rate limit reached", "code": "rate_limit_exceeded"}}
    server.replies += [Reply(status=429, error=slow_down) for _ in range(2)]
    with pytest.raises(ModelError) as raised:
        list(model(server, max_attempts=2).stream(REQUEST))
    assert raised.value.kind is ModelErrorKind.THROTTLED
    assert len(server.received) == 2


def test_an_unreachable_endpoint_is_unavailable() -> None:
    client = OpenAI(base_url="http://127.0.0.1:9/v1", api_key="k", max_retries=0, timeout=2)
    with pytest.raises(ModelError) as raised:
        list(OpenAICompatModel(client, "m", max_attempts=1).stream(REQUEST))
    assert raised.value.kind is ModelErrorKind.UNAVAILABLE
    assert raised.value.retryable


def test_an_error_inside_the_stream_after_output(server: Server) -> None:
    failing = json.dumps({"error": {"message": "upstream model crashed", "type": "server_error"}})
    server.replies.append(Reply(chunks=[chunk({"content": "par"}), failing]))
    events: list[ModelEvent] = []
    with pytest.raises(ModelError) as raised:
        events.extend(model(server).stream(REQUEST))
    assert events == [TextDelta("par")]
    assert "upstream model crashed" in raised.value.message
    assert len(server.received) == 1


def test_invalid_tool_arguments_are_an_invalid_response(server: Server) -> None:
    call = {"index": 0, "id": "c1", "function": {"name": "bash", "arguments": '{"command": '}}
    server.replies.append(Reply(chunks=[chunk({"tool_calls": [call]}), chunk({}, "tool_calls")]))
    with pytest.raises(ModelError) as raised:
        list(model(server).stream(REQUEST))
    assert raised.value.kind is ModelErrorKind.INVALID_RESPONSE


def test_stop_ends_a_silent_stream_within_two_seconds(server: Server) -> None:
    server.replies.append(Reply(chunks=TOOL_STEP, stall_after=2))
    stop = threading.Event()
    events: list[ModelEvent] = []
    started = time.monotonic()
    for event in model(server).stream(REQUEST, cancelled=stop.is_set):
        events.append(event)
        if isinstance(event, TextDelta):
            threading.Timer(0.2, stop.set).start()
    assert time.monotonic() - started < 2.0
    assert events == [
        TextDelta("Running "),
        Finish(StopReason.CANCELLED, Usage(), Message("assistant", (TextBlock("Running "),))),
    ]


def test_the_registry_builds_one_client_from_settings(server: Server) -> None:
    settings = Settings(
        _env_file=None,
        models=("openai/gpt-5.4", "openai/llama3.2"),
        openai_base_url=server.url,
        openai_api_key="sk-test-123",
    )
    registry = build_registry(settings)
    first = registry.model("openai/gpt-5.4")
    assert registry.model("openai/gpt-5.4") is first
    server.replies.append(Reply(chunks=OLLAMA_STEP))
    events = list(first.stream(REQUEST))
    assert events[-1] == Finish(
        StopReason.END_TURN,
        Usage(20, 9),
        Message("assistant", (ReasoningBlock("Simple greeting."), TextBlock("Hello!"))),
    )
    # a local server: max_tokens; OpenAI itself: max_completion_tokens
    assert server.received[0].body["max_tokens"] == 64
    assert server.received[0].headers["authorization"] == "Bearer sk-test-123"


def test_a_stream_that_ends_without_a_finish_reason_is_unavailable(server: Server) -> None:
    server.replies.append(Reply(chunks=[chunk({"content": "half"})], ending="close"))
    events: list[ModelEvent] = []
    with pytest.raises(ModelError) as raised:
        events.extend(model(server).stream(REQUEST))
    assert events == [TextDelta("half")]
    assert raised.value.kind is ModelErrorKind.UNAVAILABLE
    assert "ended before the answer was complete" in raised.value.message


def test_a_connection_broken_mid_stream_is_unavailable(server: Server) -> None:
    server.replies.append(Reply(chunks=[chunk({"content": "half"})], ending="cut"))
    events: list[ModelEvent] = []
    with pytest.raises(ModelError) as raised:
        events.extend(model(server).stream(REQUEST))
    assert events == [TextDelta("half")]
    assert raised.value.kind is ModelErrorKind.UNAVAILABLE
    assert "connection to the endpoint failed" in raised.value.message


# --- attachments: images and text files in a user message ----------------------------------

PNG = b"\x89PNG\r\n\x1a\n" + bytes(8)
NOTES = '<file name="notes.md" type="text/markdown">\n# Notes\n</file>'


def test_an_image_goes_as_an_image_url_data_part_and_a_text_file_inline(server: Server) -> None:
    server.replies.append(Reply(chunks=OLLAMA_STEP))
    user = Message(
        "user",
        (
            TextBlock("what is this?"),
            ImageBlock("image/png", PNG),
            DocumentBlock("notes.md", "text/markdown", "# Notes"),
        ),
    )
    list(model(server).stream(ModelRequest(system="", messages=(user,), max_tokens=64)))
    [received] = server.received
    data_url = "data:image/png;base64," + base64.b64encode(PNG).decode()
    assert received.body["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "what is this?"},
                {"type": "image_url", "image_url": {"url": data_url}},
                {"type": "text", "text": NOTES},
            ],
        }
    ]


def test_a_text_file_without_images_stays_plain_content(server: Server) -> None:
    server.replies.append(Reply(chunks=OLLAMA_STEP))
    user = Message(
        "user", (TextBlock("review"), DocumentBlock("notes.md", "text/markdown", "# Notes"))
    )
    list(model(server).stream(ModelRequest(system="", messages=(user,), max_tokens=64)))
    [received] = server.received
    assert received.body["messages"] == [{"role": "user", "content": f"review\n{NOTES}"}]
