"""One agent turn as a durable execution: each model call and each tool call one step (and,
before the first tool call, the workspace checkpoint; after the first model call of a chat's
first turn, the title step that names it), each returning a small ``StepResult``. From the
run's second model step on, calls whose tool runs in the model step (``Tool.in_model_step``:
todo_write, whose output is its whole effect) run in that step when all of its calls do: the
step returns the outcome the tool steps would have given, with no calls left to run (the
message and the events live in the stores). SDK-free: the handler
(``functions/agent/handler.py``) passes the SDK's ``DurableContext``; anything with a
``step(func, name=...)`` of that shape runs it, and any ``TurnSteps`` (the loop) is driven.
The engine's own failures (a checkpoint that could not be written, an invocation to retry) are
the engine adapter's to recognise (``engine_error``; the durable SDK's, in
``functions/agent/handler.py``): they go up for the engine to retry, while anything else a step
raises ends the run.

A step that raises after its retries ends the run ``failed`` with its partial message kept.
Each step is given the seq its previous step ended at, so one that runs again (a replay after a
crash, a retry) does not log its interrupted attempt's events twice. The run's end is one step
(``finalize``) and its follow-ups (auto-commit, auto-PR, diff cache, PR state) another
(``follow-ups``), after the end is recorded: a crash between them replays the follow-ups.

A model step that failed throttled (the model's quota) is followed by a ``throttled`` step
(how long to wait, or the turn's failure past the bound), the engine's ``wait`` (the SDK's
``context.wait``: a durable wait, no invocation meanwhile) and the model step again
(``agent/throttle.py``). An engine without ``wait`` fails the turn at the first throttle.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeVar

from openagents.agent.models.port import JsonObject
from openagents.agent.turn import Outcome, StepResult, TurnSteps

log = logging.getLogger(__name__)
T = TypeVar("T")


class Steps(Protocol):
    def step(self, func: Callable[[Any], T], name: str | None = None) -> T: ...


Wait = Callable[[int, str], None]  # a named durable wait of so many seconds (the engine's)


def _none(_: Exception) -> bool:
    return False


def run_turn(
    event: Mapping[str, Any],
    context: Steps,
    loop: TurnSteps,
    *,
    engine_error: Callable[[Exception], bool] = _none,
    wait: Wait | None = None,
) -> dict[str, Any]:
    run_id = str(event["runId"])
    outcome: Outcome = "failed"
    error: str | None = None
    try:
        outcome, error = _loop(run_id, context, loop, wait)
    except Exception as failure:
        if engine_error(failure):
            raise  # the engine's own (checkpoint, invocation): it retries the invocation
        log.exception("turn %s failed", run_id)
        outcome, error = "failed", f"The turn failed: {failure}"
    status = context.step(lambda _: loop.end(run_id, outcome, error).value, name="finalize")
    context.step(lambda _: loop.follow_up(run_id), name="follow-ups")
    return {"runId": run_id, "status": status}


class _Seq:
    """The seq the last step ended at: where the next one's events start."""

    def __init__(self) -> None:
        self.at: int | None = None

    def after(self, result: StepResult) -> StepResult:
        if result.seq is not None:
            self.at = result.seq
        return result


def _loop(
    run_id: str, context: Steps, loop: TurnSteps, wait: Wait | None
) -> tuple[Outcome, str | None]:
    seq = _Seq()
    begin = seq.after(
        StepResult.from_json(context.step(lambda _: loop.begin(run_id).to_json(), name="begin"))
    )
    checkpoint = _Checkpoint(run_id, context, loop)
    for i, call in enumerate(begin.calls):  # approved calls of a continued message
        checkpoint.before_tools()
        tool = seq.after(
            StepResult.from_json(
                context.step(_tool_step(loop, run_id, call, False, seq.at), name=f"approved-{i}")
            )
        )
        if tool.outcome in ("aborted", "failed", "end"):
            return tool.outcome, tool.error
    n = 0
    while True:
        model = _model(run_id, n, context, loop, seq, wait)
        if n == 0 and model.title:  # a new chat is named once its first answer streamed
            context.step(lambda _: loop.title_step(run_id), name="title")  # (docs/agent.md)
        if model.outcome != "tools":
            return model.outcome, model.error
        waiting = False
        checkpoint.before_tools()
        for i, call in enumerate(model.calls):
            last = i == len(model.calls) - 1
            tool = seq.after(
                StepResult.from_json(
                    context.step(_tool_step(loop, run_id, call, last, seq.at), name=f"tool-{n}-{i}")
                )
            )
            if tool.outcome in ("aborted", "failed", "end"):
                return tool.outcome, tool.error
            waiting = waiting or tool.outcome == "waiting"
        if waiting:
            return "waiting", None
        n += 1


def _model(
    run_id: str, n: int, context: Steps, loop: TurnSteps, seq: _Seq, wait: Wait | None
) -> StepResult:
    """Model step ``n``; while it fails throttled, a wait (the engine's durable wait, each one
    named) and the step again, as long as ``loop.throttled`` allows (``agent/throttle.py``)."""
    model = seq.after(
        StepResult.from_json(context.step(_model_step(loop, run_id, seq.at), name=f"model-{n}"))
    )
    attempt = waited = 0
    while model.throttled and model.error is not None:
        error, since = model.error, seq.at
        throttled = seq.after(
            StepResult.from_json(
                context.step(
                    _throttled_step(loop, run_id, error, attempt, waited if wait else -1, since),
                    name=f"throttled-{n}-{attempt}",
                )
            )
        )
        if throttled.wait is None or wait is None:
            return throttled
        wait(throttled.wait, f"wait-{n}-{attempt}")
        waited += throttled.wait
        attempt += 1
        model = seq.after(
            StepResult.from_json(
                context.step(_model_step(loop, run_id, seq.at), name=f"model-{n}-{attempt}")
            )
        )
    return model


class _Checkpoint:
    """The run's checkpoint: one step of its own, before the first tool step only."""

    def __init__(self, run_id: str, context: Steps, loop: TurnSteps) -> None:
        self._run_id, self._context, self._loop = run_id, context, loop
        self._taken = False

    def before_tools(self) -> None:
        if not self._taken:
            self._taken = True
            self._context.step(lambda _: self._loop.checkpoint(self._run_id), name="checkpoint")


def _model_step(loop: TurnSteps, run_id: str, since: int | None) -> Callable[[Any], JsonObject]:
    def step(_: Any) -> JsonObject:
        return loop.model_step(run_id, since).to_json()

    return step


def _throttled_step(
    loop: TurnSteps, run_id: str, error: str, attempt: int, waited: int, since: int | None
) -> Callable[[Any], JsonObject]:
    def step(_: Any) -> JsonObject:
        return loop.throttled(run_id, error, attempt=attempt, waited=waited, since=since).to_json()

    return step


def _tool_step(
    loop: TurnSteps, run_id: str, call: str, last: bool, since: int | None
) -> Callable[[Any], JsonObject]:
    def step(_: Any) -> JsonObject:
        return loop.tool_step(run_id, call, last=last, since=since).to_json()

    return step
