"""What the new-session dialog's pickers read from a git host: the repositories it can reach,
a repository's branches, and (GitHub only) a new repository. The one-machine catalog
(``git/local.py``'s ``LocalCatalog``) lists the allowed roots; GitHub's (``git/github.py``'s
``GitHubHost``) the installation's or token's repositories."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

PAGE_SIZE = 50  # repositories a page holds at most
MAX_BRANCHES = 1000


@dataclass(frozen=True)
class RepositoryInfo:
    repo_url: str  # what POST /api/sessions takes as repoUrl
    name: str
    owner: str | None
    private: bool | None
    default_branch: str | None


@dataclass(frozen=True)
class RepositoryPage:
    repositories: tuple[RepositoryInfo, ...]
    next: str | None  # the next page's cursor; None on the last


@dataclass(frozen=True)
class BranchInfo:
    name: str
    default: bool


class BadRepositoryUrl(Exception):
    """The URL cannot name a repository of this catalog (the message says why)."""


class BadCursor(Exception):
    """A cursor this catalog did not make."""


class RepositoryMissing(Exception):
    """No repository there that this catalog may show (outside the roots, unreachable)."""


class RepositoryExists(Exception):
    """A repository of that name exists already."""


@runtime_checkable
class RepositoryCatalog(Protocol):
    def repositories(self, query: str, cursor: str | None) -> RepositoryPage:
        """A page of the repositories whose ``owner/name`` contains ``query`` (ignoring case);
        ``BadCursor``. GitHub's failures are ``GitHostError``."""
        ...

    def branches(self, repo_url: str) -> list[BranchInfo]:
        """The default branch first, then the rest by name; ``BadRepositoryUrl``,
        ``RepositoryMissing``."""
        ...


@runtime_checkable
class CreatesRepositories(Protocol):
    def create_repository(self, name: str, *, private: bool) -> RepositoryInfo:
        """A new repository with a first commit (so it has a default branch);
        ``RepositoryExists``."""
        ...


def sorted_branches(names: list[str], default: str | None) -> list[BranchInfo]:
    ordered = sorted(set(names), key=lambda name: (name != default, name))[:MAX_BRANCHES]
    return [BranchInfo(name, name == default) for name in ordered]
