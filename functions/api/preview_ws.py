"""A WebSocket carried over a sandbox tunnel (wsproto): the browser's handshake is made again
upstream (its subprotocols and its own headers, our cookie removed, the Host the dev server
expects), the dev server's answer decides ours, then messages, pings and the close are relayed
both ways. A message from the sandbox is held whole (ASGI sends messages, not frames) up to
``MAX_MESSAGE_BYTES``, past which the connection is closed (1009)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Iterable

from starlette.types import Receive, Scope, Send
from wsproto import ConnectionType, WSConnection
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Message,
    Ping,
    RejectConnection,
    Request,
    TextMessage,
)

from functions.api.preview_http import strip_cookie

READ_BYTES = 64 << 10
MAX_MESSAGE_BYTES = 16 << 20
HANDSHAKE_SECONDS = 10.0
HANDSHAKE_HEADERS = frozenset(
    {b"host", b"connection", b"upgrade", b"cookie", b"sec-websocket-key",
     b"sec-websocket-version", b"sec-websocket-protocol", b"sec-websocket-extensions"}
)  # fmt: skip


def handshake_headers(
    headers: Iterable[tuple[bytes, bytes]], cookie_name: bytes, origin: bytes
) -> list[tuple[bytes, bytes]]:
    kept: list[tuple[bytes, bytes]] = []
    cookies: list[bytes] = []
    for name, value in headers:
        name = name.lower()
        if name == b"cookie":
            cookies.append(value)
        elif name == b"origin":
            kept.append((name, origin))
        elif name not in HANDSHAKE_HEADERS:
            kept.append((name, value))
    cookie = strip_cookie(b"; ".join(cookies), cookie_name)
    return [*kept, (b"cookie", cookie)] if cookie else kept


async def relay(
    scope: Scope, receive: Receive, send: Send, sock: socket.socket, host: str, cookie: bytes
) -> None:
    reader, writer = await asyncio.open_connection(sock=sock)
    ws = WSConnection(ConnectionType.CLIENT)
    target = (scope.get("raw_path") or scope["path"].encode()).decode("latin-1")
    if scope.get("query_string"):
        target += "?" + scope["query_string"].decode("latin-1")
    origin = f"http://{host}".encode()
    request = Request(
        host=host,
        target=target,
        subprotocols=list(scope.get("subprotocols") or []),
        extra_headers=handshake_headers(scope["headers"], cookie, origin),
    )
    try:
        writer.write(ws.send(request))
        accepted = await asyncio.wait_for(_handshake(ws, reader), HANDSHAKE_SECONDS)
        if accepted is None:
            await send({"type": "websocket.close", "code": 1008})
            return
        await send({"type": "websocket.accept", "subprotocol": accepted.subprotocol})
        await _relay(ws, reader, writer, receive, send)
    except (TimeoutError, OSError):
        with contextlib.suppress(Exception):
            await send({"type": "websocket.close", "code": 1011})
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()


async def _handshake(ws: WSConnection, reader: asyncio.StreamReader) -> AcceptConnection | None:
    while True:
        data = await reader.read(READ_BYTES)
        ws.receive_data(data or None)
        for event in ws.events():
            if isinstance(event, AcceptConnection):
                return event
            if isinstance(event, RejectConnection):
                return None
        if not data:
            return None


async def _relay(
    ws: WSConnection,
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    receive: Receive,
    send: Send,
) -> None:
    upstream = asyncio.create_task(_from_sandbox(ws, reader, writer, send))
    browser = asyncio.create_task(_from_browser(ws, writer, receive))
    try:
        await asyncio.wait({upstream, browser}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (upstream, browser):
            task.cancel()
            with contextlib.suppress(BaseException):
                await task


async def _from_browser(ws: WSConnection, writer: asyncio.StreamWriter, receive: Receive) -> None:
    while True:
        message = await receive()
        if message["type"] == "websocket.disconnect":
            with contextlib.suppress(Exception):
                writer.write(ws.send(CloseConnection(code=message.get("code") or 1000)))
                await writer.drain()
            return
        if message["type"] != "websocket.receive":
            continue
        text = message.get("text")
        if text is not None:
            writer.write(ws.send(Message(data=str(text))))
        else:
            writer.write(ws.send(Message(data=bytes(message.get("bytes") or b""))))
        await writer.drain()


class Assembly:
    """The frames of one message from the sandbox, until its last (bounded)."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.data = bytearray()
        self.held = 0

    def reset(self) -> None:
        self.text, self.data, self.held = [], bytearray(), 0

    def add(self, event: TextMessage | BytesMessage) -> dict[str, object] | None:
        """The ASGI send of a finished message, else None; ValueError past the cap."""
        self.held += len(event.data)
        if self.held > MAX_MESSAGE_BYTES:
            raise ValueError("message too large")
        if isinstance(event, TextMessage):
            self.text.append(event.data)
        else:
            self.data += event.data
        if not event.message_finished:
            return None
        done: dict[str, object] = (
            {"type": "websocket.send", "text": "".join(self.text)}
            if isinstance(event, TextMessage)
            else {"type": "websocket.send", "bytes": bytes(self.data)}
        )
        self.reset()
        return done


async def _from_sandbox(
    ws: WSConnection, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, send: Send
) -> None:
    pending = Assembly()
    chunk = b"handshake"  # the handshake's read may have brought frames past the 101 already
    while True:
        for event in ws.events():
            if isinstance(event, Ping):
                writer.write(ws.send(event.response()))
            elif isinstance(event, CloseConnection):
                with contextlib.suppress(Exception):
                    writer.write(ws.send(event.response()))
                await send({"type": "websocket.close", "code": event.code})
                return
            elif isinstance(event, TextMessage | BytesMessage):
                try:
                    message = pending.add(event)
                except ValueError:
                    await send({"type": "websocket.close", "code": 1009})
                    return
                if message is not None:
                    await send(message)
        if not chunk:
            await send({"type": "websocket.close", "code": 1011})  # the sandbox went away
            return
        chunk = await reader.read(READ_BYTES)
        ws.receive_data(chunk or None)
