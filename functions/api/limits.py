"""Request body limit, for declared (Content-Length) and chunked bodies alike."""

from __future__ import annotations

from collections.abc import Callable

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from functions.api.errors import error_response


class BodyLimit:
    """Refuses a declared oversize body at once; a chunked one is answered 413 as soon as it
    passes the limit, and the app sees the client gone."""

    def __init__(
        self,
        app: ASGIApp,
        limit: Callable[[], int],
        route_limit: Callable[[str, str], int | None] = lambda method, path: None,
    ) -> None:
        self._app = app
        self._limit = limit
        self._route_limit = route_limit  # (method, path) -> its own limit (uploads), or None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        limit = self._route_limit(scope.get("method", ""), scope.get("path", ""))
        limit = self._limit() if limit is None else limit
        headers: dict[bytes, bytes] = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length", b"").decode() or None
        if declared is not None and (not declared.isdigit() or int(declared) > limit):
            await _too_large(limit)(scope, receive, send)
            return
        received = 0
        refused = False

        async def guarded_send(message: Message) -> None:
            if not refused:  # after a 413, whatever the app still says is dropped
                await send(message)

        async def limited() -> Message:
            nonlocal received, refused
            if refused:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    refused = True
                    await _too_large(limit)(scope, receive, send)
                    return {"type": "http.disconnect"}
            return message

        await self._app(scope, limited, guarded_send)


def _too_large(limit: int) -> JSONResponse:
    return error_response(
        413, "payload_too_large", f"Request body is larger than {limit} bytes", "body"
    )
