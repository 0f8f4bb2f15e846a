"""Every error leaves the API as ``{"error", "code", "field"}`` with one status per class."""

from __future__ import annotations

import json
import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from openagents.domain.errors import (
    AccessDenied,
    Conflict,
    DomainError,
    InvalidInput,
    NotFound,
    PayloadTooLarge,
    RateLimited,
    Unauthenticated,
    Unavailable,
    UpstreamFailed,
)
from starlette.exceptions import HTTPException as StarletteHTTPException

STATUS: dict[type[DomainError], int] = {
    InvalidInput: 400,
    Unauthenticated: 401,
    AccessDenied: 403,
    NotFound: 404,
    Conflict: 409,
    PayloadTooLarge: 413,
    RateLimited: 429,
    UpstreamFailed: 502,
    Unavailable: 503,
}
log = logging.getLogger(__name__)
HTTP_CODES = {404: "not_found", 405: "method_not_allowed", 413: "payload_too_large"}


def error_response(
    status: int,
    code: str,
    message: str,
    field: str | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    body = {"error": message, "code": code, "field": field}
    return JSONResponse(body, status_code=status, headers=headers)


def _domain(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, DomainError)
    headers: dict[str, str] = {}
    if isinstance(exc, RateLimited):
        headers["Retry-After"] = str(exc.retry_after_seconds)
    if isinstance(exc, Unauthenticated):
        headers["WWW-Authenticate"] = "Bearer"
    if isinstance(exc, Unavailable):
        headers["Retry-After"] = "1"
    status = next(STATUS[cls] for cls in type(exc).__mro__ if cls in STATUS)
    return error_response(status, exc.code, exc.message, exc.field, headers)


def _validation(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": "Invalid request"}
    if first.get("type") == "json_invalid":
        return error_response(400, "invalid_json", "Invalid JSON body", "body")
    loc = [str(part) for part in first.get("loc", ())]
    if loc and loc[0] in ("body", "query", "path"):  # where it was, not a field (a "body" field is)
        loc = loc[1:]
    field = ".".join(loc) or None
    message = f"{field}: {first['msg']}" if field else str(first["msg"])
    if first.get("type") == "invalid_input":  # a value no route accepts (schemas.REFUSED)
        return error_response(400, "invalid_input", message, field)
    return error_response(422, "validation_error", message, field)


def _http(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    headers = dict(exc.headers or {})
    if exc.status_code == 400:  # FastAPI could not parse the body (too deep, not decodable)
        return error_response(400, "invalid_json", "Invalid JSON body", "body", headers)
    if exc.status_code == 405:  # Allow lists every method of the path, not only one route's
        headers["Allow"] = ", ".join(_methods(request))
    code = HTTP_CODES.get(exc.status_code, "error")
    detail = exc.detail if isinstance(exc.detail, str) else json.dumps(exc.detail)
    return error_response(exc.status_code, code, detail, headers=headers)


def _methods(request: Request) -> list[str]:
    allowed: set[str] = set()
    for route in _routes(request.app.router.routes):
        regex = getattr(route, "path_regex", None)
        if regex is not None and regex.match(request.url.path):
            allowed |= set(getattr(route, "methods", None) or ())
    return sorted(allowed)


def _routes(routes: list[Any]) -> list[Any]:
    """Every route, with included routers flattened (FastAPI wraps them)."""
    flat: list[Any] = []
    for route in routes:
        inner = getattr(route, "original_router", None)
        flat.extend(_routes(inner.routes) if inner is not None else [route])
    return flat


def _unexpected(_: Request, exc: Exception) -> JSONResponse:
    log.exception("unhandled error", exc_info=exc)
    return error_response(500, "internal", "Internal error")


def install(app: FastAPI) -> None:
    app.add_exception_handler(Exception, _unexpected)
    app.add_exception_handler(DomainError, _domain)
    app.add_exception_handler(RequestValidationError, _validation)
    app.add_exception_handler(StarletteHTTPException, _http)
