"""One HTTP/1.1 exchange carried over a sandbox tunnel with h11: the ASGI request's head and body
out (streamed, chunked when its length is unknown), the dev server's answer back (streamed:
each piece is sent on as it arrives, and the server's own flow control holds the rest)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Iterable

import h11
from starlette.types import Receive, Scope, Send

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
    out.append((b"connection", b"close"))  # one tunnel per request
    return out


async def forward(
    scope: Scope, receive: Receive, send: Send, sock: socket.socket, host: bytes, cookie: bytes
) -> None:
    reader, writer = await asyncio.open_connection(sock=sock)
    conn = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_HEAD_BYTES)
    target = scope.get("raw_path") or scope["path"].encode()
    if scope.get("query_string"):
        target += b"?" + scope["query_string"]
    request = h11.Request(
        method=scope["method"],
        target=target,
        headers=request_headers(scope["headers"], host, cookie),
    )
    writer.write(conn.send(request))
    upload = asyncio.create_task(_upload(conn, receive, writer))
    try:
        await _download(conn, reader, send)
    finally:
        upload.cancel()
        with contextlib.suppress(BaseException):
            await upload
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()


async def _upload(conn: h11.Connection, receive: Receive, writer: asyncio.StreamWriter) -> None:
    more = True
    while more:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
        body = message.get("body", b"")
        more = message.get("more_body", False)
        if body and conn.our_state is h11.SEND_BODY:
            writer.write(conn.send(h11.Data(data=body)))
            await writer.drain()  # the tunnel's pace, not the client's, bounds what we hold
    if conn.our_state is h11.SEND_BODY:
        writer.write(conn.send(h11.EndOfMessage()))
        await writer.drain()


async def _next(conn: h11.Connection, reader: asyncio.StreamReader) -> object:
    while True:
        event = conn.next_event()
        if event is not h11.NEED_DATA:
            return event
        conn.receive_data(await reader.read(READ_BYTES))


async def _download(conn: h11.Connection, reader: asyncio.StreamReader, send: Send) -> None:
    try:
        event = await _next(conn, reader)
        while isinstance(event, h11.InformationalResponse):  # 100 Continue: ours to swallow
            event = await _next(conn, reader)
    except h11.RemoteProtocolError:
        await _bad_gateway(send)
        return
    if not isinstance(event, h11.Response):
        await _bad_gateway(send)
        return
    headers = [(n.lower(), v) for n, v in event.headers if n.lower() not in DROPPED_RESPONSE]
    await send({"type": "http.response.start", "status": event.status_code, "headers": headers})
    try:
        while True:
            event = await _next(conn, reader)
            if isinstance(event, h11.Data):
                await send(
                    {"type": "http.response.body", "body": bytes(event.data), "more_body": True}
                )
            else:
                break
    except h11.RemoteProtocolError:
        pass  # cut short by the sandbox: the client sees the body end early
    await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _bad_gateway(send: Send) -> None:
    body = b"The preview's server answered no HTTP response\n"
    await send({
        "type": "http.response.start", "status": 502,
        "headers": [(b"content-type", b"text/plain"), (b"content-length", str(len(body)).encode())],
    })  # fmt: skip
    await send({"type": "http.response.body", "body": body})
