"""The repository picker, skills and usage routes (docs/api.md: Repositories, Skills, Usage):
their shapes, every input error naming its field, another user's session 404."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from openagents.settings import Settings

from tests.support import Api, HttpApi, git, local_server, make_origin


@pytest.fixture
def roots_api(settings: Settings, tmp_path: Path) -> Iterator[HttpApi]:
    root = tmp_path / "repos"
    (root / "team").mkdir(parents=True)
    make_origin(root / "team")  # team/origin.git: main and feature, HEAD main
    git(root, "init", "-q", "-b", "trunk", str(root / "plain"))
    (root / ".hidden" / "x").mkdir(parents=True)
    git(root, "init", "-q", str(root / ".hidden" / "x" / "secret"))
    (root / "not-a-repo").mkdir()
    local = settings.model_copy(update={"local_repo_roots": (root,)})
    with local_server(local) as base_url:
        client = HttpApi(local, base_url)
        yield client
        client.client.close()


def test_local_repositories_are_the_git_repositories_under_the_roots(
    roots_api: HttpApi, tmp_path: Path
) -> None:
    listed = roots_api.get("/api/repositories")
    assert listed.status == 200, listed.body
    root = (tmp_path / "repos").resolve()
    local = {"owner": None, "private": None}  # one machine: neither is known
    assert listed.body == {
        "repositories": [
            {"repoUrl": str(root / "plain"), "name": "plain", "defaultBranch": "trunk", **local},
            {
                "repoUrl": str(root / "team" / "origin.git"),
                "name": "origin",
                "defaultBranch": "main",
                **local,
            },
            {
                "repoUrl": str(root / "team" / "seed"),
                "name": "seed",
                "defaultBranch": "feature",
                **local,
            },
        ],
        "next": None,
    }  # neither the hidden folder's repository nor the plain folder
    found = roots_api.get("/api/repositories", query={"query": "ORIGIN"})
    assert [r["name"] for r in found.body["repositories"]] == ["origin"]
    url = str(root / "team" / "origin.git")
    branches = roots_api.get("/api/repositories/branches", query={"repoUrl": url})
    assert branches.status == 200, branches.body
    assert branches.body == {
        "branches": [{"name": "main", "default": True}, {"name": "feature", "default": False}]
    }


def test_local_repository_errors_name_their_field(roots_api: HttpApi, tmp_path: Path) -> None:
    for query, field in (({"cursor": "nope"}, "cursor"), ({"query": "a\x00b"}, "query")):
        reply = roots_api.get("/api/repositories", query=query)
        assert reply.status == 400, reply.body
        assert reply.error["field"] == field
    for url, status in (
        ("", 400),
        ("relative/path", 400),
        (str(tmp_path), 404),  # outside the roots
        (str(tmp_path / "repos" / "not-a-repo"), 404),
    ):
        reply = roots_api.get("/api/repositories/branches", query={"repoUrl": url})
        assert reply.status == status, (url, reply.body)
        assert reply.error["field"] == "repoUrl"
    created = roots_api.post("/api/repositories", {"name": "fresh"})
    assert created.status == 400
    assert created.error["code"] == "no_git_host"
    assert "GitHub" in created.error["error"]
    assert roots_api.post("/api/repositories", {"name": "x", "extra": 1}).status == 422
    assert roots_api.get("/api/repositories", user=None).status == 401


def test_skills_of_another_users_session_404_and_no_sandbox_409(api: Api) -> None:
    session_id = api.post("/api/sessions", {"title": "skills"}).body["session"]["id"]
    assert api.get(f"/api/sessions/{session_id}/skills", user="mallory").status == 404
    assert api.get("/api/sessions/nope/skills").status == 404
    reply = api.get(f"/api/sessions/{session_id}/skills")
    assert reply.status == 409
    assert reply.error["code"] == "sandbox_not_running"


def test_usage_range_errors_name_from_or_to(api: Api) -> None:
    today = datetime.now(UTC).date()
    for query, field in (
        ({"from": "2026-13-01"}, "from"),
        ({"to": "yesterday"}, "to"),
        ({"from": "2026-1-1"}, "from"),
        ({"from": str(today), "to": str(today - timedelta(days=1))}, "from"),
        ({"from": str(today - timedelta(days=92)), "to": str(today)}, "to"),
    ):
        reply = api.get("/api/usage", query=query)
        assert reply.status == 400, (query, reply.body)
        assert reply.error["field"] == field
    empty = api.get("/api/usage", query={"from": str(today - timedelta(days=91))})
    assert empty.status == 200, empty.body
    zero = {"runs": 0, "inputTokens": 0, "outputTokens": 0, "cacheReadTokens": 0}
    assert empty.body == {
        "days": [],
        "totals": {**zero, "cacheWriteTokens": 0, "costUsd": None},
    }
