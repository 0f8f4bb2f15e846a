"""The preview's WebSocket relay (``functions/api/preview_ws.py``) against a scripted dev server
on a socket pair: what the dev server sends is relayed as it comes, the frames that arrive in
the same read as its ``101`` included."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import socket
from collections.abc import MutableMapping
from typing import Any

from functions.api.preview_ws import relay

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
SCOPE: dict[str, Any] = {
    "type": "websocket",
    "path": "/hmr",
    "raw_path": b"/hmr",
    "query_string": b"",
    "headers": [(b"host", b"5173-s.localhost:8000"), (b"sec-websocket-key", b"browser")],
    "subprotocols": [],
}


def _text_frame(text: bytes) -> bytes:
    return bytes([0x81, len(text)]) + text  # unmasked: a server's frame


async def _greeting_server(sock: socket.socket) -> None:
    """Vite's HMR server: its ``connected`` message written with the 101, in one write."""
    loop = asyncio.get_running_loop()
    head = b""
    while b"\r\n\r\n" not in head:
        head += await loop.sock_recv(sock, 4096)
    key = next(
        line.split(b":", 1)[1].strip()
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"sec-websocket-key")
    )
    accept = base64.b64encode(hashlib.sha1(key + GUID).digest())  # noqa: S324 - the protocol's
    await loop.sock_sendall(
        sock,
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        b"Sec-WebSocket-Accept: " + accept + b"\r\n\r\n" + _text_frame(b'{"type":"connected"}'),
    )


def test_a_message_sent_with_the_101_is_relayed_before_anything_else_arrives() -> None:
    async def scenario() -> list[MutableMapping[str, Any]]:
        proxy_side, sandbox_side = socket.socketpair()
        sandbox_side.setblocking(False)
        sent: list[MutableMapping[str, Any]] = []
        greeted = asyncio.Event()
        leave = asyncio.Event()

        async def send(message: MutableMapping[str, Any]) -> None:
            sent.append(message)
            if message["type"] == "websocket.send":
                greeted.set()

        async def receive() -> dict[str, Any]:
            await leave.wait()  # the browser says nothing until the greeting came
            return {"type": "websocket.disconnect", "code": 1000}

        server = asyncio.create_task(_greeting_server(sandbox_side))
        relaying = asyncio.create_task(
            relay(SCOPE, receive, send, proxy_side, "localhost:5173", b"openagents_preview")
        )
        # the dev server writes nothing more: without the fix the greeting waited for a read
        await asyncio.wait_for(greeted.wait(), 30)  # a liveness bound, not a measure
        leave.set()
        await asyncio.wait_for(relaying, 30)
        await server
        sandbox_side.close()
        return sent

    sent = asyncio.run(scenario())
    assert sent[0]["type"] == "websocket.accept"
    assert sent[1] == {"type": "websocket.send", "text": '{"type":"connected"}'}
