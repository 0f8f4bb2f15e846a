"""The archive flow on moto with real sandboxes: archive keeps every message, saves a git bundle
(branch, commits and uncommitted work), stops the sandbox and drops the snapshot; unarchive
provisions a new sandbox from the bundle; a failed finalisation is recorded and retried."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from openagents.composition import Container, build
from openagents.domain.errors import Conflict, NotFound
from openagents.domain.identity import Identity
from openagents.domain.lifecycle import FAILURE_TEXT, Failure
from openagents.domain.models import LifecycleState, PrStatus, Role, Session, SessionStatus
from openagents.git.local import LocalGitHost
from openagents.sandbox.port import SandboxHandle, SandboxState
from openagents.services.sessions import NewSession
from openagents.settings import Settings

from tests.support import LambdaApi, NoMetrics, git, make_origin, provisioning_runtime

ALICE = Identity(user_id="alice", username="alice", name="Alice Smith", email="a@example.com")
BOB = Identity(user_id="bob", username="bob", name="Bob", email="b@example.com")


@pytest.fixture
def runtime(
    settings: Settings, moto_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Container]:
    quick = settings.model_copy(
        update={
            "idle_timeout_seconds": 600,
            "lifecycle_min_sleep_seconds": 0.5,
            "archive_retry_attempts": 4,
            "archive_retry_base_seconds": 1.0,
        }
    )
    with provisioning_runtime(quick, moto_endpoint, monkeypatch) as live:
        yield build(live, NoMetrics())


def wait_until(container: Container, session_id: str, check: Any, limit: float = 60) -> Session:
    deadline = time.monotonic() + limit
    session = container.sessions.get(ALICE, session_id)
    while time.monotonic() < deadline:
        session = container.sessions.get(ALICE, session_id)
        if check(session):
            return session
        time.sleep(0.1)
    raise AssertionError(f"condition not met: {session.lifecycle_state} {session.lifecycle_error}")


def start_session(container: Container, tmp_path: Path) -> Session:
    origin = make_origin(tmp_path)
    session, _ = container.sessions.create(
        ALICE, NewSession(repo_url=str(origin), branch="feature")
    )
    return wait_until(
        container,
        session.id,
        lambda s: s.lifecycle_state in (LifecycleState.ACTIVE, LifecycleState.FAILED),
    )


def run(container: Container, session_id: str, command: str) -> str:
    result = container.sandbox_tools.exec(ALICE, session_id, command=command)
    assert result.exit_code == 0, result
    return result.stdout


def finalized(session: Session) -> bool:
    return not session.archive_pending and session.lifecycle_error is None


def events(container: Container, session_id: str) -> list[str]:
    return [e.type for e in container.sessions.events(ALICE, session_id, 100, None).items]


def test_archive_bundles_the_work_and_unarchive_brings_it_back(
    runtime: Container, tmp_path: Path
) -> None:
    container = runtime
    session = start_session(container, tmp_path)
    assert session.lifecycle_state is LifecycleState.ACTIVE, session.lifecycle_error
    chat_id = next(iter(session.chats))
    for index in range(3):
        container.chats.post_message(
            ALICE,
            session.id,
            chat_id,
            message_id=f"m{index}",
            role=Role.USER,
            ui_message={
                "id": f"m{index}",
                "role": "user",
                "parts": [{"type": "text", "text": "x"}],
            },
        )
    # Given a local commit, a staged change, an unstaged change and an untracked file
    run(container, session.id, "echo local > local.txt && git add local.txt && git commit -qm c")
    run(container, session.id, "echo staged > staged.txt && git add staged.txt")
    run(container, session.id, "echo dirty >> app.py && echo new > untracked.txt")
    status_before = container.sandbox_tools.git_status(ALICE, session.id)
    head_before = run(container, session.id, "git rev-parse HEAD").strip()
    # When the user archives it
    archived = container.sessions.update(
        ALICE, session.id, title=None, status=SessionStatus.ARCHIVED
    )
    assert archived.status is SessionStatus.ARCHIVED
    assert archived.lifecycle_state is LifecycleState.ARCHIVED
    assert archived.hibernate_after is None
    assert archived.sandbox_expires_at is None
    assert archived.lifecycle_run_id is None
    assert archived.branch == "feature"
    # Then finalisation stores a bundle, stops the sandbox and keeps every message
    done = wait_until(container, session.id, finalized)
    assert done.sandbox is None
    assert done.snapshot is None
    assert done.bundle is not None
    stored = container.settings.artifacts_dir / done.bundle.key
    assert stored.exists()
    assert hashlib.sha256(stored.read_bytes()).hexdigest() == done.bundle.sha256
    refs = git(tmp_path, "bundle", "list-heads", str(stored))
    assert "refs/openagents/archive/worktree" in refs
    assert "refs/heads/feature" in refs
    assert session.sandbox is not None
    assert container.driver.probe(session.sandbox).state is SandboxState.STOPPED
    messages = container.chats.messages(ALICE, session.id, chat_id, 100, None)
    assert [m.id for m in messages.items] == ["m0", "m1", "m2"]
    kinds = events(container, session.id)
    assert "session.archived" in kinds
    assert "session.archive_finalized" in kinds
    # Archiving again is a no-op
    again = container.sessions.update(ALICE, session.id, title=None, status=SessionStatus.ARCHIVED)
    assert again.bundle == done.bundle
    # When the user unarchives it, a new sandbox comes from the bundle
    container.sessions.update(ALICE, session.id, title=None, status=SessionStatus.RUNNING)
    back = wait_until(
        container,
        session.id,
        lambda s: s.lifecycle_state in (LifecycleState.ACTIVE, LifecycleState.FAILED),
    )
    assert back.lifecycle_state is LifecycleState.ACTIVE, back.lifecycle_error
    assert back.sandbox_generation == session.sandbox_generation + 1
    assert run(container, session.id, "git rev-parse HEAD").strip() == head_before
    assert container.sandbox_tools.git_status(ALICE, session.id) == status_before
    assert run(container, session.id, "cat untracked.txt") == "new\n"
    assert "dirty" in run(container, session.id, "cat app.py")
    assert "refs/openagents" not in run(container, session.id, "git for-each-ref")


def test_a_session_without_a_repository_keeps_its_files_through_archive(
    runtime: Container,
) -> None:
    container = runtime
    # Given a session without a repository: its workspace is a new git repository
    created, _ = container.sessions.create(ALICE, NewSession())
    session = wait_until(
        container,
        created.id,
        lambda s: s.lifecycle_state in (LifecycleState.ACTIVE, LifecycleState.FAILED),
    )
    assert session.lifecycle_state is LifecycleState.ACTIVE, session.lifecycle_error
    assert run(container, session.id, "git log --format=%s") == "Initial commit\n"
    # with a file written, shown in its Changes
    run(container, session.id, "mkdir -p notes && echo keep me > notes/plan.md")
    diff = container.sandbox_tools.diff(ALICE, session.id)
    assert [f.path for f in diff.files] == ["notes/plan.md"], diff
    # When it is archived, then unarchived
    container.sessions.update(ALICE, session.id, title=None, status=SessionStatus.ARCHIVED)
    done = wait_until(container, session.id, finalized)
    assert done.bundle is not None
    container.sessions.update(ALICE, session.id, title=None, status=SessionStatus.RUNNING)
    back = wait_until(
        container,
        session.id,
        lambda s: s.lifecycle_state in (LifecycleState.ACTIVE, LifecycleState.FAILED),
    )
    # Then the file is back
    assert back.lifecycle_state is LifecycleState.ACTIVE, back.lifecycle_error
    assert run(container, session.id, "cat notes/plan.md") == "keep me\n"


def test_archive_while_hibernated_and_a_failed_finalisation_is_retried(
    runtime: Container, tmp_path: Path
) -> None:
    container = runtime
    session = start_session(container, tmp_path)
    run(container, session.id, "echo kept > kept.txt")
    container.lifecycle.pause(ALICE, session.id)
    hibernated = wait_until(
        container, session.id, lambda s: s.lifecycle_state is LifecycleState.HIBERNATED
    )
    assert hibernated.snapshot is not None
    snapshot = container.settings.home / "snapshots" / hibernated.snapshot.id
    assert snapshot.exists()
    # Given the artifact store cannot take the bundle (a file where its folder goes)
    blocker = container.settings.artifacts_dir / "bundles" / session.id
    blocker.parent.mkdir(parents=True, exist_ok=True)
    blocker.write_text("in the way")
    container.sessions.update(ALICE, session.id, title=None, status=SessionStatus.ARCHIVED)
    # Then the failure is recorded, the snapshot kept, and unarchive waits for the retries
    failed = wait_until(
        container,
        session.id,
        lambda s: s.lifecycle_error_code == Failure.ARCHIVE_FAILED,
    )
    assert failed.lifecycle_error == FAILURE_TEXT[Failure.ARCHIVE_FAILED]  # a user sentence
    assert failed.snapshot is not None
    assert snapshot.exists()
    assert "session.archive_failed" in events(container, session.id)
    # When the cause goes away, the rule's next retry succeeds
    blocker.unlink()
    done = wait_until(container, session.id, finalized, limit=30)
    assert done.bundle is not None
    assert done.snapshot is None
    assert done.sandbox is None
    assert not snapshot.exists()
    restored = container.settings.artifacts_dir / done.bundle.key
    assert "refs/openagents/archive/worktree" in git(
        tmp_path, "bundle", "list-heads", str(restored)
    )
    # The temporary sandbox that produced it is stopped
    generation = container.settings.home / "sandboxes" / session.id / str(done.sandbox_generation)
    handle = SandboxHandle.model_validate_json((generation / "sandbox.json").read_text())
    assert container.driver.probe(handle).state is SandboxState.STOPPED


def test_unarchive_conflicts_while_finalizing_and_other_users_get_404(
    runtime: Container, tmp_path: Path
) -> None:
    container = runtime
    session = start_session(container, tmp_path)
    with pytest.raises(NotFound):
        container.sessions.update(BOB, session.id, title=None, status=SessionStatus.ARCHIVED)
    archived = container.archive.archive(session)
    assert archived.archive_pending is True
    with pytest.raises(Conflict):
        container.archive.unarchive(archived)
    wait_until(container, session.id, finalized)
    with pytest.raises(NotFound):
        container.sessions.update(BOB, session.id, title=None, status=SessionStatus.RUNNING)


# ------------------------------------------------------------------ the webhook


def signed(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def test_webhook_signature_and_pr_closed_archives_matching_sessions(
    settings: Settings, tmp_path: Path
) -> None:
    secret = "s3cret"
    aws = settings.model_copy(update={"artifact_bucket": "unused"})  # no bundle is written
    unset = LambdaApi(aws)
    assert unset.post("/api/github/webhook", {}, user=None).status == 500
    api = LambdaApi(aws.model_copy(update={"github_webhook_secret": secret}))
    container = build(api.settings, NoMetrics())
    sessions = [
        container.sessions.create(ALICE, NewSession(repo_url="https://github.com/Acme/Widget"))[0]
        for _ in range(3)
    ]
    for session, number in zip(sessions, (7, 7, 8), strict=True):
        container.archive._store.transition(
            session.id,
            expect=frozenset({LifecycleState.PROVISIONING}),
            changes={
                "pr_number": number,
                "pr_status": PrStatus.OPEN,
                "pr_key": f"acme/widget#{number}",
            },
            entry=None,
        )
    body = json.dumps(
        {
            "action": "closed",
            "number": 7,
            "pull_request": {"number": 7, "merged": True},
            "repository": {"name": "WIDGET", "owner": {"login": "acme"}},
        }
    ).encode()

    def post(headers: dict[str, str]) -> Any:
        return api.request("POST", "/api/github/webhook", user=None, raw_body=body, headers=headers)

    assert post({"x-github-event": "pull_request"}).status == 400
    forged = post({"x-github-event": "pull_request", "x-hub-signature-256": signed("x", body)})
    assert forged.status == 401
    assert container.sessions.get(ALICE, sessions[0].id).status is SessionStatus.RUNNING
    good = {"x-github-event": "pull_request", "x-hub-signature-256": signed(secret, body)}
    reply = post(good)
    assert reply.status == 200, reply.body
    assert reply.body["matchedSessions"] == 2
    assert reply.body["archivedSessions"] == 2
    for session in sessions[:2]:
        current = container.sessions.get(ALICE, session.id)
        assert current.status is SessionStatus.ARCHIVED
        assert current.pr_status is not None
        assert current.pr_status.value == "merged"
    assert container.sessions.get(ALICE, sessions[2].id).status is SessionStatus.RUNNING
    assert post(good).body["duplicate"] is True  # the same signed body again: a replay
    reopened = body.replace(b'"closed"', b'"reopened"')
    again = api.request(
        "POST",
        "/api/github/webhook",
        user=None,
        raw_body=reopened,
        headers={"x-github-event": "pull_request", "x-hub-signature-256": signed(secret, reopened)},
    )
    assert again.body["updatedSessions"] == 2
    current = container.sessions.get(ALICE, sessions[0].id)
    assert current.status is SessionStatus.ARCHIVED  # reopened never unarchives
    assert current.pr_status is not None
    assert current.pr_status.value == "open"
    ping = b"{}"
    pong = api.request(
        "POST",
        "/api/github/webhook",
        user=None,
        raw_body=ping,
        headers={"x-github-event": "ping", "x-hub-signature-256": signed(secret, ping)},
    )
    assert pong.status == 200
    assert pong.body["ok"] is True


def test_archive_refreshes_the_pr_through_the_git_host(runtime: Container, tmp_path: Path) -> None:
    """The PR is the session's own branch's (``feature``): a sandbox that checked out another
    branch holding a PR (the developer's ``topic``) shows that branch but never takes its PR."""
    from openagents.domain.models import Repo

    container = runtime
    session = start_session(container, tmp_path)
    seed = tmp_path / "seed"  # the developer pushes a topic branch (the sandbox may not)
    git(seed, "checkout", "-qb", "topic")
    (seed / "t.txt").write_text("t\n")
    git(seed, "add", "t.txt")
    git(seed, "commit", "-qm", "topic")
    git(seed, "push", "-q", "origin", "topic")
    run(container, session.id, "git fetch -q origin topic && git checkout -q -b topic FETCH_HEAD")
    host = LocalGitHost(container.settings.home / "git")
    repo = Repo(clone_url=session.clone_url)
    topic = host.create_pull_request(
        repo, head_branch="topic", base_branch="main", title="Topic", body=""
    )
    own = host.create_pull_request(
        repo, head_branch="feature", base_branch="main", title="Feature", body=""
    )
    host.merge_pull_request(repo, own.number)
    archived = container.sessions.update(
        ALICE, session.id, title=None, status=SessionStatus.ARCHIVED
    )
    assert archived.branch == "topic"  # shown as the sandbox has it
    assert archived.pr_number == own.number != topic.number
    assert archived.pr_status is not None
    assert archived.pr_status.value == "merged"
    wait_until(container, session.id, finalized)
