"""``POST /workspace/prepare``: clone (or initialise) the repository, check the branch out and
set the git identity. The clone is anonymous: a private repository comes from the control plane
as a bundle (``POST /git/bundle/restore``), never with a token."""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import ApiError, JsonObject, bad_request
from .fields import optional_bool, optional_str, required_str, single_line
from .git import GIT_NETWORK_TIMEOUT_SECONDS, Git, exclude_volume_leftovers, validate_branch_name
from .log import log

if TYPE_CHECKING:
    from .app import App
    from .request import Request


@dataclass(frozen=True)
class PrepareSpec:
    clone_url: str
    branch: str | None
    is_new_branch: bool
    git_name: str
    git_email: str


def prepare_workspace(app: App, request: Request) -> JsonObject:
    spec = parse_prepare(request.json())
    with app.exclusive("prepare the workspace"):
        git = Git(app.workspace)
        if spec.branch is not None:
            validate_branch_name(git, spec.branch)
        if not spec.clone_url:  # no repository: a new one, so the work is bundled and diffed
            branch = ensure_init(git, spec)
            default_branch = None
        else:
            ensure_clone(git, spec)
            default_ref = git.default_remote_ref()
            default_branch = (
                default_ref.removeprefix("refs/remotes/origin/") if default_ref else None
            )
            branch = checkout(git, spec, default_ref)
        git.output("config", "user.name", spec.git_name)
        git.output("config", "user.email", spec.git_email)
        head = git.head()
    log("info", "workspace.prepared", cloneUrl=git.redact(spec.clone_url), branch=branch, head=head)
    return {"branch": branch, "head": head, "defaultBranch": default_branch}


def parse_prepare(body: JsonObject) -> PrepareSpec:
    """``cloneUrl`` empty (or absent): initialise a repository in the empty workspace."""
    clone_url = single_line(optional_str(body, "cloneUrl") or "", "cloneUrl")
    if clone_url.startswith("-"):
        raise bad_request("cloneUrl must not start with '-'")
    spec = PrepareSpec(
        clone_url=clone_url,
        branch=optional_str(body, "branch") or None,
        is_new_branch=optional_bool(body, "isNewBranch", False),
        git_name=single_line(required_str(body, "gitName"), "gitName"),
        git_email=single_line(required_str(body, "gitEmail"), "gitEmail"),
    )
    if spec.is_new_branch and spec.branch is None:
        raise bad_request("isNewBranch needs a branch")
    return spec


def ensure_clone(git: Git, spec: PrepareSpec) -> None:
    """Clone into the empty workspace, or accept a clone of the same URL that is already there."""
    workspace = git.workspace
    if (workspace.root / ".git").exists():
        origin = git.maybe("config", "--get", "remote.origin.url")
        if origin != spec.clone_url:
            raise ApiError(409, "workspace_not_empty", "the workspace holds another repository")
        return
    if not workspace.is_empty():
        raise ApiError(409, "workspace_not_empty", "the workspace is not empty")
    # Clone beside the final place (same file system), then move in: this works even when the
    # workspace is a volume root that must keep its lost+found.
    staging = Path(tempfile.mkdtemp(prefix=".sandboxd-clone-", dir=workspace.root))
    try:
        git.output(
            "clone",
            "--quiet",
            "--",
            spec.clone_url,
            str(staging),
            timeout=GIT_NETWORK_TIMEOUT_SECONDS,
        )
        for child in staging.iterdir():
            child.rename(workspace.root / child.name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    exclude_volume_leftovers(workspace)


def ensure_init(git: Git, spec: PrepareSpec) -> str | None:
    """A new repository with one empty commit (so HEAD, diffs and bundles exist), or the one
    an earlier prepare made; ``branch`` names its branch (default ``main``)."""
    workspace = git.workspace
    if not (workspace.root / ".git").exists():
        git.output("init", "--quiet", "--initial-branch", spec.branch or "main")
        exclude_volume_leftovers(workspace)
    if git.head() is None:
        identity = ("-c", f"user.name={spec.git_name}", "-c", f"user.email={spec.git_email}")
        git.output(*identity, "commit", "--quiet", "--allow-empty", "-m", "Initial commit")
    return git.current_branch()


def checkout(git: Git, spec: PrepareSpec, default_ref: str | None) -> str | None:
    branch = spec.branch
    if branch is None:
        return git.current_branch()
    if git.has_ref(f"refs/heads/{branch}"):
        git.output("switch", "--quiet", branch)
    elif spec.is_new_branch:
        if git.has_ref(f"refs/remotes/origin/{branch}"):
            raise ApiError(409, "branch_exists", f"branch {branch!r} already exists on the remote")
        git.output("switch", "--quiet", "--no-track", "-c", branch, default_ref or "HEAD")
    else:
        fetch_branch(git, branch)
        git.output("switch", "--quiet", "--track", "-c", branch, f"origin/{branch}")
    return branch


def fetch_branch(git: Git, branch: str) -> None:
    refspec = f"+refs/heads/{branch}:refs/remotes/origin/{branch}"
    completed = git.run("fetch", "--quiet", "origin", refspec, timeout=GIT_NETWORK_TIMEOUT_SECONDS)
    if completed.returncode != 0:
        detail = git.failure(("fetch",), completed)
        raise ApiError(422, "branch_not_found", f"cannot fetch branch {branch!r}: {detail}")
