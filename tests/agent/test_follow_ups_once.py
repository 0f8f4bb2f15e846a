"""The turn-end follow-ups run again record nothing twice (issue 21): a crash between a run's
recorded end and the checkpoint of its ``follow-ups`` step replays the step, and a stop that was
not honoured runs them beside the turn's own step. The audit entry, its event (the outbox)
and the turn's metrics are recorded once, keyed by the run; the other follow-ups (activity,
auto-commit, diff, PR) are asked again and find nothing left to do."""

from __future__ import annotations

import sqlite3
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from openagents.agent.loop import AgentLoop, LoopConfig
from openagents.artifacts.folder import FolderArtifactStore
from openagents.domain.errors import NotFound
from openagents.domain.identity import Identity
from openagents.domain.models import Session
from openagents.services.agent_turns import AgentHost, finished_entry_id
from openagents.services.lifecycle import Activity
from openagents.store.runs import Run, RunStatus
from openagents.store.runs_sqlite import SqliteRunStore
from openagents.store.sqlite import SqliteStore

from tests.contract.helpers import create

AT = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


class CountingMetrics:
    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    def count(self, name: str, value: int = 1) -> None:
        self.counts[name] += value


class Lifecycle:
    def __init__(self) -> None:
        self.reports: list[str | None] = []

    def activity(self, identity: Identity, session_id: str, turn: str | None) -> Activity:
        self.reports.append(turn)
        return Activity(success=True)

    def resume(self, identity: Identity, session_id: str) -> object:
        return None

    def finished(self, identity: Identity, session_id: str, run: Run | None = None) -> Activity:
        self.reports.append("end")  # the after-a-turn flow: its own test keys it by the run
        return Activity(success=True)


class NoModels:
    def info(self, model_id: str) -> Any:
        raise NotFound("no such model")


class Ids:
    def __init__(self) -> None:
        self.n = 0

    def __call__(self) -> str:
        self.n += 1
        return f"id-{self.n}"


@dataclass
class World:
    store: SqliteStore
    loop: AgentLoop
    metrics: CountingMetrics
    lifecycle: Lifecycle
    refreshed: list[str]
    session: Session
    db: Path


@pytest.fixture
def world(tmp_path: Path) -> World:
    store = SqliteStore(tmp_path / "db", FolderArtifactStore(tmp_path / "artifacts"), 4096)
    session = create(store)
    runs = SqliteRunStore(store)
    metrics, lifecycle = CountingMetrics(), Lifecycle()
    refreshed: list[str] = []
    host = AgentHost(
        store,
        lambda handle: None,  # type: ignore[arg-type, return-value]
        lifecycle,
        lambda: AT,
        ids=Ids(),
        metrics=metrics,
        after_turn=lifecycle,
        restore=lifecycle,
        refresh_diff=lambda identity, session_id: refreshed.append("diff"),
        refresh_pr=lambda session_id: refreshed.append("pr"),
    )
    loop = AgentLoop(runs, host, NoModels(), lambda: AT, LoopConfig())  # type: ignore[arg-type]
    run = Run(
        id="run-1",
        session_id=session.id,
        chat_id=next(iter(session.chats)),
        user_id=session.user_id,
        message_id="m-1",
        assistant_message_id="a-1",
        model_id="scripted/default",
        started_at=AT,
    )
    runs.start(run)
    return World(store, loop, metrics, lifecycle, refreshed, session, tmp_path / "db")


def _finished_entries(world: World) -> list[str]:
    entries = world.store.list_events(world.session.id, 100, None).items
    return [e.id for e in entries if e.type == "agent.turn_finished"]


def _outboxed(world: World) -> list[str]:
    db = sqlite3.connect(world.db)
    try:
        rows = db.execute("SELECT entry FROM outbox WHERE session_id = ?", (world.session.id,))
        return [row[0] for row in rows if "agent.turn_finished" in row[0]]
    finally:
        db.close()


def test_a_replayed_follow_up_step_records_the_turn_end_once(world: World) -> None:
    loop = world.loop
    loop._runs.finish(
        "run-1", RunStatus.COMPLETED, at=AT + timedelta(seconds=5), retention=timedelta(days=7)
    )
    assert loop.follow_up("run-1") == "completed"
    assert loop.follow_up("run-1") == "completed"  # the step replayed after a crash
    assert loop.follow_up("run-1") == "completed"

    assert _finished_entries(world) == [finished_entry_id("run-1")]
    assert len(_outboxed(world)) == 1  # its event, once
    metrics = world.metrics.counts
    assert metrics["AgentTurnCompleted"] == 1
    assert metrics["AgentTurnSteps"] == 0
    # the idempotent follow-ups are asked each time: nothing left to do is their no-op
    assert world.lifecycle.reports == ["end", "end", "end"]
    assert world.refreshed == ["diff", "pr"] * 3


def test_a_stop_not_honoured_and_the_turns_own_step_record_the_end_once(
    world: World,
) -> None:
    loop = world.loop
    assert loop.finalize("run-1", "aborted") is RunStatus.ABORTED  # the engine's stop
    assert loop.end("run-1", "end") is RunStatus.ABORTED  # the turn's own finalize: no change
    assert loop.follow_up("run-1") == "aborted"  # and its follow-ups step
    assert _finished_entries(world) == [finished_entry_id("run-1")]
    assert len(_outboxed(world)) == 1
    assert world.metrics.counts["AgentTurnAborted"] == 1
    assert world.lifecycle.reports == ["release", "release"]


def test_follow_ups_of_a_run_not_ended_do_nothing(world: World) -> None:
    loop = world.loop
    assert loop.follow_up("run-1") is None
    assert loop.follow_up("no-such-run") is None
    assert _finished_entries(world) == []
    assert world.metrics.counts == Counter()
