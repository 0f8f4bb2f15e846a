"""Shipping the work from the app against a GitHub-shaped server on 127.0.0.1 (REST + git smart
HTTP, ``tests/github_server.py``) with a real sandbox and the scripted model: commit with a
generated message, push, the pull request opened once with a generated title (a second call
returns it), merge readiness with passing / pending / failing checks and the merge refusing
with its reasons, checks/fix starting an ordinary turn whose prompt holds the failing log's
error lines, discard after a checkpoint, and the chat's cards."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from openagents import composition
from openagents.composition import Container, build
from openagents.domain.identity import Identity
from openagents.domain.models import Session
from openagents.domain.runs import RunStatus
from openagents.git.github import GitHubHost, StaticToken
from openagents.services.git_actions import GenerationFailed, NothingToCommit, NothingToDiscard
from openagents.services.pull_requests import NotMergeable
from openagents.services.sessions import NewSession
from openagents.settings import Settings

from tests.github_server import GitHubState, github_server
from tests.support import NoMetrics, git, make_origin, provisioning_runtime, wait_active

ALICE = Identity(user_id="alice", username="alice", name="Alice Smith", email="a@example.com")
TOKEN = "ghs_shipping_token_never_in_a_sandbox_4242"
SCRIPT: dict[str, Any] = {
    "responses": [{"text": "Fixed the failing test."}],
    "commitMessage": "feat: add the greeting\n\nSays hello from agent.txt.",
    "pullRequest": {"title": "feat: greet", "body": "## Summary\n\nA greeting."},
}
FAILING_LOG = "\n".join(
    [f"2026-01-01T00:00:{i:02d}.0000000Z step {i} ok" for i in range(50)]
    + [
        "2026-01-01T00:01:00.0000000Z FAILED tests/test_app.py::test_greeting",
        "2026-01-01T00:01:01.0000000Z AssertionError: expected 'hello' got 'bye'",
    ]
    + [f"2026-01-01T00:02:{i:02d}.0000000Z cleanup {i}" for i in range(50)]
)


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "script.json"
    path.write_text(json.dumps(SCRIPT))
    return path


@pytest.fixture
def served(tmp_path: Path) -> Iterator[GitHubState]:
    (tmp_path / "served" / "acme").mkdir(parents=True)
    make_origin(tmp_path / "served" / "acme")  # acme/origin.git: main and feature
    with github_server(tmp_path / "served", TOKEN) as server:
        yield server


@pytest.fixture
def container(
    settings: Settings,
    moto_endpoint: str,
    monkeypatch: pytest.MonkeyPatch,
    served: GitHubState,
    script: Path,
) -> Iterator[Container]:
    def git_host(_: Settings) -> GitHubHost:
        return GitHubHost(StaticToken(lambda: TOKEN), base_url=served.url, git_url=served.url)

    monkeypatch.setattr(composition, "_git_host", git_host)
    scripted = settings.model_copy(update={"scripted_model_file": script})
    with provisioning_runtime(scripted, moto_endpoint, monkeypatch) as live:
        yield build(live, NoMetrics())


def active(container: Container) -> Session:
    session, _ = container.sessions.create(
        ALICE, NewSession(repo_url="https://github.com/acme/origin", is_new_branch=True)
    )
    return wait_active(container, ALICE, session.id)


def cards(container: Container, session: Session) -> list[dict[str, Any]]:
    chat = container.chats.list(ALICE, session.id)[0]
    page = container.chats.messages(ALICE, session.id, chat.chat.id, 100, None)
    return [
        part
        for message in page.items
        for part in message.parts.get("parts", [])
        if str(part.get("type", "")).startswith("data-")
    ]


def wait_run(container: Container, session: Session, run_id: str) -> RunStatus:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        run = next(r for r in container.agent.runs(ALICE, session.id, None).items if r.id == run_id)
        if run.status.ended:
            return run.status
        time.sleep(0.05)
    raise AssertionError("the fix turn never ended")


def test_commit_push_pr_readiness_and_fix_checks(
    container: Container, served: GitHubState, script: Path, tmp_path: Path
) -> None:
    bare = tmp_path / "served" / "acme" / "origin.git"
    session = active(container)
    branch = str(session.own_branch)
    actions = container.git_actions
    with pytest.raises(NothingToCommit):
        actions.commit(ALICE, session.id, None)
    container.sandbox_tools.exec(ALICE, session.id, command="echo hello > agent.txt")

    # a generation the script cannot answer is a 502, and nothing is committed or staged
    script.write_text(json.dumps({"responses": []}))
    with pytest.raises(GenerationFailed, match="no commitMessage"):
        actions.commit(ALICE, session.id, None)
    status = container.sandbox_tools.git_status(ALICE, session.id)
    assert (status.staged_count, status.untracked_count) == (0, 1)
    script.write_text(json.dumps(SCRIPT))

    committed = actions.commit(ALICE, session.id, None)
    assert committed.generated is True
    assert committed.subject == "feat: add the greeting"
    assert committed.body == "Says hello from agent.txt."
    log = container.sandbox_tools.exec(ALICE, session.id, command="git log -1 --format=%H%n%B")
    assert log.stdout.split("\n")[:3] == [committed.commit, "feat: add the greeting", ""]

    pushed = actions.push(ALICE, session.id)
    assert (pushed.branch, pushed.commit, pushed.base) == (branch, committed.commit, "main")
    assert git(bare, "rev-parse", branch) == committed.commit

    opened = actions.open_pull_request(
        ALICE, session.id, title=None, body=None, draft=False, base=None
    )
    assert opened.created is True
    assert (opened.pull.title, opened.pull.head_branch, opened.pull.base_branch) == (
        "feat: greet", branch, "main"
    )  # fmt: skip
    assert served.pulls[("acme", "origin")][0]["body"] == "## Summary\n\nA greeting."
    stored = container.sessions.get(ALICE, session.id)
    assert (stored.pr_number, stored.pr_status) == (opened.pull.number, opened.pull.state)
    again = actions.open_pull_request(
        ALICE, session.id, title="other", body="x", draft=False, base=None
    )
    assert (again.created, again.pull.number) == (False, opened.pull.number)
    assert len(served.pulls[("acme", "origin")]) == 1  # never a second one

    readiness = container.merge_readiness
    ready = readiness.readiness(ALICE, session.id)
    assert (ready.can_merge, ready.reasons) == (True, [])
    assert ready.allowed_methods == ("merge", "squash", "rebase")
    sha = committed.commit
    served.add_check(sha, "lint", "completed", "success")
    served.add_check(sha, "build", "in_progress", None)
    pending = readiness.readiness(ALICE, session.id)
    assert pending.can_merge is False
    assert (pending.checks.required_total, pending.checks.passed, pending.checks.pending) == (
        2,
        1,
        1,
    )
    assert pending.reasons == ["1 check is still running."]
    failing_id = served.add_check(sha, "tests", "completed", "failure", log=FAILING_LOG)
    served.annotations[failing_id] = [
        {"path": "tests/test_app.py", "start_line": 3, "message": "assert failed"}
    ]
    failing = readiness.readiness(ALICE, session.id)
    assert failing.checks.failed == 1
    assert "1 check failed." in failing.reasons
    with pytest.raises(NotMergeable, match="1 check failed"):
        container.pull_requests.merge(ALICE, session.id, "squash")
    assert served.pulls[("acme", "origin")][0]["state"] == "open"  # nothing was merged

    started = actions.fix_checks(ALICE, session.id, None)
    assert [check.id for check in started.checks] == [failing_id]
    assert wait_run(container, session, started.run.id) is RunStatus.COMPLETED
    prompt = container.chats.messages(ALICE, session.id, started.chat_id, 100, None).items
    text = next(
        part["text"]
        for message in prompt
        if message.id == started.run.message_id
        for part in message.parts["parts"]
    )
    assert "FAILED tests/test_app.py::test_greeting" in text
    assert "AssertionError: expected 'hello' got 'bye'" in text
    assert "tests/test_app.py:3: failure: assert failed" in text
    assert "step 10 ok" not in text  # only the useful lines, not the whole log
    assert served.storage_auth == [None]  # the log's storage URL never saw our token

    kinds = [(card["type"], card["data"]["source"]) for card in cards(container, session)]
    assert kinds == [("data-commit", "button"), ("data-push", "button"), ("data-pr", "button")]
    events = [e.type for e in container.sessions.events(ALICE, session.id, 200, None).items]
    for kind in ("git.committed", "git.pushed", "git.pr_opened"):
        assert events.count(kind) == 1, kind


def test_discard_restores_tracked_removes_untracked_after_a_checkpoint(
    container: Container,
) -> None:
    session = active(container)
    tools = container.sandbox_tools
    tools.exec(
        ALICE,
        session.id,
        command="echo changed > README.md && echo new > new.txt && mkdir d && echo e > d/e.txt"
        " && echo keep > keep.txt",
    )
    done = container.git_actions.discard(ALICE, session.id, ["README.md", "new.txt", "d"])
    assert (sorted(done.restored), sorted(done.removed)) == (["README.md"], ["d/e.txt", "new.txt"])
    assert tools.exec(ALICE, session.id, command="cat README.md").stdout == "# demo\n"
    listing = tools.exec(ALICE, session.id, command="git status --porcelain").stdout
    assert listing == "?? keep.txt\n"  # outside the paths: untouched
    # the checkpoint holds what was discarded: the revert path puts it back
    saved = done.saved
    assert saved.ref.startswith("refs/openagents/checkpoints/discard-")
    shown = tools.exec(ALICE, session.id, command=f"git show {saved.commit}:new.txt")
    assert shown.stdout == "new\n"
    everything = container.git_actions.discard(ALICE, session.id, None)
    assert everything.removed == ["keep.txt"]
    with pytest.raises(NothingToDiscard):
        container.git_actions.discard(ALICE, session.id, None)


def test_auto_commit_at_turn_end_records_its_cards_in_the_chat(container: Container) -> None:
    session, _ = container.sessions.create(
        ALICE,
        NewSession(
            repo_url="https://github.com/acme/origin",
            is_new_branch=True,
            auto_commit_push=True,
            auto_create_pr=True,
        ),
    )
    session = wait_active(container, ALICE, session.id)
    container.sandbox_tools.exec(ALICE, session.id, command="echo agent > agent.txt")
    container.lifecycle.activity(ALICE, session.id, "start")
    ended = container.after_turn.finished(ALICE, session.id)
    assert ended.after_turn is not None
    outcome = ended.after_turn
    assert (outcome["committed"], outcome["pushed"]) == (True, True), outcome
    found = {card["type"]: card["data"] for card in cards(container, session)}
    assert found["data-commit"] == {
        "commit": outcome["commit"],
        "subject": "chore: update agent.txt",
        "branch": session.own_branch,
        "source": "auto",
    }
    assert found["data-push"]["pushed"] is True
    assert found["data-push"]["commit"] == outcome["commit"]
    assert found["data-pr"]["number"] == outcome["prNumber"]
    assert found["data-pr"]["created"] is True
    # a second turn with nothing new records nothing more
    container.lifecycle.activity(ALICE, session.id, "start")
    container.after_turn.finished(ALICE, session.id)
    assert len(cards(container, session)) == 3
