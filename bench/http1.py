"""A minimal HTTP/1.1 keep-alive client on asyncio streams, for the load benchmark: httpx costs
the load generator ~4 ms of CPU per request here, so with 50 users it, not the server, was the
bottleneck. This one parses only the status line, ``Content-Length`` and chunked bodies (what
uvicorn answers), and costs a small fraction of that. One connection per user, as a browser tab
holds one."""

from __future__ import annotations

import asyncio
import contextlib
import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode, urlsplit


@dataclass
class Response:
    status_code: int
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class Connection:
    def __init__(self, base_url: str, headers: dict[str, str], timeout: float = 30) -> None:
        parts = urlsplit(base_url)
        self._host = parts.hostname or "127.0.0.1"
        self._port = parts.port or 80
        fixed = {"host": f"{self._host}:{self._port}", **headers}
        self._fixed = "".join(f"{k}: {v}\r\n" for k, v in fixed.items())
        self._timeout = timeout
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def get(self, path: str, params: dict[str, str] | None = None) -> Response:
        target = f"{path}?{urlencode(params)}" if params else path
        return await self.request("GET", target)

    async def post(self, path: str, body: Any) -> Response:
        return await self.request("POST", path, json.dumps(body).encode())

    async def request(self, method: str, target: str, body: bytes | None = None) -> Response:
        try:
            return await asyncio.wait_for(self._exchange(method, target, body), self._timeout)
        except BaseException:
            await self.close()  # a half-read answer: never reuse the connection
            raise

    async def _exchange(self, method: str, target: str, body: bytes | None) -> Response:
        if self._writer is None:
            self._reader, self._writer = await asyncio.open_connection(self._host, self._port)
        reader, writer = self._reader, self._writer
        assert reader is not None
        head = f"{method} {target} HTTP/1.1\r\n{self._fixed}"
        if body is not None:
            head += f"content-type: application/json\r\ncontent-length: {len(body)}\r\n"
        writer.write(head.encode() + b"\r\n" + (body or b""))
        status_line = await reader.readline()
        if not status_line:
            raise ConnectionError("the server closed the connection")
        status = int(status_line.split(b" ", 2)[1])
        length, chunked, close = await _headers(reader)
        payload = await _chunked(reader) if chunked else await reader.readexactly(length)
        if close:
            await self.close()
        return Response(status, payload)

    async def close(self) -> None:
        writer, self._writer, self._reader = self._writer, None, None
        if writer is not None:
            writer.close()
            with contextlib.suppress(OSError, asyncio.CancelledError):
                await writer.wait_closed()


async def _headers(reader: asyncio.StreamReader) -> tuple[int, bool, bool]:
    """Content-Length, chunked, Connection: close."""
    length, chunked, close = 0, False, False
    while True:
        line = await reader.readline()
        if line in (b"\r\n", b"\n", b""):
            break
        name, _, value = line.partition(b":")
        name = name.strip().lower()
        if name == b"content-length":
            length = int(value)
        elif name == b"transfer-encoding" and b"chunked" in value.lower():
            chunked = True
        elif name == b"connection" and b"close" in value.lower():
            close = True
    return length, chunked, close


async def _chunked(reader: asyncio.StreamReader) -> bytes:
    data = bytearray()
    while True:
        size = int((await reader.readline()).split(b";")[0], 16)
        chunk = await reader.readexactly(size + 2)
        if size == 0:
            return bytes(data)
        data += chunk[:-2]
