"""The AWS turn engine: an asynchronous invoke named by the run id; a stop that the run does not
honour in time stops the execution and ends the run."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from openagents.agent.engine_lambda import LambdaTurnEngine
from openagents.store.runs import Run, RunStatus
from openagents.store.runs_sqlite import SqliteRunStore

from tests.support import sqlite_runs

ARN = "arn:aws:lambda:us-east-1:123456789012:function:agent-turn:live"


class FakeLambda:
    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def invoke(self, **kw: Any) -> dict[str, Any]:
        self.calls.append(("invoke", kw))
        return {"StatusCode": 202}

    def list_durable_executions_by_function(self, **kw: Any) -> dict[str, Any]:
        self.calls.append(("list", kw))
        return {"DurableExecutions": [{"DurableExecutionArn": "arn:exec:1"}]}

    def stop_durable_execution(self, **kw: Any) -> dict[str, Any]:
        self.calls.append(("stop", kw))
        return {}


class Finalizer:
    def __init__(self, runs: SqliteRunStore) -> None:
        self.runs = runs

    def finalize(self, run_id: str, outcome: str, error: str | None = None) -> RunStatus:
        from datetime import timedelta

        return self.runs.finish(
            run_id, RunStatus.ABORTED, at=datetime.now(UTC), retention=timedelta(days=7)
        ).status


class Clock:
    """A monotonic clock that moves only when slept on."""

    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_start_invokes_the_durable_function_asynchronously(tmp_path: Path) -> None:
    fake = FakeLambda()
    runs, _, _ = sqlite_runs(tmp_path)
    engine = LambdaTurnEngine(lambda: fake, ARN, runs, lambda: None)  # type: ignore[arg-type, return-value]
    engine.start("run-1")
    kind, call = fake.calls[0]
    assert kind == "invoke"
    assert call["FunctionName"] == ARN
    assert call["InvocationType"] == "Event"
    assert call["DurableExecutionName"] == "run-1"
    assert json.loads(call["Payload"]) == {"runId": "run-1"}


def test_a_stuck_run_is_stopped_and_ended(tmp_path: Path) -> None:
    runs, session_id, chat_id = sqlite_runs(tmp_path)
    run = Run(
        id="run-2",
        session_id=session_id,
        chat_id=chat_id,
        user_id="u",
        message_id="m",
        assistant_message_id="a",
        model_id="scripted/default",
        started_at=datetime.now(UTC),
    )
    runs.start(run)
    fake = FakeLambda()
    clock = Clock()
    engine = LambdaTurnEngine(
        lambda: fake,
        ARN,
        runs,
        lambda: Finalizer(runs),  # type: ignore[arg-type, return-value]
        grace=0.4,
        sleep=clock.sleep,
        clock=clock,
    )
    engine.stop("run-2")
    assert [kind for kind, _ in fake.calls] == ["list", "stop"]
    assert clock.now >= 100.4  # the grace was waited out on the clock

    assert fake.calls[0][1]["DurableExecutionName"] == "run-2"
    assert fake.calls[1][1] == {"DurableExecutionArn": "arn:exec:1"}
    ended = runs.get("run-2")
    assert ended is not None
    assert ended.status is RunStatus.ABORTED
    assert runs.active_run_id(session_id, chat_id) is None
    fake.calls.clear()
    engine.stop("run-2")  # ended: nothing to stop
    assert fake.calls == []


def _running(runs: SqliteRunStore, session_id: str, chat_id: str, run_id: str) -> None:
    runs.start(
        Run(
            id=run_id,
            session_id=session_id,
            chat_id=chat_id,
            user_id="u",
            message_id=f"m-{run_id}",
            assistant_message_id=f"a-{run_id}",
            model_id="scripted/default",
            started_at=datetime.now(UTC),
        )
    )


def test_a_run_that_ends_within_the_grace_is_not_stopped(tmp_path: Path) -> None:
    runs, session_id, chat_id = sqlite_runs(tmp_path)
    _running(runs, session_id, chat_id, "run-3")
    fake, clock = FakeLambda(), Clock()

    def sleep(seconds: float) -> None:  # the loop honours the flag during the grace
        clock.sleep(seconds)
        Finalizer(runs).finalize("run-3", "aborted")

    engine = LambdaTurnEngine(
        lambda: fake,
        ARN,
        runs,
        lambda: pytest.fail("the engine ended a run that ended by itself"),
        grace=3.0,
        sleep=sleep,
        clock=clock,
    )
    engine.stop("run-3")
    assert fake.calls == []
    assert clock.now < 103.0


def test_a_failed_stop_of_the_execution_still_ends_the_run(tmp_path: Path) -> None:
    runs, session_id, chat_id = sqlite_runs(tmp_path)
    _running(runs, session_id, chat_id, "run-4")

    class Refusing(FakeLambda):
        def stop_durable_execution(self, **kw: Any) -> dict[str, Any]:
            raise RuntimeError("throttled")

    clock = Clock()
    engine = LambdaTurnEngine(
        lambda: Refusing(),
        ARN,
        runs,
        lambda: Finalizer(runs),  # type: ignore[arg-type, return-value]
        grace=0.4,
        sleep=clock.sleep,
        clock=clock,
    )
    engine.stop("run-4")
    ended = runs.get("run-4")
    assert ended is not None
    assert ended.status is RunStatus.ABORTED
    assert runs.active_run_id(session_id, chat_id) is None
