"""One agent turn as a durable execution: each model call and each tool call one step (and,
before the first tool call, the workspace checkpoint; after the first model call of a chat's
first turn, the title step that names it), each returning a small ``StepResult``
(the message and the events live in the stores). SDK-free: the handler
(``functions/agent/handler.py``) passes the SDK's ``DurableContext``; anything with a
``step(func, name=...)`` of that shape runs it.

A step that raises after its retries ends the run ``failed`` with its partial message kept.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeVar

from openagents.agent.loop import AgentLoop, Outcome, StepResult

log = logging.getLogger(__name__)
T = TypeVar("T")


class Steps(Protocol):
    def step(self, func: Callable[[Any], T], name: str | None = None) -> T: ...


def run_turn(event: Mapping[str, Any], context: Steps, loop: AgentLoop) -> dict[str, Any]:
    run_id = str(event["runId"])
    outcome: Outcome = "failed"
    error: str | None = None
    try:
        outcome, error = _loop(run_id, context, loop)
    except Exception as failure:
        if _engine_error(failure):
            raise  # the engine's own (checkpoint, invocation): it retries the invocation
        log.exception("turn %s failed", run_id)
        outcome, error = "failed", f"The turn failed: {failure}"
    status = context.step(lambda _: loop.finalize(run_id, outcome, error).value, name="finalize")
    return {"runId": run_id, "status": status}


def _loop(run_id: str, context: Steps, loop: AgentLoop) -> tuple[Outcome, str | None]:
    begin = StepResult.from_json(context.step(lambda _: loop.begin(run_id).to_json(), name="begin"))
    checkpoint = _Checkpoint(run_id, context, loop)
    for i, call in enumerate(begin.calls):  # approved calls of a continued message
        checkpoint.before_tools()
        tool = StepResult.from_json(
            context.step(_tool_step(loop, run_id, call, False), name=f"approved-{i}")
        )
        if tool.outcome in ("aborted", "failed", "end"):
            return tool.outcome, tool.error
    n = 0
    while True:
        model = StepResult.from_json(
            context.step(lambda _: loop.model_step(run_id).to_json(), name=f"model-{n}")
        )
        if n == 0 and model.title:  # a new chat is named once its first answer streamed
            context.step(lambda _: loop.title_step(run_id), name="title")  # (docs/agent.md)
        if model.outcome != "tools":
            return model.outcome, model.error
        waiting = False
        checkpoint.before_tools()
        for i, call in enumerate(model.calls):
            last = i == len(model.calls) - 1
            tool = StepResult.from_json(
                context.step(_tool_step(loop, run_id, call, last), name=f"tool-{n}-{i}")
            )
            if tool.outcome in ("aborted", "failed", "end"):
                return tool.outcome, tool.error
            waiting = waiting or tool.outcome == "waiting"
        if waiting:
            return "waiting", None
        n += 1


class _Checkpoint:
    """The run's checkpoint: one step of its own, before the first tool step only."""

    def __init__(self, run_id: str, context: Steps, loop: AgentLoop) -> None:
        self._run_id, self._context, self._loop = run_id, context, loop
        self._taken = False

    def before_tools(self) -> None:
        if not self._taken:
            self._taken = True
            self._context.step(lambda _: self._loop.checkpoint(self._run_id), name="checkpoint")


def _tool_step(
    loop: AgentLoop, run_id: str, call: str, last: bool
) -> Callable[[Any], dict[str, Any]]:
    def step(_: Any) -> dict[str, Any]:
        return loop.tool_step(run_id, call, last=last).to_json()

    return step


def _engine_error(error: Exception) -> bool:
    """The durable SDK's own failures, except a step that failed after its retries."""
    kind = type(error)
    return kind.__module__.startswith("aws_durable_execution_sdk_python") and not any(
        base.__name__ == "StepError" for base in kind.__mro__
    )
