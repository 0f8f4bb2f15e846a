"""An outcome's audit entry is recorded once, on both adapters: appending the same entry again
(its id and time: a replayed step's follow-up) writes neither a second entry nor a second event,
and says so; another entry of the same kind and time is another entry."""

from __future__ import annotations

from datetime import UTC, datetime

from openagents.domain.models import AuditEntry

from tests.contract.conftest import Backend
from tests.contract.helpers import create

AT = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def test_the_same_entry_twice_is_recorded_once(backend: Backend) -> None:
    store = backend.store
    session = create(store, title="Once")
    finished = AuditEntry(
        id="run-1.finished", session_id=session.id, at=AT, type="agent.turn_finished"
    )
    assert store.append_entry(finished) is True
    before = backend.snapshot()
    assert store.append_entry(finished) is False
    assert backend.snapshot() == before  # nothing written the second time
    other = finished.model_copy(update={"id": "run-2.finished"})
    assert store.append_entry(other) is True

    entries = store.list_events(session.id, 10, None).items
    assert [e.id for e in entries if e.type == "agent.turn_finished"] == [
        "run-1.finished",
        "run-2.finished",
    ]
    events = [e.detail["entryId"] for e in backend.outbox(session.id)]
    assert events.count("run-1.finished") == 1
    assert events.count("run-2.finished") == 1
