"""Merge and close a session's pull request through the git host port: the local git host (one
machine, a real merge into the bare repository's base branch) over HTTP, and the Lambda
transport with no GitHub token configured (400 naming the setting)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from openagents.composition import build
from openagents.domain.models import LifecycleState, PrStatus, Repo
from openagents.git.local import LocalGitHost

from tests.api.test_sessions import SESSIONS, assert_error
from tests.support import Api, HttpApi, NoMetrics, git, make_origin


def with_pr(api: HttpApi, tmp_path: Path) -> tuple[str, LocalGitHost, Repo, int]:
    origin = make_origin(tmp_path)
    created = api.post(SESSIONS, {"repoUrl": f"file://{origin}", "branch": "feature"})
    assert created.status == 201, created.body
    session_id: str = created.body["session"]["id"]
    host = LocalGitHost(api.settings.home / "git")  # the server's registry
    repo = Repo(clone_url=f"file://{origin}")
    pr = host.create_pull_request(
        repo, head_branch="feature", base_branch="main", title="Feature", body=""
    )
    build(api.settings, NoMetrics()).archive._store.transition(
        session_id,
        expect=frozenset(LifecycleState),
        changes={"pr_number": pr.number, "pr_status": PrStatus.OPEN},
        entry=None,
    )
    return session_id, host, repo, pr.number


def event_types(api: Api, session_id: str) -> list[str]:
    events: list[dict[str, Any]] = api.get(f"{SESSIONS}/{session_id}/events").body["events"]
    return [e["type"] for e in events]


def test_without_a_git_host_merge_and_close_name_the_setting(api: Api) -> None:
    session_id = api.post(SESSIONS, {"repoUrl": "https://github.com/acme/widget"}).body["session"][
        "id"
    ]
    if api.transport == "http":  # one machine always has its local git host
        assert_error(
            api.post(f"{SESSIONS}/{session_id}/merge"), 409, "no_pull_request", "sessionId"
        )
        return
    for tail in ("merge", "close-pr"):
        reply = api.post(f"{SESSIONS}/{session_id}/{tail}")
        assert_error(reply, 400, "invalid_input", None)
        assert "OPENAGENTS_GITHUB_TOKEN_SECRET_ARN" in reply.error["error"]


def test_close_then_merge_through_the_local_git_host(http_api: HttpApi, tmp_path: Path) -> None:
    session_id, host, repo, number = with_pr(http_api, tmp_path)
    base = f"{SESSIONS}/{session_id}"

    closed = http_api.post(f"{base}/close-pr")
    assert closed.status == 200, closed.body
    assert closed.body["session"]["prStatus"] == "closed"
    assert closed.body["session"]["status"] == "running"
    assert "session.pr_closed" in event_types(http_api, session_id)
    refused = http_api.post(f"{base}/merge", {"method": "squash"})  # a closed PR
    assert_error(refused, 409, "not_mergeable", None)
    assert "closed" in refused.error["error"]

    host.reopen_pull_request(repo, number)
    merged = http_api.post(f"{base}/merge", {"method": "squash"})
    assert merged.status == 200, merged.body
    assert merged.body["session"]["prStatus"] == "merged"
    assert merged.body["session"]["status"] == "archived"  # the server archives a merged one
    types = event_types(http_api, session_id)
    assert types.index("session.pr_merged") < types.index("session.archived")
    bare = tmp_path / "origin.git"
    assert "feature.txt" in git(bare, "ls-tree", "--name-only", "main")  # it landed on main
    again = http_api.post(f"{base}/merge")
    assert_error(again, 409, "not_mergeable", None)


def test_merge_errors(http_api: HttpApi, tmp_path: Path) -> None:
    session_id, _, _, _ = with_pr(http_api, tmp_path)
    base = f"{SESSIONS}/{session_id}"
    assert_error(http_api.post(f"{base}/merge", user="bob"), 404, "not_found", None)
    assert_error(http_api.post(f"{base}/close-pr", user="bob"), 404, "not_found", None)
    assert_error(http_api.post(f"{SESSIONS}/nope/merge"), 404, "not_found", None)
    bad = http_api.post(f"{base}/merge", {"method": "octopus"})
    assert_error(bad, 422, "validation_error", "method")
    extra = http_api.post(f"{base}/merge", {"method": "merge", "force": True})
    assert_error(extra, 422, "validation_error", "force")
    session = http_api.get(base).body["session"]
    assert (session["prStatus"], session["status"]) == ("open", "running")  # nothing changed
