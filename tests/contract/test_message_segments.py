"""A live assistant message stored incrementally (``shared.Segment``), on every adapter: a
step's write with ``kept_parts`` stores only the parts from there on, the message reads back
whole, a whole write replaces the segments, and every delete leaves none behind — nor any
bytes counted on the user."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from openagents.domain.models import Chat, Message, Role, Session
from openagents.store.items import SegmentItem
from openagents.store.keys import messages_pk
from openagents.store.port import Store
from openagents.store.runs import JsonValue, Progress, Run, RunStore, RunUsage, TurnMessage

from tests.contract.conftest import Backend
from tests.contract.helpers import create
from tests.contract.test_user_storage import runs_of


def new_run(session: Session, chat_id: str) -> Run:
    return Run(
        id=f"run-{uuid.uuid4().hex[:10]}",
        session_id=session.id,
        chat_id=chat_id,
        user_id=session.user_id,
        message_id=f"u-{uuid.uuid4().hex[:8]}",
        assistant_message_id=f"a-{uuid.uuid4().hex[:8]}",
        model_id="scripted/default",
        started_at=datetime.now(UTC),
    )


class Turn:
    """A run on a fresh session whose steps write its assistant message."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.runs: RunStore = runs_of(store)
        self.session = create(store)
        self.chat_id = next(iter(self.session.chats))
        self.run = new_run(self.session, self.chat_id)
        self.runs.start(self.run)
        self.created = datetime.now(UTC) + timedelta(milliseconds=1)
        self.steps = 0

    @property
    def chat(self) -> Chat:
        chat = self.store.get_chat(self.session.id, self.chat_id)
        assert chat is not None
        return chat

    def message(self, parts: list[JsonValue], note: str = "") -> Message:
        body: dict[str, JsonValue] = {
            "id": self.run.assistant_message_id,
            "role": "assistant",
            "parts": parts,
            "metadata": {"note": note},
        }
        return Message(
            id=self.run.assistant_message_id,
            chat_id=self.chat_id,
            role=Role.ASSISTANT,
            parts=body,
            created_at=self.created,
        )

    def step(self, parts: list[JsonValue], kept: int, note: str = "") -> None:
        self.steps += 1
        turn = TurnMessage(self.session, self.chat, self.message(parts, note), None, kept)
        self.runs.append(
            self.run.id, [{"type": "start-step"}], Progress(self.steps, 1, RunUsage()), turn
        )

    def stored(self) -> dict[str, JsonValue]:
        found = self.store.list_messages(self.session.id, self.chat_id, 10, None).items
        assert [m.id for m in found] == [self.run.assistant_message_id]
        return dict(found[0].parts)

    def events_bytes(self) -> int:
        return sum(
            len(json.dumps(e.chunk, separators=(",", ":")).encode())
            for e in self.runs.events(self.run.id, 0)
        )


def text(n: int, size: int = 50) -> JsonValue:
    return {"type": "text", "text": f"{n}:" + "x" * size, "state": "done"}


def tool(n: int, state: str) -> JsonValue:
    part: dict[str, JsonValue] = {
        "type": "tool-bash",
        "toolCallId": f"call-{n}",
        "state": state,
        "input": {"command": f"echo {n}"},
    }
    if state == "output-available":
        part["output"] = {"stdout": str(n)}
    return part


def segments(backend: Backend, turn: Turn) -> list[tuple[int, int]]:
    """The message's stored segments as (start, bytes), in write order."""
    message_id = turn.run.assistant_message_id
    if backend.name == "dynamodb":
        found = SegmentItem.query(
            messages_pk(turn.session.id, turn.chat_id), SegmentItem.sk.startswith("MS#")
        )
        return [(int(item.start), int(item.size)) for item in found if f"#{message_id}#" in item.sk]
    rows = backend.rows(
        "SELECT start, bytes FROM message_segments WHERE message_id = ? ORDER BY n", (message_id,)
    )
    return [(int(start), int(size)) for start, size in rows]


def counted(turn: Turn) -> int:
    """What the user's storage counts for the turn's message (the events' bytes aside)."""
    return turn.store.storage_used(turn.session.user_id) - turn.events_bytes()


def whole(turn: Turn) -> int:
    body = json.dumps(turn.stored(), separators=(",", ":"), ensure_ascii=False)
    return len(body.encode())


def test_steps_write_only_what_they_changed_and_the_message_reads_back_whole(
    backend: Backend,
) -> None:
    turn = Turn(backend.store)
    parts: list[JsonValue] = [{"type": "step-start"}, text(1, 5000)]
    turn.step(list(parts), kept=0)  # the first write: whole
    assert segments(backend, turn) == []
    first = whole(turn)
    for n in range(2, 8):  # a model step adds a call, the tool step finishes it
        parts += [{"type": "step-start"}, tool(n, "input-available")]
        turn.step(list(parts), kept=len(parts) - 2, note=f"model {n}")
        parts[-1] = tool(n, "output-available")
        turn.step(list(parts), kept=len(parts) - 1, note=f"tool {n}")
        assert turn.stored() == turn.message(parts, f"tool {n}").parts
    laid = segments(backend, turn)
    assert len(laid) == 12  # one per step; none replaced a whole earlier one
    assert max(size for _, size in laid) < 400  # a step's bytes, not the message's (> 5 KB)
    assert first > 5000
    assert counted(turn) == first + sum(size for _, size in laid)


def test_a_segment_replaces_those_it_covers(backend: Backend) -> None:
    turn = Turn(backend.store)
    parts: list[JsonValue] = [text(1), text(2)]
    turn.step(list(parts), kept=0)
    first = whole(turn)
    turn.step([*parts, text(3)], kept=2)
    turn.step([*parts, text(3), text(4)], kept=3)
    turn.step([*parts, text(30), text(40)], kept=2)  # from 2 on again: both earlier replaced
    assert [start for start, _ in segments(backend, turn)] == [2]
    assert turn.stored()["parts"] == [*parts, text(30), text(40)]
    turn.step([text(1)], kept=1)  # shorter: the parts after 1 are gone
    assert turn.stored()["parts"] == [text(1)]
    laid = segments(backend, turn)
    assert [start for start, _ in laid] == [1]
    assert counted(turn) == first + laid[0][1]  # the replaced segments' bytes given back


def test_a_whole_write_replaces_the_segments_and_later_ones_stack_on_it(backend: Backend) -> None:
    turn = Turn(backend.store)
    turn.step([text(1)], kept=0)
    turn.step([text(1), text(2)], kept=1)
    turn.step([text(1), text(2), text(3)], kept=2)
    merged = turn.message([text(1), text(2), text(3)], "merged")
    assert turn.store.put_message(turn.session, turn.chat, merged, activity=None) == "updated"
    assert turn.stored() == merged.parts
    assert counted(turn) == whole(turn)  # the segments' bytes are given back
    assert [start for start, _ in segments(backend, turn)] == []
    turn.step([text(1), text(2), text(3), text(4)], kept=3, note="after")
    assert turn.stored() == turn.message([text(1), text(2), text(3), text(4)], "after").parts


def test_a_segment_of_a_message_not_stored_yet_is_written_whole(backend: Backend) -> None:
    turn = Turn(backend.store)
    turn.step([text(1), text(2)], kept=1)  # a wrong promise: nothing is stored
    assert turn.stored()["parts"] == [text(1), text(2)]
    assert segments(backend, turn) == []


def test_a_segment_larger_than_an_inline_body_is_written_whole(backend: Backend) -> None:
    turn = Turn(backend.store)
    turn.step([text(1)], kept=0)
    big = text(2, backend.settings.inline_message_bytes + 10)
    turn.step([text(1), big], kept=1)
    assert segments(backend, turn) == []
    assert turn.stored()["parts"] == [text(1), big]
    assert backend.files()  # the whole body went to the artifact store


@pytest.mark.parametrize("how", ["chat", "session", "from"])
def test_deletes_leave_no_segment_and_no_bytes(backend: Backend, how: str) -> None:
    turn = Turn(backend.store)
    store, session = turn.store, turn.session
    asked = Message(
        id=turn.run.message_id,
        chat_id=turn.chat_id,
        role=Role.USER,
        parts={"id": turn.run.message_id, "role": "user", "parts": [text(0)]},
        created_at=turn.created - timedelta(milliseconds=1),
    )
    store.put_message(session, turn.chat, asked, activity=None)
    turn.step([text(1)], kept=0)
    turn.step([text(1), text(2)], kept=1)
    assert segments(backend, turn)
    assert turn.store.storage_used(session.user_id) > turn.events_bytes()
    if how == "chat":
        other = Chat(
            id=f"chat-{uuid.uuid4().hex[:6]}",
            session_id=session.id,
            title="Other",
            created_at=datetime.now(UTC),
            updated_at=datetime.now(UTC),
        )
        store.create_chat(session, other, 10)
        store.delete_chat(session, turn.chat_id)
    elif how == "session":
        stored = store.get_session(session.id)
        assert stored is not None
        store.delete_session(stored)
    else:
        store.delete_messages_from(session, turn.chat, asked.id, datetime.now(UTC))
    assert segments(backend, turn) == []
    assert store.storage_used(session.user_id) - turn.events_bytes() == 0
