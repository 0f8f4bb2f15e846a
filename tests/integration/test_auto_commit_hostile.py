"""Auto-commit against a hostile sandbox (a fake sandboxd): what it answers is never trusted. A
push error that carries the token is redacted by the control plane too."""

from __future__ import annotations

from typing import Any

import pytest
from openagents.composition import Container, build
from openagents.domain.identity import Identity
from openagents.domain.models import LifecycleState, Repo, Session
from openagents.sandbox.client import SandboxRequestError
from openagents.sandbox.git_answers import GitPlace
from openagents.sandbox.port import SandboxHandle
from openagents.services.auto_commit import AutoCommitService
from openagents.services.sessions import NewSession
from openagents.settings import Settings

from tests.sandboxd_fake import SandboxdFake
from tests.support import NoMetrics

ALICE = Identity(user_id="alice", username="alice", name="Alice", email="a@example.com")
TOKEN = "ghs_hostile_sandbox_token_42"


class Host:
    def default_branch(self, repo: Repo) -> str:
        return "main"

    def clone_token(self, repo: Repo) -> str:
        return TOKEN


class EchoingSandbox(SandboxdFake):
    """Unpushed work on ``feature``; the push fails with the token in sandboxd's words."""

    def __init__(self) -> None:
        self.pushed_with: list[str | None] = []

    def git_status(self) -> dict[str, Any]:
        return {"branch": "feature", "hasUncommittedChanges": False, "hasUnpushedCommits": True}

    def git_push(self, branch: str, *, token: str | None, timeout_seconds: float) -> GitPlace:
        self.pushed_with.append(token)
        detail = f"git push failed (128): fatal: could not read from {TOKEN}@github.com"
        raise SandboxRequestError(f"sandbox request failed: {detail}", 422, "git_failed", detail)


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


def test_a_push_error_never_carries_the_token(app: Container) -> None:
    sandbox = EchoingSandbox()
    service = AutoCommitService(
        app.archive._store,
        lambda handle: sandbox,
        Host(),  # type: ignore[arg-type]  # default_branch and clone_token are all it asks
        app.archive._clock,
        app.archive._ids,
        NoMetrics(),
        app.archive._journal,
    )
    session = running(app)
    outcome = service.after_turn(session)
    assert sandbox.pushed_with == [TOKEN]  # handed to sandboxd's push, nowhere else
    assert outcome["pushed"] is False
    assert outcome["skipped"].startswith("push failed: git push failed (128)")
    assert "***@github.com" in outcome["skipped"]
    events = app.sessions.events(ALICE, session.id, 100, None).items
    recorded = [e.detail for e in events if e.type == "sandbox.auto_commit"]
    assert recorded == [outcome]
    assert TOKEN not in repr(recorded)
