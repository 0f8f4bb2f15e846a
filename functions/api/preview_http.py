"""One HTTP/1.1 exchange carried over a sandbox tunnel with h11: the ASGI request's head and body
out (streamed, chunked when its length is unknown), the dev server's answer back (streamed:
each piece is sent on as it arrives, and the server's own flow control holds the rest).

The tunnel may have carried an exchange before (``preview_pool.py``): it is handed back for the
next only when this one ended whole on both sides with keep-alive (a request body the client
abandoned, a response without a length or cut short, ``Connection: close``, an HTTP/1.0 server,
any byte past the answer: closed). The client leaving mid-way closes the tunnel at once, so a
dev server that never answers holds nothing of ours past its client."""

from __future__ import annotations

import asyncio
import contextlib
import enum
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import h11
from starlette.types import Receive, Scope, Send

from functions.api.preview_pool import Tunnel, bodiless, replayable

READ_BYTES = 64 << 10
MAX_HEAD_BYTES = 64 << 10
# hop-by-hop headers (RFC 9110 7.6.1) and the Host we set ourselves
DROPPED_REQUEST = frozenset(
    {b"connection", b"keep-alive", b"proxy-connection", b"proxy-authorization", b"te",
     b"trailer", b"transfer-encoding", b"upgrade", b"host", b"expect"}
)  # fmt: skip
DROPPED_RESPONSE = frozenset(
    {b"connection", b"keep-alive", b"proxy-connection", b"te", b"trailer",
     b"transfer-encoding", b"upgrade"}
)  # fmt: skip


def strip_cookie(value: bytes, name: bytes) -> bytes:
    """The Cookie header without our own cookie (``name``): it never reaches the sandbox."""
    kept = [part.strip() for part in value.split(b";")]
    return b"; ".join(p for p in kept if p and p.split(b"=", 1)[0].strip() != name)


def request_headers(
    headers: Iterable[tuple[bytes, bytes]], host: bytes, cookie_name: bytes
) -> list[tuple[bytes, bytes]]:
    out: list[tuple[bytes, bytes]] = [(b"host", host)]
    cookies: list[bytes] = []
    sized = chunked = False
    for name, value in headers:
        name = name.lower()
        if name == b"cookie":
            cookies.append(value)
        elif name == b"transfer-encoding":
            chunked = True
        elif name == b"origin":  # checked to be the preview's own: named as the server's own
            out.append((name, b"http://" + host))
        elif name not in DROPPED_REQUEST:
            sized = sized or name == b"content-length"
            out.append((name, value))
    cookie = strip_cookie(b"; ".join(cookies), cookie_name)
    if cookie:
        out.append((b"cookie", cookie))
    if chunked and not sized:
        out.append((b"transfer-encoding", b"chunked"))
    return out  # HTTP/1.1 keep-alive: the tunnel may carry the next request (preview_pool.py)


class Ended(enum.Enum):
    WHOLE = "whole"  # the whole response, its end known from its framing
    UNANSWERED = "unanswered"  # the tunnel ended before the first byte: nothing sent on
    CUT = "cut"  # anything else: a 502, a body cut short, a body read to the end of the stream


async def forward(
    scope: Scope,
    receive: Receive,
    send: Send,
    tunnel: Tunnel,
    host: bytes,
    cookie: bytes,
    reopen: Callable[[], Awaitable[Tunnel]],
    keep: Callable[[Tunnel], None],
) -> bool:
    """Carry the request over ``tunnel`` and its answer back. A tunnel fit to carry another
    exchange (the whole request sent, the whole response read, keep-alive on both sides,
    nothing more from the sandbox) goes to ``keep`` the moment its answer's last byte is read,
    before that byte is sent on (so the client's next request finds it); any other is closed.
    A reused tunnel the dev server closed before answering a bodiless safe request is replaced
    once by ``reopen``. Whether it was kept."""
    target = scope.get("raw_path") or scope["path"].encode()
    if scope.get("query_string"):
        target += b"?" + scope["query_string"]
    request = h11.Request(
        method=scope["method"],
        target=target,
        headers=request_headers(scope["headers"], host, cookie),
    )
    empty, again = bodiless(scope["headers"]), replayable(scope)
    while True:
        kept, ended, disconnected = await _attempt(request, tunnel, receive, send, empty, keep)
        if kept:
            return True
        tunnel.close()
        if ended is not Ended.UNANSWERED or disconnected:
            return False
        if not (again and tunnel.reused):
            await _bad_gateway(send)
            return False
        try:
            tunnel = await reopen()
        except Exception:  # the port stopped listening, the sandbox went away
            await _bad_gateway(send)
            return False


def _fit(conn: h11.Connection, tunnel: Tunnel) -> bool:
    """Both messages whole, keep-alive on both sides, no byte past the answer, no end of file."""
    return (
        conn.our_state is h11.DONE
        and conn.their_state is h11.DONE
        and conn.trailing_data == (b"", False)
        and tunnel.clean
    )


async def _attempt(
    request: h11.Request,
    tunnel: Tunnel,
    receive: Receive,
    send: Send,
    empty: bool,
    keep: Callable[[Tunnel], None],
) -> tuple[bool, Ended, bool]:
    """One exchange on ``tunnel``: (kept, how it ended, whether the client left first)."""
    conn = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_HEAD_BYTES)
    try:
        tunnel.write(conn.send(request))
        if empty:
            tunnel.write(conn.send(h11.EndOfMessage()))
    except OSError:
        pass  # the answer (none) tells
    kept = False

    def whole() -> None:
        nonlocal kept
        if _fit(conn, tunnel):
            kept = True
            keep(tunnel)

    ended, disconnected = await _exchange(conn, tunnel, receive, send, empty, whole)
    return kept, ended, disconnected


async def _exchange(
    conn: h11.Connection,
    tunnel: Tunnel,
    receive: Receive,
    send: Send,
    empty: bool,
    whole: Callable[[], None],
) -> tuple[Ended, bool]:
    """The answer relayed while the body goes up; (how it ended, whether the client left
    first: then the tunnel is abandoned mid-way)."""
    upload = asyncio.create_task(_upload(conn, receive, tunnel, not empty))
    download = asyncio.create_task(_download(conn, tunnel, send, whole))
    try:
        while True:
            waiting: set[asyncio.Task[Any]] = {download}
            if not upload.done():
                waiting.add(upload)
            done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
            if download in done:
                return download.result(), False
            if not upload.cancelled() and upload.exception() is None:  # the client left
                return Ended.CUT, True
    finally:
        for task in (upload, download):
            task.cancel()
            with contextlib.suppress(BaseException):
                await task


async def _upload(conn: h11.Connection, receive: Receive, tunnel: Tunnel, body: bool) -> None:
    """Send the request's body (when it has one), then watch for the client leaving: returns
    then (an error writing to the tunnel ends it with that error instead)."""
    more = body
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
        if not more:
            continue
        data = message.get("body", b"")
        more = message.get("more_body", False)
        if data and conn.our_state is h11.SEND_BODY:
            tunnel.write(conn.send(h11.Data(data=data)))
            await tunnel.drain()  # the tunnel's pace, not the client's, bounds what we hold
        if not more and conn.our_state is h11.SEND_BODY:
            tunnel.write(conn.send(h11.EndOfMessage()))
            await tunnel.drain()


class _Reader:
    def __init__(self, conn: h11.Connection, tunnel: Tunnel) -> None:
        self.conn, self.tunnel, self.received = conn, tunnel, 0

    async def next(self) -> object:
        while True:
            event = self.conn.next_event()
            if event is not h11.NEED_DATA:
                return event
            data = await self.tunnel.read(READ_BYTES)
            self.received += len(data)
            self.conn.receive_data(data)


async def _download(
    conn: h11.Connection, tunnel: Tunnel, send: Send, whole: Callable[[], None]
) -> Ended:
    reader = _Reader(conn, tunnel)
    try:
        event = await reader.next()
        while isinstance(event, h11.InformationalResponse):  # 100 Continue: ours to swallow
            event = await reader.next()
    except h11.RemoteProtocolError:
        if reader.received == 0:
            return Ended.UNANSWERED
        await _bad_gateway(send)
        return Ended.CUT
    if not isinstance(event, h11.Response):
        await _bad_gateway(send)
        return Ended.CUT
    headers = [(n.lower(), v) for n, v in event.headers if n.lower() not in DROPPED_RESPONSE]
    await send({"type": "http.response.start", "status": event.status_code, "headers": headers})
    ended = Ended.CUT
    try:
        while True:
            event = await reader.next()
            if isinstance(event, h11.Data):
                await send(
                    {"type": "http.response.body", "body": bytes(event.data), "more_body": True}
                )
            else:
                # a body that ran to the end of the stream (no length) closed the tunnel too
                if isinstance(event, h11.EndOfMessage) and conn.their_state is h11.DONE:
                    ended = Ended.WHOLE
                    whole()
                break
    except h11.RemoteProtocolError:
        pass  # cut short by the sandbox: the client sees the body end early
    await send({"type": "http.response.body", "body": b"", "more_body": False})
    return ended


async def _bad_gateway(send: Send) -> None:
    body = b"The preview's server answered no HTTP response\n"
    await send({
        "type": "http.response.start", "status": 502,
        "headers": [(b"content-type", b"text/plain"), (b"content-length", str(len(body)).encode())],
    })  # fmt: skip
    await send({"type": "http.response.body", "body": body})
