"""The run store contract: runs, the per-chat claim, numbered events and their retention, on
both adapters (DynamoDB on moto, SQLite on a temp file)."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

import pytest
from openagents.domain.checkpoints import Checkpoint, RevertRecord
from openagents.domain.models import Chat, ChatMark, ListFilter, Message, Role, Session
from openagents.store.dynamodb import DynamoStore
from openagents.store.port import Activity, BadCursor, Gone, MessageIdTaken, Store
from openagents.store.runs import (
    JsonValue,
    Progress,
    Run,
    RunNotFound,
    RunStatus,
    RunStore,
    RunUsage,
    Started,
    TurnInProgress,
    TurnMessage,
)
from openagents.store.runs_dynamodb import DynamoRunStore
from openagents.store.runs_sqlite import SqliteRunStore
from openagents.store.sqlite import SqliteStore

from tests.contract.conftest import Backend
from tests.contract.helpers import create, new_chat, new_objects

WEEK = timedelta(days=7)


@dataclass
class Runs:
    """The run store under test on the store it shares its writes with."""

    runs: RunStore
    store: Store
    chats: dict[str, Chat]

    def chat(self, chat_id: str, session_id: str = "sess-1") -> Chat:
        """A real chat with this id (and its session), made on first use."""
        if chat_id not in self.chats:
            session = self.store.get_session(session_id) or self._session(session_id)
            now = datetime.now(UTC)
            chat = Chat(
                id=chat_id, session_id=session.id, title="New chat", created_at=now, updated_at=now
            )
            self.store.create_chat(session, chat, 100)
            self.chats[chat_id] = chat
        return self.chats[chat_id]

    def _session(self, session_id: str) -> Session:
        session, _, entry, rate = new_objects("alice", f"T {uuid.uuid4().hex[:6]}")
        session = session.model_copy(update={"id": session_id, "chats": {}})
        first = Chat(
            id=f"first-{session_id}-{uuid.uuid4().hex[:6]}",
            session_id=session_id,
            title="New chat",
            created_at=session.created_at,
            updated_at=session.created_at,
        )
        session = session.model_copy(
            update={
                "chats": {
                    first.id: ChatMark(created_at=first.created_at, updated_at=first.created_at)
                }
            }
        )
        entry = entry.model_copy(update={"session_id": session_id})
        self.store.create_session(session, first, entry, claim_title=True, rate=rate)
        return session

    def start(self, run: Run, message: TurnMessage | None = None) -> Started:
        self.chat(run.chat_id, run.session_id)
        return self.runs.start(run, message)


@pytest.fixture
def both(backend: Backend) -> Iterator[Runs]:
    store = backend.store
    if isinstance(store, SqliteStore):
        yield Runs(SqliteRunStore(store), store, {})
    else:
        assert isinstance(store, DynamoStore)
        yield Runs(DynamoRunStore(store), store, {})


class _WithChats:
    """The run store whose ``start`` makes the run's chat (and session) first."""

    def __init__(self, both: Runs) -> None:
        self._both = both

    def start(self, run: Run, message: TurnMessage | None = None) -> Started:
        return self._both.start(run, message)

    def __getattr__(self, name: str) -> object:
        return getattr(self._both.runs, name)


@pytest.fixture
def runs(both: Runs) -> RunStore:
    return _WithChats(both)  # type: ignore[return-value]


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
    assert runs.active_run_id("sess-1", "chat-1") == first.run.id
    with pytest.raises(TurnInProgress) as caught:
        runs.start(new_run())
    assert caught.value.run_id == first.run.id
    assert runs.get(first.run.id) == first.run
    assert runs.latest("sess-1", "chat-1") == first.run
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


def test_a_run_continuing_a_message_keeps_the_parts_it_started_from(runs: RunStore) -> None:
    continued = replace(new_run(), continued_parts=3)
    runs.start(continued)
    runs.append(continued.id, [{"type": "start-step"}], Progress(1, 1, RunUsage()))
    assert runs.get(continued.id) == replace(
        continued, steps=1, model_calls=1, last_seq=1, continued_parts=3
    )
    runs.finish(continued.id, RunStatus.COMPLETED, at=datetime.now(UTC), retention=WEEK)
    stored = runs.latest("sess-1", "chat-1")
    assert stored is not None
    assert stored.continued_parts == 3
    own = runs.start(new_run("chat-2")).run  # a turn of its own continues nothing
    assert own.continued_parts is None
    assert runs.get(own.id) == own


def test_finish_releases_the_claim_once_and_is_idempotent(runs: RunStore) -> None:
    run = runs.start(new_run()).run
    at = datetime.now(UTC)
    done = runs.finish(run.id, RunStatus.ABORTED, at=at, error="stopped", retention=WEEK)
    assert done.status is RunStatus.ABORTED
    assert done.error == "stopped"
    assert done.finished_at == at
    assert runs.active_run_id("sess-1", "chat-1") is None
    again = runs.finish(run.id, RunStatus.FAILED, at=at + timedelta(seconds=5), retention=WEEK)
    assert again.status is RunStatus.ABORTED
    assert again.finished_at == at
    nxt = runs.start(new_run()).run
    runs.finish(run.id, RunStatus.FAILED, at=at, retention=WEEK)  # the old run: no effect
    assert runs.active_run_id("sess-1", "chat-1") == nxt.id
    assert runs.latest("sess-1", "chat-1") == nxt


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
    assert runs.append(run.id, [{"type": "start-step"}], Progress(3, 2, usage)) == 1
    assert not runs.cancel_requested(run.id)
    assert runs.request_cancel(run.id)
    assert runs.cancel_requested(run.id)
    current = runs.get(run.id)
    assert current is not None
    assert (current.steps, current.model_calls, current.usage) == (3, 2, usage)
    runs.finish(run.id, RunStatus.ABORTED, at=datetime.now(UTC), cost_usd=0.25, retention=WEEK)
    assert runs.running() == []
    assert not runs.request_cancel(run.id)  # ended: nothing to stop
    runs.append(run.id, [{"type": "finish"}], Progress(9, 9, RunUsage()))  # ended: kept
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
    assert runs.latest("sess-1", "nope") is None


# --- a turn's start is one write with its user message and the chat's live-run marks ---------


def user_message(chat: Chat, message_id: str, text: str = "hello") -> Message:
    return Message(
        id=message_id,
        chat_id=chat.id,
        role=Role.USER,
        parts={"id": message_id, "role": "user", "parts": [{"type": "text", "text": text}]},
        created_at=datetime.now(UTC),
    )


def turn(both: Runs, chat: Chat, message_id: str, text: str = "hello") -> TurnMessage:
    session = both.store.get_session(chat.session_id)
    assert session is not None
    now = datetime.now(UTC)
    activity = Activity(at=now, hibernate_after=now + timedelta(minutes=30))
    return TurnMessage(session, chat, user_message(chat, message_id, text), activity)


def live_marks(both: Runs, chat: Chat) -> tuple[str | None, bool, bool]:
    """(the chat's activeStreamId, its session mark's streaming, the listed session's)."""
    stored = both.store.get_chat(chat.session_id, chat.id)
    session = both.store.get_session(chat.session_id)
    assert stored is not None
    assert session is not None
    listed = both.store.list_sessions("alice", ListFilter.ALL, 100, None).items
    (summary,) = [s for s in listed if s.id == session.id]
    return stored.active_stream_id, session.chats[chat.id].streaming, summary.has_streaming


def test_start_stores_the_message_and_marks_the_chat_live_until_finish(both: Runs) -> None:
    chat = both.chat("chat-m")
    run = new_run("chat-m", message_id="u-1")
    started = both.runs.start(run, turn(both, chat, "u-1", "add a multiply function"))
    assert started.created
    (message,) = both.store.list_messages(chat.session_id, chat.id, 10, None).items
    assert message.id == "u-1"
    assert message.parts["parts"][0]["text"] == "add a multiply function"
    stored_chat = both.store.get_chat(chat.session_id, chat.id)
    assert stored_chat is not None
    assert stored_chat.title == "add a multiply function"  # the first message names the chat
    session = both.store.get_session(chat.session_id)
    assert session is not None
    assert session.last_activity_at is not None  # the activity the message refreshes
    assert live_marks(both, chat) == (run.id, True, True)
    both.runs.finish(run.id, RunStatus.COMPLETED, at=datetime.now(UTC), retention=WEEK)
    assert live_marks(both, chat) == (None, False, False)


def test_a_refused_start_writes_no_message(both: Runs) -> None:
    chat = both.chat("chat-r")
    first = new_run("chat-r", message_id="u-1")
    both.runs.start(first, turn(both, chat, "u-1"))
    with pytest.raises(TurnInProgress):
        both.runs.start(new_run("chat-r", message_id="u-2"), turn(both, chat, "u-2"))
    assert [m.id for m in both.store.list_messages(chat.session_id, chat.id, 10, None).items] == [
        "u-1"
    ]
    assert live_marks(both, chat)[0] == first.id


def test_the_same_message_again_writes_nothing_and_returns_its_run(both: Runs) -> None:
    chat = both.chat("chat-s")
    run = new_run("chat-s", message_id="u-1")
    both.runs.start(run, turn(both, chat, "u-1"))
    both.runs.finish(run.id, RunStatus.COMPLETED, at=datetime.now(UTC), retention=WEEK)
    again = both.runs.start(new_run("chat-s", message_id="u-1"), turn(both, chat, "u-1"))
    assert not again.created
    assert again.run.id == run.id
    assert len(both.store.list_messages(chat.session_id, chat.id, 10, None).items) == 1
    assert live_marks(both, chat)[0] is None  # the ended run is not live again


def test_a_message_id_of_another_chat_is_refused_whole(both: Runs) -> None:
    chat = both.chat("chat-a")
    other = both.chat("chat-b")
    both.runs.start(new_run("chat-a", message_id="shared"), turn(both, chat, "shared"))
    with pytest.raises(MessageIdTaken):
        both.runs.start(new_run("chat-b", message_id="shared"), turn(both, other, "shared"))
    assert both.runs.active_run_id(other.session_id, "chat-b") is None
    assert both.store.list_messages(other.session_id, other.id, 10, None).items == []
    assert live_marks(both, other) == (None, False, True)  # chat-a of the same session is live


def test_a_start_on_a_gone_chat_is_refused(both: Runs) -> None:
    both.chat("chat-keep")  # the session exists; the chat does not
    with pytest.raises(Gone):
        both.runs.start(new_run("chat-gone"))
    assert both.runs.active_run_id("sess-1", "chat-gone") is None


def test_a_message_stored_before_without_a_run_starts_one(both: Runs) -> None:
    chat = both.chat("chat-p")
    session = both.store.get_session(chat.session_id)
    assert session is not None
    both.store.put_message(session, chat, user_message(chat, "u-1"), activity=None)
    started = both.runs.start(new_run("chat-p", message_id="u-1"), turn(both, chat, "u-1"))
    assert started.created
    assert len(both.store.list_messages(chat.session_id, chat.id, 10, None).items) == 1
    assert live_marks(both, chat)[0] == started.run.id


def assistant_turn(both: Runs, chat: Chat, message_id: str, parts: list[JsonValue]) -> TurnMessage:
    session = both.store.get_session(chat.session_id)
    assert session is not None
    body: dict[str, JsonValue] = {"id": message_id, "role": "assistant", "parts": parts}
    message = Message(
        id=message_id,
        chat_id=chat.id,
        role=Role.ASSISTANT,
        parts=body,
        # after the user message it answers, even within one millisecond (sort keys are ms)
        created_at=datetime.now(UTC) + timedelta(milliseconds=1),
    )
    return TurnMessage(session, chat, message, activity=None)


def test_append_writes_the_assistant_message_with_the_events_and_progress(both: Runs) -> None:
    chat = both.chat("chat-w")
    run = new_run("chat-w", message_id="u-1")
    both.runs.start(run, turn(both, chat, "u-1"))
    step = [{"type": "step-start"}, {"type": "text", "text": "Hel", "state": "done"}]
    first = assistant_turn(both, chat, run.assistant_message_id, list(step))
    assert both.runs.append(run.id, [{"type": "start"}], Progress(1, 1, RunUsage()), first) == 1
    more = assistant_turn(both, chat, run.assistant_message_id, [*step, {"type": "step-start"}])
    assert both.runs.append(run.id, [{"type": "start-step"}], Progress(2, 1, RunUsage()), more) == 2
    messages = both.store.list_messages(chat.session_id, chat.id, 10, None).items
    assert [(m.id, m.role) for m in messages] == [
        ("u-1", Role.USER),
        (run.assistant_message_id, Role.ASSISTANT),
    ]
    assert messages[1].parts["parts"] == [*step, {"type": "step-start"}]  # updated in place
    stored_chat = both.store.get_chat(chat.session_id, chat.id)
    assert stored_chat is not None
    assert stored_chat.message_count == 2  # inserted once, then updated
    current = both.runs.get(run.id)
    assert current is not None
    assert (current.steps, current.last_seq) == (2, 2)
    assert [e.chunk for e in both.runs.events(run.id, 0)] == [
        {"type": "start"},
        {"type": "start-step"},
    ]


def test_an_append_to_an_unknown_run_writes_no_message(both: Runs) -> None:
    chat = both.chat("chat-x")
    lost = assistant_turn(both, chat, "asst-lost", [{"type": "step-start"}])
    with pytest.raises(RunNotFound):
        both.runs.append("run-none", [{"type": "start"}], Progress(1, 1, RunUsage()), lost)
    assert both.store.list_messages(chat.session_id, chat.id, 10, None).items == []


def test_a_checkpoint_is_recorded_once_and_reverts_mark_runs(runs: RunStore) -> None:
    run = runs.start(new_run()).run
    first = Checkpoint(f"refs/openagents/checkpoints/{run.id}", "a" * 40, 12)
    recorded = runs.record_checkpoint(run.id, first)
    assert recorded is not None
    assert recorded.checkpoint == first
    replayed = runs.record_checkpoint(run.id, Checkpoint(first.ref, "b" * 40, 13))
    assert replayed is not None
    assert replayed.checkpoint == first
    runs.append(run.id, [{"type": "start"}])
    runs.finish(run.id, RunStatus.COMPLETED, at=datetime.now(UTC), retention=WEEK)
    later = runs.start(new_run("chat-2")).run
    saved = Checkpoint("refs/openagents/checkpoints/revert-1", "c" * 40, 14)
    record = RevertRecord("revert-1", datetime(2026, 1, 2, tzinfo=UTC), "alice", 3, 2, saved)
    runs.mark_reverted(run.id, record)
    runs.mark_reverted(later.id)
    target, other = runs.get(run.id), runs.get(later.id)
    assert target is not None
    assert other is not None
    assert (target.reverted, target.revert, target.checkpoint) == (True, record, first)
    assert (target.status, target.last_seq) == (RunStatus.COMPLETED, 1)  # nothing else moved
    assert (other.reverted, other.revert, other.checkpoint) == (True, None, None)
    runs.mark_reverted(run.id)  # a later revert to an earlier run keeps this record
    again = runs.get(run.id)
    assert again is not None
    assert again.revert == record
    listed = runs.list_for_session("sess-1", 10, None).items
    assert {r.id: r.reverted for r in listed} == {run.id: True, later.id: True}
    assert runs.record_checkpoint("nope", first) is None
    assert runs.mark_reverted("nope") is None


def test_running_finds_every_live_run_and_no_ended_one(runs: RunStore) -> None:
    started = [runs.start(new_run(f"chat-live-{i}")).run for i in range(6)]
    ended = started.pop()
    runs.finish(ended.id, RunStatus.COMPLETED, at=datetime.now(UTC), retention=WEEK)
    assert {run.id for run in runs.running()} == {run.id for run in started}


def test_runs_of_two_users_chats_with_the_same_ids_are_independent(both: Runs) -> None:
    started = []
    for user in ("alice", "bob"):
        session = create(both.store, user)
        chat = new_chat(session.id, "run-same-chat")
        both.store.create_chat(session, chat, 100)
        run = new_run(chat.id, session_id=session.id, message_id="same-message")
        run = replace(run, user_id=user)
        started.append(both.runs.start(run, turn(both, chat, "same-message")))
    assert all(s.created for s in started)
    for s in started:
        assert both.runs.active_run_id(s.run.session_id, "run-same-chat") == s.run.id
        assert both.runs.latest(s.run.session_id, "run-same-chat") == s.run
        stored = both.store.list_messages(s.run.session_id, "run-same-chat", 10, None).items
        assert [m.id for m in stored] == ["same-message"]


def test_runs_of_a_user_in_a_time_range_oldest_first(runs: RunStore) -> None:
    base = datetime(2026, 3, 1, tzinfo=UTC)
    inside = []
    for i, session_id in enumerate(["sess-1", "sess-2", "sess-1"]):
        run = new_run(f"u-chat-{i}", session_id=session_id, at=base + timedelta(hours=i))
        runs.start(run)
        inside.append(run.id)
    before = new_run("u-before", at=base - timedelta(microseconds=1))
    at_end = new_run("u-end", at=base + timedelta(days=1))
    someone_else = replace(new_run("u-bob", session_id="sess-bob", at=base), user_id="bob")
    for run in (before, at_end, someone_else):
        runs.start(run)
    end = base + timedelta(days=1)
    found = runs.list_for_user("alice", base, end, 100)
    assert [r.id for r in found] == inside  # the start included, the end excluded
    assert [r.id for r in runs.list_for_user("alice", base, end, 2)] == inside[:2]
    assert [r.id for r in runs.list_for_user("bob", base, end, 100)] == [someone_else.id]
    usage = RunUsage(input_tokens=10, output_tokens=5, cache_read_tokens=2, cache_write_tokens=1)
    runs.append(inside[0], [], Progress(steps=1, model_calls=1, usage=usage))
    (first, *_) = runs.list_for_user("alice", base, end, 1)
    assert first.usage == usage  # what the run holds now, not what it started with
    assert runs.list_for_user("alice", end + WEEK, end + 2 * WEEK, 100) == []
