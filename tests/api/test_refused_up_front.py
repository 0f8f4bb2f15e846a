"""Input refused before anything is written (issue 15, "Input that must be refused up front"):
local repositories that are no git repository, control characters in URLs, reserved branch
names, messages to an archived session, NaN in a message, control characters in model ids,
garbling characters in derived titles, and unmatched ``/api`` paths. Both transports."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.api.test_sessions import SESSIONS, assert_error, assert_nothing_written, create
from tests.support import Api, git, make_origin


def test_a_local_repository_must_exist_and_be_a_git_repository(api: Api, tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "README").write_text("not a repository\n")
    refused = [
        {"repoUrl": f"file://{tmp_path}/missing"},
        {"repoUrl": f"file://{plain}"},
        {"repoUrl": f"file://{plain}/README"},
        {"repoUrl": "file:///etc"},
        {"repoUrl": "file:///etc/passwd"},
    ]
    for body in refused:
        assert_error(api.post(SESSIONS, body), 400, "invalid_input", "repoUrl")
    assert_nothing_written(api)
    if api.transport == "lambda":
        return  # AWS mode refuses every local repository (tests/api/test_sessions.py)

    bare = make_origin(tmp_path)
    work = tmp_path / "seed"  # a work tree (.git folder) is a repository too
    assert create(api, {"repoUrl": f"file://{bare}"})["cloneUrl"] == f"file://{bare}"
    assert create(api, {"repoUrl": str(work)})["cloneUrl"] == f"file://{work}"


def test_a_linked_work_tree_is_a_repository(api: Api, tmp_path: Path) -> None:
    if api.transport == "lambda":
        return
    make_origin(tmp_path)
    linked = tmp_path / "linked"
    git(tmp_path / "seed", "worktree", "add", "-q", str(linked), "main")
    assert (linked / ".git").is_file()
    assert create(api, {"repoUrl": str(linked)})["repoName"] == "linked"


def test_control_characters_in_repository_urls_and_reserved_branches(api: Api) -> None:
    refused: list[tuple[dict[str, Any], str]] = [
        ({"repoUrl": "https://github.com/acme/widget\n"}, "repoUrl"),
        ({"repoUrl": "https://github.com/acme/wid\x00get"}, "repoUrl"),
        ({"repoUrl": "https://github.com/acme/widget\r\nHost: evil"}, "repoUrl"),
        ({"cloneUrl": "https://github.com/acme/widget\t"}, "cloneUrl"),
        ({"repoUrl": "/tmp/a\nb/repo"}, "repoUrl"),
        ({"repoUrl": "https://github.com/acme/widget", "branch": "HEAD"}, "branch"),
        ({"repoUrl": "https://github.com/acme/widget", "branch": "FETCH_HEAD"}, "branch"),
        ({"repoUrl": "https://github.com/acme/widget", "branch": "topic/HEAD"}, "branch"),
    ]
    for body, field in refused:
        assert_error(api.post(SESSIONS, body), 400, "invalid_input", field)
    assert_nothing_written(api)
    kept = create(api, {"repoUrl": "https://github.com/acme/widget", "branch": "HEADS-up"})
    assert kept["branch"] == "HEADS-up"


def _chat(api: Api) -> tuple[str, str]:
    created = api.post(SESSIONS, {"title": "T"})
    assert created.status == 201, created.body
    return created.body["session"]["id"], created.body["chat"]["id"]


def _message(message_id: str, text: str, role: str = "user") -> dict[str, Any]:
    return {"message": {"id": message_id, "role": role, "parts": [{"type": "text", "text": text}]}}


def test_a_message_to_an_archived_session_is_refused(api: Api) -> None:
    session_id, chat_id = _chat(api)
    messages = f"{SESSIONS}/{session_id}/chats/{chat_id}/messages"
    assert api.post(messages, _message("before", "hello")).status == 200
    assert api.patch(f"{SESSIONS}/{session_id}", {"status": "archived"}).status == 200

    for message_id, role in (("after", "user"), ("reply", "assistant")):
        reply = api.post(messages, _message(message_id, "too late", role))
        assert_error(reply, 409, "session_archived", "sessionId")
    assert [m["id"] for m in api.get(messages).body["messages"]] == ["before"]

    assert api.patch(f"{SESSIONS}/{session_id}", {"status": "running"}).status == 200
    assert api.post(messages, _message("after", "back")).status == 200


def test_nan_and_infinity_in_a_message_are_refused(api: Api) -> None:
    session_id, chat_id = _chat(api)
    messages = f"{SESSIONS}/{session_id}/chats/{chat_id}/messages"
    for index, literal in enumerate((b"NaN", b"Infinity", b"-Infinity")):
        raw = b'{"message":{"id":"n%d","role":"user","parts":[{"type":"data","data":%s}]}}' % (
            index,
            literal,
        )
        assert_error(api.request("POST", messages, raw_body=raw), 400, "invalid_input", "message")
        turn = (
            b'{"sessionId":"%s","chatId":"%s","message":{"id":"t%d","role":"user",'
            b'"parts":[],"metadata":{"x":%s}}}'
            % (session_id.encode(), chat_id.encode(), index, literal)
        )
        reply = api.request("POST", "/api/chat", raw_body=turn)
        assert_error(reply, 400, "invalid_input", "message")
    assert api.get(messages).body["messages"] == []
    assert api.get(f"{SESSIONS}/{session_id}/runs").body["runs"] == []


def test_control_characters_in_model_ids_are_refused(api: Api) -> None:
    session_id, chat_id = _chat(api)
    chat = f"{SESSIONS}/{session_id}/chats/{chat_id}"
    before = api.get(chat).body["chat"]["modelId"]
    for bad in ("scripted/x\n", "openai/gpt\x00", "a\x1bb"):
        assert_error(api.patch(chat, {"modelId": bad}), 400, "invalid_input", "modelId")
        assert_error(
            api.put("/api/user/preferences", {"defaultModelId": bad}),
            400,
            "invalid_input",
            "defaultModelId",
        )
        turn = {"sessionId": session_id, "chatId": chat_id, "modelId": bad}
        turn |= _message("m1", "hi")
        assert_error(api.post("/api/chat", turn), 400, "invalid_input", "modelId")
    assert api.get(chat).body["chat"]["modelId"] == before
    assert api.get("/api/user/preferences").body["defaultModelId"] is None


def test_titles_derived_from_a_message_lose_control_and_bidi_characters(api: Api) -> None:
    session_id, chat_id = _chat(api)
    chat = f"{SESSIONS}/{session_id}/chats/{chat_id}"
    text = "\u202eFix\x1b[31m the\u2066 bug\n\tnow\x00"
    assert api.post(f"{chat}/messages", _message("u1", text)).status == 200
    assert api.get(chat).body["chat"]["title"] == "Fix [31m the  bug  now"


def test_unmatched_api_paths_answer_json_404(api: Api) -> None:
    for method in ("GET", "POST", "DELETE"):
        for path in ("/api/nope", "/api/sessions/x/nope/deeper", "/api/"):
            reply = api.request(method, path)
            assert_error(reply, 404, "not_found", None)
