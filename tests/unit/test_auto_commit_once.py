"""A turn's auto-commit entry is keyed by its run (``services/flows/after_turn.py``): a
follow-up run again — a crash replayed it, or a stop not honoured ran it beside the turn's
own step — records no second ``sandbox.auto_commit`` entry, and counts no second metric. A
report with no run (``POST /api/sandbox/activity {turn: end}``) records one each time."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

from openagents.artifacts.folder import FolderArtifactStore
from openagents.domain.models import Session
from openagents.services.auto_commit import AutoCommitService, auto_commit_entry_id
from openagents.store.runs import Run, RunStatus
from openagents.store.sqlite import SqliteStore

from tests.contract.helpers import create

AT = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


class CountingMetrics:
    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    def count(self, name: str, value: int = 1) -> None:
        self.counts[name] += value


def _world(tmp_path: Path) -> tuple[SqliteStore, Session, AutoCommitService, CountingMetrics]:
    store = SqliteStore(None, FolderArtifactStore(tmp_path / "artifacts"), 4096)
    session = create(store).model_copy(update={"auto_commit_push_override": True})
    metrics, ids = CountingMetrics(), iter(range(1000))
    service = AutoCommitService(
        store,
        lambda handle: None,  # type: ignore[arg-type, return-value]  # no sandbox: a skip
        None,
        lambda: AT,
        lambda: f"id-{next(ids)}",
        metrics,
    )
    return store, session, service, metrics


def _auto_commits(store: SqliteStore, session: Session) -> list[str]:
    entries = store.list_events(session.id, 100, None).items
    return [e.id for e in entries if e.type == "sandbox.auto_commit"]


def test_a_rerun_follow_up_records_the_auto_commit_once(tmp_path: Path) -> None:
    store, session, service, metrics = _world(tmp_path)
    run = Run(
        id="run-1",
        session_id=session.id,
        chat_id=next(iter(session.chats)),
        user_id=session.user_id,
        message_id="m-1",
        assistant_message_id="a-1",
        model_id="scripted/default",
        started_at=AT,
        status=RunStatus.COMPLETED,
        finished_at=AT + timedelta(seconds=5),
    )
    first = service.after_turn(session, run)
    again = service.after_turn(session, run)  # the follow-ups step replayed
    assert first == again == {"skipped": "no running sandbox"}
    assert _auto_commits(store, session) == [auto_commit_entry_id("run-1")]
    assert metrics.counts["AutoCommitSkipped"] == 1


def test_a_report_without_a_run_records_each_time(tmp_path: Path) -> None:
    store, session, service, _ = _world(tmp_path)
    service.after_turn(session)
    service.after_turn(session)
    assert len(_auto_commits(store, session)) == 2
