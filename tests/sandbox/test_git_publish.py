"""sandboxd's git publishing endpoints, the real daemon through SandboxClient: commit, upstream
(what the control plane's push records), remote, the branch bundle a push hands over, the
archive bundle saved in one sandbox and restored in another, and a clone's bundle (what the
control plane fetched for a private repository) restored as a clone would leave it. The sandbox
itself never pushes: it holds no credential."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from openagents.sandbox.client import SandboxClient, SandboxRequestError
from openagents.sandbox.git_answers import GitPlace, GitRemote
from openagents.sandbox.port import SandboxError

from tests.sandbox.conftest import (
    Origin,
    RunningSandbox,
    StartSandbox,
    git,
    prepare,
    raw_call,
    tree_digest,
)

TOKEN = "ghs_publish_token_5550001111"


def expect_error(status: int, code: str) -> pytest.RaisesExc[SandboxRequestError]:
    return pytest.raises(SandboxRequestError, match=f"status code {status} {code}")


def bundle_heads(data: bytes, tmp_path: Path) -> list[str]:
    """The refs a bundle carries, as git lists them (and git accepts the bundle)."""
    path = tmp_path / "check.bundle"
    path.write_bytes(data)
    listed = subprocess.run(
        ["git", "bundle", "list-heads", str(path)], capture_output=True, text=True, check=True
    )
    return sorted(line.split()[1] for line in listed.stdout.splitlines())


# ---------------------------------------------------------------------------- commit


def test_commit_takes_every_change_with_the_identity(client: SandboxClient, origin: Origin) -> None:
    prepare(client, origin, "agent/commit", new=True)
    client.write_file("new.txt", "new\n")
    client.write_file("README.md", "# Changed\n")
    done = client.git_commit("chore: update 2 files", "Ada Agent", "ada@example.com")
    assert done.branch == "agent/commit"
    assert done.head == client.git_branch().head != origin.main_head
    shown = client.exec("git log -1 --format='%an <%ae>|%s'; git status --porcelain").stdout
    assert shown == "Ada Agent <ada@example.com>|chore: update 2 files\n"
    with pytest.raises(SandboxRequestError, match="nothing to commit") as nothing:
        client.git_commit("chore: again", "Ada Agent", "ada@example.com")
    assert (nothing.value.status, nothing.value.code) == (422, "git_failed")


def test_commit_refuses_bad_requests(sandbox: RunningSandbox, client: SandboxClient) -> None:
    with expect_error(409, "not_a_repository"):
        client.git_commit("x", "A", "a@example.com")
    headers = {"Authorization": f"Bearer {sandbox.token}"}
    for body, field in (
        (b'{"gitName": "A", "gitEmail": "a@example.com"}', "message"),
        (b'{"message": "x", "gitName": "A\\nB", "gitEmail": "a@example.com"}', "gitName"),
        (b'{"message": "x", "gitName": "A"}', "gitEmail"),
    ):
        status, answer = raw_call(
            sandbox.endpoint, "POST", "/git/commit", headers=headers, data=body
        )
        assert (status, answer["code"]) == (400, "bad_request")
        assert field in answer["error"]


# ---------------------------------------------------------------------------- upstream


def test_upstream_records_what_a_push_would(client: SandboxClient, origin: Origin) -> None:
    prepare(client, origin, "agent/bundled", new=True)
    client.write_file("work.txt", "work\n")
    head = client.git_commit("chore: update work.txt", "A", "a@example.com").head
    assert head is not None
    assert client.git_remote().upstream is None
    assert client.git_status().ahead == 1  # against origin's default branch
    client.git_upstream("agent/bundled", head)
    assert client.git_remote().upstream == "origin/agent/bundled"
    assert client.git_status().ahead == 0
    with expect_error(400, "bad_request"):
        client.git_upstream("agent/bundled", "HEAD")
    with expect_error(400, "invalid_branch"):
        client.git_upstream("-x", head)


# ---------------------------------------------------------------------------- bundle


def test_a_branch_bundle_is_thin_when_it_can_be(
    client: SandboxClient, origin: Origin, tmp_path: Path
) -> None:
    prepare(client, origin, "agent/thin", new=True)
    # nothing new against origin: no thin bundle can be made, so the whole branch comes
    whole = client.git_bundle(branch="agent/thin", thin=True, max_bytes=1 << 20)
    assert bundle_heads(whole, tmp_path) == ["refs/heads/agent/thin"]
    client.write_file("thin.txt", "thin\n")
    client.git_commit("chore: update thin.txt", "A", "a@example.com")
    thin = client.git_bundle(branch="agent/thin", thin=True, max_bytes=1 << 20)
    full = client.git_bundle(branch="agent/thin", max_bytes=1 << 20)
    assert len(thin) < len(full)
    assert b"\n-" in thin.split(b"\n\n", 1)[0]  # a prerequisite line: only what origin lacks
    with pytest.raises(SandboxError, match="exceeds 100 bytes"):
        client.git_bundle(branch="agent/thin", max_bytes=100)


def test_bundle_refuses_bad_requests(client: SandboxClient, origin: Origin) -> None:
    with expect_error(409, "not_a_repository"):
        client.git_bundle(max_bytes=1 << 20)
    with expect_error(409, "not_a_repository"):
        client.git_archive()
    prepare(client, origin, "feature")
    with expect_error(422, "branch_not_found"):
        client.git_bundle(branch="no-such-branch", max_bytes=1 << 20)
    with expect_error(400, "invalid_branch"):
        client.git_bundle(branch="bad..name", max_bytes=1 << 20)


def make_work(client: SandboxClient) -> None:
    """Committed, staged, unstaged and untracked changes, and an ignored file."""
    client.write_file("committed.txt", "committed\n")
    client.git_commit("chore: update committed.txt", "A", "a@example.com")
    client.write_file(".gitignore", "*.log\n")
    client.write_file("staged.txt", "staged\n")
    client.exec("git add staged.txt .gitignore")
    client.write_file("README.md", "# Unstaged\n")
    client.write_file("untracked.txt", "untracked\n")
    client.write_file("ignored.log", "ignored\n")


def files_of(workspace: Path) -> dict[str, str]:
    digest = tree_digest(workspace)
    return {k: v for k, v in digest.items() if k != ".git" and not k.startswith(".git/")}


def test_archive_bundle_restores_the_work_in_another_sandbox(
    start_sandbox: StartSandbox, origin: Origin, tmp_path: Path
) -> None:
    first = start_sandbox("first")
    prepare(first.client, origin, "feature")
    make_work(first.client)
    status = first.client.git_status()
    place = first.client.git_archive()
    remote = first.client.git_remote()
    assert first.client.git_status() == status  # HEAD, branch and index untouched
    data = first.client.git_bundle(max_bytes=16 << 20)
    assert "refs/openagents/archive/worktree" in bundle_heads(data, tmp_path)
    second = start_sandbox("second")
    restored = second.client.git_bundle_restore(
        data, place=place, remote=remote, clone_url=origin.url,
        git_name="Ada Agent", git_email="ada@example.com",
    )  # fmt: skip
    assert restored == place == GitPlace(branch="feature", head=first.client.git_branch().head)
    assert second.client.git_status() == status
    assert second.client.git_remote() == remote
    expected = files_of(first.workspace)
    assert expected.pop("ignored.log")  # ignored: not in the bundle
    assert files_of(second.workspace) == expected
    refs = second.client.exec("git for-each-ref --format='%(refname)' refs/openagents")
    assert refs.stdout == ""  # the archive refs did their work and are gone
    assert list(second.tmpdir.iterdir()) == []


def test_a_clone_bundle_restores_as_a_clone(
    sandbox: RunningSandbox, client: SandboxClient, origin: Origin, tmp_path: Path
) -> None:
    # what the control plane makes of a fetch: origin's refs and the branch to check out
    path = tmp_path / "clone.bundle"
    git("bundle", "create", "-q", str(path), "main", "feature", cwd=origin.bare)
    git("init", "-q", "--bare", str(tmp_path / "renamed.git"), cwd=tmp_path)
    renamed = tmp_path / "renamed.git"
    git("fetch", "-q", str(path), "+refs/heads/main:refs/remotes/origin/main",
        "+refs/heads/feature:refs/remotes/origin/feature",
        "+refs/heads/feature:refs/heads/feature", cwd=renamed)  # fmt: skip
    bundle = tmp_path / "final.bundle"
    git("bundle", "create", "-q", str(bundle), "--all", cwd=renamed)
    restored = client.git_bundle_restore(
        bundle.read_bytes(),
        place=GitPlace(branch="feature", head=origin.feature_head),
        remote=GitRemote(
            default_branch="main", origin_head="refs/remotes/origin/main", upstream="origin/feature"
        ),
        clone_url="https://github.com/acme/widget",
        git_name="Ada Agent",
        git_email="ada@example.com",
    )
    assert restored == GitPlace(branch="feature", head=origin.feature_head)
    assert client.git_remote() == GitRemote(
        default_branch="main", origin_head="refs/remotes/origin/main", upstream="origin/feature"
    )
    status = client.git_status()
    assert (status.has_uncommitted_changes, status.ahead) == (False, 0)
    assert (sandbox.workspace / "feature.txt").read_text() == "feature work\n"
    origin_url = client.exec("git remote get-url origin").stdout
    assert origin_url == "https://github.com/acme/widget\n"  # no credentials in it
    assert client.exec("git config user.email").stdout == "ada@example.com\n"


def test_bundle_restore_refuses_and_leaves_an_empty_workspace(
    start_sandbox: StartSandbox, origin: Origin
) -> None:
    first = start_sandbox("source")
    prepare(first.client, origin, "feature")
    place, remote = first.client.git_archive(), first.client.git_remote()
    data = first.client.git_bundle(max_bytes=16 << 20)
    second = start_sandbox("target")

    def restore(name: str) -> GitPlace:
        return second.client.git_bundle_restore(
            data, place=place, remote=remote, clone_url=origin.url,
            git_name=name, git_email="a@example.com",
        )  # fmt: skip

    with expect_error(400, "bad_request"):
        restore("A\nB")
    headers = {"Authorization": f"Bearer {second.token}"}
    status, answer = raw_call(
        second.endpoint, "POST", "/git/bundle/restore?gitName=A&gitEmail=a@b.c",
        headers=headers, data=data,
    )  # fmt: skip
    assert (status, answer["code"]) == (400, "missing_checksum")
    headers["X-Expected-Sha256"] = "0" * 64
    status, answer = raw_call(
        second.endpoint, "POST", "/git/bundle/restore?gitName=A&gitEmail=a@b.c",
        headers=headers, data=data,
    )  # fmt: skip
    assert (status, answer["code"]) == (422, "checksum_mismatch")
    assert list(second.workspace.iterdir()) == []
    assert list(second.tmpdir.iterdir()) == []
    second.client.write_file("stray.txt", "x")
    with expect_error(409, "workspace_not_empty"):
        restore("A")
