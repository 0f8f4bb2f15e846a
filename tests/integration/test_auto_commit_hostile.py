"""Auto-commit against a hostile sandbox (a fake sandboxd): what it answers is never trusted and
it is never handed the token. Its bundle is data the GitHub host checks before any request: a
garbage "bundle" is refused, and the refusal carries no token."""

from __future__ import annotations

import pytest
from openagents.composition import Container, build
from openagents.domain.identity import Identity
from openagents.domain.models import LifecycleState, Repo, Session
from openagents.git.github import GitHubHost, StaticToken
from openagents.sandbox.answers import GitStatus
from openagents.sandbox.git_answers import GitBranch, GitRemote
from openagents.sandbox.port import SandboxHandle
from openagents.services.auto_commit import MAX_BUNDLE_BYTES, AutoCommitService
from openagents.services.sessions import NewSession
from openagents.settings import Settings

from tests.sandboxd_fake import SandboxdFake
from tests.support import NoMetrics

ALICE = Identity(user_id="alice", username="alice", name="Alice", email="a@example.com")
TOKEN = "ghs_hostile_sandbox_token_42"


class HostileSandbox(SandboxdFake):
    """Unpushed work on ``feature``; asked for the branch's bundle, it answers garbage that
    names the token (as if it had one to leak). Every argument it is given is recorded."""

    def __init__(self) -> None:
        self.given: list[object] = []

    def git_status(self) -> GitStatus:
        return GitStatus.from_answer(
            {"branch": "feature", "hasUncommittedChanges": False, "hasUnpushedCommits": True}
        )

    def git_remote(self) -> GitRemote:
        return GitRemote(
            default_branch="main", origin_head="refs/remotes/origin/main", upstream=None
        )

    def git_branch(self) -> GitBranch:
        return GitBranch(branch="feature", head="a" * 40)

    def git_bundle(self, *, branch: str | None = None, thin: bool = False, max_bytes: int) -> bytes:
        self.given += [branch, thin, max_bytes]
        return b"# v2 git bundle\n" + f"{TOKEN} refs/heads/feature\n\n".encode() + b"PACK"


@pytest.fixture
def app(settings: Settings) -> Container:
    return build(settings, NoMetrics())


def running(app: Container, branch: str = "feature") -> Session:
    session, _ = app.sessions.create(
        ALICE,
        NewSession(repo_url="https://github.com/acme/widget", branch=branch, auto_commit_push=True),
    )
    handle = SandboxHandle(
        driver="local", session_id=session.id, generation=1, ref="r", endpoint="http://x"
    )
    return app.archive._store.transition(
        session.id,
        expect=frozenset({LifecycleState.PROVISIONING}),
        changes={"lifecycle_state": LifecycleState.ACTIVE, "sandbox": handle},
        entry=None,
    )


class GitHub(GitHubHost):
    """GitHub as the control plane sees it: nothing listens on 127.0.0.1:9, so any request
    would fail; the repository's default branch is ``default`` (None: GitHub did not answer)."""

    def __init__(self, default: str | None = "main") -> None:
        super().__init__(
            StaticToken(lambda: TOKEN), base_url="http://127.0.0.1:9", git_url="http://127.0.0.1:9"
        )
        self._default = default

    def default_branch(self, repo: Repo) -> str | None:
        return self._default


def service(app: Container, sandbox: SandboxdFake, host: GitHubHost) -> AutoCommitService:
    return AutoCommitService(
        app.archive._store,
        lambda handle: sandbox,
        host,
        app.archive._clock,
        app.archive._ids,
        NoMetrics(),
    )


def test_a_hostile_bundle_is_refused_and_the_token_never_handed_over(app: Container) -> None:
    sandbox = HostileSandbox()
    session = running(app)
    outcome = service(app, sandbox, GitHub()).after_turn(session)  # the bundle is refused first
    assert outcome["pushed"] is False
    assert outcome["skipped"].startswith("push failed: The bundle does not verify")
    assert sandbox.given == ["feature", True, MAX_BUNDLE_BYTES]  # thin: refused, not retried
    assert TOKEN not in repr(sandbox.given)
    events = app.sessions.events(ALICE, session.id, 100, None).items
    recorded = [e.detail for e in events if e.type == "sandbox.auto_commit"]
    assert recorded == [outcome]
    assert TOKEN not in repr(recorded)


class OnTheDefaultBranch(HostileSandbox):
    """On ``main`` with unpushed work, and lying that the default branch is ``develop``."""

    def git_status(self) -> GitStatus:
        return GitStatus.from_answer(
            {"branch": "main", "hasUncommittedChanges": False, "hasUnpushedCommits": True}
        )

    def git_remote(self) -> GitRemote:
        return GitRemote(
            default_branch="develop", origin_head="refs/remotes/origin/develop", upstream=None
        )


def test_the_sandbox_cannot_name_the_default_branch_to_push_onto_it(app: Container) -> None:
    sandbox = OnTheDefaultBranch()
    outcome = service(app, sandbox, GitHub("main")).after_turn(running(app, branch="main"))
    assert outcome["skipped"] == "main is the default branch"
    assert sandbox.given == []  # no bundle asked for: nothing pushed


def test_no_push_when_the_git_host_cannot_name_the_default_branch(app: Container) -> None:
    sandbox = OnTheDefaultBranch()
    outcome = service(app, sandbox, GitHub(None)).after_turn(running(app, branch="main"))
    assert (outcome["pushed"], outcome["base"]) == (False, None)
    assert outcome["skipped"] == (
        "push skipped: the git host did not name the repository's default branch"
    )
    assert sandbox.given == []  # the sandbox's "develop" was not taken for the truth


class OnAnotherBranch(HostileSandbox):
    """Checked out ``release`` with unpushed work, and ready to bundle it."""

    def git_status(self) -> GitStatus:
        return GitStatus.from_answer(
            {"branch": "release", "hasUncommittedChanges": True, "hasUnpushedCommits": True}
        )

    def git_branch(self) -> GitBranch:
        return GitBranch(branch="release", head="a" * 40)


def test_the_sandbox_cannot_name_another_branch_to_push(app: Container) -> None:
    sandbox = OnAnotherBranch()
    outcome = service(app, sandbox, GitHub("main")).after_turn(running(app))
    assert outcome == {
        "skipped": "the sandbox is on release, not the session's branch feature",
        "branch": "feature",
        "sandboxBranch": "release",
    }
    assert sandbox.given == []  # neither committed nor bundled


def test_a_session_without_a_branch_of_its_own_pushes_nothing(app: Container) -> None:
    session, _ = app.sessions.create(
        ALICE, NewSession(repo_url="https://github.com/acme/widget", auto_commit_push=True)
    )
    assert session.own_branch is None
    handle = SandboxHandle(
        driver="local", session_id=session.id, generation=1, ref="r", endpoint="http://x"
    )
    live = app.archive._store.transition(
        session.id,
        expect=frozenset({LifecycleState.PROVISIONING}),
        changes={"lifecycle_state": LifecycleState.ACTIVE, "sandbox": handle, "branch": "feature"},
        entry=None,
    )
    sandbox = HostileSandbox()  # on feature, the branch the session shows
    outcome = service(app, sandbox, GitHub("main")).after_turn(live)
    assert outcome["skipped"].startswith("the session has no branch of its own to push")
    assert sandbox.given == []
