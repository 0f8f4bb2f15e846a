"""POST /api/github/webhook: pull request closed/reopened (public; HMAC-checked)."""

import hashlib
import hmac
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from openagents.services.pull_requests import PullRequestEventId, PullRequestUpdate, event_identity
from pydantic import BaseModel, ConfigDict, StrictBool, StrictInt, StrictStr, ValidationError

from functions.api.deps import App
from functions.api.errors import error_response
from functions.api.lazy_route import AnalysedRoute
from functions.api.schemas import ErrorOut
from functions.api.strict_query import known_query

router = APIRouter(
    route_class=AnalysedRoute,
    prefix="/api/github",
    tags=["github"],
    dependencies=[Depends(known_query)],
)
MAX_JSON_DEPTH = 64  # GitHub's payloads nest about 6 deep
MAX_DELIVERY_ID = 200


class _Payload(BaseModel):
    """GitHub sends far more than this; only what is read is checked (strict types)."""

    model_config = ConfigDict(extra="ignore")


class Owner(_Payload):
    login: StrictStr


class Repository(_Payload):
    name: StrictStr
    owner: Owner


class Head(_Payload):
    sha: StrictStr | None = None


class PullRequest(_Payload):
    number: StrictInt | None = None
    merged: StrictBool | None = None
    head: Head | None = None
    updated_at: StrictStr | None = None


class PullRequestEvent(_Payload):
    action: StrictStr
    number: StrictInt | None = None
    pull_request: PullRequest
    repository: Repository


def signature_ok(secret: str, body: bytes, header: str) -> bool:
    expected = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected.encode(), header.strip().encode())


def json_depth_exceeds(body: bytes, limit: int) -> bool:
    """Whether ``body`` nests arrays/objects deeper than ``limit`` (strings skipped): checked
    before any parser recurses into it."""
    depth = 0
    in_string = escaped = False
    for byte in body:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:  # quote
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):  # [ {
            depth += 1
            if depth > limit:
                return True
        elif byte in (0x5D, 0x7D):  # ] }
            depth -= 1
    return False


def parse_pull_request(body: bytes) -> PullRequestEvent | JSONResponse:
    """The payload, or the 400 that says why not (depth bounded before parsing)."""
    if json_depth_exceeds(body, MAX_JSON_DEPTH):
        return error_response(400, "invalid_json", "Invalid JSON body", "body")
    try:
        return PullRequestEvent.model_validate_json(body)
    except ValidationError as exc:
        first = exc.errors()[0]
        if first["type"] == "json_invalid":
            return error_response(400, "invalid_json", "Invalid JSON body", "body")
        field = ".".join(str(part) for part in first["loc"]) or None
        return error_response(
            400, "invalid_payload", f"pull_request payload: {field}: {first['msg']}", field
        )


@router.post(
    "/webhook",
    response_model=None,
    responses={code: {"model": ErrorOut} for code in (400, 401, 500, 503)},
)
async def webhook(request: Request, app: App) -> dict[str, Any] | JSONResponse:
    """GitHub's ``pull_request`` events: closed archives the matching sessions with the PR's
    status (merged or closed); reopened sets ``prStatus: open``; ``ping`` answers ok. An
    event seen before — the same ``X-GitHub-Delivery``, or the same signed body's own identity
    (action, repository, PR number, head sha, ``updated_at``) under any delivery id or none —
    is acknowledged (``duplicate``) and does nothing."""
    secret = app.webhook_secret()
    if not secret:
        return error_response(
            500, "webhook_not_configured", "GitHub webhook secret is not configured"
        )
    event = request.headers.get("x-github-event")
    signature = request.headers.get("x-hub-signature-256")
    if not event or not signature:
        return error_response(400, "missing_headers", "Missing GitHub webhook headers")
    body = await request.body()
    if not signature_ok(secret, body, signature):
        return error_response(401, "invalid_signature", "Invalid webhook signature")
    if event == "ping":
        return {"ok": True, "event": "ping"}
    if event != "pull_request":
        return {"ok": True, "event": event, "action": None, "ignored": True}
    delivery = request.headers.get("x-github-delivery") or None
    if delivery is not None and len(delivery) > MAX_DELIVERY_ID:
        return error_response(400, "invalid_payload", "X-GitHub-Delivery is too long")
    payload = parse_pull_request(body)
    if isinstance(payload, JSONResponse):
        return payload
    action = payload.action
    if action not in ("closed", "reopened"):
        return {"ok": True, "event": event, "action": action, "ignored": True}
    number = payload.pull_request.number or payload.number
    if number is None:
        return error_response(400, "invalid_payload", "pull_request payload lacks a number")
    repository = payload.repository
    pull = payload.pull_request
    said = PullRequestEventId(
        action=action,
        owner=repository.owner.login,
        name=repository.name,
        number=number,
        head_sha=pull.head.sha if pull.head else None,
        updated_at=pull.updated_at,
    )
    result = app.pull_requests.pull_request_event(
        action,
        said.owner,
        said.name,
        number,
        merged=bool(pull.merged),
        identity=event_identity(said, body),
        delivery=delivery,
    )
    return {"ok": True, "event": event, "action": action, **_answer(result)}


def _answer(result: PullRequestUpdate) -> dict[str, Any]:
    if result.duplicate:
        return {"duplicate": True}
    return {
        "prStatus": result.pr_status,
        "matchedSessions": result.matched_sessions,
        "updatedSessions": result.updated_sessions,
        "archivedSessions": result.archived_sessions,
    }
