"""A session started without a repository gains one and its work lands there: a real sandbox
(the workspace ``git init``-ed at provisioning), the local git host writing the pushed bundle
into a bare repository, the session recording the repository and its own branch only after
the push landed. A push that fails records nothing, and the same call again succeeds."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from openagents import composition
from openagents.composition import Container, build
from openagents.domain.errors import Conflict
from openagents.domain.identity import Identity
from openagents.domain.models import Session
from openagents.git.github import GitHubHost, StaticToken
from openagents.services.git_actions import PushFailed, PushRefused
from openagents.services.session_repository import NewRepository, RepositoryAlreadyAttached
from openagents.services.sessions import NewSession
from openagents.settings import Settings

from tests.github_server import GitHubState, github_server
from tests.support import NoMetrics, git, make_origin, provisioning_runtime, wait_active

ALICE = Identity(user_id="alice", username="alice", name="Alice Smith", email="a@example.com")
TOKEN = "ghs_publish_token_never_in_a_sandbox_4242"


@pytest.fixture
def runtime(
    settings: Settings, moto_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Container]:
    with provisioning_runtime(settings, moto_endpoint, monkeypatch) as live:
        yield build(live, NoMetrics())


def scratch(container: Container) -> Session:
    """A session with no repository, its work committed in the sandbox."""
    session, _ = container.sessions.create(ALICE, NewSession(title="scratch"))
    session = wait_active(container, ALICE, session.id)
    assert session.clone_url is None
    container.sandbox_tools.exec(ALICE, session.id, command="echo hello > hello.txt")
    container.git_actions.commit(ALICE, session.id, "feat: hello")
    return session


def events(container: Container, session: Session) -> list[str]:
    return [e.type for e in container.sessions.events(ALICE, session.id, 100, None).items]


def test_the_work_lands_on_the_sessions_branch_in_the_new_repository(
    runtime: Container, tmp_path: Path
) -> None:
    container = runtime
    bare = tmp_path / "published.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(bare))  # empty: no branch yet
    session = scratch(container)
    head = container.sandbox_tools.exec(ALICE, session.id, command="git rev-parse HEAD")
    commit = head.stdout.strip()

    attached = container.session_repository.attach(
        ALICE, session.id, repo_url=str(bare), branch=None, create=None
    )

    branch = str(attached.own_branch)
    assert branch.startswith("as/")  # named by the control plane, from the session's id
    assert (attached.branch, attached.is_new_branch) == (branch, True)
    assert attached.clone_url == f"file://{bare.resolve()}"
    assert attached.repo_name == "published"
    assert git(bare, "rev-parse", branch) == commit
    assert git(bare, "show", f"{branch}:hello.txt") == "hello"
    stored = container.sessions.get(ALICE, session.id)
    assert (stored.clone_url, stored.own_branch) == (attached.clone_url, branch)
    assert events(container, session).count("session.repository_attached") == 1
    origin = container.sandbox_tools.exec(ALICE, session.id, command="git remote get-url origin")
    assert origin.stdout.strip() == attached.clone_url  # a plain URL, no token
    on = container.sandbox_tools.exec(ALICE, session.id, command="git branch --show-current")
    assert on.stdout.strip() == branch

    # a second repository is refused, and nothing changes
    with pytest.raises(RepositoryAlreadyAttached):
        container.session_repository.attach(
            ALICE, session.id, repo_url=str(bare), branch=None, create=None
        )
    # the session's later work goes to the same branch through the ordinary push
    container.sandbox_tools.exec(ALICE, session.id, command="echo more > more.txt")
    later = container.git_actions.commit(ALICE, session.id, "feat: more")
    pushed = container.git_actions.push(ALICE, session.id)
    assert (pushed.branch, pushed.commit, pushed.base) == (branch, later.commit, "main")
    assert git(bare, "show", f"{branch}:more.txt") == "more"


def test_a_failed_push_records_nothing_and_the_same_call_again_succeeds(
    runtime: Container, tmp_path: Path
) -> None:
    container = runtime
    origin = make_origin(tmp_path)  # main and feature, unrelated to the sandbox's history
    session = scratch(container)
    before = git(origin, "for-each-ref", "--format=%(refname) %(objectname)")

    # the repository's default branch is never the session's to push
    with pytest.raises(PushRefused, match="main is the default branch"):
        container.session_repository.attach(
            ALICE, session.id, repo_url=str(origin), branch="main", create=None
        )
    # a given branch is never forced: an unrelated history is refused by the host
    with pytest.raises(PushFailed, match="non-fast-forward"):
        container.session_repository.attach(
            ALICE, session.id, repo_url=str(origin), branch="feature", create=None
        )
    stored = container.sessions.get(ALICE, session.id)
    assert (stored.clone_url, stored.repo_name, stored.own_branch) == (None, None, None)
    assert "session.repository_attached" not in events(container, session)
    assert git(origin, "for-each-ref", "--format=%(refname) %(objectname)") == before

    attached = container.session_repository.attach(
        ALICE, session.id, repo_url=str(origin), branch="scratch-work", create=None
    )
    assert (attached.own_branch, attached.is_new_branch) == ("scratch-work", False)
    assert git(origin, "show", "scratch-work:hello.txt") == "hello"
    assert events(container, session).count("session.repository_attached") == 1


@pytest.fixture
def served(tmp_path: Path) -> Iterator[GitHubState]:
    (tmp_path / "served").mkdir()
    with github_server(tmp_path / "served", TOKEN) as server:
        yield server


@pytest.fixture
def on_github(
    settings: Settings,
    moto_endpoint: str,
    monkeypatch: pytest.MonkeyPatch,
    served: GitHubState,
) -> Iterator[Container]:
    def git_host(_: Settings) -> GitHubHost:
        return GitHubHost(StaticToken(lambda: TOKEN), base_url=served.url, git_url=served.url)

    monkeypatch.setattr(composition, "_git_host", git_host)
    with provisioning_runtime(settings, moto_endpoint, monkeypatch) as live:
        yield build(live, NoMetrics())


def test_a_new_github_repository_is_created_and_the_work_pushed_with_no_token_inside(
    on_github: Container, tmp_path: Path
) -> None:
    container = on_github
    session = scratch(container)
    attached = container.session_repository.attach(
        ALICE, session.id, repo_url=None, branch=None, create=NewRepository("published")
    )
    branch = str(attached.own_branch)
    bare = tmp_path / "served" / "octocat" / "published.git"
    assert (attached.repo_owner, attached.repo_name) == ("octocat", "published")
    assert attached.clone_url == "https://github.com/octocat/published.git"
    assert git(bare, "show", f"{branch}:hello.txt") == "hello"
    assert git(bare, "show", "main:README.md") == "# published"  # the default branch kept
    config = container.sandbox_tools.exec(ALICE, session.id, command="cat .git/config")
    assert TOKEN not in config.stdout
    assert "https://github.com/octocat/published.git" in config.stdout
    detail = next(
        e.detail
        for e in container.sessions.events(ALICE, session.id, 100, None).items
        if e.type == "session.repository_attached"
    )
    assert detail["created"] is True
    assert detail["repoOwner"] == "octocat"
    # the same name again: the repository exists (and this session has one anyway)
    other = scratch(container)
    with pytest.raises(Conflict) as refused:
        container.session_repository.attach(
            ALICE, other.id, repo_url=None, branch=None, create=NewRepository("published")
        )
    assert refused.value.field == "create.name"
