"""/api/shared/{shareId}: a shared chat, public (no token; the bot check still applies)."""

from fastapi import APIRouter, Depends
from fastapi.responses import Response

from functions.api.deps import App, public_check
from functions.api.lazy_route import AnalysedRoute
from functions.api.schemas import ErrorOut, SharedChatOut, SharedStatusOut
from functions.api.strict_query import known_query

router = APIRouter(
    route_class=AnalysedRoute,
    prefix="/api/shared",
    tags=["shared"],
    dependencies=[Depends(public_check), Depends(known_query)],
)
ERRORS: dict[int | str, dict[str, object]] = {
    code: {"model": ErrorOut} for code in (403, 404, 422, 503)
}


@router.get("/{share_id}", responses=ERRORS)
def shared_chat(share_id: str, app: App) -> SharedChatOut:
    """The transcript as JSON; 404 once the link is revoked or the chat deleted."""
    shared = app.shares.transcript(share_id)
    return SharedChatOut(title=shared.title, messages=shared.messages)


MARKDOWN = "text/markdown; charset=utf-8"


@router.get(
    "/{share_id}/markdown",
    response_class=Response,
    responses={**ERRORS, 200: {"content": {"text/markdown": {"schema": {"type": "string"}}}}},
)
def shared_markdown(share_id: str, app: App) -> Response:
    """The transcript as Markdown."""
    return Response(app.shares.transcript(share_id).markdown, media_type=MARKDOWN)


@router.get("/{share_id}/status", responses=ERRORS)
def shared_status(share_id: str, app: App) -> SharedStatusOut:
    """Whether a turn is live in the shared chat."""
    return SharedStatusOut(is_streaming=app.shares.is_streaming(share_id))
