"""Sessions over the API: create, list, read, rename, archive, delete, audit log, isolation.

Every test here runs twice (Lambda handler in AWS mode, and HTTP against a local server)
unless it asks for ``http_api``.
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from openagents.domain.naming import CITIES

from tests.support import Api, HttpApi, Reply, make_origin

SESSIONS = "/api/sessions"
NEW_BRANCH = re.compile(r"^[a-z]{1,2}/[0-9a-f]{8}$")
CITY_NAMES = frozenset(CITIES)


# ------------------------------------------------------------------ helpers


def create(api: Api, body: dict[str, Any] | None = None, **kw: Any) -> dict[str, Any]:
    reply = api.post(SESSIONS, {} if body is None else body, **kw)
    assert reply.status == 201, reply.body
    session: dict[str, Any] = reply.body["session"]
    return session


def listing(api: Api, user: str = "alice", **query: str) -> dict[str, Any]:
    reply = api.get(SESSIONS, user=user, query=query or None)
    assert reply.status == 200, reply.body
    body: dict[str, Any] = reply.body
    return body


def listed_ids(api: Api, user: str = "alice", **query: str) -> list[str]:
    return [s["id"] for s in listing(api, user, **query)["sessions"]]


def walk(api: Api, user: str = "alice", **query: str) -> list[list[str]]:
    """Every page of a list, following ``nextCursor`` to the end."""
    pages: list[list[str]] = []
    cursor: str | None = None
    while True:
        page = listing(api, user, **query, **({"cursor": cursor} if cursor else {}))
        pages.append([s["id"] for s in page["sessions"]])
        cursor = page["nextCursor"]
        assert page["hasMore"] is (cursor is not None), page
        if cursor is None:
            return pages
        assert len(pages) < 100, "pagination does not terminate"


def when(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp)


def is_error(reply: Reply, status: int, code: str, field: str | None) -> bool:
    body = reply.body
    return (
        reply.status == status
        and isinstance(body, dict)
        and isinstance(body.get("error"), str)
        and bool(body["error"])
        and body.get("code") == code
        and body.get("field") == field
    )


def assert_error(reply: Reply, status: int, code: str, field: str | None) -> None:
    assert is_error(reply, status, code, field), (reply.status, reply.body)


def assert_nothing_written(api: Api, user: str = "alice") -> None:
    page = listing(api, user)
    assert page["sessions"] == []
    assert page["archivedCount"] == 0


def events(api: Api, session_id: str, user: str = "alice") -> list[dict[str, Any]]:
    reply = api.get(f"{SESSIONS}/{session_id}/events", user=user)
    assert reply.status == 200, reply.body
    found: list[dict[str, Any]] = reply.body["events"]
    return found


def event_types(api: Api, session_id: str) -> list[str]:
    return [e["type"] for e in events(api, session_id)]


# ------------------------------------------------------------------- create


def test_create_returns_running_session_with_its_first_chat(api: Api) -> None:
    reply = api.post(SESSIONS, {"title": "  Fix the login bug \n"})

    assert reply.status == 201, reply.body
    session, chat = reply.body["session"], reply.body["chat"]
    assert session["title"] == "Fix the login bug"
    assert session["status"] == "running"
    assert session["lifecycleState"] == "provisioning"
    assert session["lifecycleVersion"] == 0
    assert session["isNewBranch"] is False
    assert session["repoOwner"] is None
    assert session["repoName"] is None
    assert session["cloneUrl"] is None
    assert session["branch"] is None
    assert session["hasUnread"] is False
    assert chat["title"] == "New chat"
    assert chat["sessionId"] == session["id"]
    assert chat["isStreaming"] is False
    assert session["latestChatId"] == chat["id"]
    assert "userId" not in session

    got = api.get(f"{SESSIONS}/{session['id']}")
    assert got.status == 200
    assert got.body["session"]["title"] == "Fix the login bug"
    assert got.body["session"]["latestChatId"] == chat["id"]
    chats = api.get(f"{SESSIONS}/{session['id']}/chats")
    assert chats.status == 200
    assert [c["id"] for c in chats.body["chats"]] == [chat["id"]]
    assert event_types(api, session["id"]) == ["session.created"]


def test_untitled_sessions_are_named_after_cities_the_user_has_not_used(api: Api) -> None:
    # Given alice already holds one session titled with her own words
    create(api, {"title": "Manual"})

    # When she creates several sessions without a title
    titles = [create(api)["title"] for _ in range(4)]

    # Then each is a distinct city, none repeating what she already has
    assert all(title in CITY_NAMES for title in titles), titles
    assert len(set(titles)) == len(titles), titles
    everything = [s["title"] for s in listing(api)["sessions"]]
    assert sorted(everything) == sorted([*titles, "Manual"])

    # another user's untitled sessions are named the same way
    bob_title = create(api, user="bob")["title"]
    assert bob_title in CITY_NAMES


def test_new_branch_is_generated_from_initials_and_replaces_any_given_branch(api: Api) -> None:
    with_name = create(
        api, {"isNewBranch": True, "branch": "feature/mine"}, user="alice", name="Alice Smith"
    )
    one_word = create(api, {"isNewBranch": True}, user="nico", name="Nico")
    no_name = create(api, {"isNewBranch": True, "branch": "a b"}, user="Bobby")
    kept = create(api, {"branch": "feature/login-fix"}, user="alice")

    assert with_name["isNewBranch"] is True
    assert NEW_BRANCH.fullmatch(with_name["branch"]), with_name["branch"]
    assert with_name["branch"].startswith("as/")
    assert NEW_BRANCH.fullmatch(one_word["branch"])
    assert one_word["branch"].startswith("n/")
    assert NEW_BRANCH.fullmatch(no_name["branch"])
    assert no_name["branch"].startswith("bo/")
    assert kept["branch"] == "feature/login-fix"
    assert kept["isNewBranch"] is False
    again = create(api, {"isNewBranch": True}, user="alice", name="Alice Smith")
    assert again["branch"] != with_name["branch"]


OVERRIDES: list[tuple[dict[str, Any], tuple[bool, bool]]] = [
    ({}, (False, False)),
    ({"autoCommitPush": True, "autoCreatePr": True}, (True, True)),
    ({"autoCommitPush": True}, (True, False)),
    ({"autoCommitPush": False, "autoCreatePr": True}, (False, False)),
    ({"autoCreatePr": True}, (False, False)),
]


def test_auto_commit_and_pr_overrides_are_concrete_booleans(api: Api) -> None:
    for body, expected in OVERRIDES:
        session = create(api, body)

        assert (session["autoCommitPushOverride"], session["autoCreatePrOverride"]) == expected
        stored = api.get(f"{SESSIONS}/{session['id']}").body["session"]
        assert (stored["autoCommitPushOverride"], stored["autoCreatePrOverride"]) == expected


def test_preferences_apply_when_the_body_omits_the_flags(api: Api) -> None:
    saved = api.put("/api/user/preferences", {"autoCommitPush": True, "autoCreatePr": True})
    assert saved.status == 200, saved.body
    assert api.get("/api/user/preferences").body["autoCommitPush"] is True

    inherited = create(api)
    no_pr = create(api, {"autoCreatePr": False})
    no_commit = create(api, {"autoCommitPush": False})
    bobs = create(api, user="bob")

    def flags(s: dict[str, Any]) -> tuple[bool, bool]:
        return s["autoCommitPushOverride"], s["autoCreatePrOverride"]

    assert flags(inherited) == (True, True)
    assert flags(no_pr) == (True, False)
    assert flags(no_commit) == (False, False)
    assert flags(bobs) == (False, False)  # preferences are per user


REPOSITORIES: list[dict[str, str]] = [
    {"repoUrl": "https://github.com/o/r"},
    {"repoUrl": "https://github.com/o/r.git"},
    {"repoUrl": " https://GitHub.com/o/r ", "repoOwner": "o", "repoName": "r"},
    {"cloneUrl": "https://github.com/o/r.git"},
    {"repoOwner": "o", "repoName": "r"},
]


def test_repository_is_resolved_to_owner_name_and_https_clone_url(api: Api) -> None:
    for body in REPOSITORIES:
        session = create(api, body)

        resolved = (session["repoOwner"], session["repoName"], session["cloneUrl"])
        assert resolved == ("o", "r", "https://github.com/o/r.git"), body
        summary = listing(api)["sessions"][0]
        assert (summary["repoOwner"], summary["repoName"]) == ("o", "r")


INJECTION = 'vercel" && echo nope && "'

Expected = tuple[int, str, str | None]


def schema(field: str) -> Expected:
    """A request-schema failure: 422 naming the field."""
    return 422, "validation_error", field


def invalid(field: str) -> Expected:
    """A domain input error: 400 naming the field."""
    return 400, "invalid_input", field


INVALID_CREATES: list[tuple[str, Any, Expected]] = [
    # request-schema failures: 422
    ("autoCommitPush string", {"autoCommitPush": "true"}, schema("autoCommitPush")),
    ("autoCommitPush int", {"autoCommitPush": 1}, schema("autoCommitPush")),
    ("autoCreatePr string", {"autoCreatePr": "yes"}, schema("autoCreatePr")),
    ("autoCreatePr string false", {"autoCreatePr": "false"}, schema("autoCreatePr")),
    ("isNewBranch string", {"isNewBranch": "true"}, schema("isNewBranch")),
    ("isNewBranch int", {"isNewBranch": 0}, schema("isNewBranch")),
    ("unknown field", {"sandboxType": "vercel"}, schema("sandboxType")),
    ("userId injection", {"userId": "mallory"}, schema("userId")),
    ("status injection", {"status": "archived"}, schema("status")),
    ("title not a string", {"title": 123}, schema("title")),
    ("title beyond the schema", {"title": "x" * 1001}, schema("title")),
    ("repoOwner not a string", {"repoOwner": ["o"]}, schema("repoOwner")),
    # domain input errors: 400 with the field named
    ("owner injection", {"repoOwner": INJECTION, "repoName": "r"}, invalid("repoOwner")),
    ("owner injection alone", {"repoOwner": INJECTION}, invalid("repoOwner")),
    ("owner with slash", {"repoOwner": "o/x", "repoName": "r"}, invalid("repoOwner")),
    ("name injection", {"repoOwner": "o", "repoName": "r;rm -rf ~"}, invalid("repoName")),
    ("name dot-dot", {"repoOwner": "o", "repoName": ".."}, invalid("repoName")),
    ("owner without name", {"repoOwner": "o"}, invalid("repoName")),
    ("name without owner", {"repoName": "r"}, invalid("repoOwner")),
    ("http url", {"repoUrl": "http://github.com/o/r"}, invalid("repoUrl")),
    ("ssh url", {"repoUrl": "ssh://git@github.com/o/r.git"}, invalid("repoUrl")),
    ("scp-like url", {"repoUrl": "git@github.com:o/r.git"}, invalid("repoUrl")),
    ("other host", {"repoUrl": "https://gitlab.com/o/r"}, invalid("repoUrl")),
    ("lookalike host", {"repoUrl": "https://github.com.evil.example/o/r"}, invalid("repoUrl")),
    ("credentials", {"repoUrl": "https://u:p@github.com/o/r"}, invalid("repoUrl")),
    ("token user", {"repoUrl": "https://ghp_x@github.com/o/r"}, invalid("repoUrl")),
    ("port", {"repoUrl": "https://github.com:8443/o/r"}, invalid("repoUrl")),
    ("query", {"repoUrl": "https://github.com/o/r?x=1"}, invalid("repoUrl")),
    ("fragment", {"repoUrl": "https://github.com/o/r#main"}, invalid("repoUrl")),
    ("owner only url", {"repoUrl": "https://github.com/o"}, invalid("repoUrl")),
    ("deep url", {"repoUrl": "https://github.com/o/r/tree/main"}, invalid("repoUrl")),
    ("dot-dot url", {"repoUrl": "https://github.com/../r"}, invalid("repoUrl")),
    (
        "url disagrees with parts",
        {"repoUrl": "https://github.com/o/r", "repoOwner": "x", "repoName": "r"},
        invalid("repoUrl"),
    ),
    ("bad clone url", {"cloneUrl": "http://github.com/o/r.git"}, invalid("cloneUrl")),
    (
        "repoUrl and cloneUrl",
        {"repoUrl": "https://github.com/o/r", "cloneUrl": "https://github.com/o/r.git"},
        invalid("cloneUrl"),
    ),
    ("branch leading dash", {"branch": "-x"}, invalid("branch")),
    ("branch dot-dot", {"branch": "a..b"}, invalid("branch")),
    ("branch space", {"branch": "a b"}, invalid("branch")),
    ("branch .lock", {"branch": "x.lock"}, invalid("branch")),
    ("branch leading slash", {"branch": "/x"}, invalid("branch")),
    ("branch trailing slash", {"branch": "x/"}, invalid("branch")),
    ("branch double slash", {"branch": "a//b"}, invalid("branch")),
    ("branch shell", {"branch": "$(touch /tmp/x)"}, invalid("branch")),
    ("branch empty", {"branch": ""}, invalid("branch")),
    ("blank title", {"title": "   "}, invalid("title")),
    ("long title", {"title": "x" * 201}, invalid("title")),
]


def test_invalid_creates_are_refused_with_the_field_and_write_nothing(api: Api) -> None:
    wrong = []
    for label, body, expected in INVALID_CREATES:
        reply = api.post(SESSIONS, body)
        if not is_error(reply, *expected):
            wrong.append((label, body, expected, (reply.status, reply.body)))

    assert wrong == []
    assert_nothing_written(api)


def test_malformed_bodies_are_refused_and_write_nothing(api: Api) -> None:
    for raw in (b"{not json", b'{"title": "x",}', b'{"title": "x"'):
        assert_error(api.request("POST", SESSIONS, raw_body=raw), 400, "invalid_json", "body")

    for body in ([1, 2], "title", 5, True):
        reply = api.post(SESSIONS, body)
        assert reply.status == 422, (body, reply.body)
        assert reply.error["code"] == "validation_error"
        assert reply.error["field"] in (None, "body")

    assert_nothing_written(api)


def test_local_repositories_are_accepted_only_on_one_machine(api: Api, tmp_path: Path) -> None:
    for folder in ("some", "x", "y"):
        (tmp_path / folder).mkdir()
        make_origin(tmp_path / folder)
    (tmp_path / "x" / "origin.git").rename(tmp_path / "x" / "repo.git")
    (tmp_path / "y" / "origin.git").rename(tmp_path / "y" / "proj")
    local = [
        (
            {"repoUrl": f"{tmp_path}/some/origin.git"},
            f"file://{tmp_path}/some/origin.git",
            "repoUrl",
        ),
        ({"repoUrl": f"file://{tmp_path}/x/repo.git"}, f"file://{tmp_path}/x/repo.git", "repoUrl"),
        ({"cloneUrl": f"file://{tmp_path}/y/proj"}, f"file://{tmp_path}/y/proj", "cloneUrl"),
    ]
    if api.transport == "lambda":
        for body, _, field in local:
            assert_error(api.post(SESSIONS, body), 400, "invalid_input", field)
        assert_nothing_written(api)
        return

    for body, clone_url, _ in local:
        session = create(api, body)
        assert session["cloneUrl"] == clone_url
        assert session["repoOwner"] is None
        assert session["repoName"] == clone_url.rsplit("/", 1)[1].removesuffix(".git")
    for bad in ("/tmp/../etc/repo", "/", "file://relative/repo"):
        assert_error(api.post(SESSIONS, {"repoUrl": bad}), 400, "invalid_input", "repoUrl")
    assert len(listing(api)["sessions"]) == len(local)


# --------------------------------------------------------------------- list


def test_list_is_newest_first_and_filters_by_status(api: Api) -> None:
    first, second, third = (create(api, {"title": t}) for t in ("one", "two", "three"))
    archived = api.patch(f"{SESSIONS}/{second['id']}", {"status": "archived"})
    assert archived.status == 200, archived.body
    create(api, {"title": "bob's"}, user="bob")

    every = listing(api)
    assert [s["id"] for s in every["sessions"]] == [third["id"], second["id"], first["id"]]
    assert every["archivedCount"] == 1
    assert every["nextCursor"] is None
    assert every["hasMore"] is False
    assert listed_ids(api, status="all") == [third["id"], second["id"], first["id"]]
    assert listed_ids(api, status="active") == [third["id"], first["id"]]
    assert listed_ids(api, status="archived") == [second["id"]]
    assert [s["status"] for s in listing(api, status="archived")["sessions"]] == ["archived"]
    assert listing(api, status="active")["archivedCount"] == 1


def test_list_items_carry_the_sidebar_fields(api: Api) -> None:
    reply = api.post(SESSIONS, {"title": "Sidebar", "repoUrl": "https://github.com/o/r"})
    assert reply.status == 201, reply.body
    session, chat = reply.body["session"], reply.body["chat"]

    item = listing(api)["sessions"][0]
    assert item["id"] == session["id"]
    assert item["title"] == "Sidebar"
    assert item["status"] == "running"
    assert item["lifecycleState"] == "provisioning"
    assert (item["repoOwner"], item["repoName"]) == ("o", "r")
    assert item["hasUnread"] is False
    assert item["hasStreaming"] is False
    assert item["latestChatId"] == chat["id"]
    assert item["lastActivityAt"] == item["createdAt"] == session["createdAt"]

    # A newer chat becomes the latest one; an assistant reply in the first makes it unread
    newer = api.post(f"{SESSIONS}/{session['id']}/chats", {})
    assert newer.status == 200, newer.body
    assert listing(api)["sessions"][0]["latestChatId"] == newer.body["chat"]["id"]
    chat_path = f"{SESSIONS}/{session['id']}/chats/{chat['id']}"
    answer = {"id": "m-1", "role": "assistant", "parts": [{"type": "text", "text": "hi"}]}
    posted = api.post(f"{chat_path}/messages", {"message": answer})
    assert posted.status == 200, posted.body

    item = listing(api)["sessions"][0]
    assert item["hasUnread"] is True
    assert item["latestChatId"] == chat["id"]
    assert when(item["lastActivityAt"]) > when(item["createdAt"])

    read = api.post(f"{chat_path}/read")
    assert read.status == 200, read.body
    assert listing(api)["sessions"][0]["hasUnread"] is False


def test_list_rejects_bad_query_parameters(api: Api) -> None:
    assert_error(api.get(SESSIONS, query={"status": "deleted"}), 422, "validation_error", "status")
    assert_error(api.get(SESSIONS, query={"limit": "1001"}), 422, "validation_error", "limit")
    assert_error(api.get(SESSIONS, query={"limit": "-1"}), 422, "validation_error", "limit")
    assert_error(api.get(SESSIONS, query={"limit": "ten"}), 422, "validation_error", "limit")
    for garbage in ("garbage", "e30", "eyJ2IjoxLCJrIjoieCJ9", "!!!"):
        reply = api.get(SESSIONS, query={"cursor": garbage})
        assert_error(reply, 400, "invalid_input", "cursor")
    assert_error(api.get(SESSIONS, query={"cursor": "x" * 3000}), 422, "validation_error", "cursor")


def test_limit_is_clamped_and_cursor_pages_have_no_gaps_or_duplicates(api: Api) -> None:
    created = [create(api, {"title": f"s{i}"})["id"] for i in range(6)]
    newest_first = created[::-1]

    zero = listing(api, limit="0")
    assert [s["id"] for s in zero["sessions"]] == newest_first[:1]
    assert zero["hasMore"] is True
    big = listing(api, limit="1000")
    assert [s["id"] for s in big["sessions"]] == newest_first
    assert big["nextCursor"] is None

    for size, shape in ((1, [1] * 6), (4, [4, 2]), (3, [3, 3]), (6, [6]), (7, [6])):
        pages = walk(api, limit=str(size))
        assert [len(p) for p in pages] == shape, (size, pages)
        assert [sid for page in pages for sid in page] == newest_first


def test_cursors_never_cross_users_or_leak_data(api: Api) -> None:
    alice = [create(api, {"title": f"a{i}"})["id"] for i in range(4)]
    bob = [create(api, {"title": "b"}, user="bob")["id"]]
    for sid in alice[:2]:
        assert api.patch(f"{SESSIONS}/{sid}", {"status": "archived"}).status == 200
    cursor = listing(api, limit="1")["nextCursor"]
    archived_cursor = listing(api, status="archived", limit="1")["nextCursor"]
    assert cursor
    assert archived_cursor

    # bob replays alice's cursor: never alice's sessions
    for query in ({"cursor": cursor}, {"cursor": archived_cursor, "status": "archived"}):
        reply = api.get(SESSIONS, user="bob", query=query)
        if reply.status == 200:
            assert set(s["id"] for s in reply.body["sessions"]) <= set(bob), reply.body
            assert reply.body["archivedCount"] == 0
        else:
            assert_error(reply, 400, "invalid_input", "cursor")

    # a cursor from one filter used with another only ever yields that filter's sessions
    for status, allowed in (("archived", alice[:2]), ("active", alice[2:])):
        reply = api.get(SESSIONS, query={"cursor": cursor, "status": status})
        if reply.status == 200:
            assert set(s["id"] for s in reply.body["sessions"]) <= set(allowed), reply.body
        else:
            assert_error(reply, 400, "invalid_input", "cursor")


@pytest.mark.slow
def test_archived_list_pages_by_50_by_default(http_api: HttpApi) -> None:
    # ~100 writes: pagination is transport-independent, so this runs once (local server).
    total = 51  # the fewest that show a default page of 50
    ids = [create(http_api, {"title": f"old {i}"})["id"] for i in range(total)]
    for sid in ids:
        assert http_api.patch(f"{SESSIONS}/{sid}", {"status": "archived"}).status == 200

    first = listing(http_api, status="archived")
    assert len(first["sessions"]) == 50
    assert first["hasMore"] is True
    assert first["archivedCount"] == total
    rest = listing(http_api, status="archived", cursor=first["nextCursor"])
    assert len(rest["sessions"]) == total - 50
    assert rest["nextCursor"] is None
    assert rest["hasMore"] is False
    seen = [s["id"] for s in first["sessions"] + rest["sessions"]]
    assert seen == ids[::-1]
    assert len(listing(http_api, status="archived", limit="500")["sessions"]) == total
    everything = listing(http_api)  # the unfiltered list pages by 100
    assert len(everything["sessions"]) == total
    assert everything["nextCursor"] is None
    assert listing(http_api, status="active")["sessions"] == []


# -------------------------------------------------------- one session: read/update


def test_patch_title_is_trimmed_and_validated(api: Api) -> None:
    sid = create(api, {"title": "Before"})["id"]

    renamed = api.patch(f"{SESSIONS}/{sid}", {"title": "  After  "})
    assert renamed.status == 200, renamed.body
    assert renamed.body["session"]["title"] == "After"
    assert api.get(f"{SESSIONS}/{sid}").body["session"]["title"] == "After"
    assert listing(api)["sessions"][0]["title"] == "After"

    assert_error(api.patch(f"{SESSIONS}/{sid}", {"title": "  "}), 400, "invalid_input", "title")
    too_long = api.patch(f"{SESSIONS}/{sid}", {"title": "y" * 201})
    assert_error(too_long, 400, "invalid_input", "title")
    # a bad title with a good status changes nothing at all
    mixed = api.patch(f"{SESSIONS}/{sid}", {"title": " ", "status": "archived"})
    assert_error(mixed, 400, "invalid_input", "title")

    stored = api.get(f"{SESSIONS}/{sid}").body["session"]
    assert (stored["title"], stored["status"]) == ("After", "running")
    assert event_types(api, sid) == ["session.created", "session.renamed"]


def test_ask_before_bash_is_set_at_create_and_by_patch(api: Api) -> None:
    sid = create(api)["id"]
    assert api.get(f"{SESSIONS}/{sid}").body["session"]["askBeforeBash"] is False
    on = api.patch(f"{SESSIONS}/{sid}", {"askBeforeBash": True})
    assert on.status == 200, on.body
    assert on.body["session"]["askBeforeBash"] is True
    assert api.get(f"{SESSIONS}/{sid}").body["session"]["askBeforeBash"] is True
    assert api.patch(f"{SESSIONS}/{sid}", {"askBeforeBash": True}).status == 200  # no change
    assert event_types(api, sid) == ["session.created", "session.settings_changed"]
    asked = create(api, {"askBeforeBash": True})
    assert asked["askBeforeBash"] is True


def test_ask_before_bash_errors_change_nothing(api: Api) -> None:
    sid = create(api, {"title": "Kept"})["id"]
    not_bool = api.patch(f"{SESSIONS}/{sid}", {"askBeforeBash": "yes", "title": "Other"})
    assert_error(not_bool, 422, "validation_error", "askBeforeBash")
    bad_title = api.patch(f"{SESSIONS}/{sid}", {"askBeforeBash": True, "title": " "})
    assert_error(bad_title, 400, "invalid_input", "title")
    stored = api.get(f"{SESSIONS}/{sid}").body["session"]
    assert (stored["title"], stored["askBeforeBash"]) == ("Kept", False)
    assert_error(
        api.patch(f"{SESSIONS}/{sid}", {"askBeforeBash": True}, user="bob"), 404, "not_found", None
    )
    assert api.get(f"{SESSIONS}/{sid}").body["session"]["askBeforeBash"] is False
    assert_error(api.post(SESSIONS, {"askBeforeBash": 1}), 422, "validation_error", "askBeforeBash")


def test_archive_unarchive_delete_archived_count_and_audit_log(api: Api) -> None:
    sid = create(api, {"title": "Task"})["id"]
    other = create(api, {"title": "Other"})["id"]

    def archived_count() -> int:
        value: int = listing(api)["archivedCount"]
        return value

    assert api.patch(f"{SESSIONS}/{sid}", {"title": "Task v2"}).status == 200
    assert api.patch(f"{SESSIONS}/{sid}", {"title": "Task v2"}).status == 200  # unchanged

    archived = api.patch(f"{SESSIONS}/{sid}", {"status": "archived"})
    assert archived.status == 200, archived.body
    assert archived.body["session"]["status"] == "archived"
    assert archived.body["session"]["lifecycleState"] == "archived"
    stored = api.get(f"{SESSIONS}/{sid}").body["session"]
    assert (stored["status"], stored["lifecycleState"]) == ("archived", "archived")
    assert archived_count() == 1

    again = api.patch(f"{SESSIONS}/{sid}", {"status": "archived"})  # a no-op
    assert again.status == 200, again.body
    assert again.body["session"]["status"] == "archived"
    assert archived_count() == 1

    unarchived = api.patch(f"{SESSIONS}/{sid}", {"status": "running"})
    assert unarchived.status == 200, unarchived.body
    assert unarchived.body["session"]["status"] == "running"
    assert unarchived.body["session"]["lifecycleState"] != "archived"
    stored = api.get(f"{SESSIONS}/{sid}").body["session"]
    assert stored["status"] == "running"
    assert stored["lifecycleState"] != "archived"
    assert stored["title"] == "Task v2"
    assert archived_count() == 0

    log = events(api, sid)
    assert [e["type"] for e in log] == [
        "session.created",
        "session.renamed",
        "session.archived",
        "session.unarchived",
    ]
    assert log[0]["detail"] == {"title": "Task"}
    assert log[1]["detail"] == {"title": "Task v2"}
    assert [when(e["at"]) for e in log] == sorted(when(e["at"]) for e in log)
    assert len({e["id"] for e in log}) == 4
    page = api.get(f"{SESSIONS}/{sid}/events", query={"limit": "3"})
    assert [e["id"] for e in page.body["events"]] == [e["id"] for e in log[:3]]
    assert page.body["nextCursor"]
    tail = api.get(f"{SESSIONS}/{sid}/events", query={"cursor": page.body["nextCursor"]})
    assert [e["id"] for e in tail.body["events"]] == [log[3]["id"]]
    assert tail.body["nextCursor"] is None
    assert_error(
        api.get(f"{SESSIONS}/{sid}/events", query={"cursor": "junk"}),
        400,
        "invalid_input",
        "cursor",
    )

    # deleting an archived session takes it out of the count; deleting a running one does not
    assert api.patch(f"{SESSIONS}/{other}", {"status": "archived"}).status == 200
    assert archived_count() == 1
    assert api.delete(f"{SESSIONS}/{other}").status == 200
    assert archived_count() == 0
    assert api.delete(f"{SESSIONS}/{sid}").status == 200
    assert archived_count() == 0
    assert listing(api)["sessions"] == []


def test_patch_accepts_only_title_and_status(api: Api) -> None:
    sid = create(api, {"title": "Guarded"})["id"]
    before = api.get(f"{SESSIONS}/{sid}").body

    assert_error(api.patch(f"{SESSIONS}/{sid}", {}), 400, "invalid_input", "title")
    for field, value in (
        ("userId", "mallory"),
        ("prNumber", 1),
        ("prStatus", "merged"),
        ("linesAdded", 10),
        ("lifecycleState", "active"),
        ("cloneUrl", "https://github.com/evil/r.git"),
    ):
        reply = api.patch(f"{SESSIONS}/{sid}", {field: value, "title": "Hijacked"})
        assert_error(reply, 422, "validation_error", field)
    assert_error(
        api.patch(f"{SESSIONS}/{sid}", {"status": "completed"}), 422, "validation_error", "status"
    )
    assert_error(api.patch(f"{SESSIONS}/{sid}", {"title": 7}), 422, "validation_error", "title")
    assert_error(
        api.request("PATCH", f"{SESSIONS}/{sid}", raw_body=b"{"), 400, "invalid_json", "body"
    )

    assert api.get(f"{SESSIONS}/{sid}").body == before
    assert event_types(api, sid) == ["session.created"]


def test_delete_removes_the_session_and_its_chats(api: Api) -> None:
    reply = api.post(SESSIONS, {"title": "Doomed"})
    sid, chat_id = reply.body["session"]["id"], reply.body["chat"]["id"]
    keeper = create(api, {"title": "Keeper"})["id"]

    deleted = api.delete(f"{SESSIONS}/{sid}")
    assert deleted.status == 200, deleted.body
    assert deleted.body == {"success": True}

    for path in (
        f"{SESSIONS}/{sid}",
        f"{SESSIONS}/{sid}/events",
        f"{SESSIONS}/{sid}/chats",
        f"{SESSIONS}/{sid}/chats/{chat_id}",
    ):
        assert_error(api.get(path), 404, "not_found", None)
    assert_error(api.delete(f"{SESSIONS}/{sid}"), 404, "not_found", None)
    assert_error(api.patch(f"{SESSIONS}/{sid}", {"title": "x"}), 404, "not_found", None)
    assert_error(api.post(f"{SESSIONS}/{sid}/chats", {}), 404, "not_found", None)
    assert listed_ids(api) == [keeper]
    assert api.get(f"{SESSIONS}/{keeper}").status == 200


def test_unknown_session_ids_are_404(api: Api) -> None:
    # includes an id longer than a DynamoDB key may be: still 404, not a store outage
    for sid in ("does-not-exist", "x" * 64, "S%23abc", "a" * 3000):
        assert_error(api.get(f"{SESSIONS}/{sid}"), 404, "not_found", None)
        assert_error(api.patch(f"{SESSIONS}/{sid}", {"title": "t"}), 404, "not_found", None)
        assert_error(api.delete(f"{SESSIONS}/{sid}"), 404, "not_found", None)
        assert_error(api.get(f"{SESSIONS}/{sid}/events"), 404, "not_found", None)


# ---------------------------------------------------------------- isolation


def test_another_users_session_is_404_and_untouched(api: Api) -> None:
    reply = api.post(SESSIONS, {"title": "Alice's secret"})
    sid, chat_id = reply.body["session"]["id"], reply.body["chat"]["id"]
    before = api.get(f"{SESSIONS}/{sid}").body

    attempts = [
        api.get(f"{SESSIONS}/{sid}", user="bob"),
        api.patch(f"{SESSIONS}/{sid}", {"title": "pwned"}, user="bob"),
        api.patch(f"{SESSIONS}/{sid}", {"status": "archived"}, user="bob"),
        api.delete(f"{SESSIONS}/{sid}", user="bob"),
        api.get(f"{SESSIONS}/{sid}/events", user="bob"),
        api.get(f"{SESSIONS}/{sid}/chats", user="bob"),
        api.post(f"{SESSIONS}/{sid}/chats", {}, user="bob"),
        api.post(f"{SESSIONS}/{sid}/chats", {"id": "bobs-chat"}, user="bob"),
        api.get(f"{SESSIONS}/{sid}/chats/{chat_id}", user="bob"),
        api.patch(f"{SESSIONS}/{sid}/chats/{chat_id}", {"title": "pwned"}, user="bob"),
        api.delete(f"{SESSIONS}/{sid}/chats/{chat_id}", user="bob"),
        api.get(f"{SESSIONS}/{sid}/chats/{chat_id}/messages", user="bob"),
    ]
    for attempt in attempts:
        assert_error(attempt, 404, "not_found", None)
        assert "Alice's secret" not in str(attempt.body)

    assert api.get(f"{SESSIONS}/{sid}").body == before
    assert event_types(api, sid) == ["session.created"]
    chats = api.get(f"{SESSIONS}/{sid}/chats").body["chats"]
    assert [c["id"] for c in chats] == [chat_id]
    assert chats[0]["title"] == "New chat"
    assert listed_ids(api, user="bob") == []
    assert listed_ids(api) == [sid]
