"""Model throttling is a wait, not the turn's end: Bedrock's ThrottlingException (botocore's
Stubber) for longer than the adapter's own retries, on the real steps driven in process
(``test_loop_in_process``'s world) by an engine whose durable wait moves a fake clock."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest
from openagents.agent.durable import run_turn
from openagents.agent.loop import AgentLoop, LoopConfig
from openagents.agent.models.bedrock import BedrockModel
from openagents.agent.models.registry import ModelInfo, ModelRegistry

from tests.agent.test_loop_in_process import AT, MODEL, Journal, World, every_chunk_an_event, world
from tests.bedrock_stub import Bedrock

__all__ = ["every_chunk_an_event", "world"]  # the fixtures, used here
THROTTLED = ("ThrottlingException", "Too many tokens, please wait before trying again.", 429)
SAID = f"Bedrock model us.anthropic.claude: {THROTTLED[1]} ({THROTTLED[0]})"  # the adapter's
ANSWER: list[dict[str, Any]] = [
    {"messageStart": {"role": "assistant"}},
    {"contentBlockDelta": {"delta": {"text": "Done."}, "contentBlockIndex": 0}},
    {"contentBlockStop": {"contentBlockIndex": 0}},
    {"messageStop": {"stopReason": "end_turn"}},
    {
        "metadata": {
            "usage": {"inputTokens": 5, "outputTokens": 1, "totalTokens": 6},
            "metrics": {"latencyMs": 10},
        }
    },
]


class Waiting(Journal):
    """The engine, with a durable wait: recorded once by name, it moves the fake clock."""

    def __init__(self, during: Callable[[], object] = lambda: None) -> None:
        super().__init__()
        self.now = AT
        self.waits: list[tuple[int, str]] = []
        self._during = during

    def wait(self, seconds: int, name: str) -> None:
        self.waits.append((seconds, name))
        self.now += timedelta(seconds=seconds)
        self._during()

    def clock(self) -> datetime:
        return self.now


@pytest.fixture
def bedrock() -> Iterator[Bedrock]:
    stub = Bedrock()
    with stub.stubber:
        yield stub
    stub.stubber.assert_no_pending_responses()


def loop(
    world: World, bedrock: Bedrock, engine: Waiting, wait: int, counted: list[str]
) -> AgentLoop:
    model = BedrockModel(
        bedrock.client, "us.anthropic.claude", max_attempts=2, backoff_base_seconds=0
    )
    info = ModelInfo(MODEL, "bedrock", "claude", context_window=200_000)
    registry = ModelRegistry({MODEL: (info, lambda _id: model)})
    config = LoopConfig(throttle_wait_seconds=wait)
    return AgentLoop(
        world.runs,
        world.host,
        registry,
        engine.clock,
        config,
        count=counted.append,
        jitter=lambda: 0.0,
    )


def test_a_throttled_turn_waits_for_capacity_then_completes(world: World, bedrock: Bedrock) -> None:
    for _ in range(2):  # the adapter's two attempts
        bedrock.fail(*THROTTLED)
    bedrock.answer(ANSWER)
    run, engine, counted = world.start(), Waiting(), list[str]()
    result = run_turn(
        {"runId": run.id}, engine, loop(world, bedrock, engine, 900, counted), wait=engine.wait
    )
    assert result["status"] == "completed"
    assert engine.waits == [(5, "wait-0-0")]  # 10 s, jittered to its half
    assert counted == ["ModelThrottled"]
    chunks = world.chunks(run.id)  # seqs contiguous: nothing logged twice
    waiting = [c for c in chunks if c["type"] == "data-waiting"]
    assert waiting == [
        {
            "type": "data-waiting",
            "id": "waiting",
            "data": {
                "reason": "model capacity",
                "retryAt": (AT + timedelta(seconds=5)).isoformat(),
                "error": SAID,
            },
        }
    ]
    assert not [c for c in chunks if c["type"] == "error"]
    assert [c["type"] for c in chunks].count("text-start") == 1
    parts = world.assistant(run.assistant_message_id)["parts"]
    assert [p["type"] for p in parts] == ["step-start", "text"]  # the throttled step left none
    assert world.runs.get(run.id).model_calls == 1  # type: ignore[union-attr]


def test_a_stop_during_the_wait_ends_the_turn_aborted(world: World, bedrock: Bedrock) -> None:
    for _ in range(2):
        bedrock.fail(*THROTTLED)
    run = world.start()
    engine, counted = Waiting(during=lambda: world.runs.request_cancel(run.id)), list[str]()
    result = run_turn(
        {"runId": run.id}, engine, loop(world, bedrock, engine, 900, counted), wait=engine.wait
    )
    assert result["status"] == "aborted"
    assert len(engine.waits) == 1  # the model is not called again
    world.chunks(run.id)


def test_past_the_bound_the_turn_fails_saying_for_how_long(world: World, bedrock: Bedrock) -> None:
    for _ in range(2 * 6):  # the first call and five more, each throttled twice
        bedrock.fail(*THROTTLED)
    run, engine, counted = world.start(), Waiting(), list[str]()
    result = run_turn(
        {"runId": run.id}, engine, loop(world, bedrock, engine, 120, counted), wait=engine.wait
    )
    assert result["status"] == "failed"
    assert [s for s, _ in engine.waits] == [5, 10, 20, 40, 45]  # doubling, the last cut to 2 min
    assert len(counted) == 5
    ended = world.runs.get(run.id)
    assert ended is not None
    error = "The model's quota was exhausted for 2 minutes: " + SAID
    assert ended.error == error
    assert [c for c in world.chunks(run.id) if c["type"] == "error"] == [
        {"type": "error", "errorText": error}
    ]
