"""The AWS shape of "a restart replays" (issue 21): the agent function's own handler
(``functions/agent/handler.make_handler``) on the durable SDK's testing runner, with a step
failed on purpose mid model step and mid tool step. Each failure ends the invocation (the SDK
checkpoints the step's retry and suspends); the runner invokes the function again, and the
handler replays the execution from its checkpoints: every completed step returns its recorded
result (no second model call for a completed step, no second run of a completed tool call), the
interrupted step runs again, and the turn ends as an uninterrupted one would — the property
``tests/agent/test_turn_replay.py`` proves on one machine."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from aws_durable_execution_sdk_python.lambda_service import InvocationStatus
from aws_durable_execution_sdk_python_testing.runner import DurableFunctionTestRunner
from openagents.agent.loop import StepResult
from openagents.store.runs import RunStatus

from functions.agent.handler import make_handler

MODEL_STEPS = {0: "model-0", 11: "model-1", 21: "model-2"}  # by the seq each starts at


class Interrupted(RuntimeError):
    """The invocation died in the middle of a step (its process, its Lambda)."""


class Turn:
    """A turn's steps as the loop has them: two model calls, a tool call after each but the
    last; ``fail_once`` names the steps whose first attempt dies half-way (after the model
    call streamed or the tool ran its command, before the step's result was checkpointed)."""

    def __init__(self, fail_once: set[str]) -> None:
        self.fail_once = set(fail_once)
        self.attempts: Counter[str] = Counter()  # a step's bodies run, per step
        self.model_calls: Counter[str] = Counter()  # calls made by each model step
        self.executions: Counter[str] = Counter()  # commands run by each tool step
        self.invocations = 0
        self.ended: list[str] = []
        self.followed = 0

    def _maybe_die(self, name: str) -> None:
        if name in self.fail_once:
            self.fail_once.discard(name)
            raise Interrupted(f"the invocation died in {name}")

    def begin(self, run_id: str) -> StepResult:
        self.attempts["begin"] += 1
        return StepResult("tools", (), seq=0)

    def checkpoint(self, run_id: str) -> dict[str, Any]:
        self.attempts["checkpoint"] += 1
        return {"commit": "c0"}

    def model_step(self, run_id: str, since: int | None = None) -> StepResult:
        name = MODEL_STEPS[since or 0]  # each model step starts at the seq the last one ended
        self.attempts[name] += 1
        self.model_calls[name] += 1  # the model was called (and streamed)
        self._maybe_die(name)
        if name == "model-2":
            return StepResult("end", seq=30)
        return StepResult("tools", (f"call-{name[-1]}",), seq=10 * (int(name[-1]) + 1))

    def title_step(self, run_id: str) -> str | None:
        return None

    def tool_step(
        self, run_id: str, call: str, *, last: bool, since: int | None = None
    ) -> StepResult:
        name = f"tool-{call}"
        self.attempts[name] += 1
        self.executions[name] += 1  # the command ran
        self._maybe_die(name)
        return StepResult("tools", seq=(since or 0) + 1)

    def end(self, run_id: str, outcome: str, error: str | None = None) -> RunStatus:
        self.ended.append(outcome)
        return RunStatus.COMPLETED if outcome == "end" else RunStatus.FAILED

    def follow_up(self, run_id: str) -> str:
        self.followed += 1
        return "completed"


def _run(turn: Turn) -> Any:
    def loop() -> Turn:  # the handler asks for the loop once per invocation
        turn.invocations += 1
        return turn

    handler = make_handler(loop)  # type: ignore[arg-type]
    with DurableFunctionTestRunner(handler=handler) as runner:  # skips the retry delays
        return runner.run(input=json.dumps({"runId": "run-1"}), execution_timeout=60)


def test_an_uninterrupted_turn_on_the_testing_runner() -> None:
    turn = Turn(fail_once=set())
    result = _run(turn)
    assert result.status is InvocationStatus.SUCCEEDED
    assert json.loads(result.result) == {"runId": "run-1", "status": "completed"}
    assert turn.invocations == 1
    assert set(turn.attempts.values()) == {1}


def test_an_invocation_that_dies_mid_model_and_mid_tool_step_replays_the_completed_steps() -> None:
    turn = Turn(fail_once={"model-1", "tool-call-1"})
    result = _run(turn)

    assert result.status is InvocationStatus.SUCCEEDED
    assert json.loads(result.result) == {"runId": "run-1", "status": "completed"}
    assert turn.invocations == 3  # each interruption ended the invocation: replayed twice
    # the completed steps were not run again: their recorded results were replayed
    assert turn.attempts["begin"] == 1
    assert turn.attempts["checkpoint"] == 1
    assert turn.model_calls["model-0"] == 1  # no second model call for a completed step
    assert turn.executions["tool-call-0"] == 1  # no second run of a completed tool call
    assert turn.model_calls["model-2"] == 1
    # the interrupted steps ran again, once each
    assert turn.model_calls["model-1"] == 2
    assert turn.executions["tool-call-1"] == 2
    assert turn.ended == ["end"]  # the turn's end and its follow-ups, once
    assert turn.followed == 1
    names = [op.name for op in result.operations]
    assert names == [
        "begin",
        "model-0",
        "checkpoint",
        "tool-0-0",
        "model-1",
        "tool-1-0",
        "model-2",
        "finalize",
        "follow-ups",
    ]


class ThrottledOnce(Turn):
    """The first model call throttled after the adapter's retries: the turn waits for capacity."""

    def __init__(self) -> None:
        super().__init__(fail_once=set())
        self.throttles: list[tuple[int, int]] = []

    def model_step(self, run_id: str, since: int | None = None) -> StepResult:
        if not self.throttles:
            self.attempts["throttled model-0"] += 1
            return StepResult("failed", error="slow down", seq=0, throttled=True)
        return super().model_step(run_id, since)

    def throttled(
        self, run_id: str, error: str, *, attempt: int, waited: int, since: int | None = None
    ) -> StepResult:
        self.throttles.append((attempt, waited))
        return StepResult("tools", seq=since, wait=10)


def test_a_throttled_model_step_is_a_durable_wait_the_invocation_ends_meanwhile() -> None:
    turn = ThrottledOnce()
    result = _run(turn)
    assert result.status is InvocationStatus.SUCCEEDED
    assert json.loads(result.result) == {"runId": "run-1", "status": "completed"}
    assert turn.throttles == [(0, 0)]
    assert turn.attempts["throttled model-0"] == 1  # replayed from its checkpoint
    assert turn.invocations == 2  # the wait suspended the invocation; another took it up
    names = [op.name for op in result.operations]
    assert names[:5] == ["begin", "model-0", "throttled-0-0", "wait-0-0", "model-0-1"]
    assert names[-2:] == ["finalize", "follow-ups"]
