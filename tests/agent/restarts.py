"""A killed local runtime, in process: a ``LocalAgentRuntime`` whose writes (to the run store
and to the durable execution store) block forever once ``kill()`` is called, so the threads it
left behind never touch anything again (as after kill -9), and a second runtime built on the
same home that carries its runs on. Plus the views a test compares: a run's chunks with its
deltas merged and ids left out, and the assistant message's parts without ids."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from openagents.agent.loop import AgentLoop
from openagents.agent.models.port import ChatModel, ModelEvent, ModelRequest
from openagents.agent.replay import merged
from openagents.local.agent_runtime import LocalAgentRuntime
from openagents.store.runs import RunStore

RUN_WRITES = frozenset({"append", "finish", "record_checkpoint", "start", "request_cancel"})
# what a killed runtime's threads wait on: set only when the test session ends, and then they
# unwind by raising (never writing), so the interpreter can join them and exit
TESTS_OVER = threading.Event()


class Killed(BaseException):
    """Raised in a killed runtime's thread once the tests are over."""


def dead_forever() -> None:
    TESTS_OVER.wait()
    raise Killed


class Kill:
    def __init__(self) -> None:
        self.dead = threading.Event()

    def __call__(self) -> None:
        self.dead.set()

    def gate(self) -> None:
        """A write: never returns once killed."""
        if self.dead.is_set():
            dead_forever()


class KillableRuns:
    """The run store, its writes blocked forever after the kill."""

    def __init__(self, runs: RunStore, kill: Kill) -> None:
        self._runs, self._kill = runs, kill

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._runs, name)
        if name not in RUN_WRITES:
            return attribute

        def write(*args: Any, **kwargs: Any) -> Any:
            self._kill.gate()
            return attribute(*args, **kwargs)

        return write


class HeldModels:
    """The model registry, its ``step``-th model call held after ``after`` events (never let go:
    the process holding it is killed); ``reached`` is set once it holds."""

    def __init__(self, models: Any, step: int, after: int) -> None:
        self._models, self._step, self._after = models, step, after
        self.reached = threading.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._models, name)

    def model(self, model_id: str) -> ChatModel:
        inner = self._models.model(model_id)
        held = self

        class Held:
            def __getattr__(self, name: str) -> Any:
                return getattr(inner, name)

            def stream(self, request: ModelRequest, **kw: Any) -> Iterator[ModelEvent]:
                for i, event in enumerate(inner.stream(request, **kw)):
                    if request.step == held._step and i == held._after:
                        held.reached.set()
                        dead_forever()
                    yield event

        return Held()


class KilledAtFollowUps:
    """The turn's host, killed as the run's follow-ups begin (its end recorded, nothing of its
    follow-ups done); ``reached`` is set then."""

    def __init__(self, host: Any, kill: Kill) -> None:
        self._host, self._kill = host, kill
        self.reached = threading.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._host, name)

    def ended(self, run: Any) -> None:
        self._kill()
        self.reached.set()
        dead_forever()


def loop_like(
    loop: AgentLoop, *, runs: Any = None, models: Any = None, host: Any = None
) -> AgentLoop:
    """A loop of another process: the same stores and host, nothing kept."""
    return AgentLoop(
        runs or loop._runs,
        host or loop._host,
        models or loop._models,
        loop._clock,
        loop._config,
    )


def killable_runtime(
    home: Path, loop: AgentLoop, kill: Kill, models: Any = None, host: Any = None
) -> LocalAgentRuntime:
    runs = KillableRuns(loop._runs, kill)
    doomed = loop_like(loop, runs=runs, models=models, host=host)
    runtime = LocalAgentRuntime(home, runs, lambda: doomed)
    runtime._started_runner()
    store = runtime._store
    assert store is not None
    save = store.save

    def saved(execution: Any) -> None:
        kill.gate()
        save(execution)

    store.save = saved  # type: ignore[method-assign]
    return runtime


def chunks(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The run's chunks, deltas merged (their cut is timing), block and message ids left out."""
    return [
        {k: v for k, v in chunk.items() if k not in ("id", "messageId", "toolCallId")}
        for chunk in merged([event["chunk"] for event in events])
    ]


def parts(message: dict[str, Any]) -> list[dict[str, Any]]:
    """The message's parts, tool call ids left out."""
    return [{k: v for k, v in p.items() if k != "toolCallId"} for p in message["parts"]]
