"""The API's per-request observability, as pure ASGI middleware (no ``BaseHTTPMiddleware``: no
task and no copy of the request per call, and a long-poll's disconnect reaches the route
untouched): the correlation id (the caller's ``x-correlation-id``, else API Gateway's request
id, else a new one) on every log line and echoed on the response, one JSON log line per
request, and the request's metrics flushed."""

from __future__ import annotations

import uuid
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools import Metrics as PowertoolsMetrics
from starlette.types import ASGIApp, Message, Receive, Scope, Send

HEADER = b"x-correlation-id"
MAX_ID_CHARS = 200  # a caller's id longer than this is replaced, not echoed


class Observe:
    def __init__(self, app: ASGIApp, logger: Logger, metrics: PowertoolsMetrics) -> None:
        self._app, self._logger, self._metrics = app, logger, metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        correlation_id = correlation_id_of(scope)
        self._logger.set_correlation_id(correlation_id)
        status = 500  # unless the app answers

        async def answer(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = list(message.get("headers", []))
                headers.append((HEADER, correlation_id.encode("latin-1")))
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self._app(scope, receive, answer)
        finally:
            self._logger.info(
                "request",
                extra={"method": scope["method"], "path": scope["path"], "status": status},
            )
            if self._metrics.metric_set:
                self._metrics.flush_metrics()


def correlation_id_of(scope: Scope) -> str:
    for name, value in scope.get("headers") or []:
        if name == HEADER:
            given = bytes(value).decode("latin-1").strip()
            if 0 < len(given) <= MAX_ID_CHARS and given.isprintable():
                return given
    event: dict[str, Any] = scope.get("aws.event") or {}
    request_id = event.get("requestContext", {}).get("requestId")
    return str(request_id) if request_id else str(uuid.uuid4())
