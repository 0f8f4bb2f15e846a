"""Unread rule (reference §6.2) and the session's derived fields."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from openagents.domain.models import ChatMark, Session, is_unread

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


@pytest.mark.parametrize(
    ("assistant", "read", "unread"),
    [
        (None, None, False),  # no assistant message: read
        (None, at(5), False),
        (at(0), None, True),  # never read: unread
        (at(10), at(5), True),  # answered after the read
        (at(5), at(10), False),  # read after the answer
        (at(5), at(5), False),  # same instant: read
        (at(5.000001), at(5), True),
    ],
)
def test_is_unread_truth_table(
    assistant: datetime | None, read: datetime | None, unread: bool
) -> None:
    assert is_unread(assistant, read) is unread
    mark = ChatMark(
        created_at=T0, updated_at=T0, last_assistant_message_at=assistant, last_read_at=read
    )
    assert mark.has_unread is unread


def mark(created: float, updated: float, **kw: object) -> ChatMark:
    return ChatMark.model_validate({"created_at": at(created), "updated_at": at(updated), **kw})


def session(chats: dict[str, ChatMark]) -> Session:
    return Session(id="s1", user_id="u1", title="T", created_at=T0, updated_at=T0, chats=chats)


def test_session_without_chats() -> None:
    s = session({})
    assert s.latest_chat_id is None
    assert s.has_unread is False
    assert s.has_streaming is False
    assert s.chat_activity_at == T0


def test_latest_chat_is_the_most_recently_updated() -> None:
    s = session({"a": mark(0, 50), "b": mark(10, 20), "c": mark(20, 30)})
    assert s.latest_chat_id == "a"
    assert s.chat_activity_at == at(50)


def test_latest_chat_tie_break_is_the_newest_created() -> None:
    s = session({"old": mark(0, 40), "new": mark(30, 40), "mid": mark(10, 40)})
    assert s.latest_chat_id == "new"
    reordered = session({"new": mark(30, 40), "old": mark(0, 40), "mid": mark(10, 40)})
    assert reordered.latest_chat_id == "new"


def test_session_unread_when_any_chat_is_unread() -> None:
    read = mark(0, 1, last_assistant_message_at=at(1), last_read_at=at(2))
    quiet = mark(0, 1)
    unread = mark(0, 3, last_assistant_message_at=at(3), last_read_at=at(2))
    assert session({"a": read, "b": quiet}).has_unread is False
    assert session({"a": read, "b": quiet, "c": unread}).has_unread is True


def test_session_streaming_when_any_chat_streams() -> None:
    assert session({"a": mark(0, 0), "b": mark(0, 0, streaming=True)}).has_streaming is True
    assert session({"a": mark(0, 0)}).has_streaming is False
