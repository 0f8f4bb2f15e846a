"""The git host port: pull requests, default branches, short-lived tokens, and the control
plane's own pushes and clones of a session's repository (a sandbox only exchanges bundles).

Adapters: GitHub REST plus git over smart HTTP (``git/github.py``, ``git/smart_http.py``) and
local bare repositories with a small PR registry (``git/local.py``, the one-machine runtime).
Every method takes the session's ``Repo`` (owner, name, clone URL): GitHub needs owner and name,
a local repository has only its clone URL.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

from openagents.domain.models import PrStatus, Repo

__all__ = [
    "CheckReport",
    "CheckRun",
    "ClonedRepository",
    "GitHost",
    "GitHostError",
    "MergeMethod",
    "PrStatus",
    "PullRequest",
    "PullRequestState",
    "ReceivesPushes",
    "Repo",
    "ReportsChecks",
    "ServesClones",
    "pr_status",
]


MergeMethod = Literal["merge", "squash", "rebase"]


@dataclass(frozen=True)
class PullRequest:
    number: int
    state: PrStatus  # merged when the host says so; closed-unmerged is "closed"
    url: str  # where a human looks at it
    head_branch: str
    base_branch: str
    title: str


class GitHostError(Exception):
    """A git host failure with a readable message that never contains a token. ``status`` is the
    host's HTTP-like status (None: the host could not be reached); ``retry_after`` is set, in
    seconds, when the host asked us to slow down."""

    def __init__(
        self, message: str, *, status: int | None = None, retry_after: float | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.retry_after = retry_after


class GitHost(Protocol):
    name: str  # "github" | "local"

    def clone_token(self, repo: Repo) -> str | None:
        """A short-lived token that can clone and push ``repo``; None when none is needed
        (local repositories, public repositories the host has no credentials for). The control
        plane's own: it is never handed to a sandbox (``ReceivesPushes``, ``ServesClones``)."""
        ...

    def pull_request(self, repo: Repo, number: int) -> PullRequest | None:
        """Pull request ``number``; None when the host does not know it."""
        ...

    def pull_request_for_branch(self, repo: Repo, branch: str) -> PullRequest | None:
        """The most recently updated pull request from ``branch`` of ``repo`` itself, any state."""
        ...

    def create_pull_request(
        self,
        repo: Repo,
        *,
        head_branch: str,
        base_branch: str,
        title: str,
        body: str,
        draft: bool = False,
    ) -> PullRequest:
        """Open a pull request (a draft when ``draft``); when an open one for the same head and
        base already exists (a lost race), return that one."""
        ...

    def default_branch(self, repo: Repo) -> str | None:
        """The repository's default branch; None when the repository is unknown."""
        ...

    def merge_pull_request(self, repo: Repo, number: int, *, method: MergeMethod) -> PullRequest:
        """Merge an open pull request into its base. Not mergeable (conflicts, checks, not
        open) is a ``GitHostError`` with status 405 or 409 and the host's reason."""
        ...

    def close_pull_request(self, repo: Repo, number: int) -> PullRequest:
        """Close without merging; a closed or merged pull request is returned as it is."""
        ...


@dataclass(frozen=True)
class ClonedRepository:
    """A repository the control plane fetched for a sandbox: a bundle holding origin's
    ``refs/remotes/origin/<default>`` (and ``<branch>`` when the remote has it) and
    ``refs/heads/<branch>`` at ``head``, the branch the sandbox checks out."""

    bundle: bytes = field(repr=False)
    branch: str
    head: str
    default_branch: str
    upstream: str | None  # origin/<branch>; None for a new branch


@runtime_checkable
class ReceivesPushes(Protocol):
    """An optional capability: a git host that takes pushes from the control plane itself.
    Every push works this way: a sandbox hands over a bundle (data, untrusted) and the control
    plane writes it into the repository (local: a hardened fetch; GitHub: smart HTTP with the
    token, which never enters a sandbox)."""

    def receives(self, repo: Repo) -> bool:
        """Whether pushes to ``repo`` go through ``receive_bundle``."""
        ...

    def receive_bundle(self, repo: Repo, *, branch: str, bundle: bytes, force: bool) -> str:
        """Fetch ``refs/heads/<branch>`` (the bundle's only ref) into ``repo`` and return its new
        commit. A non-fast-forward is refused unless ``force``; a bundle that names any other
        ref, or that does not verify, is refused (``GitHostError``; 412 when the bundle needs
        commits the repository does not have)."""
        ...


@runtime_checkable
class ServesClones(Protocol):
    """An optional capability: a git host that fetches a private repository for a sandbox, so
    the sandbox never holds the token that can read it."""

    def clone(
        self, repo: Repo, *, branch: str | None, is_new_branch: bool
    ) -> ClonedRepository | None:
        """The repository as a bundle for a sandbox; None when the host has no credentials for
        it (the sandbox clones anonymously). A new ``branch`` that exists on the remote is a
        409, a missing existing one a 422, a repository past the size limit a 413."""
        ...


@dataclass(frozen=True)
class CheckRun:
    """One check of a commit: a GitHub check run, or a commit status context (``id`` 0)."""

    id: int
    name: str
    status: str  # queued | in_progress | completed (a status context: pending | completed)
    conclusion: str | None  # success, failure, neutral, skipped, cancelled, timed_out, ...
    url: str | None = None


@dataclass(frozen=True)
class PullRequestState:
    """What merge readiness reads: the pull request, its head's checks, the merge methods the
    repository allows."""

    pull: PullRequest
    head_sha: str
    draft: bool
    mergeable: bool | None  # None: the host has not computed it (yet)
    mergeable_state: str | None  # GitHub's: clean, dirty, blocked, behind, unstable, ...
    checks: tuple[CheckRun, ...]
    allowed_methods: tuple[MergeMethod, ...]


@dataclass(frozen=True)
class CheckReport:
    """A failing check's own words: its output, its annotations and (the end of) its log."""

    run: CheckRun
    summary: str
    annotations: tuple[str, ...]  # "path:line: message" each
    log: str  # the log's tail, capped by the host; "" when the host keeps none


@runtime_checkable
class ReportsChecks(Protocol):
    """An optional capability: a git host that reports a pull request's checks."""

    def pull_request_state(self, repo: Repo, number: int) -> PullRequestState | None:
        """Pull request ``number`` with its head's checks; None when the host does not know it."""
        ...

    def check_report(self, repo: Repo, check_id: int, *, max_log_bytes: int) -> CheckReport:
        """Check run ``check_id``'s output, annotations and the last ``max_log_bytes`` of its
        log; a ``GitHostError`` (404) when unknown."""
        ...


def pr_status(*, state: str, merged: bool) -> PrStatus:
    """Reference §5.2: merged if merged, else closed if closed, else open."""
    if merged:
        return PrStatus.MERGED
    return PrStatus.CLOSED if state == "closed" else PrStatus.OPEN
