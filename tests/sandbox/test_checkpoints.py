"""Checkpoints in the real sandboxd: ``POST /git/checkpoint`` saves the workspace on a hidden ref
without touching the branch, the index or the stash; ``POST /git/revert`` puts it back exactly
(modes included, new files removed, ignored files left alone, HEAD and the branch restored)."""

from __future__ import annotations

import pytest
from openagents.sandbox.answers import Reverted
from openagents.sandbox.client import SandboxClient, SandboxRequestError

from tests.sandbox.conftest import Origin, RunningSandbox, prepare, tree_digest

REF = "refs/openagents/checkpoints/run-1"
SAVE = "refs/openagents/checkpoints/revert-1"


def expect_error(status: int, code: str) -> pytest.RaisesExc[SandboxRequestError]:
    return pytest.raises(SandboxRequestError, match=f"status code {status} {code}")


def files(sandbox: RunningSandbox) -> dict[str, str]:
    """The workspace byte for byte (type, content or link target, executable bit), .git aside."""
    return {
        path: kind
        for path, kind in tree_digest(sandbox.workspace).items()
        if path != ".git" and not path.startswith(".git/")
    }


def git(client: SandboxClient, command: str) -> str:
    result = client.exec(command)
    assert result.exit_code == 0, result.stderr
    return str(result.stdout)


def messy_workspace(client: SandboxClient, origin: Origin) -> None:
    """Staged, unstaged, untracked, ignored, an executable, a symlink and a stash."""
    prepare(client, origin, "agent/work", new=True)
    client.write_file(".gitignore", "*.log\nbuild/\n")
    client.write_file("build/out.txt", "ignored output\n")
    client.write_file("debug.log", "ignored log\n")
    client.write_file("stashed.txt", "stash me\n")
    git(client, "git add stashed.txt && git stash --quiet")
    client.write_file("src/app.py", "def main():\n    return 2\n")
    git(client, "git add src/app.py")  # staged
    client.write_file("README.md", "# Demo, edited\n")  # unstaged
    client.write_file("notes.txt", "untracked notes\n")
    client.write_file("run.sh", "#!/bin/sh\necho run\n")
    git(client, "chmod +x run.sh && ln -s notes.txt notes-link")


def agent_turn(client: SandboxClient) -> None:
    """What a turn does: edit, create, delete, change a mode, commit, touch ignored files."""
    client.write_file("src/app.py", "def main():\n    return 3\n")
    client.write_file("new/module.py", "VALUE = 1\n")
    git(client, "rm docs/old.txt notes.txt && chmod -x run.sh && chmod +x README.md")
    git(client, "rm notes-link && ln -s README.md notes-link")
    git(client, "git add -A && git commit --quiet -m 'agent work'")
    client.write_file("after.txt", "uncommitted after the commit\n")
    client.write_file("build/new.txt", "new ignored output\n")


def test_a_checkpoint_leaves_the_branch_index_and_stash_alone(
    sandbox: RunningSandbox, client: SandboxClient, origin: Origin
) -> None:
    messy_workspace(client, origin)
    before = (git(client, "git status --porcelain=v2 --branch"), git(client, "git stash list"))
    index = (sandbox.workspace / ".git" / "index").read_bytes()
    head = client.git_branch()
    saved = client.checkpoint(REF)
    assert saved.ref == REF
    assert saved.commit == git(client, f"git rev-parse {REF}").strip()
    message = git(client, f"git log -1 --format=%B {REF}")  # what a revert puts back
    assert f"Head: {head.head}" in message
    assert "Branch: refs/heads/agent/work" in message
    tree = git(client, f"git ls-tree -r --name-only {REF}").split()
    assert sorted(tree) == sorted(git(client, "git ls-files -co --exclude-standard").split())
    assert "debug.log" not in tree
    assert "build/out.txt" not in tree
    assert saved.files == len(tree)
    assert git(client, f"git rev-parse {REF}^") == git(client, "git rev-parse HEAD")
    assert (sandbox.workspace / ".git" / "index").read_bytes() == index
    after = (git(client, "git status --porcelain=v2 --branch"), git(client, "git stash list"))
    assert after == before
    assert client.git_branch() == head
    # the staging area is the second parent's tree (reachable: bundles and gc keep it)
    assert git(client, f"git rev-parse {REF}^2^{{tree}}") == git(client, "git write-tree")


def test_revert_restores_the_workspace_exactly_and_can_be_undone(
    sandbox: RunningSandbox, client: SandboxClient, origin: Origin
) -> None:
    messy_workspace(client, origin)
    client.checkpoint(REF)
    checkpointed = files(sandbox)
    status = git(client, "git status --porcelain=v2 --branch")
    head = client.git_branch()
    agent_turn(client)
    turned = files(sandbox)
    turned_head = client.git_branch()

    preview = client.revert(REF, save_ref=None, dry_run=True)
    assert preview == Reverted(
        dry_run=True,
        restored=("README.md", "docs/old.txt", "notes-link", "notes.txt", "run.sh", "src/app.py"),
        removed=("after.txt", "new/module.py"),
        saved=None,
    )
    assert files(sandbox) == turned  # a dry run changes nothing
    assert client.git_branch() == turned_head
    assert "revert-1" not in git(client, "git for-each-ref refs/openagents")

    reverted = client.revert(REF, save_ref=SAVE, dry_run=False)
    assert (reverted.restored, reverted.removed) == (preview.restored, preview.removed)
    assert reverted.saved is not None
    assert reverted.saved.ref == SAVE
    now = files(sandbox)
    assert now.pop("build/new.txt").startswith("file:")  # ignored files are never touched
    assert now == checkpointed
    assert client.git_branch() == head  # the branch is back where it was, HEAD on it
    assert git(client, "git status --porcelain=v2 --branch") == status  # staged stays staged
    assert git(client, "git stash list").strip() != ""
    assert git(client, f"git rev-parse {SAVE}^") == str(turned_head.head) + "\n"

    undone = client.revert(SAVE, save_ref="refs/openagents/checkpoints/revert-2", dry_run=False)
    assert undone.removed == ("docs/old.txt", "notes.txt")
    assert files(sandbox) == turned
    assert client.git_branch() == turned_head


def test_revert_to_a_detached_head(
    sandbox: RunningSandbox, client: SandboxClient, origin: Origin
) -> None:
    prepare(client, origin, "feature")
    git(client, "git switch --quiet --detach HEAD")
    client.checkpoint(REF)
    assert len(git(client, f"git rev-list --parents -n1 {REF}").split()) == 2  # nothing staged
    head = client.git_branch()
    git(client, "git switch --quiet -c elsewhere && git commit --quiet --allow-empty -m more")
    client.revert(REF, save_ref=SAVE, dry_run=False)
    assert client.git_branch() == head
    assert head.branch is None  # detached


def test_checkpoint_and_revert_refuse_bad_requests(client: SandboxClient, origin: Origin) -> None:
    with expect_error(409, "not_a_repository"):
        client.checkpoint(REF)
    prepare(client, origin, "feature")
    for ref in ("refs/heads/main", "refs/openagents/checkpoints/../x", ""):
        with expect_error(400, "invalid_ref" if ref else "bad_request"):
            client.checkpoint(ref)
    with expect_error(404, "checkpoint_not_found"):
        client.revert(REF, save_ref=SAVE, dry_run=False)
    client.checkpoint(REF)
    with expect_error(400, "bad_request"):  # a real revert saves the current state first
        client.revert(REF, save_ref=None, dry_run=False)
    git(client, "git update-ref refs/openagents/checkpoints/plain HEAD")
    with expect_error(422, "not_a_checkpoint"):
        client.revert("refs/openagents/checkpoints/plain", save_ref=SAVE, dry_run=False)
