"""/api/sessions: create, list, read, update, delete, audit log; /api/user/preferences."""

from typing import Annotated

from fastapi import APIRouter, Depends, Query, status
from openagents.domain.models import ListFilter, Preferences
from openagents.services.sessions import NewSession

from functions.api.deps import App, Caller, CheckedCaller
from functions.api.lazy_route import AnalysedRoute
from functions.api.schemas import (
    ChatOut,
    CreatedSessionOut,
    CreateSessionIn,
    EventListOut,
    EventOut,
    MergeIn,
    PreferencesBody,
    SessionListOut,
    SessionOneOut,
    SessionOut,
    SessionSummaryOut,
    SuccessOut,
    UpdateSessionIn,
    error_responses,
)
from functions.api.strict_query import known_query

router = APIRouter(
    route_class=AnalysedRoute, prefix="/api", tags=["sessions"], dependencies=[Depends(known_query)]
)
ERRORS = error_responses()
Limit = Annotated[int | None, Query(ge=0, le=1000)]
Cursor = Annotated[str | None, Query(max_length=2048)]


@router.post(
    "/sessions",
    status_code=status.HTTP_201_CREATED,
    responses=error_responses(403, 409, 429),
)
def create_session(body: CreateSessionIn, app: App, caller: CheckedCaller) -> CreatedSessionOut:
    """Create a session and its first chat in one transaction (10 per minute per user)."""
    session, chat = app.sessions.create(caller, NewSession(**body.model_dump(exclude_none=True)))
    return CreatedSessionOut(session=SessionOut.of(session), chat=ChatOut.of(chat))


@router.get("/sessions", responses=ERRORS)
def list_sessions(
    app: App,
    caller: Caller,
    status: ListFilter = ListFilter.ALL,
    limit: Limit = None,
    cursor: Cursor = None,
) -> SessionListOut:
    """The caller's sessions, newest first (archived: 50 per page by default, at most 100)."""
    result = app.sessions.list(caller, status, limit, cursor)
    return SessionListOut(
        sessions=[SessionSummaryOut.of(s) for s in result.page.items],
        archived_count=result.archived_count,
        next_cursor=result.page.cursor,
        has_more=result.page.cursor is not None,
    )


@router.get("/sessions/{session_id}", responses=ERRORS)
def get_session(session_id: str, app: App, caller: Caller) -> SessionOneOut:
    """The session; opening it refreshes its branch and PR state (at most every
    `OPENAGENTS_PR_REFRESH_SECONDS` per session)."""
    session = app.pull_requests.refresh_if_due(app.sessions.get(caller, session_id))
    return SessionOneOut(session=SessionOut.of(session))


@router.post("/sessions/{session_id}/merge", responses=error_responses(409, 503))
def merge_pull_request(
    session_id: str, app: App, caller: Caller, body: MergeIn | None = None
) -> SessionOneOut:
    """Merge the session's pull request (`method`: merge, squash or rebase); the session is
    then `prStatus: merged` and archived."""
    method = body.method if body is not None else "merge"
    return SessionOneOut(session=SessionOut.of(app.pull_requests.merge(caller, session_id, method)))


@router.post("/sessions/{session_id}/close-pr", responses=error_responses(409, 503))
def close_pull_request(session_id: str, app: App, caller: Caller) -> SessionOneOut:
    """Close the session's pull request without merging (`prStatus: closed`)."""
    return SessionOneOut(session=SessionOut.of(app.pull_requests.close(caller, session_id)))


@router.patch("/sessions/{session_id}", responses=ERRORS)
def update_session(
    session_id: str, body: UpdateSessionIn, app: App, caller: Caller
) -> SessionOneOut:
    """Rename (`title`), ask before every command (`askBeforeBash`) and/or archive/unarchive
    (`status`)."""
    session = app.sessions.update(
        caller,
        session_id,
        title=body.title,
        status=body.status,
        ask_before_bash=body.ask_before_bash,
    )
    return SessionOneOut(session=SessionOut.of(session))


@router.delete("/sessions/{session_id}", responses=ERRORS)
def delete_session(session_id: str, app: App, caller: Caller) -> SuccessOut:
    """Stop the session's sandbox and remove its snapshot and volumes, then delete the session
    with its chats, messages and audit log. 503 (nothing deleted) when the sandbox cannot be
    stopped: the retry finishes it."""
    app.sessions.delete(caller, session_id)
    return SuccessOut()


@router.get("/sessions/{session_id}/events", responses=ERRORS)
def list_events(
    session_id: str, app: App, caller: Caller, limit: Limit = None, cursor: Cursor = None
) -> EventListOut:
    """The session's audit log, oldest first."""
    page = app.sessions.events(caller, session_id, limit, cursor)
    return EventListOut(events=[EventOut.of(e) for e in page.items], next_cursor=page.cursor)


@router.get("/user/preferences", responses=ERRORS, tags=["user"])
def get_preferences(app: App, caller: Caller) -> PreferencesBody:
    return PreferencesBody(**app.sessions.preferences(caller).model_dump())


@router.put("/user/preferences", responses=ERRORS, tags=["user"])
def put_preferences(body: PreferencesBody, app: App, caller: Caller) -> PreferencesBody:
    """Defaults for new sessions: auto-commit, auto-PR, model (400 `model_unavailable` on
    `defaultModelId` unless `GET /api/models` offers it)."""
    saved = app.sessions.set_preferences(caller, Preferences(**body.model_dump()))
    return PreferencesBody(**saved.model_dump())
