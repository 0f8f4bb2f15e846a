"""The durable orchestration: one named step per model and tool call, small results, and a run
that always ends (finalize), whatever a step did."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from openagents.agent.durable import run_turn
from openagents.agent.loop import AgentLoop, StepResult
from openagents.store.runs import RunStatus


class Steps:
    def __init__(self) -> None:
        self.names: list[str] = []

    def step(self, func: Callable[[Any], Any], name: str | None = None) -> Any:
        self.names.append(str(name))
        return func(None)


class Loop:
    def __init__(
        self, models: list[StepResult], tools: dict[str, StepResult] | None = None
    ) -> None:
        self.models, self.tools = models, tools or {}
        self.finalized: tuple[str, str | None] | None = None
        self.approved: tuple[str, ...] = ()
        self.checkpoints = 0
        self.titled = 0
        self.followed = False

    def begin(self, run_id: str) -> StepResult:
        return StepResult("tools", self.approved)

    def checkpoint(self, run_id: str) -> dict[str, Any]:
        self.checkpoints += 1
        return {"commit": "c1"}

    def model_step(self, run_id: str, since: int | None = None) -> StepResult:
        return self.models.pop(0)

    def throttled(
        self, run_id: str, error: str, *, attempt: int, waited: int, since: int | None = None
    ) -> StepResult:
        if waited < 0 or waited >= 30:
            return StepResult("failed", error=f"exhausted: {error}")
        return StepResult("tools", wait=10 + attempt)

    def title_step(self, run_id: str) -> str | None:
        self.titled += 1
        return "A title"

    def tool_step(
        self, run_id: str, call: str, *, last: bool, since: int | None = None
    ) -> StepResult:
        result = self.tools.get(call, StepResult("tools"))
        if isinstance(result, Exception):
            raise result
        return result

    def end(self, run_id: str, outcome: str, error: str | None = None) -> RunStatus:
        self.finalized = (outcome, error)
        return RunStatus.COMPLETED

    def follow_up(self, run_id: str) -> str:
        self.followed = True
        return "completed"


def run(loop: Loop) -> tuple[list[str], dict[str, Any]]:
    steps = Steps()
    result = run_turn({"runId": "r1"}, steps, loop)  # the fake is a TurnSteps
    return steps.names, result


def test_a_step_per_model_and_tool_call() -> None:
    first = StepResult("tools", ("a", "b"), title=True)  # the chat's first turn
    loop = Loop([first, StepResult("tools", ("c",), title=True), StepResult("end")])
    names, result = run(loop)
    assert names == [
        "begin",
        "model-0",
        "title",  # once, after the run's first model step
        "checkpoint",  # once, before the run's first tool step
        "tool-0-0",
        "tool-0-1",
        "model-1",
        "tool-1-0",
        "model-2",
        "finalize",
        "follow-ups",  # after the run's end is recorded: a replay runs them
    ]
    assert result == {"runId": "r1", "status": "completed"}
    assert loop.finalized == ("end", None)
    assert loop.followed
    assert loop.checkpoints == 1
    assert loop.titled == 1


def test_the_checkpoint_comes_before_approved_calls_and_not_without_tools() -> None:
    continued = Loop([StepResult("tools", ("b",)), StepResult("end")])
    continued.approved = ("a",)
    names, _ = run(continued)
    assert names[:4] == ["begin", "checkpoint", "approved-0", "model-0"]
    assert names.count("checkpoint") == 1
    talk = Loop([StepResult("end", title=True)])
    assert run(talk)[0] == ["begin", "model-0", "title", "finalize", "follow-ups"]
    assert talk.checkpoints == 0


def test_no_title_step_when_the_first_model_step_says_nothing_can_be_titled() -> None:
    later = Loop([StepResult("tools", ("a",)), StepResult("end")])  # not the chat's first turn
    assert run(later)[0] == [
        "begin",
        "model-0",
        "checkpoint",
        "tool-0-0",
        "model-1",
        "finalize",
        "follow-ups",
    ]
    assert later.titled == 0


def test_the_title_flag_survives_the_checkpoint_and_an_older_one_may_title() -> None:
    for title in (True, False):
        result = StepResult("tools", ("a",), title=title)
        assert StepResult.from_json(result.to_json()) == result
    older: dict[str, Any] = {"outcome": "end", "calls": [], "error": None}  # before the flag
    assert StepResult.from_json(older).title is True


def test_waiting_aborted_and_failed_end_the_loop() -> None:
    waiting = Loop([StepResult("tools", ("a", "b"))], {"a": StepResult("waiting")})
    assert run(waiting)[0][-3:] == [
        "tool-0-1",
        "finalize",
        "follow-ups",
    ]  # the other calls still run
    assert waiting.finalized == ("waiting", None)
    aborted = Loop([StepResult("tools", ("a", "b"))], {"a": StepResult("aborted")})
    assert run(aborted)[0][-3:] == ["tool-0-0", "finalize", "follow-ups"]
    assert aborted.finalized == ("aborted", None)
    failed = Loop([StepResult("failed", error="model down")])
    run(failed)
    assert failed.finalized == ("failed", "model down")


def test_a_step_that_raises_still_ends_the_run() -> None:
    broken = Loop([StepResult("tools", ("a",))], {"a": RuntimeError("store gone")})  # type: ignore[dict-item]
    names, _ = run(broken)
    assert names[-2:] == ["finalize", "follow-ups"]
    assert broken.finalized == ("failed", "The turn failed: store gone")


def test_the_lambda_handler_is_the_durable_handler() -> None:
    from functions.agent import handler

    assert callable(handler.lambda_handler)
    assert handler.make_handler(lambda: AgentLoop.__new__(AgentLoop)) is not handler.lambda_handler


def test_a_throttled_model_step_waits_durably_then_runs_again() -> None:
    throttled = StepResult("failed", error="slow down", throttled=True)
    loop = Loop([throttled, throttled, StepResult("end")])
    steps, waits = Steps(), list[tuple[int, str]]()
    result = run_turn(
        {"runId": "r1"}, steps, loop, wait=lambda seconds, name: waits.append((seconds, name))
    )
    assert result["status"] == "completed"
    assert loop.finalized == ("end", None)
    assert waits == [(10, "wait-0-0"), (11, "wait-0-1")]
    assert steps.names == [
        "begin", "model-0", "throttled-0-0", "model-0-1", "throttled-0-1", "model-0-2",
        "finalize", "follow-ups",
    ]  # fmt: skip


def test_a_throttled_model_step_past_the_bound_or_without_waits_fails_the_turn() -> None:
    throttled = StepResult("failed", error="slow down", throttled=True)
    loop = Loop([throttled] * 4)
    run_turn({"runId": "r1"}, Steps(), loop, wait=lambda seconds, name: None)
    assert loop.finalized == ("failed", "exhausted: slow down")  # 10 + 11 + 12 >= 30
    assert loop.models == []
    loop = Loop([throttled])
    run_turn({"runId": "r1"}, Steps(), loop)  # an engine that cannot wait
    assert loop.finalized == ("failed", "exhausted: slow down")
