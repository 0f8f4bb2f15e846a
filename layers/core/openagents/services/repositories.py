"""The new-session dialog's repository and branch pickers, and a new GitHub repository
(``GET/POST /api/repositories``, ``GET /api/repositories/branches``): the git host's catalog
(``git/catalog.py``), its errors mapped to the domain's, each naming its field."""

from __future__ import annotations

import logging
import re

from openagents.domain.errors import Conflict, InvalidInput, NotFound, Unavailable, UpstreamFailed
from openagents.git import GitHostError
from openagents.git.catalog import (
    BadCursor,
    BadRepositoryUrl,
    BranchInfo,
    CreatesRepositories,
    RepositoryCatalog,
    RepositoryExists,
    RepositoryInfo,
    RepositoryMissing,
    RepositoryPage,
)

log = logging.getLogger(__name__)
MAX_QUERY_CHARS = 100
REPO_NAME = re.compile(r"^[A-Za-z0-9._-]{1,100}$")
LOCAL_CREATE = (
    "Creating repositories needs GitHub; on one machine, create a folder under "
    "OPENAGENTS_LOCAL_REPO_ROOTS and run git init"
)


class NoRepositoryHost(InvalidInput):
    code = "no_git_host"


class GitHostRefused(UpstreamFailed):
    code = "git_host_error"


class RepositoryService:
    def __init__(self, catalog: RepositoryCatalog | None, host_setting: str) -> None:
        self._catalog = catalog
        self._host_setting = host_setting

    def repositories(self, query: str | None, cursor: str | None) -> RepositoryPage:
        text = query or ""
        if len(text) > MAX_QUERY_CHARS or not text.isprintable():
            raise InvalidInput(
                f"query must be at most {MAX_QUERY_CHARS} printable characters", field="query"
            )
        if self._catalog is None:
            return RepositoryPage((), None)  # no git host configured: nothing to pick
        try:
            return self._catalog.repositories(text, cursor)
        except BadCursor as exc:
            raise InvalidInput(str(exc), field="cursor") from None
        except GitHostError as exc:
            raise _host_error(exc) from None

    def branches(self, repo_url: str | None) -> list[BranchInfo]:
        if not repo_url or not repo_url.strip():
            raise InvalidInput("repoUrl is required", field="repoUrl")
        if self._catalog is None:
            raise NoRepositoryHost(
                f"No git host is configured (set {self._host_setting})", field="repoUrl"
            )
        try:
            return self._catalog.branches(repo_url)
        except BadRepositoryUrl as exc:
            raise InvalidInput(str(exc), field="repoUrl") from None
        except RepositoryMissing as exc:
            log.info("branches of %s refused: %s", repo_url, exc)
            raise NotFound("Repository not found", field="repoUrl") from None
        except GitHostError as exc:
            if exc.status == 404:
                raise NotFound("Repository not found", field="repoUrl") from None
            raise _host_error(exc) from None

    def create(self, name: str, *, private: bool) -> RepositoryInfo:
        if not isinstance(self._catalog, CreatesRepositories):
            raise NoRepositoryHost(LOCAL_CREATE, field="name")
        if not REPO_NAME.match(name) or name in (".", ".."):
            raise InvalidInput("name must be 1-100 letters, digits, '.', '-' or '_'", field="name")
        try:
            return self._catalog.create_repository(name, private=private)
        except RepositoryExists as exc:
            raise Conflict(str(exc), field="name") from None
        except GitHostError as exc:
            if exc.status == 400:
                raise NoRepositoryHost(str(exc), field="name") from None
            raise _host_error(exc) from None


def _host_error(exc: GitHostError) -> Exception:
    if exc.status is None or exc.status >= 500 or exc.status == 429:
        return Unavailable(f"GitHub could not be reached: {exc}")
    return GitHostRefused(str(exc))
