"""Shipping the work from the app: commit, discard, push, pull request, merge readiness, fix
failing checks and a repository for a session without one (``services/git_actions.py``,
``services/merge_readiness.py``, ``services/session_repository.py``)."""

from fastapi import APIRouter, Depends
from openagents.services.session_repository import NewRepository

from functions.api.deps import App, Caller, CheckedCaller
from functions.api.git_schemas import (
    AttachRepositoryIn,
    CheckpointRef,
    CommitIn,
    CommitOut,
    DiscardIn,
    DiscardOut,
    FixChecksIn,
    FixedCheckOut,
    FixStartedOut,
    OpenedOut,
    PullRequestIn,
    PullRequestOut,
    PushOut,
    ReadinessOut,
)
from functions.api.lazy_route import AnalysedRoute
from functions.api.schemas import SessionOneOut, SessionOut, error_responses
from functions.api.strict_query import known_query

router = APIRouter(
    route_class=AnalysedRoute,
    prefix="/api/sessions/{session_id}",
    tags=["git"],
    dependencies=[Depends(known_query)],
)


@router.post("/commit", responses=error_responses(409, 502))
def commit(session_id: str, app: App, caller: Caller, body: CommitIn | None = None) -> CommitOut:
    """`git add -A` and one commit; without `message` one is generated from the staged diff
    (502 `generation_failed` when it cannot be). 409 `nothing_to_commit`."""
    done = app.git_actions.commit(caller, session_id, body.message if body else None)
    return CommitOut(
        commit=done.commit,
        subject=done.subject,
        body=done.body,
        generated=done.generated,
        branch=done.branch,
    )


@router.post("/discard", responses=error_responses(409, 502))
def discard(session_id: str, app: App, caller: Caller, body: DiscardIn | None = None) -> DiscardOut:
    """Put the uncommitted changes back (tracked restored, untracked removed), a checkpoint of
    them saved first."""
    done = app.git_actions.discard(caller, session_id, body.paths if body else None)
    saved = CheckpointRef(ref=done.saved.ref, commit=done.saved.commit, files=done.saved.files)
    return DiscardOut(restored=done.restored, removed=done.removed, saved=saved)


@router.post("/push", responses=error_responses(409, 502))
def push(session_id: str, app: App, caller: Caller) -> PushOut:
    """Push the session's own branch through the git host."""
    done = app.git_actions.push(caller, session_id)
    return PushOut(branch=done.branch, commit=done.commit, base=done.base)


@router.post("/pr", responses=error_responses(409, 502))
def open_pull_request(
    session_id: str, app: App, caller: CheckedCaller, body: PullRequestIn | None = None
) -> OpenedOut:
    """Open the session's pull request (an open one is returned); title and body generated
    when not given."""
    given = body or PullRequestIn()
    done = app.git_actions.open_pull_request(
        caller,
        session_id,
        title=given.title,
        body=given.body,
        draft=given.draft,
        base=given.base,
    )
    return OpenedOut(pull_request=PullRequestOut.of(done.pull), created=done.created)


@router.get("/merge-readiness", responses=error_responses())
def merge_readiness(session_id: str, app: App, caller: Caller) -> ReadinessOut:
    """Whether the session's PR can merge, and every reason it cannot."""
    return ReadinessOut.of(app.merge_readiness.readiness(caller, session_id))


@router.post("/checks/fix", status_code=202, responses=error_responses(403, 409))
def fix_checks(
    session_id: str, app: App, caller: CheckedCaller, body: FixChecksIn | None = None
) -> FixStartedOut:
    """Start an agent turn in the latest chat with the failing checks' output as its prompt."""
    ids = body.check_run_ids if body else None
    done = app.git_actions.fix_checks(caller, session_id, ids)
    return FixStartedOut(
        run_id=done.run.id,
        status=done.run.status,
        chat_id=done.chat_id,
        checks=[FixedCheckOut.of(check) for check in done.checks],
    )


@router.post("/repository", responses=error_responses(409, 502))
def attach_repository(
    session_id: str, app: App, caller: Caller, body: AttachRepositoryIn
) -> SessionOneOut:
    """Give a session started without a repository one: an existing repository (`repoUrl`) or
    a new GitHub repository (`create`); its work is pushed to the session's own branch there
    first. 409 `repository_already_set`."""
    create = NewRepository(body.create.name, body.create.private) if body.create else None
    session = app.session_repository.attach(
        caller, session_id, repo_url=body.repo_url, branch=body.branch, create=create
    )
    return SessionOneOut(session=SessionOut.of(session))
