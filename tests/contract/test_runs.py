"""The run store contract: runs, the per-chat claim, numbered events and their retention, on
both adapters (DynamoDB on moto, SQLite on a temp file)."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import botocore.session
import pynamodb.connection.base as pynamodb_base
import pytest
from openagents.settings import Settings
from openagents.store import items
from openagents.store.port import BadCursor
from openagents.store.runs import Run, RunStatus, RunStore, RunUsage, TurnInProgress
from openagents.store.runs_dynamodb import DynamoRunStore
from openagents.store.runs_sqlite import SqliteRunStore

WEEK = timedelta(days=7)


@pytest.fixture(autouse=True)
def _one_botocore_session(monkeypatch: pytest.MonkeyPatch) -> None:
    shared = botocore.session.get_session()
    monkeypatch.setattr(pynamodb_base, "get_session", lambda: shared)


@pytest.fixture(params=["dynamodb", "sqlite"])
def runs(request: pytest.FixtureRequest, settings: Settings) -> Iterator[RunStore]:
    if request.param == "dynamodb":
        items.bind(settings.table_name, settings.dynamodb_endpoint, settings.region)
        yield DynamoRunStore()
    else:
        store = SqliteRunStore(settings.sqlite_path)
        yield store
        store.db.close()


def new_run(
    chat_id: str = "chat-1",
    *,
    session_id: str = "sess-1",
    message_id: str | None = None,
    at: datetime | None = None,
) -> Run:
    return Run(
        id=f"run-{uuid.uuid4().hex[:12]}",
        session_id=session_id,
        chat_id=chat_id,
        user_id="alice",
        message_id=message_id or f"msg-{uuid.uuid4().hex[:8]}",
        assistant_message_id=f"asst-{uuid.uuid4().hex[:8]}",
        model_id="scripted/default",
        started_at=at or datetime.now(UTC),
    )


def test_start_claims_the_chat_and_a_second_live_run_is_refused(runs: RunStore) -> None:
    first = runs.start(new_run())
    assert first.created
    assert runs.active_run_id("chat-1") == first.run.id
    with pytest.raises(TurnInProgress) as caught:
        runs.start(new_run())
    assert caught.value.run_id == first.run.id
    assert runs.get(first.run.id) == first.run
    assert runs.latest("chat-1") == first.run
    # other chats are free
    assert runs.start(new_run("chat-2")).created


def test_the_same_user_message_returns_the_run_it_started(runs: RunStore) -> None:
    run = new_run(message_id="m-1")
    assert runs.start(run).created
    again = runs.start(new_run(message_id="m-1"))
    assert not again.created
    assert again.run.id == run.id
    runs.finish(run.id, RunStatus.COMPLETED, at=datetime.now(UTC), retention=WEEK)
    after_end = runs.start(new_run(message_id="m-1"))  # still that run, even after it ended
    assert not after_end.created
    assert after_end.run.id == run.id
    assert after_end.run.status is RunStatus.COMPLETED


def test_finish_releases_the_claim_once_and_is_idempotent(runs: RunStore) -> None:
    run = runs.start(new_run()).run
    at = datetime.now(UTC)
    done = runs.finish(run.id, RunStatus.ABORTED, at=at, error="stopped", retention=WEEK)
    assert done.status is RunStatus.ABORTED
    assert done.error == "stopped"
    assert done.finished_at == at
    assert runs.active_run_id("chat-1") is None
    again = runs.finish(run.id, RunStatus.FAILED, at=at + timedelta(seconds=5), retention=WEEK)
    assert again.status is RunStatus.ABORTED
    assert again.finished_at == at
    nxt = runs.start(new_run()).run
    runs.finish(run.id, RunStatus.FAILED, at=at, retention=WEEK)  # the old run: no effect
    assert runs.active_run_id("chat-1") == nxt.id
    assert runs.latest("chat-1") == nxt


def test_events_are_numbered_in_order_and_read_after_any_seq(runs: RunStore) -> None:
    run = runs.start(new_run()).run
    assert runs.append(run.id, [{"type": "start"}, {"type": "start-step"}]) == 2
    assert runs.append(run.id, [{"type": "text-delta", "id": "t", "delta": "hi"}]) == 3
    assert [e.seq for e in runs.events(run.id, 0)] == [1, 2, 3]
    assert [e.chunk for e in runs.events(run.id, 2)] == [
        {"type": "text-delta", "id": "t", "delta": "hi"}
    ]
    assert runs.events(run.id, 3) == []
    assert runs.events(run.id, 0, limit=2) == runs.events(run.id, 0)[:2]
    current = runs.get(run.id)
    assert current is not None
    assert current.last_seq == 3


def test_concurrent_appends_never_share_a_seq(runs: RunStore) -> None:
    run = runs.start(new_run()).run

    def write(n: int) -> None:
        for i in range(5):
            runs.append(run.id, [{"type": "data-test", "data": {"writer": n, "i": i}}])

    threads = [threading.Thread(target=write, args=(n,)) for n in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [e.seq for e in runs.events(run.id, 0)] == list(range(1, 16))


def test_events_are_kept_retention_after_the_run_ends(runs: RunStore) -> None:
    run = runs.start(new_run()).run
    runs.append(run.id, [{"type": "start"}, {"type": "finish"}])
    assert runs.expires_at(run.id) == [None, None]  # type: ignore[attr-defined]
    at = datetime.now(UTC)
    runs.finish(run.id, RunStatus.COMPLETED, at=at, retention=WEEK)
    expected = (at + WEEK).timestamp()
    assert all(
        value is not None and abs(value - expected) < 1.5
        for value in runs.expires_at(run.id)  # type: ignore[attr-defined]
    )
    assert len(runs.events(run.id, 0)) == 2


def test_progress_cancel_and_running(runs: RunStore) -> None:
    run = runs.start(new_run()).run
    assert [r.id for r in runs.running()] == [run.id]
    usage = RunUsage(10, 5, 2, 1)
    runs.progress(run.id, steps=3, model_calls=2, usage=usage)
    assert not runs.cancel_requested(run.id)
    assert runs.request_cancel(run.id)
    assert runs.cancel_requested(run.id)
    current = runs.get(run.id)
    assert current is not None
    assert (current.steps, current.model_calls, current.usage) == (3, 2, usage)
    runs.finish(run.id, RunStatus.ABORTED, at=datetime.now(UTC), cost_usd=0.25, retention=WEEK)
    assert runs.running() == []
    assert not runs.request_cancel(run.id)  # ended: nothing to stop
    runs.progress(run.id, steps=9, model_calls=9, usage=RunUsage())  # ended: ignored
    ended = runs.get(run.id)
    assert ended is not None
    assert ended.steps == 3
    assert ended.cost_usd == 0.25


def test_runs_of_a_session_newest_first_with_a_cursor(runs: RunStore) -> None:
    base = datetime(2026, 1, 1, tzinfo=UTC)
    made = []
    for i in range(5):
        run = new_run(f"chat-{i}", at=base + timedelta(minutes=i))
        runs.start(run)
        made.append(run.id)
    runs.start(new_run("chat-x", session_id="other"))
    first = runs.list_for_session("sess-1", 2, None)
    assert [r.id for r in first.items] == made[::-1][:2]
    assert first.cursor
    second = runs.list_for_session("sess-1", 2, first.cursor)
    third = runs.list_for_session("sess-1", 2, second.cursor)
    assert [r.id for r in second.items + third.items] == made[::-1][2:]
    assert third.cursor is None
    with pytest.raises(BadCursor):
        runs.list_for_session("sess-1", 2, "not-a-cursor")
    assert runs.get("nope") is None
    assert runs.latest("nope") is None
