"""Publishing the work: ``POST /git/commit`` (every change, one commit), ``POST /git/upstream``
(what a push records, after the control plane pushed the branch's bundle: the sandbox never
pushes, it holds no credential) and ``GET /git/remote`` (origin's default branch and the
branch's upstream)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .errors import ApiError, JsonObject, bad_request
from .fields import required_str, single_line
from .git import SHA_HEX, Git, validate_branch_name

if TYPE_CHECKING:
    from .app import App
    from .request import Request

MAX_MESSAGE_CHARS = 64 << 10


def git_commit(app: App, request: Request) -> JsonObject:
    """``git add --all`` and one commit with ``message`` by ``gitName`` <``gitEmail``>."""
    body = request.json()
    message = required_str(body, "message")
    if len(message) > MAX_MESSAGE_CHARS or "\x00" in message:
        raise bad_request(f"message must be at most {MAX_MESSAGE_CHARS} characters, no NUL")
    identity = (
        "-c", f"user.name={single_line(required_str(body, 'gitName'), 'gitName')}",
        "-c", f"user.email={single_line(required_str(body, 'gitEmail'), 'gitEmail')}",
    )  # fmt: skip
    git = Git(app.workspace)
    git.require_repository()
    with app.exclusive("commit"):
        git.output("add", "--all")
        done = git.run(*identity, "commit", "--quiet", "-m", message)
        if done.returncode != 0:  # "nothing to commit" goes to stdout
            said = (done.stderr or done.stdout).decode("utf-8", "replace").strip()[-2000:]
            raise ApiError(422, "git_failed", git.redact(f"git commit failed: {said}"))
        return {"branch": git.current_branch(), "head": git.head()}


def git_upstream(app: App, request: Request) -> JsonObject:
    """Record ``commit`` as origin's ``branch`` and make it the branch's upstream."""
    body = request.json()
    branch = required_str(body, "branch")
    commit = required_str(body, "commit")
    if not SHA_HEX.match(commit):
        raise bad_request("commit must be a commit id")
    git = Git(app.workspace)
    git.require_repository()
    validate_branch_name(git, branch)
    git.output("update-ref", f"refs/remotes/origin/{branch}", commit)
    git.output("config", f"branch.{branch}.remote", "origin")
    git.output("config", f"branch.{branch}.merge", f"refs/heads/{branch}")
    return {"branch": branch, "upstream": f"origin/{branch}"}


def git_remote(app: App, request: Request) -> JsonObject:
    git = Git(app.workspace)
    git.require_repository()
    origin_head = git.default_remote_ref()
    upstream = git.maybe("rev-parse", "-q", "--abbrev-ref", "--symbolic-full-name", "@{upstream}")
    return {
        "defaultBranch": origin_head.removeprefix("refs/remotes/origin/") if origin_head else None,
        "originHead": origin_head,
        "upstream": upstream,
    }
