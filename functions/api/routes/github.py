"""POST /api/github/webhook: pull request closed/reopened (public; HMAC-checked)."""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from functions.api.deps import App
from functions.api.errors import error_response
from functions.api.schemas import ErrorOut

router = APIRouter(prefix="/api/github", tags=["github"])


def signature_ok(secret: str, body: bytes, header: str) -> bool:
    expected = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected.encode(), header.strip().encode())


@router.post(
    "/webhook",
    response_model=None,
    responses={code: {"model": ErrorOut} for code in (400, 401, 500, 503)},
)
async def webhook(request: Request, app: App) -> dict[str, Any] | JSONResponse:
    """GitHub's ``pull_request`` events: closed archives the matching sessions with the PR's
    status (merged or closed); reopened sets ``prStatus: open``; ``ping`` answers ok."""
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
    try:
        payload = json.loads(body)
    except ValueError:
        return error_response(400, "invalid_json", "Invalid JSON body")
    action = payload.get("action") if isinstance(payload, dict) else None
    if event != "pull_request" or action not in ("closed", "reopened"):
        return {"ok": True, "event": event, "action": action, "ignored": True}
    pull = payload.get("pull_request") or {}
    repository = payload.get("repository") or {}
    owner = (repository.get("owner") or {}).get("login")
    name = repository.get("name")
    number = pull.get("number") or payload.get("number")
    if not isinstance(owner, str) or not isinstance(name, str) or not isinstance(number, int):
        return error_response(
            400, "invalid_payload", "pull_request payload lacks repository or number"
        )
    result = app.archive.pull_request_event(
        action, owner, name, number, merged=bool(pull.get("merged"))
    )
    return {"ok": True, "event": event, "action": action, **result}
