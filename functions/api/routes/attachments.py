"""/api/sessions/{id}/attachments: a user message's images and text files (upload, read)."""

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.concurrency import run_in_threadpool
from openagents.domain.attachments import MAX_IMAGE_BYTES

from functions.api.chat_schemas import AttachmentOut
from functions.api.deps import App, Caller, CheckedCaller
from functions.api.lazy_route import AnalysedRoute
from functions.api.schemas import error_responses
from functions.api.strict_query import known_query

router = APIRouter(
    route_class=AnalysedRoute, prefix="/api", tags=["agent"], dependencies=[Depends(known_query)]
)

UPLOAD_OVERHEAD_BYTES = 64 * 1024
_UPLOAD_TYPES = ("image/png", "image/jpeg", "image/webp", "image/gif", "text/plain")
_BINARY = {"schema": {"type": "string", "format": "binary"}}


def upload_limit(method: str, path: str) -> int | None:
    """The body limit of an upload (the BodyLimit middleware's per-route override)."""
    parts = path.split("/")
    upload = len(parts) == 5 and parts[1:3] == ["api", "sessions"] and parts[4] == "attachments"
    if method == "POST" and upload:
        return MAX_IMAGE_BYTES + UPLOAD_OVERHEAD_BYTES
    return None


@router.post(
    "/sessions/{session_id}/attachments",
    status_code=201,
    responses=error_responses(403, 409, 413),
    openapi_extra={
        "requestBody": {
            "required": True,
            "description": "The file's bytes; Content-Type is the claimed type",
            "content": {media: _BINARY for media in (*_UPLOAD_TYPES, "*/*")},
        }
    },
)
async def upload(
    session_id: str,
    request: Request,
    app: App,
    caller: CheckedCaller,
    filename: Annotated[str | None, Query(max_length=1000)] = None,
) -> AttachmentOut:
    """Store a file for a message of the session: the body is its bytes, `Content-Type` the
    type the client claims, `filename` its display name. Images (png, jpeg, webp, gif; at most
    3,750,000 bytes) are recognised from their first bytes, whatever the name or the
    claim; anything else must be UTF-8 text (at most {MAX_TEXT_BYTES} bytes) claimed as text
    (`text/*`, JSON, YAML, …) or generically. 400 `invalid_input` on `mediaType` when the claim
    contradicts the bytes, on `body` for an empty file or bytes that are neither; 413 on `body`
    over the caps; 404 for another user's session; 409 `session_archived`."""
    data = await request.body()
    claimed = request.headers.get("content-type", "")
    found = await run_in_threadpool(
        app.attachments.upload, caller, session_id, data, claimed, filename
    )
    return AttachmentOut(
        id=found.id,
        url=found.url,
        media_type=found.media_type,
        size=found.size,
        filename=found.filename,
    )


@router.get(
    "/sessions/{session_id}/attachments/{attachment_id}",
    response_class=Response,
    responses={
        **error_responses(),
        200: {"description": "The file's bytes", "content": {"image/png": _BINARY}},
    },
)
def read(session_id: str, attachment_id: str, app: App, caller: Caller) -> Response:
    """The attachment's bytes, with its type (text as `text/plain; charset=utf-8`, never
    rendered as HTML); another user's, or a missing one, 404."""
    found = app.attachments.get(caller, session_id, attachment_id)
    record = found.attachment
    media = record.media_type if record.is_image else "text/plain; charset=utf-8"
    headers = {
        "X-Content-Type-Options": "nosniff",
        "Content-Security-Policy": "sandbox; default-src 'none'",
        "Cache-Control": "private, max-age=31536000, immutable",  # an id's bytes never change
    }
    return Response(found.data, media_type=media, headers=headers)
