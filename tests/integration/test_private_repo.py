"""A private GitHub repository end to end, with a hostile sandbox: the control plane clones it
with its token (a real smart-HTTP server on 127.0.0.1 that refuses anyone without it) into a
real sandbox as a bundle, the agent commits, auto-commit pushes the bundle back through the
control plane, and the push lands on the server. A background process left in the sandbox
reads every process's environment and command line for the whole time, the repository's
pre-push hook, core.fsmonitor and credential helper record what they get: the token is
nowhere in the sandbox, not in a file, not in any /proc/*/environ or cmdline it can see."""

from __future__ import annotations

import base64
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from openagents import composition
from openagents.composition import Container, build
from openagents.domain.identity import Identity
from openagents.domain.models import Repo, Session
from openagents.git import ClonedRepository
from openagents.git.github import GitHubHost, StaticToken
from openagents.sandbox.client import SandboxClient
from openagents.services.sessions import NewSession
from openagents.settings import Settings

from tests.git_http_server import GitHttpServer, git_http_server
from tests.support import (
    NoMetrics,
    git,
    make_origin,
    provisioning_runtime,
    sandboxd_pid,
    wait_active,
)

ALICE = Identity(user_id="alice", username="alice", name="Alice Smith", email="a@example.com")
TOKEN = "ghs_private_repo_token_never_in_a_sandbox_31337"
# Every process the sandbox can see, read again and again until it is killed; a file of what it saw.
SCANNER = (
    "while :; do for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do "
    "tr '\\0' '\\n' < \"$f\"; echo; done 2>/dev/null | sort -u >> /tmp/scan; "
    "git -C /workspace config --list 2>/dev/null >> /tmp/scan; sleep 0.05; done"
)
HOOK = "#!/bin/sh\nenv > /tmp/pre-push-ran\ncat >> /tmp/pre-push-ran\n"
FSMONITOR = '#!/bin/sh\n{ env; echo "$@"; } >> /tmp/fsmonitor-ran\n'


@dataclass
class Watch:
    """What the test hands the git host: the container (to reach the sandbox), the session."""

    container: Container | None = None
    session_id: str | None = None
    clones: list[ClonedRepository] = field(default_factory=list)


class WatchedHost(GitHubHost):
    """The real GitHub host; before it hands the clone over, a hostile process is started in the
    sandbox, so the whole restore happens under its eyes."""

    watch: Watch

    def clone(
        self, repo: Repo, *, branch: str | None, is_new_branch: bool
    ) -> ClonedRepository | None:
        cloned = super().clone(repo, branch=branch, is_new_branch=is_new_branch)
        assert cloned is not None
        client = sandbox_client(self.watch, waiting=True)
        client.exec(f"setsid nohup sh -c {quote(SCANNER)} >/dev/null 2>&1 &", timeout_seconds=10)
        deadline = time.monotonic() + 10
        while client.exec("test -s /tmp/scan").exit_code != 0:
            assert time.monotonic() < deadline, "the scanner never ran"
            time.sleep(0.05)
        self.watch.clones.append(cloned)
        return cloned

    def default_branch(self, repo: Repo) -> str | None:
        return "main"  # what GitHub's REST API answers for acme/origin (nothing serves it here)


def quote(text: str) -> str:
    return "'" + text.replace("'", "'\"'\"'") + "'"


def sandbox_client(watch: Watch, *, waiting: bool = False) -> SandboxClient:
    deadline = time.monotonic() + 30
    while watch.session_id is None or watch.container is None:  # create has not returned yet
        assert waiting
        assert time.monotonic() < deadline
        time.sleep(0.05)
    session = watch.container.sessions.get(ALICE, watch.session_id)
    assert session.sandbox is not None
    driver = watch.container.driver
    return SandboxClient(driver.endpoint(session.sandbox), driver.token(session.sandbox), 30)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[GitHttpServer]:
    (tmp_path / "served" / "acme").mkdir(parents=True)
    make_origin(tmp_path / "served" / "acme")  # acme/origin.git: main and feature
    with git_http_server(tmp_path / "served", TOKEN) as server:
        yield server


@pytest.fixture
def runtime(
    settings: Settings, moto_endpoint: str, monkeypatch: pytest.MonkeyPatch, served: GitHttpServer
) -> Iterator[tuple[Container, Watch]]:
    watch = Watch()

    def git_host(_: Settings) -> GitHubHost:
        host = WatchedHost(
            StaticToken(lambda: TOKEN), base_url="http://127.0.0.1:9", git_url=served.url
        )  # nothing serves the REST API (PR refreshes fail fast)
        host.watch = watch
        return host

    monkeypatch.setattr(composition, "_git_host", git_host)
    with provisioning_runtime(settings, moto_endpoint, monkeypatch) as live:
        watch.container = build(live, NoMetrics())
        yield watch.container, watch


def active(container: Container, watch: Watch, request: NewSession) -> Session:
    session, _ = container.sessions.create(ALICE, request)
    watch.session_id = session.id
    return wait_active(container, ALICE, session.id)


def token_seen_in_the_sandbox(session: Session) -> list[str]:
    """Where the token is in what a process in the sandbox can reach: its writable files
    (/workspace, /tmp), every /proc/*/environ and cmdline of its pid namespace."""
    assert session.sandbox is not None
    root = Path(f"/proc/{sandboxd_pid(session.sandbox.model_dump())}/root")
    found = []
    for folder in (root / "workspace", root / "tmp"):
        for path in folder.rglob("*"):
            if path.is_file() and not path.is_symlink() and TOKEN.encode() in path.read_bytes():
                found.append(str(path))
    for proc in (root / "proc").glob("[0-9]*"):
        for name in ("environ", "cmdline"):
            try:
                if TOKEN.encode() in (proc / name).read_bytes():
                    found.append(f"{proc}/{name}")
            except OSError:
                continue  # gone since
    return found


def test_a_private_repository_round_trip_never_lets_the_token_in(
    runtime: tuple[Container, Watch], served: GitHttpServer, tmp_path: Path
) -> None:
    container, watch = runtime
    bare = tmp_path / "served" / "acme" / "origin.git"
    session = active(
        container,
        watch,
        NewSession(
            repo_url="https://github.com/acme/origin", is_new_branch=True, auto_commit_push=True
        ),
    )
    assert len(watch.clones) == 1  # the control plane cloned it, with the token
    client = sandbox_client(watch)
    # the sandbox holds a clone as git would leave it, its origin without credentials
    assert client.exec("git remote get-url origin").stdout == "https://github.com/acme/origin.git\n"
    remote = client.git_remote()
    assert (remote.default_branch, remote.upstream) == ("main", None)
    assert client.git_branch().branch == session.branch
    assert client.git_branch().head == git(bare, "rev-parse", "main")
    assert client.exec("cat README.md").stdout == "# demo\n"
    # a retried prepare step finds its restore done and answers the same
    assert session.sandbox is not None
    again = container.sandbox_ready.prepare(session.id, session.sandbox.generation)
    assert again.branch == session.branch
    # the repository turns hostile: a pre-push hook, an fsmonitor, a credential helper
    client.exec(
        f"printf %s {quote(HOOK)} > .git/hooks/pre-push && chmod +x .git/hooks/pre-push && "
        f"printf %s {quote(FSMONITOR)} > .git/fsmonitor && chmod +x .git/fsmonitor && "
        "git config core.fsmonitor /workspace/.git/fsmonitor && "
        "git config credential.helper '!cat >> /tmp/credential-ran'"
    )
    container.sandbox_tools.exec(ALICE, session.id, command="echo agent > agent.txt")
    container.lifecycle.activity(ALICE, session.id, "start")
    ended = container.after_turn.finished(ALICE, session.id)
    assert ended.after_turn is not None
    outcome = ended.after_turn
    assert (outcome["committed"], outcome["pushed"]) == (True, True), outcome
    # the push landed on the server, through the control plane
    assert git(bare, "show", f"{session.branch}:agent.txt") == "agent"
    assert git(bare, "log", "-1", "--format=%s", str(session.branch)) == "chore: update agent.txt"
    pushes = [p for method, p, ok in served.seen if ok and p.endswith("/git-receive-pack")]
    assert pushes == ["/acme/origin.git/git-receive-pack"]
    assert client.git_status().ahead == 0  # the push is recorded in the sandbox
    assert client.git_remote().upstream == f"origin/{session.branch}"
    # and the token never entered: the sandbox itself never pushed or asked for credentials
    assert client.exec("test -e /tmp/pre-push-ran").exit_code == 1
    assert client.exec("test -e /tmp/credential-ran").exit_code == 1
    fsmonitor = client.exec("cat /tmp/fsmonitor-ran 2>/dev/null").stdout
    assert TOKEN not in fsmonitor
    scanned = client.exec("sort -u /tmp/scan | base64 -w0", max_output_bytes=16 << 20)
    seen = base64.b64decode(scanned.stdout).decode("utf-8", "replace")
    assert "sandboxd" in seen  # the scanner read the other processes' command lines
    assert TOKEN not in seen
    assert token_seen_in_the_sandbox(container.sessions.get(ALICE, session.id)) == []


def test_an_existing_branch_of_a_private_repository_is_checked_out_tracking_origin(
    runtime: tuple[Container, Watch], tmp_path: Path
) -> None:
    container, watch = runtime
    bare = tmp_path / "served" / "acme" / "origin.git"
    session = active(
        container,
        watch,
        NewSession(repo_url="https://github.com/acme/origin", branch="feature"),
    )
    client = sandbox_client(watch)
    place = client.git_branch()
    assert (place.branch, place.head) == ("feature", git(bare, "rev-parse", "feature"))
    remote = client.git_remote()
    assert (remote.default_branch, remote.upstream) == ("main", "origin/feature")
    status = client.git_status()
    assert (status.branch, status.ahead, status.has_uncommitted_changes) == (
        "feature",
        0,
        False,
    )
    assert client.exec("cat feature.txt").stdout == "feature\n"
    assert token_seen_in_the_sandbox(container.sessions.get(ALICE, session.id)) == []
