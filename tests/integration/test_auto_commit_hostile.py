"""Auto-commit against a hostile sandbox (a fake sandboxd): what it answers is never trusted and
it is never handed the token. Its bundle is data the GitHub host checks before any request: a
garbage "bundle" is refused, and the refusal carries no token."""

from __future__ import annotations

from typing import Any

import pytest
from openagents.composition import Container, build
from openagents.domain.identity import Identity
from openagents.domain.models import LifecycleState, Session
from openagents.git.github import GitHubHost, StaticToken
from openagents.sandbox.git_answers import GitRemote
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

    def git_status(self) -> dict[str, Any]:
        return {"branch": "feature", "hasUncommittedChanges": False, "hasUnpushedCommits": True}

    def git_remote(self) -> GitRemote:
        return GitRemote(
            default_branch="main", origin_head="refs/remotes/origin/main", upstream=None
        )

    def git_branch(self) -> dict[str, Any]:
        return {"branch": "feature", "head": "a" * 40}

    def git_bundle(self, *, branch: str | None = None, thin: bool = False, max_bytes: int) -> bytes:
        self.given += [branch, thin, max_bytes]
        return b"# v2 git bundle\n" + f"{TOKEN} refs/heads/feature\n\n".encode() + b"PACK"


@pytest.fixture
def app(settings: Settings) -> Container:
    return build(settings, NoMetrics())


def running(app: Container) -> Session:
    session, _ = app.sessions.create(
        ALICE,
        NewSession(
            repo_url="https://github.com/acme/widget", branch="feature", auto_commit_push=True
        ),
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


def test_a_hostile_bundle_is_refused_and_the_token_never_handed_over(app: Container) -> None:
    sandbox = HostileSandbox()
    # nothing listens on 127.0.0.1:9: a request would fail; the bundle is refused before any
    host = GitHubHost(
        StaticToken(lambda: TOKEN), base_url="http://127.0.0.1:9", git_url="http://127.0.0.1:9"
    )
    service = AutoCommitService(
        app.archive._store,
        lambda handle: sandbox,
        host,
        app.archive._clock,
        app.archive._ids,
        NoMetrics(),
        app.archive._journal,
    )
    session = running(app)
    outcome = service.after_turn(session)
    assert outcome["pushed"] is False
    assert outcome["skipped"].startswith("push failed: The bundle does not verify")
    assert sandbox.given == ["feature", True, MAX_BUNDLE_BYTES]  # thin: refused, not retried
    assert TOKEN not in repr(sandbox.given)
    events = app.sessions.events(ALICE, session.id, 100, None).items
    recorded = [e.detail for e in events if e.type == "sandbox.auto_commit"]
    assert recorded == [outcome]
    assert TOKEN not in repr(recorded)
