"""Hostile input: path traversal in the file APIs, SSRF through clone URLs, oversized bodies
(declared and chunked), invalid branch names, huge, unicode and control-character titles, deep
and non-standard JSON. Each is answered with a clear 4xx in the one error shape — never a 5xx —
and writes nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from openagents.settings import Settings

from tests.reliability.conftest import SESSIONS, run, start_session, tool
from tests.support import Api, HttpApi, LambdaApi, Reply

pytestmark = pytest.mark.timeout(120)
CODES = {
    "invalid_input",
    "invalid_json",
    "unauthenticated",
    "access_denied",
    "not_found",
    "conflict",
    "payload_too_large",
    "validation_error",
    "rate_limited",
    "unavailable",
    "sandbox_not_running",
}


def assert_clear_4xx(reply: Reply, *statuses: int, field: str | None = None) -> None:
    assert reply.status in (statuses or range(400, 500)), reply.body
    assert isinstance(reply.body, dict), reply.body
    assert set(reply.body) == {"error", "code", "field"}, reply.body
    assert reply.body["code"] in CODES, reply.body
    if field is not None:
        assert reply.body["field"] == field, reply.body


def snapshot_of(api: Api, user: str = "alice") -> Any:
    """Everything the user can see: sessions (with titles and states), chats and messages."""
    sessions = api.get(SESSIONS, user=user, query={"limit": "100"}).body["sessions"]
    found = []
    for session in sessions:
        chats = api.get(f"{SESSIONS}/{session['id']}/chats", user=user).body["chats"]
        for chat in chats:
            messages = api.get(
                f"{SESSIONS}/{session['id']}/chats/{chat['id']}/messages", user=user
            ).body["messages"]
            found.append((session["id"], session["title"], chat["id"], chat["title"], messages))
    return sorted(found, key=repr)


@pytest.fixture
def aws_api(settings: Settings) -> LambdaApi:
    return LambdaApi(settings.model_copy(update={"artifact_bucket": "unused"}))


# ------------------------------------------------------------------ the file APIs


@pytest.mark.slow
def test_file_apis_stay_inside_the_workspace(live_api: HttpApi, tmp_path: Path) -> None:
    sid = start_session(live_api, tmp_path)
    run(live_api, sid, "ln -s /etc/passwd passwd-link && ln -s / root-link && mkdir -p d")
    escapes = [
        "../../etc/passwd",
        "/etc/passwd",
        "d/../../etc/passwd",
        "./../etc/passwd",
        ".git/../../etc/passwd",
        "passwd-link",
        "root-link/etc/passwd",
        "a\x00b",
        "..",
    ]
    for path in escapes:
        content = live_api.get(tool(sid, "files/content"), query={"path": path})
        assert_clear_4xx(content, 400, field="path")
        assert "root:x:0:0" not in json.dumps(content.body), path
    for path in ("../..", "/", "root-link", "/etc"):
        listed = live_api.get(tool(sid, "files"), query={"path": path})
        assert_clear_4xx(listed, 400, field="path")
    for cwd in ("../..", "/etc", "root-link"):
        ran = live_api.post(tool(sid, "exec"), {"command": "cat passwd", "cwd": cwd})
        assert_clear_4xx(ran, 400)
    # the workspace itself is intact and readable
    assert live_api.get(tool(sid, "files/content"), query={"path": "README.md"}).status == 200


# ------------------------------------------------------------------ SSRF through clone URLs

SSRF_URLS = [
    "http://169.254.169.254/latest/meta-data/iam/security-credentials/",
    "https://169.254.169.254/latest/meta-data",
    "https://github.com@169.254.169.254/acme/app",
    "https://169.254.169.254#@github.com/acme/app",
    "https://169.254.169.254%23@github.com/acme/app",
    "https://user:password@github.com/acme/app",
    "https://ghp_token@github.com/acme/app",
    "https://github.com:22/acme/app",
    "https://github.com:443/acme/app",
    "https://[::1]/acme/app",
    "https://[::ffff:169.254.169.254]/acme/app",
    "https://[fd00:ec2::254]/acme/app",
    "https://127.0.0.1/acme/app",
    "https://localhost/acme/app",
    "https://github.com.evil.example/acme/app",
    "https://evil.example/github.com/acme/app",
    "https://g\u0456thub.com/acme/app",  # a Cyrillic i
    "https://github.com/acme/app?upload-pack=touch+/tmp/pwned",
    "https://github.com/acme/app#frag",
    "https://github.com/../../etc/passwd",
    "https://github.com/%2e%2e/app",
    "https://github.com/acme/app/extra",
    "ssh://git@github.com/acme/app",
    "git://github.com/acme/app",
    "ext::sh -c touch% /tmp/pwned",
    "--upload-pack=touch /tmp/pwned",
    "github.com/acme/app",
    "ftp://github.com/acme/app",
    "https:///acme/app",
    " https://169.254.169.254/a/b",
]
LOCAL_ONLY = ["file:///etc", "/etc/passwd", "file:///srv/repos/app.git", "/srv/repos/app.git"]
LOCAL_BAD = ["file://relative/path", "file:///srv/../etc", "/srv/repos/../../etc", "file:///", "/"]


def test_clone_urls_cannot_reach_other_hosts(http_api: HttpApi, aws_api: LambdaApi) -> None:
    for api in (http_api, aws_api):
        before = snapshot_of(api)
        for url in SSRF_URLS:
            for field in ("repoUrl", "cloneUrl"):
                reply = api.post(SESSIONS, {field: url, "title": "ssrf"})
                assert reply.status == 400, (api.transport, field, url, reply.body)
                assert_clear_4xx(reply, 400, field=field)
        assert snapshot_of(api) == before, api.transport
    # an empty URL means "no repository": a session with nothing to clone
    empty = http_api.post(SESSIONS, {"repoUrl": ""})
    assert empty.status == 201, empty.body
    assert empty.body["session"]["cloneUrl"] is None


def test_local_repositories_only_on_one_machine(http_api: HttpApi, aws_api: LambdaApi) -> None:
    before = snapshot_of(aws_api)
    for url in LOCAL_ONLY + LOCAL_BAD:
        reply = aws_api.post(SESSIONS, {"repoUrl": url})
        assert_clear_4xx(reply, 400, field="repoUrl")
    assert snapshot_of(aws_api) == before
    before = snapshot_of(http_api)
    for url in LOCAL_BAD:
        reply = http_api.post(SESSIONS, {"repoUrl": url})
        assert_clear_4xx(reply, 400, field="repoUrl")
    assert snapshot_of(http_api) == before


def test_owner_and_name_cannot_smuggle_a_path(http_api: HttpApi) -> None:
    before = snapshot_of(http_api)
    for owner, name in (
        ("..", "app"),
        ("acme", ".."),
        ("acme/../..", "app"),
        ("acme", "app?x=1"),
        ("acme", "app b"),
        ("acme@evil.example", "app"),
        ("acme", "app\n--upload-pack=x"),
        ("", "app"),
    ):
        reply = http_api.post(SESSIONS, {"repoOwner": owner, "repoName": name})
        assert_clear_4xx(reply, 400)
    assert snapshot_of(http_api) == before


# ------------------------------------------------------------------ branch names


BAD_BRANCHES = [
    "-x",
    "--upload-pack=touch /tmp/p",
    "a..b",
    "a b",
    "a~1",
    "a^b",
    "a:b",
    "a?b",
    "a*b",
    "a[b",
    "a\\b",
    "@{-1}",
    "x.lock",
    "/x",
    "x/",
    ".x",
    "x.",
    "a//b",
    "a/.b",
    "$(touch /tmp/p)",
    "`id`",
    "a;id",
    "a\nb",
    "a\x00b",
    "x" * 201,
    "",
]


def test_invalid_branch_names_are_refused(http_api: HttpApi) -> None:
    before = snapshot_of(http_api)
    for branch in BAD_BRANCHES:
        reply = http_api.post(
            SESSIONS, {"repoUrl": "https://github.com/acme/app", "branch": branch}
        )
        assert_clear_4xx(reply, 400, field="branch")
    assert snapshot_of(http_api) == before
    # a long but legal name, and a non-ASCII one (git allows both), are accepted
    for branch in ("feature/" + "x" * 150, "fonctionnalité/été"):
        reply = http_api.post(
            SESSIONS, {"repoUrl": "https://github.com/acme/app", "branch": branch}
        )
        assert reply.status == 201, reply.body
        assert reply.body["session"]["branch"] == branch


# ------------------------------------------------------------------ titles


def test_huge_and_blank_titles_are_refused(http_api: HttpApi) -> None:
    before = snapshot_of(http_api)
    for title, status in (
        ("x" * 201, 400),
        ("x" * 999, 400),
        ("x" * 1001, 422),
        ("x" * 1_000_000, 422),
        ("   ", 400),
        ("\t\n ", 400),
    ):
        reply = http_api.post(SESSIONS, {"title": title})
        assert_clear_4xx(reply, status, field="title")
    assert snapshot_of(http_api) == before


def test_unicode_titles_round_trip(http_api: HttpApi) -> None:
    for title in ("Zürich", "東京の作業", "😀 rocket 🚀", "👩‍💻 pairing", "Ωmega — ∑", "x" * 200):
        created = http_api.post(SESSIONS, {"title": title})
        assert created.status == 201, created.body
        sid = created.body["session"]["id"]
        assert http_api.get(f"{SESSIONS}/{sid}").body["session"]["title"] == title
    for raw in (b'{"title": "\\ud800"}', b'{"title": "a\\udfffb"}'):  # lone surrogates
        reply = http_api.request("POST", SESSIONS, raw_body=raw)
        assert_clear_4xx(reply, 400, 422)


CONTROL_TITLES = [
    "a\x00b",
    "\x1b[2J\x1b[31mred",
    "line\nbreak",
    "tab\tinside",
    "bell\x07",
    "c1\x85control",
    "\u202eevil.exe",  # right-to-left override
    "iso\u2066late\u2069",
]


def test_control_characters_in_titles_are_refused(http_api: HttpApi) -> None:
    before = snapshot_of(http_api)
    for title in CONTROL_TITLES:
        reply = http_api.post(SESSIONS, {"title": title})
        assert_clear_4xx(reply, 400, 422, field="title")
    assert snapshot_of(http_api) == before


def test_control_characters_in_chat_titles_are_refused(http_api: HttpApi) -> None:
    created = http_api.post(SESSIONS, {"title": "chats"}).body
    path = f"{SESSIONS}/{created['session']['id']}/chats/{created['chat']['id']}"
    for title in CONTROL_TITLES:
        reply = http_api.patch(path, {"title": title})
        assert_clear_4xx(reply, 400, 422, field="title")
    assert http_api.get(path).body["chat"]["title"] == "New chat"


# ------------------------------------------------------------------ bodies


def test_oversized_bodies_are_refused_declared_or_chunked(http_api: HttpApi) -> None:
    created = http_api.post(SESSIONS, {"title": "big"}).body
    messages = f"{SESSIONS}/{created['session']['id']}/chats/{created['chat']['id']}/messages"
    before = snapshot_of(http_api)
    limit = http_api.settings.max_message_bytes
    token = http_api.token("alice")
    headers = {"authorization": f"Bearer {token}", "content-type": "application/json"}
    huge = json.dumps(
        {
            "message": {
                "id": "huge",
                "role": "user",
                "parts": [{"type": "text", "text": "x" * (3 * limit)}],
            }
        }
    ).encode()
    declared = http_api.client.post(messages, content=huge, headers=headers)
    assert declared.status_code == 413, declared.text
    assert declared.json()["code"] == "payload_too_large"

    def chunks() -> Iterator[bytes]:
        for start in range(0, len(huge), 64 * 1024):
            yield huge[start : start + 64 * 1024]

    chunked = http_api.client.post(messages, content=chunks(), headers=headers)
    assert chunked.status_code == 413, chunked.text
    assert chunked.json()["code"] == "payload_too_large"
    # a message just over the message limit, in a body the request limit lets through
    over = {"message": {"id": "over", "role": "user", "parts": ["x" * (limit + 10)]}}
    assert_clear_4xx(http_api.post(messages, over), 413, field="message")
    assert snapshot_of(http_api) == before


def test_oversized_bodies_through_the_lambda_handler(aws_api: LambdaApi) -> None:
    created = aws_api.post(SESSIONS, {"title": "big"}).body
    messages = f"{SESSIONS}/{created['session']['id']}/chats/{created['chat']['id']}/messages"
    before = snapshot_of(aws_api)
    limit = aws_api.settings.max_message_bytes
    body = {"message": {"id": "huge", "role": "user", "parts": ["x" * (2 * limit)]}}
    assert_clear_4xx(aws_api.post(messages, body), 413)
    assert snapshot_of(aws_api) == before


def test_deep_json_is_refused_or_kept_whole(http_api: HttpApi) -> None:
    created = http_api.post(SESSIONS, {"title": "deep"}).body
    messages = f"{SESSIONS}/{created['session']['id']}/chats/{created['chat']['id']}/messages"
    # moderately deep parts are a valid UI message: stored whole and read back equal
    nested: Any = {"type": "text", "text": "leaf"}
    for _ in range(60):
        nested = {"type": "data", "data": nested}
    kept = http_api.post(
        messages, {"message": {"id": "deep-60", "role": "assistant", "parts": [nested]}}
    )
    assert kept.status == 200, kept.body
    listed = http_api.get(messages).body["messages"]
    assert listed[-1]["parts"] == [nested]
    before = snapshot_of(http_api)
    for depth in (5_000, 100_000):
        raw = '{"message":{"id":"d","role":"user","parts":[' + "[" * depth + "]" * depth + "]}}"
        reply = http_api.request("POST", messages, raw_body=raw.encode())
        assert 400 <= reply.status < 500, (depth, reply.status, reply.body)
    assert snapshot_of(http_api) == before


def test_deep_json_gets_the_documented_error_code(http_api: HttpApi) -> None:
    created = http_api.post(SESSIONS, {"title": "deep"}).body
    messages = f"{SESSIONS}/{created['session']['id']}/chats/{created['chat']['id']}/messages"
    raw = '{"message":{"id":"d","role":"user","parts":[' + "[" * 5000 + "]" * 5000 + "]}}"
    assert_clear_4xx(http_api.request("POST", messages, raw_body=raw.encode()), 400)


def test_non_standard_json_numbers_never_break_reads(http_api: HttpApi) -> None:
    created = http_api.post(SESSIONS, {"title": "nan"}).body
    messages = f"{SESSIONS}/{created['session']['id']}/chats/{created['chat']['id']}/messages"
    for index, literal in enumerate((b"NaN", b"Infinity", b"-Infinity", b"1e999")):
        raw = b'{"message":{"id":"n%d","role":"assistant","parts":[%s]}}' % (index, literal)
        reply = http_api.request("POST", messages, raw_body=raw)
        assert reply.status in (200, 400, 422), reply.body
    listed = http_api.client.get(
        messages, headers={"authorization": f"Bearer {http_api.token('alice')}"}
    )
    assert listed.status_code == 200
    json.loads(listed.text, parse_constant=_refuse)  # strict JSON, whatever was accepted


def _refuse(constant: str) -> None:
    raise AssertionError(f"the API answered non-standard JSON: {constant}")


def test_lone_surrogates_in_messages_are_a_clear_4xx(http_api: HttpApi) -> None:
    created = http_api.post(SESSIONS, {"title": "surrogates"}).body
    messages = f"{SESSIONS}/{created['session']['id']}/chats/{created['chat']['id']}/messages"
    before = snapshot_of(http_api)
    raw = b'{"message":{"id":"s1","role":"user","parts":[{"type":"text","text":"\\ud800"}]}}'
    assert_clear_4xx(http_api.request("POST", messages, raw_body=raw), 400, 422)
    assert snapshot_of(http_api) == before


def test_unicode_messages_round_trip(http_api: HttpApi) -> None:
    created = http_api.post(SESSIONS, {"title": "unicode"}).body
    messages = f"{SESSIONS}/{created['session']['id']}/chats/{created['chat']['id']}/messages"
    parts = [{"type": "text", "text": "naïve 東京 😀 \u202e \x00 \\ \" ' <script>"}]
    posted = http_api.post(messages, {"message": {"id": "u1", "role": "user", "parts": parts}})
    assert posted.status == 200, posted.body
    assert http_api.get(messages).body["messages"] == [{"id": "u1", "role": "user", "parts": parts}]


def test_garbage_bodies_are_clear_errors(http_api: HttpApi) -> None:
    before = snapshot_of(http_api)
    for raw in (b"", b"{", b"null", b"[]", b'"x"', b"\xff\xfe", b"{}" * 1000, b'{"title": 1}'):
        reply = http_api.request("POST", SESSIONS, raw_body=raw)
        assert reply.status in (201, 400, 422), (raw, reply.body)
        if reply.status != 201:
            assert_clear_4xx(reply, 400, 422)
    after = snapshot_of(http_api)
    # an empty or null body may mean "all defaults" (one new session); nothing else is written
    assert len(after) - len(before) <= 2, after


def test_message_ids_and_roles_are_checked(http_api: HttpApi) -> None:
    created = http_api.post(SESSIONS, {"title": "ids"}).body
    messages = f"{SESSIONS}/{created['session']['id']}/chats/{created['chat']['id']}/messages"
    before = snapshot_of(http_api)
    for message in (
        {"id": "", "role": "user", "parts": []},
        {"id": "with space", "role": "user", "parts": []},
        {"id": "x" * 201, "role": "user", "parts": []},
        {"id": "ok", "role": "system", "parts": []},
        {"id": "ok", "role": "user", "parts": "not a list"},
        {"id": "ok", "role": "user"},
    ):
        assert_clear_4xx(http_api.post(messages, {"message": message}), 422)
    assert snapshot_of(http_api) == before
