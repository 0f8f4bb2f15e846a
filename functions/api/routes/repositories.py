"""The new-session dialog's pickers: repositories, a repository's branches, a new GitHub
repository (``services/repositories.py``)."""

from typing import Annotated

from fastapi import APIRouter, Depends, Query
from openagents.services.repositories import MAX_QUERY_CHARS

from functions.api.deps import App, Caller
from functions.api.lazy_route import AnalysedRoute
from functions.api.picker_schemas import (
    BranchesOut,
    BranchOut,
    CreatedRepositoryOut,
    RepositoriesOut,
    RepositoryIn,
    RepositoryOut,
)
from functions.api.schemas import error_responses
from functions.api.strict_query import known_query

router = APIRouter(
    route_class=AnalysedRoute,
    prefix="/api/repositories",
    tags=["repositories"],
    dependencies=[Depends(known_query)],
)


@router.get("", responses=error_responses())
def repositories(
    app: App,
    caller: Caller,
    query: Annotated[str | None, Query(max_length=MAX_QUERY_CHARS)] = None,
    cursor: Annotated[str | None, Query(max_length=64)] = None,
) -> RepositoriesOut:
    """The repositories a session may start from: the GitHub installation's (or token's), or
    on one machine the git repositories under the allowed roots."""
    page = app.repositories.repositories(query, cursor)
    return RepositoriesOut(
        repositories=[RepositoryOut.of(info) for info in page.repositories], next=page.next
    )


@router.get("/branches", responses=error_responses())
def branches(
    app: App,
    caller: Caller,
    repo_url: Annotated[str | None, Query(alias="repoUrl", max_length=2048)] = None,
) -> BranchesOut:
    """The repository's branches, the default first."""
    found = app.repositories.branches(repo_url)
    return BranchesOut(branches=[BranchOut.of(info) for info in found])


@router.post("", status_code=201, responses=error_responses(409, 502))
def create_repository(app: App, caller: Caller, body: RepositoryIn) -> CreatedRepositoryOut:
    """A new GitHub repository (400 `no_git_host` on one machine)."""
    info = app.repositories.create(body.name, private=body.private)
    return CreatedRepositoryOut(repository=RepositoryOut.of(info))
