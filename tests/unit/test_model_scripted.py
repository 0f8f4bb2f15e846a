"""The scripted model's contract, the shipped example script, and the model registry."""

from __future__ import annotations

import itertools
import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from openagents.agent.models import (
    NO_MODELS,
    Finish,
    Message,
    ModelError,
    ModelErrorKind,
    ModelEvent,
    ModelRequest,
    ModelUnavailable,
    ReasoningBlock,
    ReasoningDelta,
    StopReason,
    TextBlock,
    TextDelta,
    ToolCall,
    ToolCallComplete,
    ToolResult,
    Usage,
    build_registry,
    every,
)
from openagents.agent.models.codec import message_from_json, message_json
from openagents.agent.models.registry import ModelId
from openagents.agent.models.scripted import ScriptedModel, words
from openagents.agent.models.tokens import estimate_tokens
from openagents.settings import Mode, Settings

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "scripted-turn.json"


def request(step: int = 0) -> ModelRequest:
    return ModelRequest(system="You code.", messages=(Message.user("go"),), step=step)


def script(tmp_path: Path, *responses: Any) -> Path:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"responses": list(responses)}))
    return path


def test_text_and_reasoning_stream_word_by_word_and_end_the_turn(tmp_path: Path) -> None:
    model = ScriptedModel(script(tmp_path, {"reasoning": "think  hard", "text": "Hello big world"}))
    events = list(model.stream(request()))
    assert events[:-1] == [
        ReasoningDelta("think  "),
        ReasoningDelta("hard"),
        TextDelta("Hello "),
        TextDelta("big "),
        TextDelta("world"),
    ]
    finish = events[-1]
    assert isinstance(finish, Finish)
    assert finish.stop_reason is StopReason.END_TURN
    assert finish.message == Message(
        "assistant", (ReasoningBlock("think  hard"), TextBlock("Hello big world"))
    )
    assert finish.usage.output_tokens == 5
    assert finish.usage.input_tokens > 0


def test_tool_calls_end_the_step_with_tool_use(tmp_path: Path) -> None:
    path = script(
        tmp_path,
        {"text": "one"},
        {"text": "Writing.", "toolCalls": [{"name": "write", "input": {"filePath": "a.py"}}]},
    )
    events = list(ScriptedModel(path).stream(request(step=1)))
    assert events[0] == TextDelta("Writing.")
    assert events[1] == ToolCallComplete("scripted-1-0", "write", {"filePath": "a.py"})
    finish = events[2]
    assert isinstance(finish, Finish)
    assert finish.stop_reason is StopReason.TOOL_USE
    assert finish.message.tool_calls == (ToolCall("scripted-1-0", "write", {"filePath": "a.py"}),)
    assert finish.message.text == "Writing."


def test_the_file_is_read_again_at_every_call(tmp_path: Path) -> None:
    path = script(tmp_path, {"text": "first"})
    model = ScriptedModel(path)
    assert next(iter(model.stream(request()))) == TextDelta("first")
    script(tmp_path, {"text": "second"})
    assert next(iter(model.stream(request()))) == TextDelta("second")


def test_past_the_last_response_is_an_error(tmp_path: Path) -> None:
    model = ScriptedModel(script(tmp_path, {"text": "only"}))
    with pytest.raises(ModelError) as raised:
        model.stream(request(step=1))
    assert raised.value.message == "scripted model has no response for step 1"
    assert raised.value.kind is ModelErrorKind.SCRIPT


def test_the_title_call_answers_the_title_and_leaves_the_steps_alone(tmp_path: Path) -> None:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"responses": [{"text": "step zero"}], "title": "Fix login bug"}))
    model = ScriptedModel(path)
    titled = ModelRequest(system="", messages=(Message.user("name it"),), purpose="title")
    assert [e for e in model.stream(titled) if isinstance(e, TextDelta)] == [
        TextDelta("Fix "),
        TextDelta("login "),
        TextDelta("bug"),
    ]
    assert next(iter(model.stream(request()))) == TextDelta("step ")  # step 0 unchanged
    script(tmp_path, {"text": "step zero"})  # no title answer
    with pytest.raises(ModelError) as raised:
        model.stream(titled)
    assert raised.value.message == "scripted model has no title response"


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("not json", "not readable JSON"),
        ('{"answers": []}', '{"responses": [...]}'),
        ('{"responses": [{"txt": "typo"}]}', "unknown keys ['txt']"),
        ('{"responses": [{"text": 3}]}', "must be strings"),
        ('{"responses": [{"chunkDelayMs": -1}]}', "non-negative integer"),
        ('{"responses": [{"toolCalls": [{"input": {}}]}]}', '{"name": str'),
    ],
)
def test_a_bad_script_is_a_readable_error(tmp_path: Path, content: str, needle: str) -> None:
    path = tmp_path / "script.json"
    path.write_text(content)
    with pytest.raises(ModelError) as raised:
        ScriptedModel(path).stream(request())
    assert needle in raised.value.message


def test_a_missing_file_is_a_readable_error(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="not found"):
        ScriptedModel(tmp_path / "nope.json").stream(request())


def test_chunks_are_chunk_delay_ms_apart(tmp_path: Path) -> None:
    model = ScriptedModel(script(tmp_path, {"text": "a b c d e", "chunkDelayMs": 40}))
    started = time.monotonic()
    stamps = [time.monotonic() - started for _ in model.stream(request())]
    gaps = [later - earlier for earlier, later in itertools.pairwise(stamps)]
    assert stamps[0] < 0.5  # the first word comes at once (no gap before it)
    assert len(gaps) == 5  # five words, then Finish
    assert all(gap >= 0.039 for gap in gaps[:4])  # 40 ms between words


def test_stop_ends_a_slow_stream_quickly_with_the_partial_message(tmp_path: Path) -> None:
    text = " ".join(f"w{i}" for i in range(100))
    model = ScriptedModel(script(tmp_path, {"text": text, "chunkDelayMs": 1000}))
    stop = threading.Event()
    events: list[ModelEvent] = []
    started = time.monotonic()
    for event in model.stream(request(), cancelled=stop.is_set):
        events.append(event)
        if len(events) == 2:
            threading.Timer(0.1, stop.set).start()
    elapsed = time.monotonic() - started
    assert elapsed < 1.5 + 0.5  # one full gap, then stop within the next one
    finish = events[-1]
    assert isinstance(finish, Finish)
    assert finish.stop_reason is StopReason.CANCELLED
    assert finish.message.text == "w0 w1 "


def test_the_example_turn_writes_tests_and_commits(tmp_path: Path) -> None:
    example = json.loads(EXAMPLE.read_text())
    assert all(response["chunkDelayMs"] == 30 for response in example["responses"])
    for response in example["responses"]:
        response["chunkDelayMs"] = 0
    model = ScriptedModel(script(tmp_path, *example["responses"]))
    calls: list[ToolCallComplete] = []
    stops: list[StopReason] = []
    step = 0
    while True:
        for event in model.stream(request(step)):
            if isinstance(event, ToolCallComplete):
                calls.append(event)
            if isinstance(event, Finish):
                stops.append(event.stop_reason)
        if stops[-1] is not StopReason.TOOL_USE:
            break
        step += 1
    assert stops == [StopReason.TOOL_USE] * 3 + [StopReason.END_TURN]
    assert [(call.name, call.input.get("filePath")) for call in calls[:2]] == [
        ("write", "multiply.py"),
        ("write", "test_multiply.py"),
    ]
    assert calls[2].input == {"command": "python3 -m unittest -v test_multiply"}
    command = calls[3].input["command"]
    assert isinstance(command, str)
    assert command.startswith("git add -A && git commit -m ")
    assert ScriptedModel(EXAMPLE).response(0).chunk_delay_ms == 30
    # and it names the new session and chat (the title call, apart from the turn's steps)
    assert ScriptedModel(EXAMPLE).title().text == "Add a multiply function"


def test_words_join_back() -> None:
    for text in ["", " lead", "a  b\n\nc ", "x"]:
        assert "".join(words(text)) == text


# --- registry ----------------------------------------------------------------------------


def settings(**values: Any) -> Settings:
    return Settings(_env_file=None, **values)


def test_model_ids_are_provider_slash_model() -> None:
    assert ModelId.parse("bedrock/arn:aws:bedrock:us-east-1:1:inference-profile/x") == ModelId(
        "bedrock", "arn:aws:bedrock:us-east-1:1:inference-profile/x"
    )
    for bad in ["gpt-5", "/x", "bedrock/", "acme/model"]:
        with pytest.raises(ModelUnavailable) as raised:
            ModelId.parse(bad)
        assert raised.value.code == "model_unavailable"
        assert raised.value.field == "modelId"


def test_no_model_configured_names_the_settings() -> None:
    registry = build_registry(settings())
    assert registry.available() == ()
    for call in (registry.default, lambda: registry.info("openai/gpt-5.4")):
        with pytest.raises(ModelUnavailable) as raised:
            call()
        assert raised.value.message == NO_MODELS
        for name in ["OPENAGENTS_MODELS", "OPENAGENTS_OPENAI_BASE_URL", "SCRIPTED_MODEL_FILE"]:
            assert name in raised.value.message


def test_the_configured_models_in_order_with_context_windows(tmp_path: Path) -> None:
    registry = build_registry(
        settings(
            models="bedrock/us.anthropic.claude-sonnet-4-5-v1:0, openai/llama3.2,openai/gpt-x",
            openai_base_url="http://127.0.0.1:11434/v1",
            model_context_windows={"openai/llama3.2": 32_000},
            scripted_model_file=script(tmp_path, {"text": "hi"}),
        ),
        bedrock_client=lambda: pytest.fail("not built until used"),
    )
    assert [info.id for info in registry.available()] == [
        "bedrock/us.anthropic.claude-sonnet-4-5-v1:0",
        "openai/llama3.2",
        "openai/gpt-x",
        "scripted/default",
    ]
    assert registry.default().id == "bedrock/us.anthropic.claude-sonnet-4-5-v1:0"
    assert registry.info("openai/llama3.2").context_window == 32_000
    assert registry.info("openai/gpt-x").context_window == 128_000
    assert registry.info("openai/gpt-x").to_json() == {
        "id": "openai/gpt-x",
        "provider": "openai",
        "name": "gpt-x",
        "contextWindow": 128_000,
    }
    model = registry.model("scripted/default")
    assert registry.model("scripted/default") is model
    assert next(iter(model.stream(request()))) == TextDelta("hi")
    with pytest.raises(ModelUnavailable, match=r"available: bedrock/"):
        registry.info("openai/other")


def test_unconfigured_models_say_what_is_missing(tmp_path: Path) -> None:
    registry = build_registry(
        settings(
            mode=Mode.AWS,
            models="bedrock/m,openai/gpt-5.4,scripted/default",
            scripted_model_file=script(tmp_path),
        )
    )
    assert [info.id for info in registry.available()] == ["bedrock/m"]
    with pytest.raises(ModelUnavailable, match="OPENAGENTS_OPENAI_BASE_URL"):
        registry.info("openai/gpt-5.4")
    with pytest.raises(ModelUnavailable, match="local mode only"):
        registry.info("scripted/default")


def test_usage_adds_up_and_has_the_api_shape() -> None:
    total = Usage(1, 2, 3, 4) + Usage(10, 20, 30, 40)
    assert total.to_json() == {
        "inputTokens": 11,
        "outputTokens": 22,
        "cacheReadTokens": 33,
        "cacheWriteTokens": 44,
    }
    assert Usage.from_json(total.to_json()) == total


def test_every_throttles_the_cancel_check() -> None:
    now = [0.0]
    reads: list[float] = []

    def read() -> bool:
        reads.append(now[0])
        return now[0] >= 1.0

    check = every(0.5, read, clock=lambda: now[0])
    for tick in range(12):
        now[0] = tick * 0.1
        check()
    assert reads == [0.0, 0.5, 1.0]
    assert check() is True


def test_stop_reasons_that_fail_a_run_say_why() -> None:
    assert StopReason.END_TURN.failure_message is None
    assert StopReason.CANCELLED.failure_message is None
    message = StopReason.CONTENT_FILTER.failure_message
    assert message is not None
    assert "content filter" in message


def test_messages_round_trip_through_json() -> None:
    message = Message(
        "assistant",
        (
            ReasoningBlock("hm", signature="sig"),
            TextBlock("Writing."),
            ToolCall("t1", "write", {"filePath": "a.py", "nested": [1, {"x": None}]}),
        ),
    )
    results = Message.tool_results([ToolResult("t1", "boom", is_error=True)])
    for original in (message, results, Message.user("hi")):
        encoded = json.loads(json.dumps(message_json(original)))
        assert message_from_json(encoded) == original
    assert message_json(results) == {
        "role": "user",
        "content": [{"type": "toolResult", "toolCallId": "t1", "content": "boom", "isError": True}],
    }


def test_estimate_tokens_grows_with_the_history() -> None:
    small = request()
    big = ModelRequest(
        system="You code.",
        messages=(Message.user("go"), Message.tool_results([ToolResult("t", "x" * 4000)])),
    )
    assert 0 < estimate_tokens(small) < 10
    assert 1000 <= estimate_tokens(big) <= 1010


def test_model_errors_survive_pickling() -> None:
    import pickle

    error = ModelError(ModelErrorKind.THROTTLED, "slow down", retryable=True)
    copy = pickle.loads(pickle.dumps(error))  # noqa: S301 - our own bytes
    assert (copy.kind, copy.message, copy.retryable) == (
        ModelErrorKind.THROTTLED,
        "slow down",
        True,
    )
