"""Share links of chats and the public transcript (reference §2.2, §6.9), through both
transports: owner routes under the chat, public routes under /api/shared with no token."""

from __future__ import annotations

from typing import Any

from openagents.domain.secrets import REDACTED as SHAPED
from openagents.domain.transcript import REDACTED

from tests.api.chat_support import BOT_HEADERS, live_turn, post, ui
from tests.api.test_chats import assert_error, chats_path, new_session
from tests.support import Api

SECRET = "API_KEY=sk-very-secret"


def share_path(sid: str, chat_id: str) -> str:
    return f"{chats_path(sid)}/{chat_id}/share"


def tool(call_id: str, name: str, tool_input: dict[str, Any], output: str) -> dict[str, Any]:
    return {
        "type": f"tool-{name}",
        "toolCallId": call_id,
        "state": "output-available",
        "input": tool_input,
        "output": output,
    }


def shared(api: Api, path: str) -> str:
    """POST the chat's share path; the link's id."""
    created = api.post(path)
    assert created.status == 200, created.body
    share_id: str = created.body["shareId"]
    return share_id


def test_a_share_link_is_created_once_and_serves_the_transcript(api: Api) -> None:
    sid, chat = new_session(api)
    post(api, sid, chat, ui("u0", "user", "Show me the config"))
    post(api, sid, chat, ui("a0", "assistant", "Here it is"))
    assert api.get(share_path(sid, chat)).body == {"shareId": None}

    share_id = shared(api, share_path(sid, chat))
    assert len(share_id) >= 12  # 96 bits from secrets, URL-safe
    assert shared(api, share_path(sid, chat)) == share_id  # created once
    assert api.get(share_path(sid, chat)).body == {"shareId": share_id}

    public = api.get(f"/api/shared/{share_id}", user=None)
    assert public.status == 200, public.body
    title = api.get(f"{chats_path(sid)}/{chat}").body["chat"]["title"]
    assert public.body == {
        "title": title,
        "messages": [ui("u0", "user", "Show me the config"), ui("a0", "assistant", "Here it is")],
    }
    markdown = api.get(f"/api/shared/{share_id}/markdown", user=None)
    assert markdown.status == 200
    assert markdown.headers["content-type"].startswith("text/markdown")
    assert (
        markdown.body
        == f"# {title}\n\n## User\n\nShow me the config\n\n## Assistant\n\nHere it is\n"
    )


def test_tool_contents_from_env_files_are_redacted(api: Api) -> None:
    sid, chat = new_session(api)
    parts = [
        tool("t1", "read", {"path": ".env.local"}, SECRET),
        tool("t2", "bash", {"command": "cat config/.env"}, SECRET),
        tool("t3", "read", {"path": "src/app.py"}, "print('hello')"),
        {"type": "text", "text": "done"},
    ]
    post(api, sid, chat, {"id": "a0", "role": "assistant", "parts": parts})
    share_id = shared(api, share_path(sid, chat))

    public = api.get(f"/api/shared/{share_id}", user=None)
    markdown = api.get(f"/api/shared/{share_id}/markdown", user=None)

    shown = public.body["messages"][0]["parts"]
    for redacted in shown[:2]:
        assert redacted["input"] == redacted["output"] == REDACTED
    assert shown[2:] == parts[2:]  # other tools and the text are shown as they are
    assert SECRET not in str(public.body)
    assert SECRET not in markdown.body
    assert "print('hello')" in markdown.body
    # the owner's own view is not redacted
    mine = api.get(f"{chats_path(sid)}/{chat}/messages").body["messages"][0]["parts"]
    assert mine == parts


LEAKS = {
    "aws": "AKIAIOSFODNN7EXAMPLE",
    "github": "ghp_0123456789abcdefghijABCDEFGHIJ012345",
    "pat": "github_pat_11AAAAAAA0123456789_abcdefghijklmnopqrstuvwxyz",
    "sk": "sk-LIVE-SECRET-42",
    "env": "hunter2-database-pass",
    "pem": "MIIEowIBAAKCAQEAsecretkeymaterial",
}
PEM = f"-----BEGIN RSA PRIVATE KEY-----\n{LEAKS['pem']}\n-----END RSA PRIVATE KEY-----"


def leaky_chat(api: Api) -> tuple[str, str]:
    """A prompt-injected turn's transcript: secrets in tool outputs whose inputs name no .env
    file, in the model's text, in a tool input and in the user's own message."""
    sid, chat = new_session(api)
    post(api, sid, chat, ui("u0", "user", f"my key is {LEAKS['github']}, keep it safe"))
    grep = f".env:1:OPENAI_API_KEY={LEAKS['sk']}\n.env:2:DB_PASSWORD={LEAKS['env']}\n"
    parts = [
        tool("t1", "grep", {"pattern": "API_KEY|PASSWORD", "path": "."}, grep),
        tool("t2", "bash", {"command": "echo $DB_PASSWORD"}, LEAKS["env"] + "\n"),  # the value
        tool("t3", "read", {"filePath": "deploy/id_rsa"}, f"{PEM}\n"),
        tool("t4", "bash", {"command": f"git push https://x:{LEAKS['pat']}@github.com/a/b"}, ""),
        {"type": "text", "text": f"Found AWS key {LEAKS['aws']} and DEBUG=1 in the config."},
    ]
    post(api, sid, chat, {"id": "a0", "role": "assistant", "parts": parts})
    return sid, chat


def test_secrets_are_redacted_by_their_shape_wherever_they_appear(api: Api) -> None:
    sid, chat = leaky_chat(api)
    share_id = shared(api, share_path(sid, chat))
    public = api.get(f"/api/shared/{share_id}", user=None)
    markdown = api.get(f"/api/shared/{share_id}/markdown", user=None)
    assert public.status == 200, public.body
    for name, leak in LEAKS.items():
        assert leak not in str(public.body), name
        assert leak not in markdown.body, name
    parts = public.body["messages"][1]["parts"]
    assert parts[0]["output"] == (
        f".env:1:OPENAI_API_KEY={SHAPED}\n.env:2:DB_PASSWORD={SHAPED}\n"
    )  # the names stay: the reader sees what was there
    assert parts[1]["output"] == f"{SHAPED}\n"  # a value learned from its NAME=value line
    assert parts[4]["text"] == f"Found AWS key {SHAPED} and DEBUG=1 in the config."
    assert public.body["messages"][0]["parts"][0]["text"] == f"my key is {SHAPED}, keep it safe"
    # the owner's own view is not redacted
    mine = api.get(f"{chats_path(sid)}/{chat}/messages").body["messages"][1]["parts"]
    assert mine[1]["output"] == LEAKS["env"] + "\n"


def test_the_owner_previews_what_a_share_will_show(api: Api) -> None:
    sid, chat = leaky_chat(api)
    preview = api.get(f"{share_path(sid, chat)}/preview")
    assert preview.status == 200, preview.body
    assert api.get(share_path(sid, chat)).body == {"shareId": None}  # previewing shares nothing
    title = api.get(f"{chats_path(sid)}/{chat}").body["chat"]["title"]
    assert LEAKS["github"] in title  # named from the first message: its secret with it
    assert preview.body["redactions"] == 8  # the title's, the user's, six of the turn's
    for leak in LEAKS.values():
        assert leak not in str(preview.body)
    share_id = shared(api, share_path(sid, chat))
    public = api.get(f"/api/shared/{share_id}", user=None).body
    assert {k: preview.body[k] for k in ("title", "messages")} == public  # exactly what shows
    markdown = api.get(f"/api/shared/{share_id}/markdown", user=None).body
    assert preview.body["markdown"] == markdown


def test_a_preview_is_the_owners_alone(api: Api) -> None:
    sid, chat = leaky_chat(api)
    path = f"{share_path(sid, chat)}/preview"
    assert_error(api.get(path, user="bob"), 404, "not_found")
    assert_error(api.get(f"{share_path(sid, 'nope')}/preview"), 404, "not_found")
    assert_error(api.get(path, user=None), 401, "unauthenticated")


def test_status_says_whether_a_turn_is_live(api: Api) -> None:
    sid, chat = new_session(api)
    share_id = shared(api, share_path(sid, chat))
    status = f"/api/shared/{share_id}/status"
    assert api.get(status, user=None).body == {"isStreaming": False}
    with live_turn(api, sid, chat):
        assert api.get(status, user=None).body == {"isStreaming": True}
    assert api.get(status, user=None).body == {"isStreaming": False}


def test_revoked_deleted_and_unknown_links_are_404(api: Api) -> None:
    sid, chat = new_session(api)
    second = api.post(chats_path(sid)).body["chat"]["id"]
    revoked = shared(api, share_path(sid, chat))
    of_chat = shared(api, share_path(sid, second))

    assert api.delete(share_path(sid, chat)).body == {"success": True}
    assert api.delete(share_path(sid, chat)).status == 200  # idempotent
    assert api.get(share_path(sid, chat)).body == {"shareId": None}
    assert shared(api, share_path(sid, chat)) != revoked  # a new link, not the old one
    assert api.delete(f"{chats_path(sid)}/{second}").status == 200
    for gone in (revoked, of_chat, "no-such-share"):
        for suffix in ("", "/markdown", "/status"):
            assert_error(api.get(f"/api/shared/{gone}{suffix}", user=None), 404, "not_found")


def test_deleting_the_session_revokes_its_links(api: Api) -> None:
    sid, chat = new_session(api)
    share_id = shared(api, share_path(sid, chat))
    assert api.delete(f"/api/sessions/{sid}").status == 200
    assert_error(api.get(f"/api/shared/{share_id}", user=None), 404, "not_found")


def test_owner_routes_are_404_for_another_user(api: Api) -> None:
    sid, chat = new_session(api)
    for method in ("GET", "POST", "DELETE"):
        reply = api.request(method, share_path(sid, chat), user="bob")
        assert_error(reply, 404, "not_found")
        assert_error(api.request(method, share_path(sid, "nope")), 404, "not_found")
        assert_error(api.request(method, share_path(sid, chat), user=None), 401, "unauthenticated")
    assert api.get(share_path(sid, chat)).body == {"shareId": None}


def test_public_routes_keep_the_bot_check(api: Api) -> None:
    sid, chat = new_session(api)
    share_id = shared(api, share_path(sid, chat))
    for suffix in ("", "/markdown", "/status"):
        reply = api.get(f"/api/shared/{share_id}{suffix}", user=None, headers=BOT_HEADERS)
        assert_error(reply, 403, "access_denied")
