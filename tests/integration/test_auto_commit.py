"""Auto-commit and auto-PR when an agent ends its turn: real sandbox, real push to a local
bare repository, a pull request in the local git host's registry."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from openagents.composition import Container, build
from openagents.domain.identity import Identity
from openagents.domain.models import Repo, Session
from openagents.git.local import LocalGitHost
from openagents.services.sessions import NewSession
from openagents.settings import Settings

from tests.support import NoMetrics, git, make_origin, provisioning_runtime, wait_active

ALICE = Identity(user_id="alice", username="alice", name="Alice Smith", email="a@example.com")


@pytest.fixture
def runtime(
    settings: Settings, moto_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Container]:
    with provisioning_runtime(settings, moto_endpoint, monkeypatch) as live:
        yield build(live, NoMetrics())


def active(container: Container, request: NewSession) -> Session:
    session, _ = container.sessions.create(ALICE, request)
    return wait_active(container, ALICE, session.id)


def turn_end(container: Container, session_id: str) -> dict[str, Any]:
    """What auto-commit / auto-PR did when the agent's turn ended."""
    ended = container.lifecycle.activity(ALICE, session_id, "end")
    assert ended.success, ended
    assert ended.after_turn is not None
    return ended.after_turn


def test_turn_end_commits_pushes_and_opens_a_pull_request(
    runtime: Container, tmp_path: Path
) -> None:
    container = runtime
    origin = make_origin(tmp_path)
    session = active(
        container,
        NewSession(
            repo_url=f"file://{origin}",
            is_new_branch=True,
            auto_commit_push=True,
            auto_create_pr=True,
        ),
    )
    container.sandbox_tools.exec(ALICE, session.id, command="echo agent > agent.txt")
    container.lifecycle.activity(ALICE, session.id, "start")
    # When the agent ends its turn
    outcome = turn_end(container, session.id)
    # Then the work is committed and pushed to the session's branch, with a pull request
    assert outcome["committed"] is True
    assert outcome["pushed"] is True
    assert outcome["branch"] == session.branch
    assert git(origin, "log", "-1", "--format=%s", str(session.branch)) == "chore: update agent.txt"
    assert git(origin, "show", f"{session.branch}:agent.txt") == "agent"
    pr = LocalGitHost(container.settings.home / "git").pull_request_for_branch(
        Repo(clone_url=f"file://{origin}"), str(session.branch)
    )
    assert pr is not None
    assert pr.number == outcome["prNumber"]
    assert pr.base_branch == "main"
    updated = container.sessions.get(ALICE, session.id)
    assert updated.pr_number == pr.number
    assert updated.pr_status is not None
    kinds = [e.type for e in container.sessions.events(ALICE, session.id, 100, None).items]
    assert "sandbox.auto_commit" in kinds
    # And a second turn with nothing new pushes nothing and keeps the one pull request
    again = turn_end(container, session.id)
    assert again["skipped"] == "nothing to commit or push"


def test_skips_are_recorded_with_their_reason(runtime: Container, tmp_path: Path) -> None:
    container = runtime
    origin = make_origin(tmp_path)
    on_main = active(
        container, NewSession(repo_url=str(origin), branch="main", auto_commit_push=True)
    )
    container.sandbox_tools.exec(ALICE, on_main.id, command="echo x > x.txt")
    skipped = turn_end(container, on_main.id)
    assert skipped["skipped"] == "main is the default branch"
    assert git(origin, "rev-list", "--count", "main") == "2"  # nothing pushed to main
    off = active(container, NewSession(repo_url=str(origin), branch="feature"))
    assert turn_end(container, off.id) == {"skipped": "auto-commit is off"}


def plant_hooks(bare: Path, markers: Path) -> None:
    """Hooks a sandbox could have planted while its repository was writable: each leaves a
    marker, and pre-receive refuses every push."""
    markers.mkdir()
    for hook in ("pre-receive", "update", "post-receive", "post-update", "reference-transaction"):
        script = bare / "hooks" / hook
        script.write_text(f"#!/bin/sh\ntouch {markers}/{hook}\nexit 1\n")
        script.chmod(0o755)
    git(bare, "config", "core.fsmonitor", f"touch {markers}/fsmonitor")


def test_a_local_push_goes_through_the_git_host_and_runs_no_hook(
    runtime: Container, tmp_path: Path
) -> None:
    container = runtime
    origin = make_origin(tmp_path)
    markers = tmp_path / "markers"
    plant_hooks(origin, markers)
    session = active(
        container,
        NewSession(repo_url=str(origin), is_new_branch=True, auto_commit_push=True),
    )
    branch = str(session.branch)
    for turn, name in enumerate(("one", "two"), start=1):
        container.sandbox_tools.exec(ALICE, session.id, command=f"echo {name} > {name}.txt")
        outcome = turn_end(container, session.id)
        assert outcome["pushed"] is True, outcome
        assert git(origin, "show", f"{branch}:{name}.txt") == name
        assert git(origin, "rev-list", "--count", f"main..{branch}") == str(turn)
    again = turn_end(container, session.id)
    assert again["skipped"] == "nothing to commit or push"
    assert sorted(marker.name for marker in markers.iterdir()) == []


def test_a_non_fast_forward_to_a_shared_branch_is_refused(
    runtime: Container, tmp_path: Path
) -> None:
    container = runtime
    origin = make_origin(tmp_path)
    session = active(
        container, NewSession(repo_url=str(origin), branch="feature", auto_commit_push=True)
    )
    other = tmp_path / "someone-else"
    git(tmp_path, "clone", "-q", "--branch", "feature", str(origin), str(other))
    (other / "theirs.txt").write_text("theirs\n")
    git(other, "add", ".")
    git(other, "-c", "user.name=B", "-c", "user.email=b@example.com", "commit", "-qm", "theirs")
    git(other, "push", "-q", "origin", "feature")
    theirs = git(origin, "rev-parse", "feature")
    container.sandbox_tools.exec(ALICE, session.id, command="echo mine > mine.txt")
    outcome = turn_end(container, session.id)
    assert outcome["pushed"] is False
    assert "non-fast-forward" in outcome["skipped"]
    assert git(origin, "rev-parse", "feature") == theirs
