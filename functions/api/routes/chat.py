"""/api/chat: agent turns (start, stream, stop), runs of a session, available models."""

import asyncio
from typing import TYPE_CHECKING, Annotated

from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.concurrency import run_in_threadpool
from openagents.agent.models.registry import NO_MODELS
from openagents.composition import Container
from openagents.domain.identity import Identity
from openagents.services.caps import Counted

from functions.api.chat_schemas import (
    ChatTurnIn,
    CheckpointOut,
    ModelListOut,
    ModelOut,
    RespondIn,
    RespondOut,
    RevertOut,
    RunListOut,
    RunOut,
    RunStartedOut,
    StopOut,
    StreamEventOut,
    StreamOut,
)
from functions.api.deps import App, Caller, CheckedCaller
from functions.api.lazy_route import AnalysedRoute
from functions.api.schemas import ErrorOut, error_responses
from functions.api.strict_query import known_query

if TYPE_CHECKING:  # the agent's modules load with the first turn, not the API's cold start
    from openagents.services.agent_turns import StreamView

router = APIRouter(
    route_class=AnalysedRoute, prefix="/api", tags=["agent"], dependencies=[Depends(known_query)]
)


@router.post("/chat", status_code=202, responses=error_responses(403, 409, 413))
def start_turn(body: ChatTurnIn, app: App, caller: CheckedCaller) -> RunStartedOut:
    """Store the user message and start an agent turn. 409 `turn_in_progress` while another
    turn runs in the chat; the same message id again answers the run it started. A hibernated
    session is resumed and the turn starts once it is active; 409 `sandbox_unavailable` for a
    failed one, `session_archived` for an archived session; 400 `model_unavailable` on
    `modelId`."""
    message = body.message.model_dump(mode="json", exclude_none=True)
    run = app.agent.post(caller, body.session_id, body.chat_id, message, body.model_id)
    return RunStartedOut(run_id=run.id, status=run.status)


MAX_SEQ = 2**53 - 1  # a stream's seq: any larger `after` is refused, never a 500


@router.get(
    "/chat/{chat_id}/stream",
    response_model=StreamOut,
    responses={
        **error_responses(429),
        204: {"description": "No run, or nothing after `after`"},
    },
)
async def stream(
    request: Request,
    chat_id: str,
    app: App,
    caller: Caller,
    after: Annotated[int, Query(ge=0, le=MAX_SEQ)] = 0,
    wait: Annotated[float | None, Query(ge=0, le=25)] = None,
) -> StreamOut | Response:
    """The chat's latest run's events after `after` (long-polls up to `wait` seconds, default
    20, max 25). Resume by asking again with `after=next`; every client gets the same events.
    A long-poll holds no server thread while it waits; 429 `too_many_streams` (with
    `Retry-After`) beyond the long-polls a chat, a user or the server may hold at once."""
    from openagents.services.agent_turns import STREAM_DEFAULT_WAIT

    view = await run_in_threadpool(app.agent.stream, caller, chat_id, after, 0)
    budget = STREAM_DEFAULT_WAIT if wait is None else wait
    if _pending(view) and budget > 0:
        polls: Counted = request.app.state.long_polls
        with polls.admit(caller.user_id, chat_id):
            view = await _wait(request, app, caller, chat_id, after, budget, view)
    if view is None:
        return Response(status_code=204)
    return StreamOut(
        run_id=view.run.id,
        status=view.run.status,
        events=[StreamEventOut(seq=e.seq, chunk=dict(e.chunk)) for e in view.events],
        next=view.next,
        continues=dict(view.continues) if view.continues is not None else None,
    )


def _pending(view: "StreamView | None") -> bool:
    """The run is live and has nothing after ``after`` yet: a long-poll would wait."""
    return view is not None and not view.events and not view.run.status.ended


async def _wait(
    request: Request,
    app: Container,
    caller: Identity,
    chat_id: str,
    after: int,
    budget: float,
    view: "StreamView | None",
) -> "StreamView | None":
    """Ask the store again every ``STREAM_POLL_SECONDS`` (asleep on the event loop in between)
    until an event comes, the run ends or another starts, the client leaves, or ``budget``
    seconds pass."""
    from openagents.services.agent_turns import STREAM_POLL_SECONDS

    loop = asyncio.get_running_loop()
    deadline = loop.time() + budget
    first = view.run.id if view is not None else None
    while _pending(view) and view is not None and view.run.id == first:
        left = deadline - loop.time()
        if left <= 0 or await request.is_disconnected():
            break
        await asyncio.sleep(min(STREAM_POLL_SECONDS, left))
        view = await run_in_threadpool(app.agent.stream, caller, chat_id, after, 0)
    return view


@router.post("/chat/{chat_id}/stop", responses=error_responses())
def stop(chat_id: str, app: App, caller: Caller) -> StopOut:
    """Stop the chat's running turn (model stream and sandbox command within 2 s; the run ends
    `aborted`, its partial message kept). Idempotent."""
    run = app.agent.stop(caller, chat_id)
    if run is None:
        return StopOut()
    return StopOut(run_id=run.id, status=run.status)


@router.post("/chat/{chat_id}/respond", status_code=202, responses=error_responses(409))
def respond(chat_id: str, body: RespondIn, app: App, caller: CheckedCaller) -> RespondOut:
    """Answer a tool approval (`approved`, `reason`) or an `ask_user_question` (`answers`) of
    the chat's waiting turn. When nothing else waits, a new run continues the same assistant
    message (its id is returned); otherwise `pending` says how many calls still wait."""
    run, pending = app.agent.respond(
        caller,
        chat_id,
        body.tool_call_id,
        approved=body.approved,
        reason=body.reason,
        answers=body.answers,
    )
    return RespondOut(run_id=run.id, status=run.status, pending=pending)


@router.get("/sessions/{session_id}/runs", responses=error_responses())
def list_runs(
    session_id: str,
    app: App,
    caller: Caller,
    cursor: Annotated[str | None, Query(max_length=2048)] = None,
) -> RunListOut:
    """The session's runs, newest first, with steps and usage."""
    page = app.agent.runs(caller, session_id, cursor)
    return RunListOut(runs=[RunOut.of(run) for run in page.items], next_cursor=page.cursor)


@router.post("/sessions/{session_id}/runs/{run_id}/revert", responses=error_responses(409))
def revert_run(
    session_id: str,
    run_id: str,
    app: App,
    caller: Caller,
    dry_run: Annotated[bool, Query(alias="dryRun")] = False,
) -> RevertOut:
    """Put the workspace back as it was before the run's first tool step: files changed since
    are restored, files created since removed, the branch and HEAD as they were (ignored files
    are left alone). The run and every later run of the session are marked `reverted`; the
    state replaced is saved first (`saved`: revert to it to undo). `dryRun=true` only lists
    the files. 409 `turn_in_progress` while a turn runs in the session, `no_checkpoint` for a
    run without one, `sandbox_not_running` unless the sandbox is active."""
    outcome = app.checkpoints.revert(caller, session_id, run_id, dry_run=dry_run)
    return RevertOut(
        run_id=outcome.run.id,
        dry_run=outcome.dry_run,
        restored=outcome.restored,
        removed=outcome.removed,
        saved=CheckpointOut.of(outcome.saved) if outcome.saved else None,
        reverted_runs=outcome.reverted_runs,
    )


@router.get("/models", responses={401: {"model": ErrorOut}})
def models(app: App, caller: Caller) -> ModelListOut:
    """The models chats may use; the first is the default."""
    available, default = app.agent.models()
    return ModelListOut(
        models=[ModelOut.of(info) for info in available],
        default_model_id=default,
        message=None if available else NO_MODELS,
    )
