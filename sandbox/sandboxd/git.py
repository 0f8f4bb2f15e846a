"""git in the workspace (a fixed environment, URL credentials redacted from its errors), and
``GET /git/branch`` and ``GET /git/status``."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING

from .errors import ApiError, JsonObject, bad_request
from .process import run_tool, spawn, tool_env
from .workspace import IGNORED_TOP_LEVEL, Workspace

if TYPE_CHECKING:
    from .app import App
    from .request import Request


GIT_LOCAL_TIMEOUT_SECONDS = 60.0
GIT_NETWORK_TIMEOUT_SECONDS = 600.0
GIT_PROTOCOLS = "file:https:http:ssh:git"
SHA_HEX = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")  # a commit id (SHA-1 or SHA-256)
CHANGE_WORDS = {
    "M": "modified",
    "T": "modified",
    "A": "added",
    "D": "deleted",
    "R": "renamed",
    "C": "copied",
}
URL_CREDENTIALS = re.compile(r"(://)[^/@\s]+@")


class Git:
    """git in the workspace, with a fixed environment and URL credentials redacted from errors."""

    def __init__(self, workspace: Workspace, extra_env: Mapping[str, str] | None = None) -> None:
        self.workspace = workspace
        self.env = {
            **tool_env(workspace),
            "GIT_TERMINAL_PROMPT": "0",  # no prompt, no askpass: no credential ever comes in
            "GIT_ASKPASS": "",
            "SSH_ASKPASS": "",
            "GCM_INTERACTIVE": "never",
            "GIT_OPTIONAL_LOCKS": "0",
            "GIT_ALLOW_PROTOCOL": GIT_PROTOCOLS,
            **(extra_env or {}),
        }

    def argv(self, *args: str) -> list[str]:
        # An empty credential.helper list: no helper may store a token anywhere.
        return ["git", "-c", "credential.helper=", "-c", "core.quotePath=false", *args]

    def run(
        self, *args: str, cwd: Path | None = None, timeout: float = GIT_LOCAL_TIMEOUT_SECONDS
    ) -> subprocess.CompletedProcess[bytes]:
        argv = self.argv(*args)
        return run_tool(argv, cwd=cwd or self.workspace.root, env=self.env, timeout=timeout)

    def start(self, *args: str, stderr: IO[bytes]) -> subprocess.Popen[bytes]:
        """git running in the background, its stdout a pipe (a stream to answer with)."""
        return spawn(
            self.argv(*args),
            cwd=self.workspace.root,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=stderr,
        )

    def output(self, *args: str, timeout: float = GIT_LOCAL_TIMEOUT_SECONDS) -> bytes:
        """stdout of a git command that must succeed; 422 with git's stderr otherwise."""
        completed = self.run(*args, timeout=timeout)
        if completed.returncode != 0:
            raise ApiError(422, "git_failed", self.failure(args, completed))
        return completed.stdout

    def maybe(self, *args: str) -> str | None:
        """stdout of a git query, or None when git says no."""
        completed = self.run(*args)
        if completed.returncode != 0:
            return None
        return completed.stdout.decode("utf-8", "replace").strip() or None

    def failure(self, args: tuple[str, ...], completed: subprocess.CompletedProcess[bytes]) -> str:
        stderr = completed.stderr.decode("utf-8", "replace").strip()
        return self.redact(f"git {args[0]} failed ({completed.returncode}): {stderr}")

    def redact(self, text: str) -> str:
        """Credentials a URL carries (a user's ``https://user:pass@…``) are not repeated."""
        return URL_CREDENTIALS.sub(r"\1***@", text)

    def require_repository(self) -> None:
        if not (self.workspace.root / ".git").exists():
            raise ApiError(409, "not_a_repository", "the workspace is not a git repository")

    def head(self) -> str | None:
        return self.maybe("rev-parse", "--verify", "--quiet", "HEAD^{commit}")

    def current_branch(self) -> str | None:
        return self.maybe("symbolic-ref", "--quiet", "--short", "HEAD")

    def default_remote_ref(self) -> str | None:
        """``refs/remotes/origin/<default>`` when the clone knows origin's default branch."""
        return self.maybe("symbolic-ref", "--quiet", "refs/remotes/origin/HEAD")

    def has_ref(self, ref: str) -> bool:
        return self.maybe("rev-parse", "--verify", "--quiet", ref) is not None


def validate_branch_name(git: Git, branch: str) -> None:
    completed = git.run("check-ref-format", "--branch", branch)
    if branch.startswith("-") or completed.returncode != 0:
        raise bad_request(f"invalid branch name: {branch!r}", "invalid_branch")


def exclude_volume_leftovers(workspace: Workspace) -> None:
    """Keep a volume's lost+found out of git status and diffs."""
    present = [name for name in IGNORED_TOP_LEVEL if (workspace.root / name).exists()]
    if present:
        info = workspace.root / ".git" / "info"
        info.mkdir(exist_ok=True)
        with open(info / "exclude", "a") as exclude:
            exclude.writelines(f"/{name}/\n" for name in present)


# ---------------------------------------------------------------------------- git endpoints


def git_branch(app: App, request: Request) -> JsonObject:
    git = Git(app.workspace)
    git.require_repository()
    branch = git.current_branch()
    return {"branch": branch, "head": git.head(), "detached": branch is None}


@dataclass
class PorcelainStatus:
    branch: str | None = None
    detached: bool = False
    ahead: int | None = None
    behind: int | None = None
    staged: int = 0
    unstaged: int = 0
    untracked: int = 0
    files: list[dict[str, str]] = field(default_factory=list)


def git_status(app: App, request: Request) -> JsonObject:
    git = Git(app.workspace)
    git.require_repository()
    status = parse_porcelain(git.output("status", "--porcelain=v2", "--branch", "-z"))
    if status.ahead is None:
        status.ahead, status.behind = ahead_behind_default(git)
    changes = status.staged + status.unstaged + status.untracked
    return {
        "branch": status.branch,
        "isDetachedHead": status.detached,
        "hasUncommittedChanges": changes > 0,
        "hasUnpushedCommits": status.ahead > 0,
        "stagedCount": status.staged,
        "unstagedCount": status.unstaged,
        "untrackedCount": status.untracked,
        "ahead": status.ahead,
        "behind": status.behind or 0,
        "uncommittedFiles": status.files,
    }


def parse_porcelain(raw: bytes) -> PorcelainStatus:
    status = PorcelainStatus()
    records = iter(raw.decode("utf-8", "replace").split("\x00"))
    for record in records:
        if record.startswith("# "):
            apply_status_header(status, record[2:])
        elif record[:2] in ("1 ", "2 ", "u "):
            apply_status_change(status, record, records)
        elif record.startswith("? "):
            status.untracked += 1
            status.files.append({"path": record[2:], "status": "untracked"})
    return status


def apply_status_header(status: PorcelainStatus, header: str) -> None:
    key, _, value = header.partition(" ")
    if key == "branch.head":
        status.detached = value == "(detached)"
        status.branch = None if status.detached else value
    elif key == "branch.ab":
        ahead, behind = value.split()
        status.ahead, status.behind = int(ahead), -int(behind)


def apply_status_change(status: PorcelainStatus, record: str, records: Iterator[str]) -> None:
    kind = record[0]
    field_count = {"1": 8, "2": 9, "u": 10}[kind]
    parts = record.split(" ", field_count)
    index_code, worktree_code = parts[1][0], parts[1][1]
    if kind == "2":
        next(records, None)  # the original path of a rename or copy
    if kind == "u":
        status.unstaged += 1
        word = "conflicted"
    else:
        status.staged += index_code != "."
        status.unstaged += worktree_code != "."
        code = index_code if index_code != "." else worktree_code
        word = CHANGE_WORDS.get(code, "modified")
    status.files.append({"path": parts[field_count], "status": word})


def ahead_behind_default(git: Git) -> tuple[int, int]:
    """Without an upstream, "ahead" is measured against origin's default branch."""
    if git.head() is None or not git.has_ref("refs/remotes/origin/HEAD"):
        return 0, 0
    counts = git.maybe("rev-list", "--left-right", "--count", "refs/remotes/origin/HEAD...HEAD")
    if counts is None:
        return 0, 0
    behind, ahead = (int(number) for number in counts.split())
    return ahead, behind
