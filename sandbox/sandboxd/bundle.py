"""Git bundles: ``POST /git/archive`` (the uncommitted work kept as two commits on hidden refs),
``POST /git/bundle`` (a bundle streamed as the answer, made by git as it goes) and
``POST /git/bundle/restore`` (a repository rebuilt from an uploaded bundle in the empty
workspace: an archive's, or a private repository the control plane cloned with its token, so
the token never enters the sandbox)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, cast

from .checkpoints import capture, checkpoint_indexes
from .errors import ApiError, JsonObject, bad_request
from .fields import optional_bool, optional_str, required_str, single_line
from .git import (
    GIT_NETWORK_TIMEOUT_SECONDS,
    SHA_HEX,
    Git,
    exclude_volume_leftovers,
    validate_branch_name,
)
from .log import log
from .process import CHUNK_BYTES
from .restore import SHA256_HEX, restore_failure

if TYPE_CHECKING:
    from .app import App
    from .request import Request, Stream

ARCHIVE_REFS = "refs/openagents/archive"  # /index: the staging area, /worktree: every file
BUNDLE_TYPE = "application/x-git-bundle"


# ---------------------------------------------------------------------------- archive


def git_archive(app: App, request: Request) -> JsonObject:
    """Keep the staging area and the working tree (tracked changes and untracked files,
    .gitignore respected) as two commits under ``refs/openagents/archive/`` without moving
    HEAD, the branch or the index; a bundle of every ref then carries the work."""
    request.json()  # no fields; a body that is not a JSON object is still refused
    git = Git(app.workspace)
    git.require_repository()
    with app.exclusive("archive"), checkpoint_indexes(git) as (staging, worktree):
        state = capture(git, staging, worktree)
        parent = ("-p", state.head) if state.head else ()
        # a staging area with conflicts is kept as HEAD's tree (as a checkpoint keeps it)
        index_tree = state.index or state.head_tree or state.worktree
        for name, tree, title in (
            ("index", index_tree, "staged"),
            ("worktree", state.worktree, "work"),
        ):
            made = worktree.output(
                "commit-tree", tree, *parent, "-m", f"openagents archive: {title}"
            )
            git.output("update-ref", f"{ARCHIVE_REFS}/{name}", made.decode().strip())
    branch = state.branch.removeprefix("refs/heads/") if state.branch else None
    return {"branch": branch, "head": state.head}


# ---------------------------------------------------------------------------- bundle


def git_bundle(app: App, request: Request) -> None:
    """Stream ``git bundle create -``: every ref (``branch: null``), or one branch; ``thin``:
    only the commits origin lacks, the whole branch when origin has them all (git makes no
    empty bundle). The last chunk goes out only when git succeeded, so a cut stream is never a
    whole bundle; a failure before any byte is a 422."""
    body = request.json()
    branch = optional_str(body, "branch") or None
    thin = optional_bool(body, "thin", False)
    git = Git(app.workspace)
    git.require_repository()
    refs = ["--all"]
    if branch is not None:
        validate_branch_name(git, branch)
        refs = [f"refs/heads/{branch}"]
        if not git.has_ref(refs[0]):
            raise ApiError(422, "branch_not_found", f"no branch {branch!r}")
        if thin and git.maybe("rev-list", "--count", *refs, "--not", "--remotes=origin") != "0":
            refs += ["--not", "--remotes=origin"]
    with tempfile.TemporaryFile() as errors:
        process = git.start("bundle", "create", "-q", "-", *refs, stderr=errors)
        source = cast(IO[bytes], process.stdout)
        first = os.read(source.fileno(), CHUNK_BYTES)
        if not first and process.wait() != 0:
            source.close()
            errors.seek(0)
            detail = errors.read().decode("utf-8", "replace").strip()[-2000:]
            raise ApiError(422, "git_failed", git.redact(f"git bundle failed: {detail}"))
        stream_bundle(request.stream, process, first)


def stream_bundle(stream: Stream, process: subprocess.Popen[bytes], first: bytes) -> None:
    source = cast(IO[bytes], process.stdout)
    stream.start(BUNDLE_TYPE, {})
    try:
        chunk = first
        while chunk:
            stream.write(chunk)
            chunk = os.read(source.fileno(), CHUNK_BYTES)
    except OSError:
        process.kill()
        process.wait()
        raise ApiError(500, "internal", "the client went away during the bundle") from None
    finally:
        source.close()
    if process.wait() != 0:
        log("error", "bundle.failed", exitCode=process.returncode)
        raise ApiError(422, "git_failed", "git bundle failed mid-stream")  # the stream is cut
    stream.end()


# ---------------------------------------------------------------------------- restore


def git_bundle_restore(app: App, request: Request) -> JsonObject:
    """Rebuild the repository from the uploaded bundle (the body; ``X-Expected-Sha256``) in the
    empty workspace: every ref, HEAD on the saved branch (or detached at the saved commit), the
    files and then the staging area from ``refs/openagents/archive/`` (none: HEAD's files), the
    identity, origin and its default branch, the branch's upstream. Anything fails: the
    workspace is emptied."""
    expected = (request.header("X-Expected-Sha256") or "").strip().lower()
    if not SHA256_HEX.match(expected):
        raise bad_request("X-Expected-Sha256 must be a sha256 hex digest", "missing_checksum")
    git = Git(app.workspace)
    spec = parse_restore(request.query, git)
    workspace = app.workspace
    with app.exclusive("restore the bundle"):
        if not workspace.is_empty():
            raise ApiError(409, "workspace_not_empty", "a bundle restores into an empty workspace")
        directory = Path(tempfile.mkdtemp(prefix="sandboxd-bundle-"))  # mode 0700
        try:
            if directory.resolve().is_relative_to(workspace.root):
                raise ApiError(500, "internal", "the temporary directory is inside the workspace")
            bundle = directory / "archive.bundle"
            digest = receive(request.body(), bundle)
            if digest != expected:
                raise restore_failure(digest, expected, None)
            rebuild(git, spec, bundle)
        except BaseException:
            workspace.empty()
            raise
        finally:
            shutil.rmtree(directory, ignore_errors=True)
        answer = {"branch": git.current_branch(), "head": git.head()}
    log("info", "bundle.restored", branch=answer["branch"], head=answer["head"])
    return answer


@dataclass(frozen=True)
class RestoreSpec:
    """The facts a bundle restore puts back (from the query: the body is the bundle)."""

    branch: str | None
    head: str | None
    upstream: str | None
    origin_head: str | None
    clone_url: str | None
    git_name: str
    git_email: str


def parse_restore(query: dict[str, str], git: Git) -> RestoreSpec:
    def line(name: str) -> str | None:
        value = single_line(optional_str(query, name) or "", name)
        if value.startswith("-"):
            raise bad_request(f"{name} must not start with '-'")
        return value or None

    spec = RestoreSpec(
        branch=line("branch"),
        head=line("head"),
        upstream=line("upstream"),
        origin_head=line("originHead"),
        clone_url=line("cloneUrl"),
        git_name=single_line(required_str(query, "gitName"), "gitName"),
        git_email=single_line(required_str(query, "gitEmail"), "gitEmail"),
    )
    if spec.branch is not None:
        validate_branch_name(git, spec.branch)
    if spec.head is not None and not SHA_HEX.match(spec.head):
        raise bad_request("head must be a commit id")
    if spec.origin_head is not None and not spec.origin_head.startswith("refs/remotes/origin/"):
        raise bad_request("originHead must be refs/remotes/origin/<branch>")
    return spec


def receive(chunks: Iterator[bytes], path: Path) -> str:
    """Write the body to ``path`` (created 0600), hashing it: its sha256."""
    hasher = hashlib.sha256()
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "wb") as out:
        for chunk in chunks:
            hasher.update(chunk)
            out.write(chunk)
    return hasher.hexdigest()


def rebuild(git: Git, spec: RestoreSpec, bundle: Path) -> None:
    git.output("init", "--quiet")
    exclude_volume_leftovers(git.workspace)
    fetch = ("fetch", "--quiet", "--update-head-ok", str(bundle), "+refs/*:refs/*")
    git.output(*fetch, timeout=GIT_NETWORK_TIMEOUT_SECONDS)
    if spec.branch is not None:
        git.output("symbolic-ref", "HEAD", f"refs/heads/{spec.branch}")
    elif spec.head is not None:
        git.output("update-ref", "--no-deref", "HEAD", spec.head)
    if git.has_ref(f"{ARCHIVE_REFS}/worktree") and git.has_ref(f"{ARCHIVE_REFS}/index"):
        git.output("read-tree", "-u", "--reset", f"{ARCHIVE_REFS}/worktree")
        git.output("read-tree", f"{ARCHIVE_REFS}/index")
        git.output("update-ref", "-d", f"{ARCHIVE_REFS}/worktree")
        git.output("update-ref", "-d", f"{ARCHIVE_REFS}/index")
    else:  # a clone the control plane fetched: HEAD's files, nothing staged
        git.output("read-tree", "-u", "--reset", "HEAD")
    git.output("config", "user.name", spec.git_name)
    git.output("config", "user.email", spec.git_email)
    added = spec.clone_url and git.run("remote", "add", "origin", spec.clone_url).returncode == 0
    if spec.clone_url is not None and not added:
        git.output("remote", "set-url", "origin", spec.clone_url)
    if spec.origin_head is not None and git.has_ref(spec.origin_head):
        git.output("symbolic-ref", "refs/remotes/origin/HEAD", spec.origin_head)
    if spec.branch is not None and spec.upstream is not None:
        git.run("branch", "--quiet", f"--set-upstream-to={spec.upstream}", spec.branch)
