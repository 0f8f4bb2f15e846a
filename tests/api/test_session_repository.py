"""``POST /api/sessions/{id}/repository``'s refusals, through both transports (the Lambda
handler on DynamoDB with no git host; the local server on SQLite with its local git host): a
session that has a repository 409 `repository_already_set`, another user's session 404, bad
bodies 400/422 naming the field, `create` on one machine 400 `no_git_host` on `create`, no
running sandbox 409 `sandbox_not_running`, archived 409 `session_archived` — and nothing is
written by a refused call (no audit entry, no card, the session unchanged). The paths that push
run a real sandbox in tests/integration/test_session_repository.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.api.test_git_routes import session, written
from tests.api.test_sessions import SESSIONS, assert_error
from tests.support import Api, HttpApi, git

ROUTE = "repository"


def attach(api: Api, session_id: str, body: Any, user: str = "alice") -> Any:
    return api.post(f"{SESSIONS}/{session_id}/{ROUTE}", body, user=user)


def bare(tmp_path: Path) -> Path:
    repo = tmp_path / "empty.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(repo))
    return repo


@pytest.mark.parametrize(
    ("body", "status", "code", "field"),
    [
        ({}, 400, "invalid_input", "repoUrl"),
        (
            {"repoUrl": "https://github.com/acme/app", "create": {"name": "app"}},
            400,
            "invalid_input",
            "repoUrl",
        ),
        ({"repoUrl": "https://github.com/acme/app", "branch": "bad..name"}, 400, None, "branch"),
        ({"repoUrl": "https://github.com/acme/app", "branch": "-x"}, 400, None, "branch"),
        ({"repoUrl": ""}, 422, "validation_error", "repoUrl"),
        ({"repoUrl": 7}, 422, "validation_error", "repoUrl"),
        ({"repoUrl": "https://github.com/acme/app", "branch": ""}, 422, None, "branch"),
        ({"create": {"name": ""}}, 422, "validation_error", "create.name"),
        ({"create": {"name": "x" * 101}}, 422, "validation_error", "create.name"),
        ({"create": {"name": "app", "private": "yes"}}, 422, "validation_error", "create.private"),
        ({"create": {}}, 422, "validation_error", "create.name"),
        ({"create": {"name": "app", "owner": "x"}}, 422, "validation_error", "create.owner"),
        ({"repo": "typo"}, 422, "validation_error", "repo"),
    ],
)
def test_bad_bodies_name_the_field_and_write_nothing(
    api: Api, body: dict[str, Any], status: int, code: str | None, field: str
) -> None:
    session_id = session(api)
    before = written(api, session_id)
    reply = attach(api, session_id, body)
    assert reply.status == status, reply.body
    assert reply.error["field"] == field, reply.body
    if code is not None:
        assert reply.error["code"] == code, reply.body
    assert written(api, session_id) == before


def test_no_body_is_422(api: Api) -> None:
    session_id = session(api)
    reply = api.post(f"{SESSIONS}/{session_id}/{ROUTE}")
    assert reply.status == 422, reply.body
    assert reply.error["code"] == "validation_error"


def test_a_repository_url_the_platform_refuses_is_400_on_repo_url(api: Api) -> None:
    session_id = session(api)
    for url in ("http://github.com/acme/app", "https://evil.example/acme/app", "/"):
        reply = attach(api, session_id, {"repoUrl": url})
        if api.transport == "lambda":  # no git host configured: said before the URL
            assert_error(reply, 400, "no_git_host", None)
            continue
        assert_error(reply, 400, "invalid_input", "repoUrl")
    assert written(api, session_id)[0] == ["session.created"]


def test_a_repository_outside_the_allowed_roots_or_missing_is_refused(
    http_api: HttpApi, tmp_path: Path
) -> None:
    api = http_api  # local repositories are one machine's: the local server only
    session_id = session(api)
    assert_error(
        attach(api, session_id, {"repoUrl": str(tmp_path / "nothing-here")}),
        400,
        "invalid_input",
        "repoUrl",
    )
    # github.com on one machine: the local git host takes no pushes there
    assert_error(
        attach(api, session_id, {"repoUrl": "https://github.com/acme/app"}),
        400,
        "no_git_host",
        "repoUrl",
    )
    assert written(api, session_id)[0] == ["session.created"]


def test_create_needs_github(api: Api) -> None:
    session_id = session(api)
    reply = attach(api, session_id, {"create": {"name": "fresh", "private": True}})
    assert_error(reply, 400, "no_git_host", "create")
    if api.transport == "http":
        assert "OPENAGENTS_LOCAL_REPO_ROOTS" in reply.error["error"]
    assert written(api, session_id)[0] == ["session.created"]


def test_without_a_running_sandbox_it_is_409_and_nothing_is_recorded(
    api: Api, tmp_path: Path
) -> None:
    session_id = session(api)  # provisioning is off: it never gets a sandbox
    if api.transport == "lambda":
        body: dict[str, Any] = {"repoUrl": "https://github.com/acme/app"}
        assert_error(attach(api, session_id, body), 400, "no_git_host", None)
    else:
        body = {"repoUrl": str(bare(tmp_path))}
        assert_error(attach(api, session_id, body), 409, "sandbox_not_running", None)
    after = api.get(f"{SESSIONS}/{session_id}").body["session"]
    assert (after["cloneUrl"], after["repoName"], after["branch"]) == (None, None, None)
    assert written(api, session_id)[0] == ["session.created"]


def test_a_session_that_has_a_repository_is_409_repository_already_set(api: Api) -> None:
    created = api.post(SESSIONS, {"repoUrl": "https://github.com/acme/app", "isNewBranch": True})
    assert created.status == 201, created.body
    session_id = created.body["session"]["id"]
    before = written(api, session_id)
    for body in (
        {"repoUrl": "https://github.com/acme/other"},
        {"create": {"name": "other"}},
        {"repoUrl": "https://github.com/acme/app", "branch": "x/y"},
    ):
        reply = attach(api, session_id, body)
        assert_error(reply, 409, "repository_already_set", "sessionId")
    assert written(api, session_id) == before
    after = api.get(f"{SESSIONS}/{session_id}").body["session"]
    assert after["repoName"] == "app"


def test_an_archived_session_is_409_session_archived(api: Api) -> None:
    session_id = session(api)
    assert api.patch(f"{SESSIONS}/{session_id}", {"status": "archived"}).status == 200
    before = written(api, session_id)
    reply = attach(api, session_id, {"repoUrl": "https://github.com/acme/app"})
    assert_error(reply, 409, "session_archived", "sessionId")
    assert written(api, session_id) == before


def test_another_users_session_is_404(api: Api) -> None:
    session_id = session(api)
    before = written(api, session_id)
    body = {"repoUrl": "https://github.com/acme/app"}
    assert_error(attach(api, session_id, body, user="mallory"), 404, "not_found", None)
    assert_error(attach(api, "no-such-session", body), 404, "not_found", None)
    assert written(api, session_id) == before
