"""``POST /git/checkpoint`` and ``POST /git/revert``: the whole workspace saved as one commit on a
hidden ref, and put back exactly as it was."""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import ApiError, JsonObject, bad_request
from .fields import optional_bool, required_str
from .git import Git
from .log import log

if TYPE_CHECKING:
    from .app import App
    from .request import Request


CHECKPOINT_REF = re.compile(r"^refs/openagents/checkpoints/[A-Za-z0-9_-]{1,80}$")
CHECKPOINT_TITLE = "OpenAgents checkpoint"
CHECKPOINT_INDEX = "openagents/checkpoint.index"  # in the git dir: the checkpoints' own index
# commit-tree needs an identity; a checkpoint's is fixed (the user's config is not needed).
CHECKPOINT_IDENTITY = {
    "GIT_AUTHOR_NAME": "OpenAgents",
    "GIT_AUTHOR_EMAIL": "checkpoints@openagents.invalid",
    "GIT_COMMITTER_NAME": "OpenAgents",
    "GIT_COMMITTER_EMAIL": "checkpoints@openagents.invalid",
}


@dataclass(frozen=True)
class WorkspaceState:
    """What a checkpoint keeps: every file that is not ignored (tracked, staged, unstaged,
    untracked) as one tree, the staging area's tree, and where HEAD was."""

    worktree: str
    index: str | None  # None: the staging area had conflicts (it comes back as HEAD's tree)
    head: str | None  # None: no commit yet
    branch: str | None  # refs/heads/<name>; None: a detached HEAD
    files: int
    head_tree: str | None = None  # HEAD's tree (not recorded: a staging area equal to it is kept)

    def message(self) -> str:
        """The commit message: the facts a revert puts back, one ``Key: value`` line each."""
        return (
            f"{CHECKPOINT_TITLE}\n\n"
            f"Head: {self.head or 'none'}\n"
            f"Branch: {self.branch or 'detached'}\n"
            f"Index: {self.index or 'none'}\n"
        )


def checkpoint_ref(body: JsonObject, name: str) -> str:
    ref = required_str(body, name)
    if not CHECKPOINT_REF.match(ref):
        raise bad_request(f"{name} must be refs/openagents/checkpoints/<id>", "invalid_ref")
    return ref


@contextmanager
def checkpoint_indexes(git: Git) -> Iterator[tuple[Git, Git]]:
    """(staging, worktree): git on a private copy of the real index, outside the workspace (the
    staging area's tree; the real index is never written), and git on the checkpoints' own index
    in the git dir, kept from one checkpoint to the next (first seeded from the real one), so
    ``git add --all`` hashes only what changed since the last checkpoint, untracked files too."""
    git_dir = git.workspace.root / ".git"
    if not git_dir.is_dir():
        raise ApiError(409, "not_a_repository", "the workspace is not a git repository")
    real, kept = git_dir / "index", git_dir / CHECKPOINT_INDEX
    directory = Path(tempfile.mkdtemp(prefix="sandboxd-index-"))  # mode 0700
    try:
        if directory.resolve().is_relative_to(git.workspace.root):
            raise ApiError(500, "internal", "the temporary directory is inside the workspace")
        copy = directory / "index"
        if real.is_file():
            shutil.copyfile(real, copy)
            if not kept.is_file():
                kept.parent.mkdir(exist_ok=True)
                shutil.copyfile(real, kept)
        yield (
            Git(git.workspace, {**CHECKPOINT_IDENTITY, "GIT_INDEX_FILE": str(copy)}),
            Git(git.workspace, {**CHECKPOINT_IDENTITY, "GIT_INDEX_FILE": str(kept)}),
        )
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def capture(git: Git, staging: Git, worktree: Git) -> WorkspaceState:
    """The workspace as it is now; ``worktree``'s index then matches the files."""
    index = staging.maybe("write-tree")  # None: the staging area has conflicts
    worktree.output("-c", "core.untrackedCache=true", "add", "--all", "--", ".")
    head = git.maybe("rev-parse", "HEAD^{commit}", "HEAD^{tree}")  # None: no commit yet
    commit, tree = head.split() if head else (None, None)
    symbolic = (git.workspace.root / ".git" / "HEAD").read_text().strip()
    return WorkspaceState(
        worktree=worktree.output("write-tree").decode().strip(),
        index=index,
        head=commit,
        branch=symbolic.removeprefix("ref: ") if symbolic.startswith("ref: ") else None,
        files=index_entries(Path(worktree.env["GIT_INDEX_FILE"])),
        head_tree=tree,
    )


def index_entries(index: Path) -> int:
    """The entry count in an index file's header (``DIRC``, version, count)."""
    with open(index, "rb") as handle:
        header = handle.read(12)
    return int.from_bytes(header[8:12], "big") if header[:4] == b"DIRC" else 0


def save_checkpoint(git: Git, committer: Git, state: WorkspaceState, ref: str) -> JsonObject:
    """One commit of ``state`` on ``ref``: its first parent is HEAD (when there is one), its
    second (when something is staged) a commit of the staging area's tree, so that tree is
    reachable too (bundles, gc)."""
    head = ("-p", state.head) if state.head else ()
    parents = [*head]
    if state.index is not None and state.index != state.head_tree:  # else HEAD keeps the tree
        staged = committer.output("commit-tree", state.index, *head, "-m", "OpenAgents index")
        parents += ["-p", staged.decode().strip()]
    commit = committer.output("commit-tree", state.worktree, *parents, "-m", state.message())
    sha = commit.decode().strip()
    git.output("update-ref", "-m", CHECKPOINT_TITLE, ref, sha)
    return {"ref": ref, "commit": sha, "files": state.files}


def read_checkpoint(git: Git, ref: str) -> WorkspaceState:
    commit = git.maybe("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    if commit is None:
        raise ApiError(404, "checkpoint_not_found", f"no checkpoint {ref}")
    raw = git.output("cat-file", "commit", commit).decode("utf-8", "replace")
    headers, _, message = raw.partition("\n\n")
    tree = next(line.split()[1] for line in headers.splitlines() if line.startswith("tree "))
    facts = dict(
        line.split(": ", 1) for line in message.splitlines()[1:] if ": " in line
    )  # the lines after the title
    if not message.startswith(CHECKPOINT_TITLE) or "Head" not in facts:
        raise ApiError(422, "not_a_checkpoint", f"{ref} is not a checkpoint commit")
    return WorkspaceState(
        worktree=tree,
        index=None if facts.get("Index", "none") == "none" else facts["Index"],
        head=None if facts["Head"] == "none" else facts["Head"],
        branch=None if facts.get("Branch", "detached") == "detached" else facts["Branch"],
        files=0,
    )


def tree_changes(git: Git, current: str, target: str) -> tuple[list[str], list[str]]:
    """(paths the target tree writes back, paths it removes) going from ``current``."""
    raw = git.output("diff-tree", "-r", "-z", "--no-renames", "--name-status", current, target)
    fields = raw.decode("utf-8", "surrogateescape").split("\x00")
    restored: list[str] = []
    removed: list[str] = []
    for status, path in zip(fields[0::2], fields[1::2], strict=False):
        (removed if status == "D" else restored).append(path)
    return sorted(restored), sorted(removed)


def restore_head(git: Git, state: WorkspaceState) -> None:
    """HEAD, the branch and the staging area as the checkpoint recorded them."""
    if state.branch is None:
        if state.head is not None:
            git.output("update-ref", "--no-deref", "-m", "openagents revert", "HEAD", state.head)
    else:
        if state.head is not None:
            git.output("update-ref", "-m", "openagents revert", state.branch, state.head)
        else:
            git.run("update-ref", "-d", state.branch)
        git.output("symbolic-ref", "HEAD", state.branch)
    staged = state.index or state.head
    # --reset keeps the stat data of unchanged entries: the refresh rehashes only changed files
    git.output("read-tree", *(("--reset", staged) if staged else ("--empty",)))
    git.run("update-index", "-q", "--refresh")


def git_checkpoint(app: App, request: Request) -> JsonObject:
    ref = checkpoint_ref(request.json(), "ref")
    git = Git(app.workspace)
    git.require_repository()
    with app.exclusive("checkpoint"), checkpoint_indexes(git) as (staging, worktree):
        state = capture(git, staging, worktree)
        saved = save_checkpoint(git, worktree, state, ref)
    return {**saved, "head": state.head, "branch": state.branch}


def git_revert(app: App, request: Request) -> JsonObject:
    """Put the workspace back as checkpoint ``ref`` recorded it; a real revert first saves the
    current state on ``saveRef`` (so it can be undone). Ignored files are never touched."""
    body = request.json()
    ref = checkpoint_ref(body, "ref")
    dry_run = optional_bool(body, "dryRun", False)
    save_ref = None if dry_run else checkpoint_ref(body, "saveRef")
    git = Git(app.workspace)
    git.require_repository()
    with app.exclusive("revert"):
        target = read_checkpoint(git, ref)
        with checkpoint_indexes(git) as (staging, worktree):
            current = capture(git, staging, worktree)
            restored, removed = tree_changes(git, current.worktree, target.worktree)
            if save_ref is None:
                return {"dryRun": True, "restored": restored, "removed": removed, "saved": None}
            saved = save_checkpoint(git, worktree, current, save_ref)
            # that index matches the files: --reset -u rewrites exactly the difference
            worktree.output("read-tree", "--reset", "-u", target.worktree)
        restore_head(git, target)
    log("info", "workspace.reverted", ref=ref, restored=len(restored), removed=len(removed))
    return {"dryRun": False, "restored": restored, "removed": removed, "saved": saved}
