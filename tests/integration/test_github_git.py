"""The GitHub host's git over smart HTTP against a real server (``git http-backend`` on
127.0.0.1 with basic auth): a sandbox's bundle pushed thin, whole when the remote lacks the
base, fast-forward only unless forced; bundles naming another ref, not verifying or too big
refused; a private repository cloned into a bundle; the token never in any error."""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest
from openagents.git import GitHostError, Repo
from openagents.git import github as github_module
from openagents.git.github import GitHubHost, StaticToken

from tests.git_http_server import GitHttpServer, git_http_server
from tests.support import git

TOKEN = "ghs_control_plane_only_token_777"
REPO = Repo(owner="acme", name="widget", clone_url="https://github.com/acme/widget")


@dataclass
class World:
    server: GitHttpServer
    bare: Path  # the served repository
    work: Path  # a clone of it (what a sandbox holds), origin = the bare repository
    tmp: Path

    def host(self, token: str = TOKEN) -> GitHubHost:
        return GitHubHost(StaticToken(lambda: token), git_url=self.server.url)

    def commit(self, name: str, text: str) -> str:
        (self.work / name).write_text(text)
        git(self.work, "add", "-A")
        git(self.work, "commit", "--quiet", "-m", f"update {name}")
        return git(self.work, "rev-parse", "HEAD")

    def bundle(self, *refs: str) -> bytes:
        path = self.tmp / "push.bundle"
        path.unlink(missing_ok=True)
        git(self.work, "bundle", "create", "-q", str(path), *refs)
        return path.read_bytes()

    def remote_head(self, branch: str) -> str | None:
        done = subprocess.run(
            ["git", "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}"],
            cwd=self.bare, capture_output=True, text=True, check=False,
        )  # fmt: skip
        return done.stdout.strip() or None


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    root = tmp_path / "served"
    bare = root / "acme" / "widget.git"
    bare.parent.mkdir(parents=True)
    git(tmp_path, "init", "--quiet", "--bare", "-b", "main", str(bare))
    work = tmp_path / "work"
    git(tmp_path, "init", "--quiet", "-b", "main", str(work))
    with git_http_server(root, TOKEN) as server:
        state = World(server=server, bare=bare, work=work, tmp=tmp_path)
        state.commit("README.md", "# Widget\n" + "line\n" * 500)
        git(work, "remote", "add", "origin", str(bare))
        git(work, "push", "--quiet", "origin", "main")
        git(work, "switch", "--quiet", "-c", "agent/work")
        yield state


def test_a_thin_bundle_lands_on_the_branch(world: World) -> None:
    head = world.commit("README.md", "# Widget\n" + "line\n" * 500 + "one more\n")
    thin = world.bundle("refs/heads/agent/work", "--not", "--remotes=origin")
    assert b"\n-" in thin.split(b"\n\n", 1)[0]  # it has a prerequisite: it is thin
    landed = world.host().receive_bundle(REPO, branch="agent/work", bundle=thin, force=False)
    assert landed == head == world.remote_head("agent/work")
    assert git(world.bare, "fsck", "--no-progress") == ""
    assert all(authorized for _, _, authorized in world.server.seen)
    # the same push again: nothing to send, the same commit
    again = world.host().receive_bundle(REPO, branch="agent/work", bundle=thin, force=False)
    assert again == head


def test_the_whole_branch_lands_when_the_remote_lacks_the_base(world: World) -> None:
    # the sandbox believes origin has a commit it does not (as after a push it lost)
    base = world.commit("base.txt", "base\n")
    git(world.work, "update-ref", "refs/remotes/origin/main", base)
    head = world.commit("work.txt", "work\n")
    thin = world.bundle("refs/heads/agent/work", "--not", "--remotes=origin")
    with pytest.raises(GitHostError, match="lacks the bundle's base") as lacking:
        world.host().receive_bundle(REPO, branch="agent/work", bundle=thin, force=False)
    assert lacking.value.status == 412
    assert world.remote_head("agent/work") is None
    whole = world.bundle("refs/heads/agent/work")
    landed = world.host().receive_bundle(REPO, branch="agent/work", bundle=whole, force=False)
    assert landed == head == world.remote_head("agent/work")


def test_a_non_fast_forward_is_refused_unless_forced(world: World) -> None:
    first = world.commit("a.txt", "a\n")
    world.host().receive_bundle(
        REPO, branch="agent/work", bundle=world.bundle("refs/heads/agent/work"), force=False
    )
    git(world.work, "reset", "--quiet", "--hard", "HEAD~1")
    other = world.commit("b.txt", "b\n")  # diverged from what the remote has
    whole = world.bundle("refs/heads/agent/work")
    with pytest.raises(GitHostError, match="non-fast-forward") as diverged:
        world.host().receive_bundle(REPO, branch="agent/work", bundle=whole, force=False)
    assert diverged.value.status == 409
    assert world.remote_head("agent/work") == first
    # a thin bundle cannot show it either way: the caller is told to send the whole branch
    git(world.work, "fetch", "--quiet", "origin")
    thin = world.bundle("refs/heads/agent/work", "--not", "refs/remotes/origin/main")
    with pytest.raises(GitHostError) as unknown:
        world.host().receive_bundle(REPO, branch="agent/work", bundle=thin, force=False)
    assert unknown.value.status == 412
    forced = world.host().receive_bundle(REPO, branch="agent/work", bundle=whole, force=True)
    assert forced == other == world.remote_head("agent/work")


def test_a_fast_forward_of_an_existing_branch_lands(world: World) -> None:
    world.commit("a.txt", "a\n")
    world.host().receive_bundle(
        REPO, branch="agent/work", bundle=world.bundle("refs/heads/agent/work"), force=False
    )
    git(world.work, "fetch", "--quiet", "origin")
    head = world.commit("b.txt", "b\n")
    thin = world.bundle("refs/heads/agent/work", "--not", "--remotes=origin")
    landed = world.host().receive_bundle(REPO, branch="agent/work", bundle=thin, force=False)
    assert landed == head == world.remote_head("agent/work")


def test_a_bundle_naming_another_ref_is_refused(world: World) -> None:
    world.commit("a.txt", "a\n")
    git(world.work, "branch", "other")
    for refs in (("refs/heads/other",), ("refs/heads/agent/work", "refs/heads/other")):
        data = world.bundle(*refs)
        with pytest.raises(GitHostError, match="may update only refs/heads/agent/work") as named:
            world.host().receive_bundle(REPO, branch="agent/work", bundle=data, force=False)
        assert named.value.status == 403
    with pytest.raises(GitHostError, match="Invalid branch name") as invalid:
        world.host().receive_bundle(REPO, branch="bad..name", bundle=b"", force=False)
    assert invalid.value.status == 400
    assert world.remote_head("agent/work") is None
    assert world.remote_head("other") is None


def test_a_bundle_that_does_not_verify_is_refused(world: World) -> None:
    world.commit("a.txt", "a\n" * 200)
    whole = bytearray(world.bundle("refs/heads/agent/work"))
    corrupt = bytes(whole[:-30]) + bytes(30)  # the pack's end (and checksum) overwritten
    truncated = bytes(whole[: len(whole) // 2])
    for data in (corrupt, truncated, b"not a bundle at all", b"# v2 git bundle\n"):
        with pytest.raises(GitHostError, match="does not verify") as broken:
            world.host().receive_bundle(REPO, branch="agent/work", bundle=data, force=False)
        assert broken.value.status == 400
    assert world.remote_head("agent/work") is None


def test_an_oversize_bundle_is_refused(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    world.commit("a.txt", "a\n")
    data = world.bundle("refs/heads/agent/work")
    monkeypatch.setattr(github_module, "MAX_PUSH_BUNDLE_BYTES", len(data) - 1)
    with pytest.raises(GitHostError, match="exceeds") as big:
        world.host().receive_bundle(REPO, branch="agent/work", bundle=data, force=False)
    assert big.value.status == 413
    assert world.server.seen == []  # refused before any request


def test_a_wrong_token_is_refused_and_never_shown(world: World) -> None:
    world.commit("a.txt", "a\n")
    data = world.bundle("refs/heads/agent/work")
    wrong = "ghs_wrong_token_123"
    with pytest.raises(GitHostError) as rejected:
        world.host(wrong).receive_bundle(REPO, branch="agent/work", bundle=data, force=False)
    assert rejected.value.status == 401
    assert "rejected the credentials" in rejected.value.message
    assert wrong not in str(rejected.value)
    with pytest.raises(GitHostError) as clone_rejected:
        world.host(wrong).clone(REPO, branch=None, is_new_branch=False)
    assert clone_rejected.value.status == 401
    assert wrong not in str(clone_rejected.value)
    # the 401 was retried once with a fresh token, then given up
    assert [authorized for _, _, authorized in world.server.seen] == [False] * 4


def test_a_private_repository_is_cloned_into_a_bundle(world: World) -> None:
    feature = world.commit("feature.txt", "feature\n")
    world.host().receive_bundle(
        REPO, branch="agent/work", bundle=world.bundle("refs/heads/agent/work"), force=False
    )
    main = world.remote_head("main")
    host = world.host()
    existing = host.clone(REPO, branch="agent/work", is_new_branch=False)
    assert existing is not None
    assert (existing.branch, existing.head, existing.default_branch, existing.upstream) == (
        "agent/work", feature, "main", "origin/agent/work"
    )  # fmt: skip
    assert heads_of(existing.bundle, world.tmp) == {
        "refs/heads/agent/work": feature,
        "refs/remotes/origin/agent/work": feature,
        "refs/remotes/origin/main": main,
    }
    new = host.clone(REPO, branch="agent/new", is_new_branch=True)
    assert new is not None
    assert (new.branch, new.head, new.upstream) == ("agent/new", main, None)
    assert heads_of(new.bundle, world.tmp) == {
        "refs/heads/agent/new": main,
        "refs/remotes/origin/main": main,
    }
    default = host.clone(REPO, branch=None, is_new_branch=False)
    assert default is not None
    assert (default.branch, default.head, default.upstream) == ("main", main, "origin/main")


def test_a_clone_refuses_what_a_clone_would(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    host = world.host()
    with pytest.raises(GitHostError, match="already exists") as exists:
        host.clone(REPO, branch="main", is_new_branch=True)
    assert exists.value.status == 409
    with pytest.raises(GitHostError, match="not found") as missing:
        host.clone(REPO, branch="no-such-branch", is_new_branch=False)
    assert missing.value.status == 422
    with pytest.raises(GitHostError, match="not found") as unknown:
        host.clone(Repo(owner="acme", name="nothing"), branch=None, is_new_branch=False)
    assert unknown.value.status == 404
    small = GitHubHost(StaticToken(lambda: TOKEN), git_url=world.server.url, clone_max_bytes=64)
    with pytest.raises(GitHostError, match="larger than the clone limit of 64") as big:
        small.clone(REPO, branch=None, is_new_branch=False)
    assert big.value.status == 413
    assert list(world.tmp.glob("openagents-clone-*")) == []
    for error in (exists, missing, unknown, big):
        assert TOKEN not in str(error.value)


def heads_of(bundle: bytes, tmp: Path) -> dict[str, str]:
    """The bundle's refs as git reads them; git verifies it (whole: no prerequisites)."""
    path = tmp / "check.bundle"
    path.write_bytes(bundle)
    git(tmp, "init", "--quiet", "--bare", str(tmp / "verify.git"))
    git(tmp / "verify.git", "bundle", "verify", "--quiet", str(path))
    listed = git(tmp, "bundle", "list-heads", str(path))
    return {ref: sha for sha, ref in (line.split() for line in listed.splitlines())}


class Redirecting(BaseHTTPRequestHandler):
    """A git URL that redirects elsewhere (where the token must not follow) or, on another
    path, answers something that is no smart HTTP git server."""

    seen: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        self.seen.append(self.path)
        if self.path.startswith("/acme/"):
            self.send_response(302)
            self.send_header("Location", "http://127.0.0.1:9/steal/info/refs")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = b"<html>hello</html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


def test_a_redirect_is_not_followed_and_a_non_git_server_is_refused(world: World) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Redirecting)
    Redirecting.seen = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        world.commit("a.txt", "a\n")
        data = world.bundle("refs/heads/agent/work")
        host = GitHubHost(StaticToken(lambda: TOKEN), git_url=url)
        with pytest.raises(GitHostError, match="redirected") as redirected:
            host.receive_bundle(REPO, branch="agent/work", bundle=data, force=False)
        assert redirected.value.status == 302
        other = GitHubHost(StaticToken(lambda: TOKEN), git_url=f"{url}/web")
        with pytest.raises(GitHostError, match="not a smart HTTP git server") as html:
            other.clone(REPO, branch=None, is_new_branch=False)
        assert html.value.status == 502
        assert Redirecting.seen == [
            "/acme/widget.git/info/refs?service=git-receive-pack",
            "/web/acme/widget.git/info/refs?service=git-upload-pack",
        ]
    finally:
        server.shutdown()
        server.server_close()
