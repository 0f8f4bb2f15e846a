"""Agent turns on the one-machine runtime (issue 13): the API over HTTP, real provisioning and a
local sandbox, the durable handler on the SDK's local runtime, the scripted model.

1. Engine overhead per step: a turn of N model steps, each calling ``todo_write`` once (the
   cheapest tool: no sandbox call), at ``chunkDelayMs`` 0, then a closing text. Wall time (run
   store ``start`` → ``finish``) minus the model's time (the same scripted responses streamed
   directly) minus the tool's (``TodoWriteTool.run`` called directly N times), per model step.
2. Stream latency: a turn of text deltas ``chunkDelayMs`` 200 apart while a client long-polls
   ``GET /api/chat/{chatId}/stream``; per event, the run store's ``append`` return time (wrapped
   here) against the client's receive time. Only events stored while a poll was waiting count.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench.common import fresh_settings, moto_server, say, scratch, summary

TODO = {"todos": [{"id": "1", "content": "bench", "status": "pending"}]}
WORDS = 12  # stream turn: text deltas


def _script(path: Path, responses: list[dict[str, Any]]) -> None:
    path.write_text(json.dumps({"responses": responses}))


def _until(api: Any, session_id: str, state: str) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        session = api.get(f"/api/sessions/{session_id}").body["session"]
        if session["lifecycleState"] == state:
            return
        if session["lifecycleState"] == "failed":
            raise RuntimeError(f"session failed: {session.get('lifecycleError')}")
        time.sleep(0.2)
    raise RuntimeError(f"session {session_id} never became {state}")


class Probe:
    """Wraps the SQLite run store's ``start``, ``append`` and ``finish`` to timestamp them."""

    def __init__(self) -> None:
        self.started: dict[str, float] = {}
        self.finished: dict[str, float] = {}
        self.stored: dict[tuple[str, int], float] = {}
        self.in_steps: dict[str, float] = {}  # seconds inside the loop's model and tool steps

    def install(self, patch: Any) -> None:
        from openagents.agent.loop import AgentLoop
        from openagents.store.runs_sqlite import SqliteRunStore

        start, append, finish = SqliteRunStore.start, SqliteRunStore.append, SqliteRunStore.finish

        def started(store: Any, run: Any, message: Any = None) -> Any:
            self.started.setdefault(run.id, time.monotonic())
            return start(store, run, message)

        def appended(store: Any, run_id: str, chunks: Sequence[Any], *a: Any, **kw: Any) -> int:
            last = append(store, run_id, chunks, *a, **kw)
            now = time.monotonic()
            for seq in range(last - len(chunks) + 1, last + 1):
                self.stored[(run_id, seq)] = now
            return last

        def finished(store: Any, run_id: str, *a: Any, **kw: Any) -> Any:
            done = finish(store, run_id, *a, **kw)
            self.finished.setdefault(run_id, time.monotonic())
            return done

        for name in ("model_step", "tool_step"):
            patch.setattr(AgentLoop, name, self._timed(getattr(AgentLoop, name)))
        patch.setattr(SqliteRunStore, "start", started)
        patch.setattr(SqliteRunStore, "append", appended)
        patch.setattr(SqliteRunStore, "finish", finished)

    def _timed(self, step: Callable[..., Any]) -> Callable[..., Any]:
        def timed(loop: Any, run_id: str, *a: Any, **kw: Any) -> Any:
            began = time.perf_counter()
            try:
                return step(loop, run_id, *a, **kw)
            finally:
                spent = time.perf_counter() - began
                self.in_steps[run_id] = self.in_steps.get(run_id, 0.0) + spent

        return timed


def _turn(api: Any, session_id: str, chat_id: str, text: str) -> str:
    message = {
        "id": f"m-{time.monotonic_ns()}",
        "role": "user",
        "parts": [{"type": "text", "text": text}],
    }
    reply = api.post("/api/chat", {"sessionId": session_id, "chatId": chat_id, "message": message})
    if reply.status not in (200, 201, 202):
        raise RuntimeError(f"POST /api/chat: {reply.status} {reply.body}")
    return str(reply.body["runId"])


def _follow(api: Any, chat_id: str) -> dict[int, tuple[float, float]]:
    """Long-poll the stream until the run ends: each event's seq → (its poll's send time, the
    receive time)."""
    received: dict[int, tuple[float, float]] = {}
    after = 0
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        sent = time.monotonic()
        page = api.get(f"/api/chat/{chat_id}/stream", query={"after": str(after), "wait": "5"})
        now = time.monotonic()
        if page.status == 204:
            return received
        for event in page.body["events"]:
            received.setdefault(int(event["seq"]), (sent, now))
        after = page.body["next"]
    raise RuntimeError("the stream did not end")


def _model_seconds(path: Path, steps: int) -> float:
    from openagents.agent.models.port import Message, ModelRequest
    from openagents.agent.models.scripted import ScriptedModel
    from openagents.agent.tools import specs

    model = ScriptedModel(path)
    messages = (Message.user("bench"),)
    began = time.perf_counter()
    for step in range(steps):
        for _ in model.stream(ModelRequest("system", messages, specs(), step=step)):
            pass
    return time.perf_counter() - began


def _tool_seconds(calls: int) -> float:
    from openagents.agent.tools import TOOLS, ToolContext

    tool = TOOLS["todo_write"]
    context = ToolContext(workspace=None)  # type: ignore[arg-type]  # todo_write never uses it
    began = time.perf_counter()
    for _ in range(calls):
        tool.run(dict(TODO), context)
    return time.perf_counter() - began


def _durable_step_ms(store: Any, steps: int) -> float:
    """The SDK's local runtime alone: a durable function of ``steps`` empty steps."""
    from aws_durable_execution_sdk_python import DurableContext, durable_execution
    from aws_durable_execution_sdk_python_testing.runner import DurableFunctionTestRunner

    @durable_execution
    def empty(event: Any, context: DurableContext) -> int:
        for i in range(steps):
            context.step(lambda _: None, name=f"s{i}")
        return steps

    runner = DurableFunctionTestRunner(handler=empty, skip_time=False, store=store)
    with runner:
        began = time.perf_counter()
        arn = runner.run_async(input="{}", execution_name="bench", function_name="bench")
        runner.wait_for_result(execution_arn=arn, timeout=600)
        return (time.perf_counter() - began) / steps * 1000


def durable_steps(folder: Path, steps: int) -> dict[str, float]:
    """ms per durable step on the SDK's SQLite store, on ours (``KeptConnectionStore``) and
    on the SDK's in-memory store, in the same run."""
    from aws_durable_execution_sdk_python_testing.stores.memory import InMemoryExecutionStore
    from aws_durable_execution_sdk_python_testing.stores.sqlite import SQLiteExecutionStore
    from openagents.local.execution_store import KeptConnectionStore

    kept = KeptConnectionStore.create_and_initialize(folder / "kept.db")
    result = {
        "sdkSqlite": _durable_step_ms(
            SQLiteExecutionStore.create_and_initialize(folder / "sdk.db"), steps
        ),
        "kept": _durable_step_ms(kept, steps),
        "memory": _durable_step_ms(InMemoryExecutionStore(), steps),
    }
    assert isinstance(kept, KeptConnectionStore)
    kept.close()
    return {name: round(ms, 2) for name, ms in result.items()}


def run(args: Any) -> dict[str, Any]:
    import pytest

    from tests.support import HttpApi, make_origin, provisioning_runtime, serve_app

    steps = int(args.steps)
    probe = Probe()
    with moto_server() as moto, scratch("agent") as home, pytest.MonkeyPatch.context() as patch:
        script = home / "script.json"
        _script(script, [{"text": "Hello."}])
        settings = fresh_settings(
            moto.endpoint,
            home / "home",
            store="sqlite",
            scripted_model_file=script,
            idle_timeout_seconds=3600,
        )
        probe.install(patch)
        with (
            provisioning_runtime(settings, moto.endpoint, patch) as live,
            serve_app(live) as (base_url, app),
        ):
            api = HttpApi(live, base_url)
            try:
                origin = make_origin(home)
                created = api.post(
                    "/api/sessions", {"repoUrl": f"file://{origin}", "branch": "main"}
                )
                session_id = created.body["session"]["id"]
                chat_id = created.body["chat"]["id"]
                _until(api, session_id, "active")
                # warm-up: the durable runner, the model registry, the first sandbox calls
                engine = app.state.container().agent.engine
                engine.wait(_turn(api, session_id, chat_id, "hi"))
                _follow(api, chat_id)

                say(f"agent: a turn of {steps} todo_write steps")
                tool_call = {"toolCalls": [{"name": "todo_write", "input": TODO}]}
                responses = [{**tool_call, "chunkDelayMs": 0} for _ in range(steps)]
                _script(script, [*responses, {"text": "Done.", "chunkDelayMs": 0}])
                run_id = _turn(api, session_id, chat_id, "steps")
                engine.wait(run_id)
                _follow(api, chat_id)
                wall = probe.finished[run_id] - probe.started[run_id]
                in_steps = probe.in_steps[run_id]
                model = _model_seconds(script, steps + 1)
                tool = _tool_seconds(steps)

                say("agent: a streamed turn, chunkDelayMs 200")
                text = " ".join(f"word{i}" for i in range(WORDS))
                _script(script, [{"text": text, "chunkDelayMs": 200}])
                run_id = _turn(api, session_id, chat_id, "stream")
                received = _follow(api, chat_id)
                engine.wait(run_id)
                stored = {seq: at for (rid, seq), at in probe.stored.items() if rid == run_id}
                latencies = [
                    received[seq][1] - at
                    for seq, at in stored.items()
                    if seq in received and received[seq][0] < at  # stored while a poll waited
                ]
            finally:
                api.client.close()
                app.state.container().agent.engine.close()
        say(f"agent: the durable runtime alone, {steps * 2} empty steps per store")
        durable = durable_steps(home, steps * 2)
    return {
        "steps": steps,
        "durableStepMs": durable,
        "wallMs": round(wall * 1000, 1),
        "modelMs": round(model * 1000, 2),
        "toolMs": round(tool * 1000, 3),
        "inStepsMs": round(in_steps * 1000, 1),
        "overheadMsPerStep": round((wall - model - tool) / (steps + 1) * 1000, 2),
        "loopMsPerStep": round((in_steps - model - tool) / (steps + 1) * 1000, 2),
        "engineMsPerStep": round((wall - in_steps) / (steps + 1) * 1000, 2),
        "streamEvents": len(stored),
        "streamLatencyMs": {
            k: round(v * 1000, 1) for k, v in summary(latencies).items() if k != "n"
        },
        "streamMeasured": len(latencies),
    }


def rows(result: dict[str, Any]) -> list[list[str]]:
    s = result["streamLatencyMs"]
    d = result["durableStepMs"]
    return [
        [
            "agent: one durable step, runtime alone",
            f"{d['kept']} ms",
            f"our kept-connection store; the SDK's SQLite store {d['sdkSqlite']} ms "
            f"({d['sdkSqlite'] / d['kept']:.1f}x), its in-memory store {d['memory']} ms",
        ],
        [
            "agent: engine overhead per step",
            f"{result['overheadMsPerStep']} ms",
            f"goal <= 15 ms; turn of {result['steps']} todo_write steps + 1: "
            f"{result['wallMs']} ms wall - model {result['modelMs']} - tool {result['toolMs']}; "
            f"per step: in the loop's steps {result['loopMsPerStep']}, "
            f"engine between them {result['engineMsPerStep']} ms",
        ],
        [
            "agent: stream stored -> received",
            f"p99 {s.get('p99', 0)} ms",
            f"goal p99 <= 300 ms; p50 {s.get('p50', 0)}, max {s.get('max', 0)} ms, "
            f"{result['streamMeasured']} of {result['streamEvents']} events (stored mid-poll)",
        ],
    ]
