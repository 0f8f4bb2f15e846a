"""The check-pr rules (reference §2.5) on a session with a running sandbox (faked: its branch) and
a git host (faked: the PR per branch), on the one-machine store, with one change from the
reference: the sandbox's branch is only shown (detached HEAD or another branch keep the PR),
the PR is looked up for the session's own branch; no git host (no token) stops there, a PR found
is saved, none found leaves the stored one; opening a session refreshes at most once per
interval; an agent turn's end refreshes too (tests/agent cover the wiring)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

import pytest
from openagents.composition import Container, build
from openagents.domain.identity import Identity
from openagents.domain.lifecycle import LifecycleFields
from openagents.domain.models import LifecycleState, PrStatus, Repo, Session
from openagents.git import PullRequest
from openagents.sandbox.git_answers import GitBranch
from openagents.sandbox.port import SandboxHandle
from openagents.services.agent_turns import AgentHost
from openagents.services.pull_requests import PullRequestService
from openagents.services.sessions import NewSession
from openagents.settings import Settings
from openagents.store.runs import Run, RunStatus

from tests.sandboxd_fake import SandboxdFake
from tests.support import NoMetrics

ALICE = Identity(user_id="alice", username="alice", name="Alice", email="a@example.com")


@dataclass
class Workspace(SandboxdFake):
    branch: str | None = "feature"

    def git_branch(self) -> GitBranch:
        return GitBranch.from_answer({"branch": self.branch, "detached": self.branch is None})


@dataclass
class Host:
    prs: dict[str, PullRequest] = field(default_factory=dict)
    asked: list[str] = field(default_factory=list)

    def pull_request_for_branch(self, repo: Repo, branch: str) -> PullRequest | None:
        self.asked.append(branch)
        return self.prs.get(branch)


def pr(number: int, state: PrStatus = PrStatus.OPEN, branch: str = "feature") -> PullRequest:
    return PullRequest(number, state, f"u/{number}", branch, "main", "t")


@dataclass
class Clock:
    now: float = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def app(settings: Settings) -> Container:
    return build(settings, NoMetrics())


def service(
    app: Container, workspace: Workspace, host: Host | None, clock: Clock
) -> PullRequestService:
    return PullRequestService(
        app.archive._store,
        lambda handle: workspace,
        host,  # type: ignore[arg-type]  # only pull_request_for_branch is used here
        app.archive._clock,
        app.archive._ids,
        NoMetrics(),
        archive=app.archive,
        host_setting="OPENAGENTS_GITHUB_TOKEN_SECRET_ARN",
        refresh_seconds=30,
        monotonic=clock,
    )


def running(app: Container, **changes: Any) -> Session:
    session, _ = app.sessions.create(
        ALICE, NewSession(repo_url="https://github.com/acme/widget", branch="feature")
    )
    handle = SandboxHandle(
        driver="local", session_id=session.id, generation=1, ref="r", endpoint="http://x"
    )
    return app.archive._store.transition(
        session.id,
        expect=frozenset({LifecycleState.PROVISIONING}),
        changes=cast(
            LifecycleFields,
            {"lifecycle_state": LifecycleState.ACTIVE, "sandbox": handle, **changes},
        ),
        entry=None,
    )


def state(session: Session | None) -> tuple[str | None, int | None, PrStatus | None]:
    assert session is not None
    return session.branch, session.pr_number, session.pr_status


def test_detached_head_keeps_the_branch_and_the_pr(app: Container) -> None:
    session = running(app, pr_number=3, pr_status=PrStatus.OPEN)
    prs = service(app, Workspace(branch=None), Host(), Clock())
    assert state(prs.refresh(session.id)) == ("feature", 3, PrStatus.OPEN)


def test_a_changed_branch_is_shown_and_keeps_the_pr(app: Container) -> None:
    session = running(app, pr_number=3, pr_status=PrStatus.OPEN)
    without_token = service(app, Workspace(branch="other"), None, Clock())
    assert state(without_token.refresh(session.id)) == ("other", 3, PrStatus.OPEN)


def test_no_token_leaves_the_pr_fields(app: Container) -> None:
    session = running(app, pr_number=3, pr_status=PrStatus.OPEN)
    prs = service(app, Workspace(), None, Clock())
    assert state(prs.refresh(session.id)) == ("feature", 3, PrStatus.OPEN)


def test_a_found_pr_is_saved_and_none_found_keeps_the_stored_one(app: Container) -> None:
    session = running(app, pr_number=3, pr_status=PrStatus.OPEN)
    host = Host({"feature": pr(9, PrStatus.MERGED)})
    prs = service(app, Workspace(), host, Clock())
    assert state(prs.refresh(session.id)) == ("feature", 9, PrStatus.MERGED)
    host.prs.clear()
    assert state(prs.refresh(session.id)) == ("feature", 9, PrStatus.MERGED)
    assert app.sessions.get(ALICE, session.id).pr_number == 9  # stored, not only returned


def test_the_sandboxs_branch_never_brings_its_pr_only_the_own_branchs_is_looked_up(
    app: Container,
) -> None:
    """Issue 22: a sandbox that checks out bob's branch must not hand this session bob's PR
    (to merge or close); the PR is keyed to the session's own branch, whatever is checked out."""
    session = running(app, pr_number=3, pr_status=PrStatus.MERGED)
    host = Host({"bob/feature": pr(4, branch="bob/feature")})
    prs = service(app, Workspace(branch="bob/feature"), host, Clock())
    assert state(prs.refresh(session.id)) == ("bob/feature", 3, PrStatus.MERGED)
    assert host.asked == ["feature"]
    host.prs["feature"] = pr(9)
    assert state(prs.refresh(session.id)) == ("bob/feature", 9, PrStatus.OPEN)


def test_opening_refreshes_at_most_once_per_interval(app: Container) -> None:
    session = running(app)
    host, clock = Host({"feature": pr(5)}), Clock()
    prs = service(app, Workspace(), host, clock)
    assert prs.refresh_if_due(session).pr_number == 5
    host.prs["feature"] = pr(6)
    clock.now += 29
    assert prs.refresh_if_due(session).pr_number is None  # the session as read: no refresh
    assert host.asked == ["feature"]
    clock.now += 2
    assert prs.refresh_if_due(session).pr_number == 6
    assert host.asked == ["feature", "feature"]


def test_a_failing_sandbox_never_fails_the_refresh(app: Container) -> None:
    session = running(app, pr_number=3, pr_status=PrStatus.OPEN)

    class Broken(Workspace):
        def git_branch(self) -> GitBranch:
            raise OSError("sandboxd is down")

    prs = service(app, Broken(), Host(), Clock())
    assert state(prs.refresh(session.id)) == ("feature", 3, PrStatus.OPEN)


class Lifecycle:
    def __init__(self) -> None:
        self.calls: list[str | None] = []

    def activity(self, identity: Identity, session_id: str, turn: str | None) -> Any:
        self.calls.append(turn)
        return {}

    def finished(self, identity: Identity, session_id: str, run: Any = None) -> Any:
        self.calls.append("end")  # a natural finish: the after-a-turn flow (auto-commit)
        return {}


@pytest.mark.parametrize("status", [RunStatus.COMPLETED, RunStatus.ABORTED, RunStatus.FAILED])
def test_every_turn_end_refreshes_the_pr_after_the_auto_commit_and_survives_its_failure(
    app: Container, status: RunStatus
) -> None:
    session, chat = app.sessions.create(ALICE, NewSession(title="turn"))
    lifecycle, order = Lifecycle(), []

    def refresh(session_id: str) -> None:
        order.append(("refresh", list(lifecycle.calls)))
        raise OSError("the git host is down")

    host = AgentHost(
        app.archive._store,
        lambda handle: SandboxdFake(),
        lifecycle,
        app.archive._clock,
        ids=app.archive._ids,
        metrics=NoMetrics(),
        after_turn=lifecycle,
        restore=app.restore,
        refresh_pr=refresh,
    )
    run = Run(
        id="run-1",
        session_id=session.id,
        chat_id=chat.id,
        user_id="alice",
        message_id="m",
        assistant_message_id="a",
        model_id="scripted/x",
        started_at=session.created_at,
        status=status,
    )
    host.ended(run)  # the refresh's failure does not escape
    after = "end" if status is RunStatus.COMPLETED else "release"
    assert order == [("refresh", [after])]
    kinds = [e.type for e in app.sessions.events(ALICE, session.id, None, None).items]
    assert kinds[-1] == "agent.turn_finished"
