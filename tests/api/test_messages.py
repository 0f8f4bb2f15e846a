"""Messages, chat naming, activity and unread markers (reference §2.2, §6.2, §6.4),
through both transports."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import botocore.session
import pynamodb.connection.base as pynamodb_base
import pytest
from openagents.settings import Settings

from tests.support import Api, HttpApi, LambdaApi, Reply


def settings_of(api: Api) -> Settings:
    assert isinstance(api, LambdaApi | HttpApi)
    return api.settings


@pytest.fixture(autouse=True)
def _one_botocore_session(monkeypatch: pytest.MonkeyPatch) -> None:
    """Speed only: PynamoDB builds a new botocore session (reloading the service models,
    ~0.1 s) for every transaction; share one across the test's connections."""
    shared = botocore.session.get_session()
    monkeypatch.setattr(pynamodb_base, "get_session", lambda: shared)


def new_session(api: Api, user: str = "alice", title: str = "T") -> tuple[str, str]:
    created = api.post("/api/sessions", {"title": title}, user=user)
    assert created.status == 201, created.body
    return created.body["session"]["id"], created.body["chat"]["id"]


def ui(message_id: str, role: str, *texts: str, **extra: Any) -> dict[str, Any]:
    return {
        "id": message_id,
        "role": role,
        "parts": [{"type": "text", "text": text} for text in texts],
        **extra,
    }


class Chat:
    """One chat's routes for one caller."""

    def __init__(self, api: Api, session_id: str, chat_id: str, user: str = "alice") -> None:
        self.api = api
        self.session_id = session_id
        self.id = chat_id
        self.user = user
        self.path = f"/api/sessions/{session_id}/chats/{chat_id}"

    def post(self, message: Any) -> Reply:
        return self.api.post(f"{self.path}/messages", {"message": message}, user=self.user)

    def status(self, message: dict[str, Any]) -> str:
        reply = self.post(message)
        assert reply.status == 200, reply.body
        assert reply.body["success"] is True
        status: str = reply.body["status"]
        return status

    def page(self, **query: str) -> Reply:
        reply = self.api.get(f"{self.path}/messages", query=query or None, user=self.user)
        return reply

    def messages(self) -> list[dict[str, Any]]:
        reply = self.page()
        assert reply.status == 200, reply.body
        assert reply.body["nextCursor"] is None
        messages: list[dict[str, Any]] = reply.body["messages"]
        return messages

    def get(self) -> dict[str, Any]:
        reply = self.api.get(self.path, user=self.user)
        assert reply.status == 200, reply.body
        chat: dict[str, Any] = reply.body["chat"]
        return chat

    def read(self) -> None:
        reply = self.api.post(f"{self.path}/read", user=self.user)
        assert reply.status == 200, reply.body
        assert reply.body == {"success": True}

    def unread(self) -> bool:
        flag: bool = self.get()["hasUnread"]
        return flag


@pytest.fixture
def chat(api: Api) -> Chat:
    return Chat(api, *new_session(api))


def add_chat(api: Api, session_id: str, chat_id: str) -> Chat:
    reply = api.post(f"/api/sessions/{session_id}/chats", {"id": chat_id})
    assert reply.status == 200, reply.body
    return Chat(api, session_id, chat_id)


def summary(api: Api, session_id: str) -> dict[str, Any]:
    listed = api.get("/api/sessions")
    assert listed.status == 200, listed.body
    (found,) = [s for s in listed.body["sessions"] if s["id"] == session_id]
    return dict(found)


def session(api: Api, session_id: str) -> dict[str, Any]:
    got = api.get(f"/api/sessions/{session_id}")
    assert got.status == 200, got.body
    return dict(got.body["session"])


def assert_error(reply: Reply, status: int, code: str, field: str | None) -> None:
    assert reply.status == status, reply.body
    assert set(reply.error) == {"error", "code", "field"}
    assert (reply.error["code"], reply.error["field"]) == (code, field)


# ------------------------------------------------------------------ upserts


def test_user_messages_are_written_once(chat: Chat) -> None:
    first = ui("u-1", "user", "hello")
    reply = chat.post(first)
    assert reply.status == 200, reply.body
    assert reply.body == {"success": True, "status": "inserted"}

    assert chat.status(first) == "unchanged"
    assert chat.status(ui("u-1", "user", "edited")) == "unchanged"
    assert chat.messages() == [first]


def test_assistant_messages_upsert_by_id(chat: Chat) -> None:
    assert chat.status(ui("a-1", "assistant", "draft")) == "inserted"
    final = ui("a-1", "assistant", "final answer", metadata={"tokens": 3})

    assert chat.status(final) == "updated"
    assert chat.messages() == [final]
    assert chat.status(ui("a-1", "assistant", "third")) == "updated"
    assert chat.messages() == [ui("a-1", "assistant", "third")]


def test_message_id_of_another_role_or_chat_is_a_conflict(api: Api, chat: Chat) -> None:
    other = add_chat(api, chat.session_id, "other-chat")
    user_msg = ui("shared-u", "user", "original user")
    assistant_msg = ui("shared-a", "assistant", "original assistant")
    assert chat.status(user_msg) == "inserted"
    assert chat.status(assistant_msg) == "inserted"

    for target, message in (
        (chat, ui("shared-u", "assistant", "overwrite")),  # other role, same chat
        (chat, ui("shared-a", "user", "overwrite")),
        (other, ui("shared-u", "user", "overwrite")),  # same role, other chat
        (other, ui("shared-a", "assistant", "overwrite")),
    ):
        reply = target.post(message)
        assert_error(reply, 409, "conflict", "message.id")
        assert reply.error["error"] == "Message ID already belongs to a different chat or role"
        assert "original" not in str(reply.body)

    assert chat.messages() == [user_msg, assistant_msg]
    assert other.messages() == []
    assert other.get()["title"] == "New chat"


def test_another_users_message_ids_are_fresh_ids_for_them(api: Api, chat: Chat) -> None:
    """Message ids are unique per user: bob's chat takes alice's ids as new messages (a 409
    would tell him they exist); each chat keeps its own."""
    bob = Chat(api, *new_session(api, user="bob"), user="bob")
    alices = [ui("shared-u", "user", "alice asks"), ui("shared-a", "assistant", "alice hears")]
    bobs = [ui("shared-u", "user", "bob asks"), ui("shared-a", "assistant", "bob hears")]
    for message in alices:
        assert chat.status(message) == "inserted"
    for message in bobs:
        assert bob.status(message) == "inserted"
    assert bob.status(ui("shared-a", "assistant", "bob again")) == "updated"
    assert chat.messages() == alices
    assert bob.messages() == [bobs[0], ui("shared-a", "assistant", "bob again")]
    assert bob.get()["title"] == "bob asks"


# ------------------------------------------------------------------- naming


def test_only_a_first_user_message_names_the_chat(api: Api, chat: Chat) -> None:
    long_text = "word " * 30
    chat.status(ui("u-1", "user", long_text))
    assert chat.get()["title"] == long_text.strip()[:80] + "..."

    chat.status(ui("u-2", "user", "second message"))
    chat.status(ui("a-1", "assistant", "answer"))
    assert chat.get()["title"] == long_text.strip()[:80] + "..."

    parts = add_chat(api, chat.session_id, "parts-chat")
    message = {
        "id": "u-3",
        "role": "user",
        "parts": [
            {"type": "text", "text": " Fix "},
            {"type": "file", "url": "https://example.com/a.png"},
            {"type": "text", "text": "the bug "},
        ],
    }
    parts.status(message)
    assert parts.get()["title"] == "Fix  the bug"

    exact = add_chat(api, chat.session_id, "exact-chat")
    exact.status(ui("u-4", "user", "e" * 80))
    assert exact.get()["title"] == "e" * 80

    assistant_first = add_chat(api, chat.session_id, "assistant-first")
    assistant_first.status(ui("a-2", "assistant", "I speak first"))
    assert assistant_first.get()["title"] == "New chat"
    assistant_first.status(ui("u-5", "user", "not the first message"))
    assert assistant_first.get()["title"] == "New chat"

    blank = add_chat(api, chat.session_id, "blank-chat")
    blank.status(ui("u-6", "user", "   "))
    assert blank.get()["title"] == "New chat"

    renamed = add_chat(api, chat.session_id, "renamed-chat")
    assert api.patch(renamed.path, {"title": "Chosen"}).status == 200
    renamed.status(ui("u-7", "user", "first words"))
    assert renamed.get()["title"] == "first words"  # §6.4: the first message names it


# ---------------------------------------------------------------- validation


def test_invalid_payloads_cursors_and_limits(api: Api, chat: Chat) -> None:
    cases: list[tuple[Any, str]] = [
        ({"role": "user", "parts": []}, "message.id"),
        ({"id": "", "role": "user", "parts": []}, "message.id"),
        ({"id": "a b", "role": "user", "parts": []}, "message.id"),
        ({"id": " lead", "role": "user", "parts": []}, "message.id"),
        ({"id": 5, "role": "user", "parts": []}, "message.id"),
        ({"id": "x" * 201, "role": "user", "parts": []}, "message.id"),
        ({"id": "m", "role": "system", "parts": []}, "message.role"),
        ({"id": "m", "parts": []}, "message.role"),
        ({"id": "m", "role": "user", "parts": "hi"}, "message.parts"),
        ({"id": "m", "role": "user", "parts": {"type": "text"}}, "message.parts"),
        ({"id": "m", "role": "user"}, "message.parts"),
        ("just text", "message"),
        (None, "message"),
    ]
    for message, field in cases:
        assert_error(chat.post(message), 422, "validation_error", field)
    no_message = chat.api.post(f"{chat.path}/messages", {})
    assert_error(no_message, 422, "validation_error", "message")
    extra = chat.api.post(f"{chat.path}/messages", {"message": ui("m", "user"), "x": 1})
    assert_error(extra, 422, "validation_error", "x")
    assert chat.messages() == []
    assert chat.get()["title"] == "New chat"

    post_many(chat, 3, "m")
    for cursor in ("garbage", "eyJ2IjoxfQ", "!!!"):
        assert_error(chat.page(cursor=cursor), 400, "invalid_input", "cursor")
    api.post("/api/sessions", {"title": "another"})
    sessions = api.get("/api/sessions", query={"limit": "1"})
    session_cursor = sessions.body["nextCursor"]
    assert session_cursor
    assert_error(chat.page(cursor=session_cursor), 400, "invalid_input", "cursor")
    assert_error(chat.page(limit="abc"), 422, "validation_error", "limit")
    assert_error(chat.page(limit="-1"), 422, "validation_error", "limit")
    assert_error(chat.page(limit="1001"), 422, "validation_error", "limit")


# --------------------------------------------------------------------- sizes


def stored_artifacts(api: Api) -> list[str]:
    settings = settings_of(api)
    if api.transport == "lambda":
        assert settings.artifact_bucket
        listed = boto3.client("s3", region_name=settings.region).list_objects_v2(
            Bucket=settings.artifact_bucket
        )
        return [obj["Key"] for obj in listed.get("Contents", [])]
    root = Path(settings.artifacts_dir)
    return [p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()]


# ------------------------------------------------------------------ listing


def test_message_listing_and_pagination(api: Api, chat: Chat) -> None:
    ids = post_many(chat, 7, "m")
    seven = pages(chat, 3)
    assert [len(p) for p in seven] == [3, 3, 1]
    assert [i for p in seven for i in p] == ids

    full = add_chat(api, chat.session_id, "full-chat")
    six = post_many(full, 6, "f")
    assert pages(full, 3) == [six[:3], six[3:]]
    assert pages(full, 6) == [six]
    assert pages(full, 1) == [[i] for i in six]
    assert [m["id"] for m in full.page().body["messages"]] == six

    empty = add_chat(api, chat.session_id, "empty-chat")
    assert pages(empty, 3) == [[]]

    as_posted = add_chat(api, chat.session_id, "as-posted")
    posted = [
        ui("p-1", "user", "first", metadata={"client": "web"}),
        ui("p-2", "assistant", "second", createdAt="2026-01-01T00:00:00Z"),
        {
            "id": "p-3",
            "role": "user",
            "parts": [{"type": "text", "text": "third"}, {"type": "data-x", "data": {"n": [1]}}],
            "custom": {"nested": True},
        },
    ]
    for message in posted:
        as_posted.status(message)

    reply = as_posted.page()
    assert set(reply.body) == {"messages", "nextCursor"}
    assert reply.body["messages"] == posted


def post_many(chat: Chat, count: int, prefix: str) -> list[str]:
    ids = [f"{prefix}-{i}" for i in range(count)]
    for i, message_id in enumerate(ids):
        role = "user" if i % 2 == 0 else "assistant"
        chat.status(ui(message_id, role, f"text {i}"))
    return ids


def pages(chat: Chat, limit: int) -> list[list[str]]:
    found: list[list[str]] = []
    cursor: str | None = None
    while True:
        query = {"limit": str(limit), **({"cursor": cursor} if cursor else {})}
        reply = chat.page(**query)
        assert reply.status == 200, reply.body
        found.append([m["id"] for m in reply.body["messages"]])
        cursor = reply.body["nextCursor"]
        if cursor is None:
            return found
        assert len(found) < 10, found


def test_message_sizes(api: Api, chat: Chat) -> None:
    settings = settings_of(api)
    size = 400_000
    assert settings.inline_message_bytes < size < settings.max_message_bytes
    big_user = ui("big-u", "user", "é" * 160_000)  # 2 bytes each in UTF-8: 320 KB stored
    big_assistant = ui("big-a", "assistant", "a" * size)

    assert chat.status(big_user) == "inserted"
    assert chat.status(big_assistant) == "inserted"
    assert chat.messages() == [big_user, big_assistant]
    assert len(stored_artifacts(api)) == 2

    replaced = ui("big-a", "assistant", "b" * size)
    assert chat.status(replaced) == "updated"
    assert chat.messages() == [big_user, replaced]
    assert len(stored_artifacts(api)) == 2  # the replaced body is gone
    assert chat.get()["title"] == "é" * 80 + "..."

    huge = add_chat(api, chat.session_id, "huge-chat")
    text = "z" * 1_100_000
    assert settings.max_message_bytes < len(text) < settings.max_message_bytes + 64 * 1024
    reply = huge.post(ui("huge", "user", text))
    assert_error(reply, 413, "payload_too_large", "message")
    assert huge.messages() == []
    assert huge.get()["title"] == "New chat"
    assert len(stored_artifacts(api)) == 2
    assert huge.status(ui("huge", "user", "small")) == "inserted"  # the id was not claimed


# ------------------------------------------------------------------ activity


def test_user_messages_refresh_session_activity(api: Api, chat: Chat) -> None:
    idle = timedelta(seconds=settings_of(api).idle_timeout_seconds)
    before = session(api, chat.session_id)

    chat.status(ui("u-1", "user", "wake up"))
    after = session(api, chat.session_id)

    activity = datetime.fromisoformat(after["lastActivityAt"])
    assert datetime.fromisoformat(after["hibernateAfter"]) - activity == idle
    if before["lastActivityAt"] is not None:
        assert activity > datetime.fromisoformat(before["lastActivityAt"])
    assert activity >= datetime.fromisoformat(before["createdAt"])

    chat.status(ui("a-1", "assistant", "answer"))
    chat.status(ui("a-2", "assistant", "another answer"))
    later = session(api, chat.session_id)
    assert later["lastActivityAt"] == after["lastActivityAt"]
    assert later["hibernateAfter"] == after["hibernateAfter"]

    chat.status(ui("u-2", "user", "again"))
    newest = session(api, chat.session_id)
    newest_activity = datetime.fromisoformat(newest["lastActivityAt"])
    assert newest_activity > activity
    assert datetime.fromisoformat(newest["hibernateAfter"]) - newest_activity == idle


# -------------------------------------------------------------------- unread


def test_unread_follows_assistant_messages_and_reads(api: Api, chat: Chat) -> None:
    sid = chat.session_id
    assert chat.unread() is False
    assert summary(api, sid)["hasUnread"] is False
    assert session(api, sid)["hasUnread"] is False

    chat.status(ui("u-1", "user", "question"))
    assert chat.unread() is False  # user messages never make a chat unread

    chat.status(ui("a-1", "assistant", "answer"))
    assert chat.unread() is True
    assert summary(api, sid)["hasUnread"] is True
    assert session(api, sid)["hasUnread"] is True
    listed = api.get(f"/api/sessions/{sid}/chats").body["chats"]
    assert [c["hasUnread"] for c in listed] == [True]
    assert chat.get()["lastAssistantMessageAt"] is not None

    chat.read()
    assert chat.unread() is False
    assert summary(api, sid)["hasUnread"] is False
    assert session(api, sid)["hasUnread"] is False

    chat.status(ui("a-2", "assistant", "another answer"))
    assert chat.unread() is True
    assert summary(api, sid)["hasUnread"] is True

    chat.read()
    chat.read()  # idempotent
    assert chat.unread() is False

    other = add_chat(api, chat.session_id, "quiet-chat")
    chat.status(ui("a-3", "assistant", "third answer"))

    flags = {
        c["id"]: c["hasUnread"]
        for c in api.get(f"/api/sessions/{chat.session_id}/chats").body["chats"]
    }
    assert flags == {chat.id: True, other.id: False}
    other.read()
    assert chat.unread() is True
    assert summary(api, chat.session_id)["hasUnread"] is True
    chat.read()
    assert summary(api, chat.session_id)["hasUnread"] is False


def test_updating_an_assistant_message_does_not_make_it_unread(api: Api, chat: Chat) -> None:
    chat.status(ui("a-1", "assistant", "answer"))
    stamp = chat.get()["lastAssistantMessageAt"]
    chat.read()

    assert chat.status(ui("a-1", "assistant", "answer, revised")) == "updated"

    assert chat.unread() is False
    assert summary(api, chat.session_id)["hasUnread"] is False
    assert chat.get()["lastAssistantMessageAt"] == stamp


def test_latest_chat_is_the_most_recently_updated(api: Api, chat: Chat) -> None:
    sid = chat.session_id
    assert summary(api, sid)["latestChatId"] == chat.id
    second = add_chat(api, sid, "second-chat")
    assert summary(api, sid)["latestChatId"] == second.id

    chat.status(ui("u-1", "user", "back to the first"))
    assert summary(api, sid)["latestChatId"] == chat.id
    assert session(api, sid)["latestChatId"] == chat.id

    second.status(ui("a-1", "assistant", "news in the second"))
    assert summary(api, sid)["latestChatId"] == second.id

    assert api.patch(chat.path, {"title": "Renamed"}).status == 200
    assert summary(api, sid)["latestChatId"] == chat.id

    assert api.delete(chat.path).status == 200
    assert summary(api, sid)["latestChatId"] == second.id
