"""The shipping routes' refusals, through both transports (the Lambda handler on DynamoDB with
no git host; the local server on SQLite with its local git host): bad input is a 4xx naming the
field, another user's session 404, a session with no running sandbox 409
`sandbox_not_running`, an archived one 409 `session_archived`, and nothing is written by a
refused call (no audit entry, no card). The paths that succeed run against a GitHub-shaped
server in tests/integration/test_git_actions.py."""

from __future__ import annotations

from typing import Any

import pytest

from tests.api.test_sessions import SESSIONS, assert_error
from tests.support import Api

ROUTES = ("commit", "discard", "push", "pr", "checks/fix")


def session(api: Api) -> str:
    created = api.post(SESSIONS, {"title": "ship it"})
    assert created.status == 201, created.body
    session_id: str = created.body["session"]["id"]
    return session_id


def written(api: Api, session_id: str) -> tuple[list[str], list[Any]]:
    """The session's audit entry types and its first chat's messages."""
    events = api.get(f"{SESSIONS}/{session_id}/events").body["events"]
    chat = api.get(f"{SESSIONS}/{session_id}/chats").body["chats"][0]["id"]
    messages = api.get(f"{SESSIONS}/{session_id}/chats/{chat}/messages").body["messages"]
    return [e["type"] for e in events], messages


@pytest.mark.parametrize(
    ("route", "body", "status", "code", "field"),
    [
        ("commit", {"message": "   "}, 400, "invalid_input", "message"),
        ("commit", {"message": ""}, 422, "validation_error", "message"),
        ("commit", {"message": "fix\x07bell"}, 400, "invalid_input", "message"),
        ("commit", {"message": "x" * 5001}, 422, "validation_error", "message"),
        ("commit", {"msg": "typo"}, 422, "validation_error", "msg"),
        ("discard", {"paths": "README.md"}, 422, "validation_error", "paths"),
        ("discard", {"paths": ["a"] * 1001}, 422, "validation_error", "paths"),
        ("pr", {"title": " "}, 400, "invalid_input", "title"),
        ("pr", {"draft": "yes"}, 422, "validation_error", "draft"),
        ("pr", {"body": "x" * 65537}, 422, "validation_error", "body"),
        ("checks/fix", {"checkRunIds": []}, 422, "validation_error", "checkRunIds"),
        ("checks/fix", {"checkRunIds": ["1"]}, 422, "validation_error", "checkRunIds.0"),
        ("checks/fix", {"checkRunIds": list(range(21))}, 422, "validation_error", "checkRunIds"),
    ],
)
def test_bad_input_names_the_field_and_writes_nothing(
    api: Api, route: str, body: dict[str, Any], status: int, code: str, field: str
) -> None:
    session_id = session(api)
    before = written(api, session_id)
    assert_error(api.post(f"{SESSIONS}/{session_id}/{route}", body), status, code, field)
    assert written(api, session_id) == before


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"paths": ["/etc/passwd"]}, "paths"),
        ({"paths": ["../outside"]}, "paths"),
        ({"paths": ["a/../../b"]}, "paths"),
        ({"paths": []}, "paths"),
        ({"paths": [" "]}, "paths"),
    ],
)
def test_discard_refuses_paths_outside_the_workspace(
    api: Api, body: dict[str, Any], field: str
) -> None:
    session_id = session(api)
    assert_error(api.post(f"{SESSIONS}/{session_id}/discard", body), 400, "invalid_input", field)


def test_a_bad_base_branch_is_400_on_base(api: Api) -> None:
    session_id = session(api)
    reply = api.post(f"{SESSIONS}/{session_id}/pr", {"base": "bad..name", "title": "t"})
    if api.transport == "lambda":  # no git host configured: said before anything else
        assert_error(reply, 400, "no_git_host", None)
        assert "OPENAGENTS_GITHUB_TOKEN_SECRET_ARN" in reply.error["error"]
        return
    assert_error(reply, 409, "push_refused", "sessionId")  # no repository: no branch of its own


def test_without_a_running_sandbox_the_sandbox_routes_are_409(api: Api) -> None:
    session_id = session(api)  # provisioning is off: it never gets a sandbox
    for route in ("commit", "discard", "push"):
        reply = api.post(f"{SESSIONS}/{session_id}/{route}")
        assert_error(reply, 409, "sandbox_not_running", None)
    assert written(api, session_id)[0] == ["session.created"]


def test_an_archived_session_is_409_session_archived(api: Api) -> None:
    session_id = session(api)
    assert api.patch(f"{SESSIONS}/{session_id}", {"status": "archived"}).status == 200
    for route in ROUTES:
        reply = api.post(f"{SESSIONS}/{session_id}/{route}")
        assert_error(reply, 409, "session_archived", "sessionId")


def test_another_users_session_is_404_on_every_route(api: Api) -> None:
    session_id = session(api)
    for route in ROUTES:
        reply = api.post(f"{SESSIONS}/{session_id}/{route}", user="mallory")
        assert_error(reply, 404, "not_found", None)
    reply = api.get(f"{SESSIONS}/{session_id}/merge-readiness", user="mallory")
    assert_error(reply, 404, "not_found", None)
    assert_error(api.post(f"{SESSIONS}/no-such-session/commit"), 404, "not_found", None)


def test_merge_readiness_and_fix_without_a_pull_request(api: Api) -> None:
    session_id = session(api)
    reply = api.get(f"{SESSIONS}/{session_id}/merge-readiness")
    fix = api.post(f"{SESSIONS}/{session_id}/checks/fix")
    if api.transport == "lambda":
        assert_error(reply, 400, "no_git_host", None)
        assert_error(fix, 400, "no_git_host", None)
        return
    assert reply.status == 200, reply.body
    assert reply.body == {
        "canMerge": False,
        "reasons": ["The session has no pull request"],
        "checks": {"requiredTotal": 0, "passed": 0, "pending": 0, "failed": 0},
        "allowedMethods": [],
        "pr": None,
    }
    assert_error(fix, 409, "no_pull_request", "sessionId")
