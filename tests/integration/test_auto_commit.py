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
    ended = container.after_turn.finished(ALICE, session_id)
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


def seed_branches(origin: Path, tmp_path: Path) -> dict[str, str]:
    """``release`` and another user's ``bob/feature`` on origin, beside main and feature; their
    commits as they are."""
    work = tmp_path / "branches"
    git(tmp_path, "clone", "-q", str(origin), str(work))
    for branch in ("release", "bob/feature"):
        git(work, "checkout", "-qb", branch, "origin/main")
        (work / f"{branch.replace('/', '-')}.txt").write_text(f"{branch}\n")
        git(work, "add", ".")
        git(work, "-c", "user.name=B", "-c", "user.email=b@example.com", "commit", "-qm", branch)
        git(work, "push", "-q", "origin", branch)
    return {b: git(origin, "rev-parse", b) for b in ("main", "feature", "release", "bob/feature")}


def test_a_session_pushes_only_its_own_branch_whatever_the_sandbox_checks_out(
    runtime: Container, tmp_path: Path
) -> None:
    """Issue 22 (high): a prompt-injected agent checks out ``release``, then another user's
    ``bob/feature``, and commits there; the turn's auto-commit and auto-PR push neither, the
    session's PR is not taken from the branch the sandbox names, and the skip says why."""
    container = runtime
    origin = make_origin(tmp_path)
    before = seed_branches(origin, tmp_path)
    host = LocalGitHost(container.settings.home / "git")
    bobs_pr = host.create_pull_request(
        Repo(clone_url=str(origin)),
        head_branch="bob/feature",
        base_branch="main",
        title="Bob's work",
        body="",
    )
    session = active(
        container,
        NewSession(
            repo_url=str(origin), is_new_branch=True, auto_commit_push=True, auto_create_pr=True
        ),
    )
    own = str(session.own_branch)
    assert own == session.branch
    for target in ("release", "bob/feature"):
        # the agent's commands, in the real sandbox
        attack = (
            f"git fetch -q origin && git checkout -q -B {target} origin/{target} && "
            f"echo injected > injected.txt && git add -A && git commit -qm injected"
        )
        ran = container.sandbox_tools.exec(ALICE, session.id, command=attack)
        assert ran.exit_code == 0, ran
        container.sandbox_tools.exec(ALICE, session.id, command="echo more > more.txt")
        refreshed = container.pull_requests.refresh(session.id)
        assert refreshed is not None
        assert refreshed.branch == target  # shown as the branch the sandbox is on
        assert refreshed.own_branch == own  # but never taken for the session's own
        assert refreshed.pr_number is None  # bob's pull request is not this session's
        outcome = turn_end(container, session.id)
        assert outcome.get("pushed") is not True
        assert outcome["skipped"] == f"the sandbox is on {target}, not the session's branch {own}"
        assert outcome["sandboxBranch"] == target
        assert "prNumber" not in outcome
        assert git(origin, "rev-parse", target) == before[target]  # not pushed
    events = container.sessions.events(ALICE, session.id, 100, None).items
    recorded = [e.detail for e in events if e.type == "sandbox.auto_commit"]
    assert [d.get("sandboxBranch") for d in recorded] == ["release", "bob/feature"]
    assert {b: git(origin, "rev-parse", b) for b in before} == before
    assert git(origin, "branch", "--list", own) == ""  # the own branch was never pushed either
    # back on its own branch, the session's work is pushed there, and its own PR opened
    ran = container.sandbox_tools.exec(ALICE, session.id, command=f"git checkout -q {own}")
    assert ran.exit_code == 0, ran
    container.sandbox_tools.exec(ALICE, session.id, command="echo mine > mine.txt")
    pushed = turn_end(container, session.id)
    assert (pushed["pushed"], pushed["branch"]) == (True, own)
    assert pushed["prNumber"] != bobs_pr.number
    assert git(origin, "show", f"{own}:mine.txt") == "mine"
    assert {b: git(origin, "rev-parse", b) for b in before} == before
