"""Delete-from-here and upward paging of a chat's messages (reference §2.2, §6.5), through
both transports."""

from __future__ import annotations

from tests.api.chat_support import conversation, live_turn, post, ui
from tests.api.test_chats import assert_error, chats_path, new_session
from tests.support import Api


def messages_path(sid: str, chat_id: str) -> str:
    return f"{chats_path(sid)}/{chat_id}/messages"


def listed(api: Api, sid: str, chat_id: str, **query: str) -> tuple[list[str], str | None]:
    reply = api.get(messages_path(sid, chat_id), query=query)
    assert reply.status == 200, reply.body
    return [m["id"] for m in reply.body["messages"]], reply.body["nextCursor"]


# ------------------------------------------------------------------ delete from here


def test_delete_from_a_user_message_drops_the_rest_and_recomputes_unread(api: Api) -> None:
    sid, chat = new_session(api)
    ids = conversation(api, sid, chat, 3)  # u0 a0 u1 a1 u2 a2
    assert api.post(f"{chats_path(sid)}/{chat}/read").status == 200
    post(api, sid, chat, ui("a-late", "assistant", "late"))  # unread again

    reply = api.delete(f"{messages_path(sid, chat)}/u1")

    assert reply.status == 200, reply.body
    assert reply.body == {"success": True, "deletedMessageIds": [*ids[2:], "a-late"]}
    assert listed(api, sid, chat) == (ids[:2], None)
    got = api.get(f"{chats_path(sid)}/{chat}").body["chat"]
    assert got["hasUnread"] is False  # a0, the latest assistant message left, was read
    # the deleted ids are free: the user can send the message again
    post(api, sid, chat, ui("u1", "user", "edited"))
    assert listed(api, sid, chat)[0] == [*ids[:2], "u1"]


def test_delete_from_refuses_assistant_and_unknown_messages(api: Api) -> None:
    sid, chat = new_session(api)
    ids = conversation(api, sid, chat, 1)
    assert_error(api.delete(f"{messages_path(sid, chat)}/a0"), 400, "invalid_input", "messageId")
    assert_error(api.delete(f"{messages_path(sid, chat)}/nope"), 404, "not_found", "messageId")
    assert listed(api, sid, chat)[0] == ids


def test_delete_from_is_409_while_a_turn_runs(api: Api) -> None:
    sid, chat = new_session(api)
    ids = conversation(api, sid, chat, 1)
    with live_turn(api, sid, chat):
        busy = api.delete(f"{messages_path(sid, chat)}/u0")
        assert_error(busy, 409, "turn_in_progress", "chatId")
        assert listed(api, sid, chat)[0] == ids
    assert api.delete(f"{messages_path(sid, chat)}/u0").status == 200


def test_delete_from_another_users_or_another_sessions_chat_is_404(api: Api) -> None:
    sid, chat = new_session(api)
    conversation(api, sid, chat, 1)
    other_sid, _ = new_session(api, title="Other")
    assert_error(api.delete(f"{messages_path(sid, chat)}/u0", user="bob"), 404, "not_found")
    assert_error(api.delete(f"{messages_path(other_sid, chat)}/u0"), 404, "not_found")
    assert listed(api, sid, chat)[0] == ["u0", "a0"]


# ------------------------------------------------------------------ upward paging


def test_paging_up_from_the_end(api: Api) -> None:
    sid, chat = new_session(api)
    ids = conversation(api, sid, chat, 3)  # six messages

    last, older = listed(api, sid, chat, before="end", limit="4")
    assert last == ids[2:]  # the newest page, newest last
    assert older is not None
    first, none = listed(api, sid, chat, before=older, limit="4")
    assert first == ids[:2]
    assert none is None
    assert listed(api, sid, chat, before="end") == (ids, None)
    assert listed(api, sid, chat, limit="2")[0] == ids[:2]  # forward paging is unchanged


def test_paging_refuses_a_bad_before_and_both_directions(api: Api) -> None:
    sid, chat = new_session(api)
    conversation(api, sid, chat, 2)
    _, cursor = listed(api, sid, chat, limit="1")
    assert cursor is not None
    bad = api.get(messages_path(sid, chat), query={"before": "garbage"})
    assert_error(bad, 400, "invalid_input", "before")
    both = api.get(messages_path(sid, chat), query={"before": "end", "cursor": cursor})
    assert_error(both, 400, "invalid_input", "before")
    theirs = api.get(messages_path(sid, chat), query={"before": "end"}, user="bob")
    assert_error(theirs, 404, "not_found")
