"""A stop on one machine that the turn does not honour (a model step that ignores the cancel
flag): once the grace is out, the run's execution is paused through the runner's public API
(its invocation ends at its next checkpoint), the run ends ``aborted`` with its follow-ups, and
the execution, resumed, runs out to its end (each step finds the run ended): nothing is left
for a restart to carry on, the turn's end is recorded once and the stream ends with its
``finish``, seqs contiguous."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

from openagents.agent.models.port import ChatModel, ModelEvent, ModelRequest
from openagents.agent.stopping import Grace
from openagents.local.agent_runtime import LocalAgentRuntime

from tests.agent.conftest import AgentApi
from tests.agent.restarts import loop_like


class Unheeding:
    """The model registry, its first call held after two events until ``release`` is set,
    deaf to the cancel flag meanwhile; ``reached`` is set once it holds."""

    def __init__(self, models: Any) -> None:
        self._models = models
        self.reached, self.release = threading.Event(), threading.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._models, name)

    def model(self, model_id: str) -> ChatModel:
        inner, held = self._models.model(model_id), self

        class Held:
            def __getattr__(self, name: str) -> Any:
                return getattr(inner, name)

            def stream(self, request: ModelRequest, **kw: Any) -> Iterator[ModelEvent]:
                for i, event in enumerate(inner.stream(request)):  # no cancel check given
                    if request.step == 0 and i == 2 and not held.release.is_set():
                        held.reached.set()
                        assert held.release.wait(120)
                    yield event

        return Held()


def test_a_stop_the_turn_does_not_honour_pauses_ends_and_runs_the_execution_out(
    agent_api: AgentApi, live_session: tuple[str, str], monkeypatch: Any
) -> None:
    session_id, chat_id = live_session
    agent_api.script.set([{"text": " ".join(f"w{i}" for i in range(20))}])
    container = agent_api.container
    home, loop = agent_api.settings.home, container.agent_loop
    models = Unheeding(loop._models)
    runtime = LocalAgentRuntime(
        home,
        loop._runs,
        lambda: loop_like(loop, models=models),
        stop_grace=Grace(0.0),  # the grace is out at once: the stop must act
        pause_wait_seconds=120,
    )
    monkeypatch.setattr(container.agent, "_engine", lambda: runtime)
    started = agent_api.turn(session_id, chat_id, "Talk")
    assert started.status == 202, started.body
    run_id = str(started.body["runId"])
    assert models.reached.wait(60)

    stopped = agent_api.post(f"/api/chat/{chat_id}/stop", {})
    assert stopped.status == 200, stopped.body
    arn = runtime._executions[run_id]
    store = runtime._store
    assert store is not None

    def paused() -> bool:
        return store.load(arn).is_paused

    _until(paused)  # the stop holds the execution while its step is in flight
    run = loop._runs.get(run_id)
    assert run is not None
    assert run.status.value == "running"  # not ended before the execution is held
    models.release.set()  # the step returns; its invocation ends at its checkpoint
    runtime.wait(run_id)  # resumed, the execution runs out to its end

    ended = loop._runs.get(run_id)
    assert ended is not None
    assert ended.status.value == "aborted"
    assert store.load(arn).is_complete
    events = agent_api.events(chat_id)
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert events[-1]["chunk"] == {"type": "finish", "finishReason": "other"}
    audit = agent_api.get(f"/api/sessions/{session_id}/events").body["events"]
    finished = [e for e in audit if e["type"] == "agent.turn_finished"]
    assert [e["detail"]["status"] for e in finished] == ["aborted"]
    later = LocalAgentRuntime(home, loop._runs, lambda: loop_like(loop))
    try:
        assert later.recover() == 0  # nothing left for a restart
    finally:
        later.close()


def _until(condition: Any, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the condition never held"
        time.sleep(0.01)
